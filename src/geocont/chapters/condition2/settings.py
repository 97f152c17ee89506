"""What the Condition-2 chapter trains: its presets and parameters, its settings, its run set and what it costs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...book.chapter import Chapter
from ...config import MLPRunConfig, OptimizerConfig, check_positive
from ...data import check_dataset_name
from ...scales import parse_seeds
from ...sweeps import predicted_wall_seconds
from .. import mlp_runs
from ..mlp_runs import predicted_run_seconds
from .forks import FORK_RATES, fork_configs

#: The Condition-2 core compared on every dataset: the element-wise baseline, the linear residual
#: net, a rotation-equivariant nonlinearity that is nonlinear in practice, and no residual.
CORE_CONDITIONS = ("res-relu", "res-none", "res-radial-tau", "nores-relu")

#: The headline dataset is the one whose training set has the paper's size (the rule all MLP chapters share).
HEADLINE_RULE = mlp_runs.HEADLINE_DATASET_RULE

#: Stabilising and symmetry-removing interventions, each a change to the base run (Adam, lr 1e-3,
#: constant). Values chosen before any was run: lr 3e-4 (the issue's example, 3.3x smaller);
#: clipping at global norm 1.0 (the common default of language-model training); cosine decay to
#: zero over the horizon (no warm-up); AdamW with decoupled weight decay 0.1 (the value of
#: Llama/GPT-3 pre-training; torch's default 0.01 would shrink an unused weight by only 9% over
#: 9,360 steps at lr 1e-3, 0.1 by 61%).
INTERVENTIONS: dict[str, dict[str, Any]] = {
    "lr 3e-4": dict(optimizer=OptimizerConfig("adam", lr=3e-4)),
    "clip 1.0": dict(grad_clip=1.0),
    "cosine": dict(lr_schedule="cosine"),
    "adamw 0.1": dict(optimizer=OptimizerConfig("adamw", lr=1e-3, weight_decay=0.1)),
    #: not a stabiliser: Adam in an independent random orthogonal frame per layer, so that no two
    #: layers share Adam's per-coordinate axes (geocont.optimizers.FrameAdam)
    "adam-rotated": dict(optimizer=OptimizerConfig("adam-rotated", lr=1e-3)),
}

#: The direct tests of drift on the linear net (headline dataset, every seed of the comparison), each a change to
#: the base run, written down with what each reading predicts before any was run:
#:
#: * ``lr step-down``: lr 1e-3 to half the horizon, then x0.1. Accumulated drift predicts that weight v1 stops
#:   where it was at the switch (the frames that drifted apart stay apart); an equilibrium set by the current
#:   noise level predicts that it recovers towards a higher level after the switch.
#: * ``lr step-up``: the mirror, lr 3e-4 then x(10/3) = 1e-3. Drift predicts a faster fall after the switch;
#:   an equilibrium predicts a fall to the lr-1e-3 level.
#: * ``lr 3e-4 long``: lr 3e-4 for the same summed learning rate as lr 1e-3 over the horizon (steps x 10/3 =
#:   31,200 at ``cpu``), read against the base run on a sum-of-lr axis: if continuity is a function of the
#:   distance travelled, the two curves coincide there.
#: * ``batch 64`` and ``batch 256``: half and twice the base batch, same lr and steps. If gradient noise sets
#:   the pace of drift, the smaller batch falls faster and the larger one slower.
DRIFT_TESTS: dict[str, dict[str, Any]] = {
    "lr step-down": dict(lr_schedule="step", lr_step_factor=0.1),
    "lr step-up": dict(optimizer=OptimizerConfig("adam", lr=3e-4), lr_schedule="step", lr_step_factor=10 / 3),
    "lr 3e-4 long": dict(optimizer=OptimizerConfig("adam", lr=3e-4), steps_factor=10 / 3),
    "batch 64": dict(batch_size=64),
    "batch 256": dict(batch_size=256),
}


def switch_step(total_steps: int) -> int:
    """Where the ``step`` schedule switches its learning rate: after ``total_steps // 2`` updates (the
    training loop's rule, ``geocont.training.step_factor``); the snapshot there is the state at the switch."""
    return total_steps // 2


#: SGD (momentum 0.9): its learning rate is chosen per dataset as the largest of these with no
#: seed of any SGD condition diverging within ``sgd_probe_steps``.
SGD_LEARNING_RATES = (0.03, 0.01, 0.003)
SGD_MOMENTUM = 0.9

#: What the chapter adds to the MLP chapters' presets per scale (:data:`geocont.chapters.mlp_runs.MLP_PRESETS`,
#: whose model, horizon, snapshots and trace it keeps, so that a run it shares with the conditions chapter is
#: trained once): the datasets compared (the headline one first) and the seeds of the linear net's spread.
_CHAPTER_VALUES: dict[str, dict[str, Any]] = {
    "smoke": dict(datasets=("fashion-mnist", "mnist-subset"), many_seeds=4, sgd_probe_steps=8, forks=FORK_RATES),
    "cpu": dict(
        datasets=("fashion-mnist", "mnist-10k", "mnist-subset"), many_seeds=8, sgd_probe_steps=500, forks=FORK_RATES
    ),
    "paper": dict(
        datasets=("mnist", "fashion-mnist", "mnist-10k"), many_seeds=16, sgd_probe_steps=500, forks=FORK_RATES
    ),
}
_PRESETS = mlp_runs.mlp_presets(
    _CHAPTER_VALUES,
    without=("dataset",),
    conditions=CORE_CONDITIONS,
    interventions=tuple(INTERVENTIONS),
    drift_tests=tuple(DRIFT_TESTS),
)

#: The notebook's parameters, in the order of its ``parameters`` cell.
PARAMETERS: dict[str, str] = {
    "scale": "smoke | cpu | paper: the whole preset, see geocont.chapters.condition2",
    "seeds": "seeds of the comparison and the interventions: an int n (0..n-1) or a list; None keeps the preset",
    "many_seeds": "seeds of the linear net under Adam and SGD on the headline dataset (an int or a list)",
    "steps": "the horizon (optimizer steps) of every long run",
    "datasets": "the datasets compared, the headline one first (mnist-subset, mnist-10k, mnist, fashion-mnist)",
    "conditions": "the conditions compared on every dataset",
    "interventions": f"which interventions run on the headline dataset (of {', '.join(INTERVENTIONS)})",
    "drift_tests": f"which direct tests of drift run on the linear net (of {', '.join(DRIFT_TESTS)})",
    "forks": "learning rates the linear net and the baseline continue at from the formed state (an empty list: none)",
    "width": "hidden width",
    "depth": "number of hidden layers",
    "trace_every": "steps between trace points (loss and weight v1 for the instability analysis)",
}


@dataclass(frozen=True)
class Condition2Settings:
    """Everything the chapter trains."""

    scale: str
    #: the base run (Adam, lr 1e-3) on the headline dataset
    base: MLPRunConfig
    datasets: tuple[str, ...]
    conditions: tuple[str, ...]
    seeds: tuple[int, ...]
    many_seeds: tuple[int, ...]
    interventions: tuple[str, ...]
    early_steps: int
    sgd_probe_steps: int
    #: the direct tests of drift (:data:`DRIFT_TESTS`)
    drift_tests: tuple[str, ...] = ()
    #: the rates of the forks from the formed state (:mod:`.forks`)
    forks: tuple[float, ...] = ()
    #: the chapter parameters that were set (not None), as a re-run must repeat them
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def headline(self) -> str:
        return self.datasets[0]

    def comparison_configs(self, dataset: str) -> list[MLPRunConfig]:
        """The conditions x seeds under Adam on ``dataset``."""
        return [self.base.replace(dataset=dataset, condition=c, seed=s) for c in self.conditions for s in self.seeds]

    def linear_seed_configs(self) -> list[MLPRunConfig]:
        """The linear net under Adam on the headline dataset, every one of ``many_seeds``."""
        return [self.base.replace(condition="res-none", seed=s) for s in self.many_seeds]

    def intervention_configs(self, name: str) -> list[MLPRunConfig]:
        """The linear net and the baseline under intervention ``name`` on the headline dataset."""
        return [
            self.base.replace(condition=c, seed=s, **INTERVENTIONS[name])
            for c in ("res-none", "res-relu")
            for s in self.seeds
        ]

    def drift_test_configs(self, name: str) -> list[MLPRunConfig]:
        """The linear net under drift test ``name`` (:data:`DRIFT_TESTS`) on the headline dataset, every seed.
        A longer run (``steps_factor``) also snapshots the base horizon, so it can be read at equal steps too;
        a step schedule also snapshots its switch (:func:`switch_step`), so it can be read there."""
        changes = dict(DRIFT_TESTS[name])
        factor = changes.pop("steps_factor", None)
        steps = self.base.steps if factor is None else round(self.base.steps * factor)
        extra = () if factor is None else (self.base.steps,)
        if changes.get("lr_schedule") == "step":
            extra += (switch_step(steps),)
        if factor is not None:
            changes["steps"] = steps
        if extra:
            changes["snapshot_steps"] = (*self.base.snapshot_steps, *extra)
        return [self.base.replace(condition="res-none", seed=s, **changes) for s in self.seeds]

    def fork_configs(self) -> list[MLPRunConfig]:
        """The forks from the formed state on the headline dataset (:func:`.forks.fork_configs`)."""
        return fork_configs(self.base, self.seeds, self.forks) if self.forks else []

    def sgd_configs(self, lr: float, steps: int | None = None) -> list[MLPRunConfig]:
        """SGD at ``lr`` on the headline dataset: the linear net on ``many_seeds``, the baseline on ``seeds``;
        ``steps`` shortens them to probes (no late snapshots)."""
        optimizer = OptimizerConfig("sgd", lr=lr, momentum=SGD_MOMENTUM)
        configs = [self.base.replace(condition="res-none", seed=s, optimizer=optimizer) for s in self.many_seeds]
        configs += [self.base.replace(condition="res-relu", seed=s, optimizer=optimizer) for s in self.seeds]
        if steps is not None:
            configs = [c.replace(steps=steps, n_late_snapshots=0, snapshot_steps=(), n_snapshots=2) for c in configs]
        return configs

    def run_configs(self) -> list[MLPRunConfig]:
        """Every long run except the SGD ones (whose learning rate the probes choose), most valuable first."""
        configs = self.comparison_configs(self.headline)
        for name in self.interventions:
            configs += self.intervention_configs(name)
        configs += self.linear_seed_configs()
        for name in self.drift_tests:
            configs += self.drift_test_configs(name)
        configs += self.fork_configs()
        for dataset in self.datasets[1:]:
            configs += self.comparison_configs(dataset)
        unique: dict[str, MLPRunConfig] = {}
        for config in configs:
            unique.setdefault(repr(config.to_dict()), config)
        return list(unique.values())


#: The chapter's own settings, besides those of the shared MLP builder (:func:`geocont.chapters.mlp_runs.build_settings`).
_OWN_VALUES = ("datasets", "many_seeds", "interventions", "drift_tests", "sgd_probe_steps", "forks")


def build_settings(scale: str, values: dict[str, Any]) -> Condition2Settings:
    """The chapter's settings from its preset values (any of them replaced): the base run, seeds,
    conditions and horizon are the shared MLP builder's (its checks included); a bad value raises ValueError."""
    values = dict(values)
    own = {name: values.pop(name) for name in _OWN_VALUES}
    datasets, interventions = tuple(own["datasets"]), tuple(own["interventions"])
    if not datasets:
        raise ValueError("datasets must not be empty")
    for dataset in datasets:
        check_dataset_name(dataset)
    for name in interventions:
        if name not in INTERVENTIONS:
            raise ValueError(f"unknown intervention {name!r}; valid choices: {', '.join(INTERVENTIONS)}")
    drift_tests = tuple(own["drift_tests"])
    for name in drift_tests:
        if name not in DRIFT_TESTS:
            raise ValueError(f"unknown drift test {name!r}; valid choices: {', '.join(DRIFT_TESTS)}")
    forks = tuple(sorted(check_positive("forks", rate, integer=False) for rate in (own["forks"] or ())))
    mlp = mlp_runs.build_settings(scale, {**values, "dataset": datasets[0]})
    for condition in ("res-none", "res-relu"):
        if condition not in mlp.conditions:
            raise ValueError(f"conditions must include {condition} (the comparison is between them)")
    probe_steps = min(check_positive("sgd_probe_steps", own["sgd_probe_steps"]), mlp.base.steps)
    return Condition2Settings(
        scale=scale,
        base=mlp.base,
        datasets=datasets,
        conditions=mlp.conditions,
        seeds=mlp.seeds,
        many_seeds=parse_seeds(own["many_seeds"], "many_seeds"),
        interventions=interventions,
        early_steps=mlp.early_steps,
        sgd_probe_steps=probe_steps,
        drift_tests=drift_tests,
        forks=forks,
    )


def describe(settings: Condition2Settings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    base = settings.base
    return dict(
        seeds=settings.seeds,
        data=", ".join(f"`{d}`" for d in settings.datasets)
        + f" (headline: `{settings.headline}`, {HEADLINE_RULE})"
        + (f"; first {base.max_train} training examples" if base.max_train else ""),
        model=f"residual MLP, {base.depth} hidden layers of width {base.width}",
        training=(
            f"{base.steps:,} optimizer steps of batch {base.batch_size}, Adam (lr {base.optimizer.lr:g}); "
            f"{base.n_snapshots} log-spaced and {base.n_late_snapshots} evenly spaced snapshots and one at step "
            f"{settings.early_steps:,}; a trace point every {base.trace_every} steps; interventions on "
            f"`{settings.headline}`: {', '.join(settings.interventions) or 'none'}; the linear net also with seeds "
            f"{', '.join(map(str, settings.many_seeds))} under Adam and SGD (momentum {SGD_MOMENTUM:g}, "
            f"learning rate chosen by probe runs of {settings.sgd_probe_steps:,} steps)"
        ),
    )


def probe_configs(settings: Condition2Settings) -> list[MLPRunConfig]:
    """The SGD probes at every candidate rate (a build stops at the first rate with no diverged probe)."""
    return [c for lr in SGD_LEARNING_RATES for c in settings.sgd_configs(lr, steps=settings.sgd_probe_steps)]


def all_run_configs(settings: Condition2Settings) -> list[MLPRunConfig]:
    """Every run the chapter trains but the SGD runs to the horizon, whose learning rate the probes
    choose (they differ from the listed runs in the optimizer alone): the long runs, then the probes."""
    return settings.run_configs() + probe_configs(settings)


def predicted_minutes(settings: Condition2Settings, workers: int = 2) -> float:
    """Predicted cold wall minutes of the chapter run alone on ``workers`` one-thread workers
    (:func:`geocont.chapters.mlp_runs.predicted_run_seconds`): its long runs as one sweep, then the SGD
    probes at every candidate rate (an upper bound), then the SGD runs."""
    phases = (settings.run_configs(), probe_configs(settings), settings.sgd_configs(SGD_LEARNING_RATES[-1]))
    return sum(predicted_wall_seconds(map(predicted_run_seconds, phase), workers) for phase in phases) / 60


def scale_rows(settings: Condition2Settings) -> list[tuple[str, str]]:
    """The chapter's rows of the methods page's table of the scales."""
    return [
        ("Condition 2: datasets (headline first)", ", ".join(f"`{d}`" for d in settings.datasets)),
        (
            "Condition 2: seeds of the comparison; of the linear net under Adam and SGD",
            f"{len(settings.seeds)}; {len(settings.many_seeds)}",
        ),
        (
            "Condition 2: trace point every (steps); SGD probe steps",
            f"{settings.base.trace_every}; {settings.sgd_probe_steps:,}",
        ),
    ]


CHAPTER = Chapter(
    name="condition2",
    parameters=PARAMETERS,
    presets=_PRESETS,
    build=build_settings,
    describe=describe,
    runs=all_run_configs,
    scale_rows=scale_rows,
)


#: The parameters that narrow the design (fewer runs) rather than change the runs.
_BREADTH_PARAMETERS = ("seeds", "many_seeds", "datasets", "conditions", "interventions", "drift_tests", "forks")

#: A narrower ``cpu`` re-run: the headline dataset with two of the stabilising interventions, the horizon
#: and every seed kept.
NARROW_CPU_RERUN = dict(
    datasets=("fashion-mnist",), interventions=("clip 1.0", "cosine"), drift_tests=("lr step-down",)
)


@dataclass(frozen=True)
class Budget:
    """What the chapter trains and, at ``cpu``, its predicted cold minutes (None elsewhere), what this build
    leaves out of the preset (``{setting: [left out]}``) and the preset's minutes, and a narrower re-run's
    minutes (None where it is not narrower)."""

    runs: int
    probes: int
    sgd_runs: int
    minutes: float | None = None
    left_out: dict[str, list] = field(default_factory=dict)
    preset_minutes: float | None = None
    narrow_minutes: float | None = None


def budget(settings: Condition2Settings) -> Budget:
    """The :class:`Budget` of ``settings`` (:func:`predicted_minutes`)."""
    counts = dict(
        runs=len(settings.run_configs()),
        probes=len(probe_configs(settings)),
        sgd_runs=len(settings.sgd_configs(SGD_LEARNING_RATES[-1])),
    )
    if settings.scale != "cpu":
        return Budget(**counts)
    minutes = predicted_minutes(settings)
    kept = {k: v for k, v in settings.overrides.items() if k not in _BREADTH_PARAMETERS}
    preset = CHAPTER.configure(settings.scale, **kept)
    left_out = {
        name: missing
        for name, missing in (
            ("datasets", [d for d in preset.datasets if d not in settings.datasets]),
            ("conditions", [c for c in preset.conditions if c not in settings.conditions]),
            ("interventions", [i for i in preset.interventions if i not in settings.interventions]),
            ("drift tests", [t for t in preset.drift_tests if t not in settings.drift_tests]),
            ("seeds", [s for s in preset.seeds if s not in settings.seeds]),
            ("linear-net seeds", [s for s in preset.many_seeds if s not in settings.many_seeds]),
        )
        if missing
    }
    narrow = predicted_minutes(CHAPTER.configure(settings.scale, **{**kept, **NARROW_CPU_RERUN}))
    return Budget(
        **counts,
        minutes=minutes,
        left_out=left_out,
        preset_minutes=predicted_minutes(preset) if left_out else None,
        narrow_minutes=narrow if narrow < minutes else None,
    )

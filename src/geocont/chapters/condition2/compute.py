"""condition2: what the chapter computes (settings, runs, instability events, explanations, claims);
no figures, no matplotlib."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ... import instability, metrics, paper
from ...config import MLPRunConfig, OptimizerConfig, check_positive
from ...data import check_dataset_name
from ...book.chapter import Chapter, ClaimsBuilder
from ...scales import parse_seeds
from ...statistics import (Estimate, Fall, estimate, final_estimate, final_per_run, formed,
                           peak_and_final, peaks_per_seed, verdict_for_difference, verdict_for_value)
from ...sweeps import predicted_wall_seconds
from ...tables import diverged_runs, select
from ...training import run_sweep
from .. import mlp_runs
from ..mlp_runs import predicted_run_seconds

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

#: SGD (momentum 0.9): its learning rate is chosen per dataset as the largest of these with no
#: seed of any SGD condition diverging within ``sgd_probe_steps``.
SGD_LEARNING_RATES = (0.03, 0.01, 0.003)
SGD_MOMENTUM = 0.9

#: What the chapter adds to the MLP chapters' presets per scale (:data:`geocont.chapters.mlp_runs.MLP_PRESETS`,
#: whose model, horizon, snapshots and trace it keeps, so that a run it shares with the conditions chapter is
#: trained once): the datasets compared (the headline one first) and the seeds of the linear net's spread.
_CHAPTER_VALUES: dict[str, dict[str, Any]] = {
    "smoke": dict(datasets=("fashion-mnist", "mnist-subset"), many_seeds=4, sgd_probe_steps=8),
    "cpu": dict(datasets=("fashion-mnist", "mnist-10k", "mnist-subset"), many_seeds=8, sgd_probe_steps=500),
    "paper": dict(datasets=("mnist", "fashion-mnist", "mnist-10k"), many_seeds=16, sgd_probe_steps=500),
}
_PRESETS = mlp_runs.mlp_presets(_CHAPTER_VALUES, without=("dataset",), conditions=CORE_CONDITIONS,
                                interventions=tuple(INTERVENTIONS), drift_tests=tuple(DRIFT_TESTS))

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
        return [self.base.replace(condition=c, seed=s, **INTERVENTIONS[name])
                for c in ("res-none", "res-relu") for s in self.seeds]

    def drift_test_configs(self, name: str) -> list[MLPRunConfig]:
        """The linear net under drift test ``name`` (:data:`DRIFT_TESTS`) on the headline dataset, every seed.
        A longer run (``steps_factor``) also snapshots the base horizon, so it can be read at equal steps too."""
        changes = dict(DRIFT_TESTS[name])
        factor = changes.pop("steps_factor", None)
        if factor is not None:
            steps = round(self.base.steps * factor)
            changes.update(steps=steps, snapshot_steps=(*self.base.snapshot_steps, self.base.steps))
        return [self.base.replace(condition="res-none", seed=s, **changes) for s in self.seeds]

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
        for dataset in self.datasets[1:]:
            configs += self.comparison_configs(dataset)
        unique: dict[str, MLPRunConfig] = {}
        for config in configs:
            unique.setdefault(repr(config.to_dict()), config)
        return list(unique.values())


#: The chapter's own settings, besides those of the shared MLP builder (:func:`geocont.chapters.mlp_runs.build_settings`).
_OWN_VALUES = ("datasets", "many_seeds", "interventions", "drift_tests", "sgd_probe_steps")


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
    mlp = mlp_runs.build_settings(scale, {**values, "dataset": datasets[0]})
    for condition in ("res-none", "res-relu"):
        if condition not in mlp.conditions:
            raise ValueError(f"conditions must include {condition} (the comparison is between them)")
    probe_steps = min(check_positive("sgd_probe_steps", own["sgd_probe_steps"]), mlp.base.steps)
    return Condition2Settings(scale=scale, base=mlp.base, datasets=datasets, conditions=mlp.conditions, seeds=mlp.seeds,
                              many_seeds=parse_seeds(own["many_seeds"], "many_seeds"), interventions=interventions,
                              early_steps=mlp.early_steps, sgd_probe_steps=probe_steps, drift_tests=drift_tests)


def describe(settings: Condition2Settings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    base = settings.base
    return dict(
        seeds=settings.seeds,
        data=", ".join(f"`{d}`" for d in settings.datasets) + f" (headline: `{settings.headline}`, {HEADLINE_RULE})"
             + (f"; first {base.max_train} training examples" if base.max_train else ""),
        model=f"residual MLP, {base.depth} hidden layers of width {base.width}",
        training=(f"{base.steps:,} optimizer steps of batch {base.batch_size}, Adam (lr {base.optimizer.lr:g}); "
                  f"{base.n_snapshots} log-spaced and {base.n_late_snapshots} evenly spaced snapshots and one at step "
                  f"{settings.early_steps:,}; a trace point every {base.trace_every} steps; interventions on "
                  f"`{settings.headline}`: {', '.join(settings.interventions) or 'none'}; the linear net also with seeds "
                  f"{', '.join(map(str, settings.many_seeds))} under Adam and SGD (momentum {SGD_MOMENTUM:g}, "
                  f"learning rate chosen by probe runs of {settings.sgd_probe_steps:,} steps)"),
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
        ("Condition 2: seeds of the comparison; of the linear net under Adam and SGD",
         f"{len(settings.seeds)}; {len(settings.many_seeds)}"),
        ("Condition 2: trace point every (steps); SGD probe steps",
         f"{settings.base.trace_every}; {settings.sgd_probe_steps:,}"),
    ]


CHAPTER = Chapter(name="condition2", parameters=PARAMETERS, presets=_PRESETS, build=build_settings, describe=describe,
                  runs=all_run_configs, scale_rows=scale_rows)


#: The parameters that narrow the design (fewer runs) rather than change the runs.
_BREADTH_PARAMETERS = ("seeds", "many_seeds", "datasets", "conditions", "interventions", "drift_tests")

#: A narrower ``cpu`` re-run: the headline dataset with two of the stabilising interventions, the horizon
#: and every seed kept.
NARROW_CPU_RERUN = dict(datasets=("fashion-mnist",), interventions=("clip 1.0", "cosine"), drift_tests=("lr step-down",))


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
    counts = dict(runs=len(settings.run_configs()), probes=len(probe_configs(settings)),
                  sgd_runs=len(settings.sgd_configs(SGD_LEARNING_RATES[-1])))
    if settings.scale != "cpu":
        return Budget(**counts)
    minutes = predicted_minutes(settings)
    kept = {k: v for k, v in settings.overrides.items() if k not in _BREADTH_PARAMETERS}
    preset = CHAPTER.configure(settings.scale, **kept)
    left_out = {name: missing for name, missing in (
        ("datasets", [d for d in preset.datasets if d not in settings.datasets]),
        ("conditions", [c for c in preset.conditions if c not in settings.conditions]),
        ("interventions", [i for i in preset.interventions if i not in settings.interventions]),
        ("drift tests", [t for t in preset.drift_tests if t not in settings.drift_tests]),
        ("seeds", [s for s in preset.seeds if s not in settings.seeds]),
        ("linear-net seeds", [s for s in preset.many_seeds if s not in settings.many_seeds])) if missing}
    narrow = predicted_minutes(CHAPTER.configure(settings.scale, **{**kept, **NARROW_CPU_RERUN}))
    return Budget(**counts, minutes=minutes, left_out=left_out,
                  preset_minutes=predicted_minutes(preset) if left_out else None,
                  narrow_minutes=narrow if narrow < minutes else None)


def _diverged_seeds(table: pd.DataFrame) -> pd.DataFrame:
    rows = select(table, "diverged")
    return rows[["condition", "seed", "step"]]


@dataclass
class SGDChoice:
    """The SGD learning rate chosen on the headline dataset, and what each probed rate did."""

    lr: float | None
    #: per probed rate: how many probe runs diverged, of how many
    probes: dict[float, tuple[int, int]]


def choose_sgd_lr(settings: Condition2Settings, executor: str | None = None) -> tuple[SGDChoice, pd.DataFrame]:
    """Probe SGD's candidate rates from the largest down; the first with no diverged probe is chosen."""
    probes: dict[float, tuple[int, int]] = {}
    tables = []
    for lr in SGD_LEARNING_RATES:
        configs = settings.sgd_configs(lr, steps=settings.sgd_probe_steps)
        table = run_sweep(configs, executor=executor).assign(lr=lr)
        tables.append(table)
        bad = len(_diverged_seeds(table))
        probes[lr] = (bad, len(configs))
        if bad == 0:
            return SGDChoice(lr, probes), pd.concat(tables, ignore_index=True)
    return SGDChoice(None, probes), pd.concat(tables, ignore_index=True)


@dataclass
class Results:
    """The chapter's run tables."""

    settings: Condition2Settings
    #: ``{dataset: sweep table}`` of the comparison (Adam), the headline dataset first
    comparison: dict[str, pd.DataFrame]
    #: the linear net under Adam on the headline dataset, every seed
    linear_seeds: pd.DataFrame
    #: ``{intervention: sweep table}`` on the headline dataset; "adam" is the unchanged base run
    interventions: dict[str, pd.DataFrame]
    #: ``{drift test: sweep table}`` of the linear net on the headline dataset
    drift_tests: dict[str, pd.DataFrame]
    sgd_choice: SGDChoice
    #: SGD at the chosen rate (empty if none was stable)
    sgd: pd.DataFrame
    baseline: float


def run(settings: Condition2Settings, executor: str | None = None) -> Results:
    """Train (or load from the cache) every run: the long runs as one sweep, then the SGD probes and runs."""
    long_runs = settings.run_configs()
    run_sweep(long_runs, executor=executor)  # every long run at once: the executor keeps all workers busy
    comparison = {d: run_sweep(settings.comparison_configs(d), progress=False) for d in settings.datasets}
    interventions = {"adam": comparison[settings.headline][
        comparison[settings.headline]["condition"].isin(["res-none", "res-relu"])]}
    interventions.update({name: run_sweep(settings.intervention_configs(name), progress=False)
                          for name in settings.interventions})
    choice, _ = choose_sgd_lr(settings, executor)
    sgd = run_sweep(settings.sgd_configs(choice.lr), executor=executor) if choice.lr is not None else pd.DataFrame()
    return Results(settings=settings, comparison=comparison,
                   linear_seeds=run_sweep(settings.linear_seed_configs(), progress=False),
                   interventions=interventions, sgd_choice=choice, sgd=sgd,
                   drift_tests={name: run_sweep(settings.drift_test_configs(name), progress=False)
                                for name in settings.drift_tests},
                   baseline=metrics.random_abs_cos(settings.base.width))


# ---------------------------------------------------------------------------------------------
# Numbers: every quantity the chapter reports, and its claims (no plotting here)
# ---------------------------------------------------------------------------------------------

#: Seeds' final values are called bimodal when the largest gap between consecutive sorted values
#: is at least this large, exceeds 3 x the pooled sd within the two groups it separates, and each
#: group holds at least 2 seeds (a rule stated before the seeds were run).
BIMODAL_GAP = 0.15


def weight_v1(table: pd.DataFrame, condition: str, metric: str = "weight_cos", space: str = "input",
              direction: int = 1) -> Estimate:
    """``condition``'s final value of a layer-mean metric (weight v1 by default): mean ± sd over its
    finite seeds, diverged seeds counted (:func:`geocont.statistics.final_estimate`)."""
    return final_estimate(table, metric, space, direction, condition=condition)


def weight_v1_fall(table: pd.DataFrame, condition: str) -> Fall:
    """``condition``'s weight v1 from its peak to its end (the book's fall rule, :class:`geocont.statistics.Fall`)."""
    return Fall(*peak_and_final(table, "weight_cos", "input", 1, condition=condition))


def comparison_rows(results: Results) -> pd.DataFrame:
    """Per dataset and condition, as numbers: weight v1 final / peak (mean, sd) and whether it falls (the fall
    rule), gradient v1 final, the final trace loss, test accuracy, runs with instability events, events,
    memorised and diverged runs."""
    rows = []
    for dataset, table in results.comparison.items():
        summaries = instability.run_summary(table)
        for condition in results.settings.conditions:
            one = table[table["condition"] == condition]
            mine = summaries[summaries["condition"] == condition]
            fall = weight_v1_fall(one, condition)
            gradient = weight_v1(one, condition, "grad_cos")
            rows.append(dict(
                dataset=dataset, condition=condition, seeds=one["seed"].nunique(), diverged=len(diverged_runs(one)),
                v1_final=fall.final.mean, v1_final_sd=fall.final.std, v1_peak=fall.peak.mean, v1_peak_sd=fall.peak.std,
                falls=fall.falls, gradient_v1=gradient.mean, gradient_v1_sd=gradient.std,
                train_loss=float(mine["final_loss"].mean()), test_acc=weight_v1(one, condition, "test_acc", "", 0).mean,
                runs_with_events=int((mine["events"] > 0).sum()), events=int(mine["events"].sum()),
                memorised_runs=int(mine["memorised_step"].notna().sum()),
            ))
    return pd.DataFrame(rows)


def intervention_rows(results: Results) -> pd.DataFrame:
    """Per intervention ("adam" = none) and condition, as numbers: weight v1 final and peak, its fall (and the
    fall rule's ``falls`` / ``holds``), its fall per 1,000 steps after the peak, instability events, the
    stable-window drift rate (degrees per 1,000 steps), final trace loss and test accuracy (means and sds
    over seeds)."""
    rows = []
    for name, table in results.interventions.items():
        summaries = instability.run_summary(table)
        summaries["fall_rate"] = instability.fall_rate_after_peak(summaries)
        events = instability.instability_events(table)
        drift = instability.stable_windows_turn_rate(table, events)
        for condition in ("res-none", "res-relu"):
            mine = summaries[summaries["condition"] == condition]
            fall = weight_v1_fall(table, condition)
            rate = estimate(drift.loc[drift["condition"] == condition, "turn_rate"])
            fall_rate = estimate(mine["fall_rate"])
            rows.append(dict(
                intervention=name, condition=condition, seeds=len(mine),
                v1_final=fall.final.mean, v1_final_sd=fall.final.std, v1_peak=fall.peak.mean, v1_peak_sd=fall.peak.std,
                fall=fall.amount, falls=fall.falls, holds=fall.holds,
                fall_per_1000=fall_rate.mean, fall_per_1000_sd=fall_rate.std,
                runs_with_events=int((mine["events"] > 0).sum()), events=int(mine["events"].sum()),
                drift_rate=rate.mean, drift_rate_sd=rate.std,
                train_loss=float(mine["final_loss"].mean()), test_acc=weight_v1(table, condition, "test_acc", "", 0).mean,
            ))
    return pd.DataFrame(rows)


def seed_groups(results: Results) -> list[tuple[str, str, pd.DataFrame]]:
    """The runs of every seed on the headline dataset, as (condition, optimizer, its runs): the linear net
    and the baseline under Adam, and under SGD when some SGD run trained."""
    headline = results.comparison[results.settings.headline]
    groups = [("res-none", "adam", results.linear_seeds), ("res-relu", "adam", headline)]
    if not results.sgd.empty:
        groups += [("res-none", "sgd", results.sgd), ("res-relu", "sgd", results.sgd)]
    return [(condition, optimizer, table[table["condition"] == condition]) for condition, optimizer, table in groups]


def seed_values(results: Results) -> pd.DataFrame:
    """Every seed's final weight v1 on the headline dataset: the linear net and the baseline under Adam
    and under SGD (column ``optimizer``); diverged seeds are rows with ``diverged`` True and no value."""
    rows = []
    for condition, optimizer, table in seed_groups(results):
        finals = final_per_run(table, "weight_cos", "input", 1)
        rows += [dict(condition=condition, optimizer=optimizer, seed=int(r.seed), value=float(r.value),
                      diverged=False) for r in finals.itertuples()]
        rows += [dict(condition=condition, optimizer=optimizer, seed=int(r.seed), value=math.nan, diverged=True)
                 for r in select(table, "diverged").itertuples()]
    return pd.DataFrame(rows).drop_duplicates(["condition", "optimizer", "seed"]).sort_values(
        ["condition", "optimizer", "seed"], ignore_index=True)


def formation_rows(results: Results) -> pd.DataFrame:
    """Whether continuity formed at all, per condition and optimizer on the headline dataset: every finite
    seed's peak of weight v1 (lowest, highest, mean, sd), and ``formed`` (the formation rule,
    :func:`geocont.statistics.formed`)."""
    rows = []
    for condition, optimizer, table in seed_groups(results):
        peaks = peaks_per_seed(table, "weight_cos", "input", 1, condition=condition)
        if not peaks.empty:
            peak = estimate(peaks)
            rows.append(dict(condition=condition, optimizer=optimizer, seeds=len(peaks), peak_min=float(peaks.min()),
                             peak_max=float(peaks.max()), peak_mean=peak.mean, peak_sd=peak.std,
                             formed=formed(peak, results.baseline)))
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Modality:
    """Whether one group of seeds' final values splits into two clusters (:data:`BIMODAL_GAP`)."""

    bimodal: bool
    gap: float
    low: tuple[float, ...]
    high: tuple[float, ...]


def modality(values: pd.Series) -> Modality:
    ordered = sorted(float(v) for v in values.dropna())
    if len(ordered) < 4:
        return Modality(False, math.nan, tuple(ordered), ())
    gaps = [b - a for a, b in zip(ordered, ordered[1:])]
    cut = max(range(len(gaps)), key=gaps.__getitem__)
    low, high = ordered[:cut + 1], ordered[cut + 1:]
    within = math.sqrt((sum((v - sum(low) / len(low)) ** 2 for v in low)
                        + sum((v - sum(high) / len(high)) ** 2 for v in high)) / max(1, len(ordered) - 2))
    bimodal = len(low) >= 2 and len(high) >= 2 and gaps[cut] >= BIMODAL_GAP and gaps[cut] > 3 * within
    return Modality(bimodal, gaps[cut], tuple(low), tuple(high))


def half_verdicts(results: Results) -> pd.DataFrame:
    """The linear net's weight-v1 claims judged on two disjoint halves of its seeds (even and odd
    seeds), for each optimizer: the verdict is stable when both halves give the one of all seeds."""
    values = seed_values(results)
    rows = []
    for optimizer, group in values.groupby("optimizer"):
        linear = group[(group["condition"] == "res-none") & ~group["diverged"]]
        relu = estimate(group.loc[(group["condition"] == "res-relu") & ~group["diverged"], "value"])
        for half, seeds in (("all", linear), ("even seeds", linear[linear["seed"] % 2 == 0]),
                            ("odd seeds", linear[linear["seed"] % 2 == 1])):
            none = estimate(seeds["value"])
            rows.append(dict(optimizer=optimizer, seeds=half, n=none.n, mean=none.mean, sd=none.std,
                             low_verdict=verdict_for_value(none, PAPER_LINEAR_WEIGHT),
                             relu_above_verdict=verdict_for_difference(relu, none)))
    return pd.DataFrame(rows)


#: The paper's numbers for Condition 2 (:mod:`geocont.paper`).
PAPER_LINEAR_WEIGHT = paper.LINEAR_WEIGHT_V1
PAPER_LINEAR_GRADIENT = paper.LINEAR_GRADIENT_V1


def comparison_claims(results: Results, builder: ClaimsBuilder) -> None:
    """The Condition-2 claims on every dataset, into ``builder``. On the headline dataset a claim's key is its
    plain name (``linear-weight-v1``) and it is one of the book's headline claims (``headline=True``), elsewhere
    its key is the name and the dataset (``linear-weight-v1-mnist-10k``)."""
    for dataset, table in results.comparison.items():
        headline = dataset == results.settings.headline
        tag = f"({dataset}{', headline' if headline else ''})"

        def key(name: str) -> str:
            return name if headline else f"{name}-{dataset}"

        def final(condition: str, metric: str = "weight_cos") -> Estimate:
            return weight_v1(table, condition, metric)

        none, relu = final("res-none"), final("res-relu")
        builder.add(key("linear-weight-v1"), "A linear residual net has low weight continuity",
                    f"Res+None weight v1 |cos| {tag}", f"{PAPER_LINEAR_WEIGHT}", none, results.baseline,
                    verdict_for_value(none, PAPER_LINEAR_WEIGHT), headline=headline)
        gradient = final("res-none", "grad_cos")
        builder.add(key("linear-gradient-v1"), "... yet high gradient continuity",
                    f"Res+None gradient v1 |cos| {tag}", f"{PAPER_LINEAR_GRADIENT}", gradient, results.baseline,
                    verdict_for_value(gradient, PAPER_LINEAR_GRADIENT), headline=headline)
        builder.add(key("relu-above-linear"), "An element-wise activation keeps weight continuity",
                    f"res-relu minus res-none weight v1 {tag}", "higher (no number)", relu.mean - none.mean,
                    results.baseline, verdict_for_difference(relu, none), note=f"res-relu {relu}; res-none {none}",
                    std=relu.std, n=relu.n, headline=headline)
        if "res-radial-tau" in results.settings.conditions:
            radial = final("res-radial-tau")
            builder.add(key("radial-tau-low"), "A rotation-equivariant nonlinearity fails too",
                        f"res-radial-tau weight v1 |cos| {tag}", f"~{paper.RADIAL_WEIGHT_V1}", radial, results.baseline,
                        verdict_for_value(radial, paper.RADIAL_WEIGHT_V1), headline=headline)
            builder.add(key("relu-above-radial-tau"), "Symmetry breaking, not nonlinearity, keeps continuity",
                        f"res-relu minus res-radial-tau weight v1 {tag}", "higher (no number)",
                        relu.mean - radial.mean, results.baseline, verdict_for_difference(relu, radial),
                        note=f"res-relu {relu}; res-radial-tau {radial}", std=relu.std, n=relu.n, headline=headline)
        if "nores-relu" in results.settings.conditions:
            nores = final("nores-relu", "grad_cos")
            builder.add(key("nores-gradient-v1"), "Without residuals, gradient continuity is at random level",
                        f"NoRes gradient v1 |cos| {tag}", f"~{paper.NORES_GRADIENT}", nores, results.baseline,
                        verdict_for_value(nores, paper.NORES_GRADIENT), headline=headline)
        peak = weight_v1_fall(table, "res-none").peak
        builder.add(key("linear-rise-then-fall"), "Weight continuity first forms, then is lost",
                    f"res-none weight v1: peak minus final {tag}", "rise, then collapse", peak.mean - none.mean,
                    results.baseline, verdict_for_difference(peak, none), note=f"peak {peak}, final {none}", n=peak.n, headline=headline)


@dataclass(frozen=True)
class Explanation:
    """One candidate explanation of the linear net's fall: its computed verdict ("supported", "not supported"
    or "inconclusive") and the numbers it rests on (the chapter's prose words them)."""

    name: str
    verdict: str
    numbers: dict[str, Any]


def explanations(results: Results) -> list[Explanation]:
    """Instability, drift and memorisation judged by the rules stated in the chapter (module docstrings
    of :mod:`geocont.instability` and the rules below), each with its numbers. A fall is the book's
    fall rule (:class:`geocont.statistics.Fall`: ``falls``, a clear fall; ``holds``, less than the margin).

    * instability is supported when at least half of res-none's fall (peak to final, headline, Adam)
      happens across instability events and no intervention without events makes res-none fall;
      not supported when an intervention whose runs had no event still makes it fall while less
      than half the Adam fall happened across events;
    * drift is supported when some intervention without events makes res-none fall while res-relu
      under it holds, and res-none's drift rate in stable windows exceeds res-relu's; not supported
      when no event-free run of res-none falls;
    * memorisation is supported when every dataset on which res-none falls has every run memorised
      and most of the headline fall comes after the memorised step; not supported when res-none
      falls on a dataset where no run memorised its training set.
    """
    rows = intervention_rows(results).set_index(["intervention", "condition"])
    base = rows.loc[("adam", "res-none")]
    headline = results.comparison[results.settings.headline]
    summaries = instability.run_summary(headline[headline["condition"] == "res-none"])
    # the split of the fall is read off the trace, run by run: the fall from each run's peak to its end,
    # and the part of it that happened across instability events
    fall = float(summaries["fall_from_peak"].mean())
    across = float(summaries["fall_across_events"].mean())
    share = across / fall if fall > 0 else math.nan
    stable = [name for name in rows.index.get_level_values(0).unique()
              if rows.loc[(name, "res-none"), "runs_with_events"] == 0]
    falls_without_events = [name for name in stable if rows.loc[(name, "res-none"), "falls"]]
    if not math.isnan(share) and share >= 0.5 and not falls_without_events:
        instability_verdict = "supported"
    elif falls_without_events and (math.isnan(share) or share < 0.5):
        instability_verdict = "not supported"
    else:
        instability_verdict = "inconclusive"
    out = [Explanation("instability", instability_verdict, dict(
        headline=results.settings.headline, runs_with_events=int(base["runs_with_events"]), runs=int(base["seeds"]),
        events=int(base["events"]), fall=fall, across=across, share=share,
        without_events=[(name, float(rows.loc[(name, "res-none"), "fall"]), float(rows.loc[(name, "res-relu"), "fall"]))
                        for name in stable]))]

    relu_rate, none_rate = rows.loc[("adam", "res-relu"), "drift_rate"], base["drift_rate"]
    kept = [name for name in falls_without_events if rows.loc[(name, "res-relu"), "holds"]]
    if kept and none_rate > relu_rate:
        drift_verdict = "supported"
    elif stable and not falls_without_events:
        drift_verdict = "not supported"
    else:
        drift_verdict = "inconclusive"
    out.append(Explanation("rotation drift", drift_verdict, dict(
        none_rate=float(none_rate), none_rate_sd=float(base["drift_rate_sd"]), relu_rate=float(relu_rate),
        relu_rate_sd=float(rows.loc[("adam", "res-relu"), "drift_rate_sd"]), kept=kept)))

    comparison = comparison_rows(results)
    linear = comparison[comparison["condition"] == "res-none"].set_index("dataset")
    falling = linear[linear["falls"].astype(bool)]
    unmemorised_falls = [d for d, r in falling.iterrows() if r["memorised_runs"] == 0]
    after = -float(summaries["change_after_memorised"].mean())
    if unmemorised_falls:
        memorisation_verdict = "not supported"
    elif len(falling) and (falling["memorised_runs"] == falling["seeds"]).all() and fall > 0 and after >= 0.5 * fall:
        memorisation_verdict = "supported"
    else:
        memorisation_verdict = "inconclusive"
    out.append(Explanation("memorisation", memorisation_verdict, dict(
        datasets=[(d, float(r["v1_peak"] - r["v1_final"]), int(r["memorised_runs"]), int(r["seeds"]))
                  for d, r in linear.iterrows()])))
    return out


@dataclass(frozen=True)
class SharedAxes:
    """res-relu's final weight v1 under Adam and under Adam in random per-layer frames, and the share of its
    continuity above the random level that Adam's shared axes supply (NaN where Adam's is not above it)."""

    adam: Estimate
    rotated: Estimate
    share: float


def shared_axes(results: Results) -> SharedAxes | None:
    """What Adam's per-coordinate axes, shared by all layers, supply of res-relu's continuity (None if not run)."""
    if "adam-rotated" not in results.interventions:
        return None
    adam = weight_v1(results.interventions["adam"], "res-relu")
    rotated = weight_v1(results.interventions["adam-rotated"], "res-relu")
    share = (adam.mean - rotated.mean) / (adam.mean - results.baseline) if adam.mean > results.baseline else math.nan
    return SharedAxes(adam, rotated, share)


def weight_decay_prediction(results: Results) -> tuple[str, Estimate, Estimate]:
    """Our prediction (not the paper's): weight decay keeps more of res-none's continuity than Adam."""
    if "adamw 0.1" not in results.interventions:
        return "not tested", Estimate(math.nan, math.nan, 0), Estimate(math.nan, math.nan, 0)
    with_decay = weight_v1(results.interventions["adamw 0.1"], "res-none")
    without = weight_v1(results.interventions["adam"], "res-none")
    return verdict_for_difference(with_decay, without), with_decay, without


@dataclass(frozen=True)
class Formation:
    """Whether continuity formed at all under SGD, beside Adam (what the SGD rows can say).

    ``linear``: "no-sgd" (no SGD run trained), "all-diverged", "never-formed" or "formed"
    (:func:`geocont.statistics.formed`); ``baseline``: how res-relu's peaks compare across the optimizers,
    "not-comparable", "lower-under-sgd" / "higher-under-sgd" (a difference by the book's rule) or "alike".
    """

    lr: float | None
    rows: pd.DataFrame
    linear: str
    baseline: str
    relu_gap: float


def formation(results: Results) -> Formation:
    """The :class:`Formation` finding from :func:`formation_rows`."""
    rows = formation_rows(results)
    if rows.empty or "sgd" not in set(rows["optimizer"]):
        return Formation(results.sgd_choice.lr, rows, "no-sgd", "not-comparable", math.nan)
    by = rows.set_index(["condition", "optimizer"])

    def peak(condition: str, optimizer: str) -> Estimate | None:
        if (condition, optimizer) not in by.index:
            return None
        one = by.loc[(condition, optimizer)]
        return Estimate(one.peak_mean, one.peak_sd, int(one.seeds))

    if ("res-none", "sgd") not in by.index:
        linear = "all-diverged"
    else:
        linear = "formed" if by.loc[("res-none", "sgd"), "formed"] else "never-formed"
    adam, sgd = peak("res-relu", "adam"), peak("res-relu", "sgd")
    if adam is None or sgd is None:
        return Formation(results.sgd_choice.lr, rows, linear, "not-comparable", math.nan)
    if verdict_for_difference(adam, sgd) == "reproduced":
        baseline = "lower-under-sgd"
    elif verdict_for_difference(sgd, adam) == "reproduced":
        baseline = "higher-under-sgd"
    else:
        baseline = "alike"
    return Formation(results.sgd_choice.lr, rows, linear, baseline, adam.mean - sgd.mean)


@dataclass(frozen=True)
class SeedGroup:
    """One group of seeds' final weight v1 (headline dataset): its estimate, diverged seeds, and its shape."""

    condition: str
    optimizer: str
    value: Estimate
    diverged: int
    shape: Modality


def seed_groups_found(results: Results) -> list[SeedGroup]:
    """Every group of :func:`seed_values`, with whether it is bimodal (:func:`modality`)."""
    out = []
    for (condition, optimizer), group in seed_values(results).groupby(["condition", "optimizer"]):
        finite = group.loc[~group["diverged"], "value"]
        out.append(SeedGroup(condition, optimizer, estimate(finite), int(group["diverged"].sum()), modality(finite)))
    return out


def halves_agree(results: Results) -> dict[str, bool]:
    """Per optimizer: whether both halves of the linear net's seeds give the verdicts of all its seeds."""
    return {optimizer: group["low_verdict"].nunique() == 1 and group["relu_above_verdict"].nunique() == 1
            for optimizer, group in half_verdicts(results).groupby("optimizer")}


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims: Condition 2 on every dataset (the headline dataset's under plain keys)."""
    builder = ClaimsBuilder(CHAPTER.name)
    comparison_claims(results, builder)
    return builder.table()

"""The MLP runs shared by the MLP chapters: presets per scale, optimizers, the settings they build, the run set,
the predicted cost, and the settings' descriptions (provenance rows, parameter help).

``mlp_conditions``, ``activation_vs_norm`` and ``timeline`` train the same residual MLP at the
same three scales; each chapter adds its conditions and departures with :func:`mlp_presets`.
What the MLP chapters show of their runs (tables, the closing list) is :mod:`.mlp_presentation`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..book.chapter import Presets, presets, seeds_text
from ..config import MLPRunConfig, OptimizerConfig, check_positive
from ..data import check_dataset_name
from ..mlp import CONDITIONS, block_spec
from ..scales import parse_seeds
from ..training import run_sweep

#: Optimizers compared at the horizon on the robustness conditions. SGD is rotation
#: equivariant; Adam's per-coordinate scaling is not, so Adam might itself pin a linear net's
#: frame; ``adam-rotated`` is Adam computed in an independent random orthogonal basis per
#: layer (:class:`geocont.optimizers.FrameAdam`), so no two layers share Adam's axes. SGD
#: with momentum 0.9 at lr 0.03 diverged within 930 steps; 0.01 trains.
ROBUSTNESS_OPTIMIZERS: dict[str, OptimizerConfig] = {
    "adam": OptimizerConfig("adam", lr=1e-3),
    "sgd(momentum=0.9)": OptimizerConfig("sgd", lr=0.01, momentum=0.9),
    "adam-rotated": OptimizerConfig("adam-rotated", lr=1e-3),
}


#: The presets: the values of the settings per scale. ``steps`` is the horizon of every long run
#: (the paper's: 20 epochs of 60,000 digits at batch 128 = 9,360 optimizer steps, at ``cpu`` too).
#: ``dataset`` at ``cpu`` is ``fashion-mnist``, offline and of the paper's training-set size (60,000
#: images): whether the training set is memorised before the horizon, which decides several claims, depends
#: on that size (:data:`HEADLINE_DATASET_RULE`). Snapshots are ``n_snapshots`` log-spaced plus
#: ``n_late_snapshots`` evenly spaced, and ``early_steps`` (930, a tenth of the horizon) is snapshotted
#: too, so that every verdict can show its early value. The initialisation sweeps train ``early_steps`` only. ``trace_every`` is the dense
#: loss/continuity trace of :mod:`geocont.instability`; every MLP chapter records it, so that a run
#: two chapters train (the Condition-2 chapter's and the conditions chapter's) is trained once. A chapter adds its own
#: values (at least ``conditions``) with :func:`mlp_presets`.
MLP_PRESETS: dict[str, dict[str, Any]] = {
    "smoke": dict(
        dataset="fashion-mnist",
        max_train=1024,
        width=32,
        depth=16,
        steps=48,
        early_steps=16,
        batch_size=64,
        n_snapshots=8,
        n_late_snapshots=4,
        trace_every=2,
        seeds=(0, 1),
    ),
    "cpu": dict(
        dataset="fashion-mnist",
        max_train=None,
        width=256,
        depth=16,
        steps=9360,
        early_steps=930,
        batch_size=128,
        n_snapshots=24,
        n_late_snapshots=16,
        trace_every=20,
        seeds=(0, 1, 2),
    ),
    "paper": dict(
        dataset="mnist",
        max_train=None,
        width=256,
        depth=16,
        steps=9360,
        early_steps=930,
        batch_size=128,
        n_snapshots=32,
        n_late_snapshots=24,
        trace_every=10,
        seeds=(0, 1, 2),
        device="auto",
        precision="bf16-autocast",
    ),
}


#: One worker's wall seconds per MLP training step at ``cpu`` (16 x 256, batch 128, fp32, recording and the
#: dense trace included) with two one-thread workers on this project's 2-core machine when it is quiet
#: (benchmarks/README.md gives the measurements; on a shared machine the same runs take 1.5x as long).
CPU_SECONDS_PER_MLP_STEP = 0.0193

#: ``adam-rotated`` (Adam in a random orthogonal frame per layer: two more 256 x 256 products per layer
#: and step) costs about twice a plain step (benchmarks/README.md).
ROTATED_STEP_FACTOR = 2.0


def predicted_run_seconds(config: MLPRunConfig) -> float:
    """Predicted wall seconds of one MLP run at ``cpu`` width on one of two one-thread workers."""
    factor = ROTATED_STEP_FACTOR if config.optimizer.name == "adam-rotated" else 1.0
    return config.steps * CPU_SECONDS_PER_MLP_STEP * factor


#: A radial activation (x tanh(||x|| / tau)) is called linear in practice when at least this percentage of its
#: pre-activations lie where it is within 1% of the identity (tanh(||z|| / tau) >= 0.99); the conditions chapter
#: applies it at initialisation, the symmetry-dose chapter at the end of training. Chosen before any run was read.
NEAR_LINEAR_SHARE = 90.0

#: Why the MLP chapters' headline dataset is the one they train on (stated before any run was read).
HEADLINE_DATASET_RULE = (
    "the dataset whose training set has the paper's size (60,000 images), since whether the "
    "training set is memorised before the horizon depends on its size"
)

#: The datasets of the data control (besides the chapter's own), at the same step count: real digits
#: (``mnist-10k``, 9,000 for training) and the 4,000-digit subset, the named control of the interpolating
#: regime (its training set is memorised long before the horizon).
DATA_CONTROL_DATASETS: tuple[str, ...] = ("mnist-10k", "mnist-subset")

#: What the data control's datasets stand for in the book's words (the control is named, never a headline).
DATASET_ROLES: dict[str, str] = {
    "fashion-mnist": "60,000 images, the paper's training-set size",
    "mnist": "the paper's data",
    "mnist-10k": "9,000 real digits",
    "mnist-subset": "the interpolating-regime control: 4,000 digits, memorised long before the horizon",
}


@dataclass(frozen=True)
class MLPChapterSettings:
    """Everything the MLP chapter runs: a base config, seeds, conditions, optimizers."""

    scale: str
    base: MLPRunConfig
    seeds: tuple[int, ...]
    #: the early horizon (steps): snapshotted in every long run, the length of the short runs
    early_steps: int
    #: the chapter parameters that were set (not None), as a re-run must repeat them
    overrides: dict[str, Any] = field(default_factory=dict)
    conditions: tuple[str, ...] = ()
    robustness_conditions: tuple[str, ...] = ("res-relu", "res-none")
    optimizers: dict[str, OptimizerConfig] = field(default_factory=lambda: dict(ROBUSTNESS_OPTIMIZERS))
    #: extra initialisation scales tried on the robustness conditions (base optimizer, short runs)
    extra_init_scales: tuple[float, ...] = (4.0,)
    data_datasets: tuple[str, ...] = DATA_CONTROL_DATASETS
    #: the conditions of the data control: the linear net, whose fall it asks about, and the net without
    #: residuals, whose weight claim every dataset judges (the Condition-2 chapter trains the same runs)
    data_conditions: tuple[str, ...] = ("res-none", "nores-relu")
    #: the mean-removal control: conditions whose activation output has its batch mean removed
    #: (``nores-relu-batch-centred``, ``res-relu-batch-centred``), trained like the conditions
    mean_control_conditions: tuple[str, ...] = ()
    #: departures of the short runs (the init sweep) from the base config, besides their length
    short_run: dict[str, Any] = field(default_factory=dict)
    #: the preset's early horizon where ``steps`` was set below it (``early_steps`` is then shortened
    #: in proportion); None otherwise
    early_preset: int | None = None

    def condition_configs(self) -> list[MLPRunConfig]:
        """Every condition x seed under the base optimizer, at the horizon."""
        return [self.base.replace(condition=c, seed=s) for c in self.conditions for s in self.seeds]

    def mean_control_configs(self) -> list[MLPRunConfig]:
        """The mean-removal control's conditions x every seed under the base optimizer, at the horizon."""
        return [self.base.replace(condition=c, seed=s) for c in self.mean_control_conditions for s in self.seeds]

    def robustness_configs(self) -> list[MLPRunConfig]:
        """The robustness conditions x every optimizer x seed, at the horizon."""
        return [
            self.base.replace(condition=c, optimizer=o, seed=s)
            for c in self.robustness_conditions
            for o in self.optimizers.values()
            for s in self.seeds
        ]

    def data_configs(self) -> dict[str, list[MLPRunConfig]]:
        """Per dataset (the base one first): the data conditions x seed, at the horizon."""
        datasets = (self.base.dataset, *(d for d in self.data_datasets if d != self.base.dataset))
        return {
            d: [self.base.replace(dataset=d, condition=c, seed=s) for c in self.data_conditions for s in self.seeds]
            for d in datasets
        }

    @property
    def short_base(self) -> MLPRunConfig:
        """The base config of the short runs: ``early_steps`` long, log-spaced snapshots only."""
        return self.base.replace(steps=self.early_steps, n_late_snapshots=0, snapshot_steps=(), **self.short_run)

    def init_configs(self) -> list[MLPRunConfig]:
        """The robustness conditions at the base and every extra init scale, x seed (short runs)."""
        scales = (self.base.init_scale, *self.extra_init_scales)
        return [
            self.short_base.replace(condition=c, init_scale=i, seed=s)
            for c in self.robustness_conditions
            for i in scales
            for s in self.seeds
        ]


def mlp_preset(scale: str) -> dict[str, Any]:
    """The shared MLP presets at ``scale`` (:data:`MLP_PRESETS`), read when a chapter is configured."""
    return dict(MLP_PRESETS[scale])


def mlp_presets(
    per_scale: dict[str, dict[str, Any]] | None = None, *, without: tuple[str, ...] = (), **values: Any
) -> Presets:
    """An MLP chapter's presets (:func:`geocont.book.chapter.presets`): :data:`MLP_PRESETS` less
    ``without``, with ``values`` (every scale) and ``per_scale`` (``{scale: {setting: value}}``) added or replaced."""
    return presets(mlp_preset, per_scale, without=without, **values)


#: The settings values that set the base optimizer (the others are MLPRunConfig fields or sweeps).
OPTIMIZER_FIELDS = ("lr", "beta1", "beta2", "momentum", "weight_decay")
#: The settings values that set the robustness, init and data sweeps.
SWEEP_FIELDS = (
    "robustness_conditions",
    "extra_init_scales",
    "data_datasets",
    "data_conditions",
    "mean_control_conditions",
)


def _early_steps(scale: str, values: dict[str, Any]) -> tuple[int, int | None]:
    """The early snapshot's step (popped from ``values``) and, where the run is shorter than it, the preset's
    early step it replaces (the early horizon then keeps its share of the preset's run; else None)."""
    early_steps = check_positive("early_steps", values.pop("early_steps"))
    early_preset = None
    if values.get("steps") is not None and check_positive("steps", values["steps"]) < early_steps:
        # a run shorter than the early snapshot: the early horizon keeps its share of the preset's run
        early_preset = early_steps
        early_steps = max(1, round(values["steps"] * early_steps / MLP_PRESETS[scale]["steps"]))
    return early_steps, early_preset


def _check_sweeps(conditions: tuple[str, ...], sweeps: dict[str, tuple]) -> None:
    """Raise ``ValueError`` for an unknown dataset or condition, or a non-positive extra init scale."""
    for dataset in sweeps.get("data_datasets", ()):
        check_dataset_name(dataset)
    for condition in (
        conditions
        + sweeps.get("robustness_conditions", ())
        + sweeps.get("data_conditions", ())
        + sweeps.get("mean_control_conditions", ())
    ):
        block_spec(condition)
    for init_scale in sweeps.get("extra_init_scales", ()):
        check_positive("extra_init_scales", init_scale, integer=False)


def _base_optimizer(values: dict[str, Any]) -> OptimizerConfig:
    """The base optimizer: Adam with the :data:`OPTIMIZER_FIELDS` of ``values`` (popped), ``optimizer`` naming
    another one."""
    optimizer_changes = {name: values.pop(name) for name in OPTIMIZER_FIELDS if name in values}
    if isinstance(values.get("optimizer"), str):
        optimizer_changes["name"] = values.pop("optimizer")
    return dataclasses.replace(ROBUSTNESS_OPTIMIZERS["adam"], **optimizer_changes)


def build_settings(scale: str, values: dict[str, Any]) -> MLPChapterSettings:
    """An MLP chapter's settings from its preset values (:func:`mlp_presets`, any of them replaced).

    Values may be any :class:`MLPRunConfig` field (but ``condition`` and ``seed``), ``seeds``
    (an int n means ``range(n)``, or a list), ``conditions``, ``early_steps``, the
    :data:`SWEEP_FIELDS`, ``short_run`` (the short runs' departures), the
    :data:`OPTIMIZER_FIELDS` or ``optimizer`` ("adam" / "sgd") for the base optimizer. With
    ``steps`` None, ``epochs`` sets the long runs' length. A bad value raises ``ValueError``.
    """
    values = dict(values)
    seeds = parse_seeds(values.pop("seeds"))
    conditions = tuple(values.pop("conditions"))
    if not conditions:
        raise ValueError(f"conditions must name at least one condition; valid choices: {', '.join(CONDITIONS)}")
    early_steps, early_preset = _early_steps(scale, values)
    short_run = dict(values.pop("short_run", {}))
    sweeps = {name: tuple(values.pop(name)) for name in SWEEP_FIELDS if name in values}
    _check_sweeps(conditions, sweeps)
    optimizer = _base_optimizer(values)
    snapshot_steps = (*values.pop("snapshot_steps", ()), early_steps)
    base = MLPRunConfig(optimizer=optimizer, snapshot_steps=snapshot_steps, **values)
    if base.steps is not None and early_steps > base.steps:
        raise ValueError(f"early_steps ({early_steps}) cannot exceed steps ({base.steps})")
    settings = MLPChapterSettings(
        scale=scale,
        base=base,
        seeds=seeds,
        early_steps=early_steps,
        conditions=conditions,
        short_run=short_run,
        early_preset=early_preset,
        **sweeps,
    )
    _ = settings.short_base  # building it validates the short runs' config too
    return settings


def all_run_configs(settings: MLPChapterSettings) -> list[MLPRunConfig]:
    """Every run of the conditions, robustness, init and data sweeps."""
    return (
        settings.condition_configs()
        + settings.robustness_configs()
        + settings.init_configs()
        + [config for configs in settings.data_configs().values() for config in configs]
        + settings.mean_control_configs()
    )


def run_data_sweep(settings: MLPChapterSettings) -> dict[str, pd.DataFrame]:
    """The data control: ``{dataset: sweep table}`` (the chapter's own dataset first)."""
    return {dataset: run_sweep(configs) for dataset, configs in settings.data_configs().items()}


@dataclass(frozen=True)
class RunSummary:
    """An MLP chapter's run note: how many conditions and seeds, and the random level at the width."""

    conditions: int
    seeds: int
    width: int
    baseline: float


def run_summary(results: Any) -> RunSummary:
    """The numbers of an MLP chapter's run note, from its results (``order``, ``settings``, ``baseline``)."""
    settings = results.settings
    return RunSummary(
        conditions=len(results.order), seeds=len(settings.seeds), width=settings.base.width, baseline=results.baseline
    )


def last_step(table: pd.DataFrame) -> int:
    """The final step of the runs in ``table`` (they share one horizon)."""
    return int(table["step"].max())


def horizon_text(settings: MLPChapterSettings) -> str:
    """``9,360 optimizer steps`` (or ``30 epochs``): the long runs' length as configured."""
    base = settings.base
    return f"{base.steps:,} optimizer steps" if base.steps is not None else f"{base.epochs} epochs"


def training_description(settings: MLPChapterSettings, init_sweep: bool = True) -> str:
    """The provenance row "training" of an MLP chapter: horizon, batch, optimizer, snapshots, and
    (``init_sweep``) the short runs of the initialisation sweep."""
    base, short = settings.base, settings.short_base
    text = (
        f"{horizon_text(settings)}, batch {base.batch_size}, optimizer {base.optimizer.label} "
        f"(lr {base.optimizer.lr:g}); {base.n_snapshots} log-spaced and {base.n_late_snapshots} evenly spaced "
        f"snapshots, and one at step {settings.early_steps:,}; k = {base.n_directions} directions"
    )
    if settings.early_preset is not None:
        text += (
            f" (the early horizon, {settings.early_preset:,} steps in the preset, is shortened with the run to "
            f"{settings.early_steps:,} steps, the same share of the run)"
        )
    if init_sweep:
        text += (
            f". The initialisation sweep trains {settings.early_steps:,} steps ({short.n_snapshots} log-spaced "
            f"snapshots, k = {short.n_directions})"
        )
    return text


def scale_rows(settings: MLPChapterSettings) -> list[tuple[str, str]]:
    """The MLP's rows of the methods page's table of the scales (:attr:`geocont.book.chapter.Chapter.scale_rows`)."""
    base = settings.base
    return [
        ("MLP: data", f"`{base.dataset}`" + (f", first {base.max_train} training digits" if base.max_train else "")),
        ("MLP: hidden layers × width", f"{base.depth} × {base.width}"),
        ("MLP: optimizer steps × batch (every long run)", f"{base.steps:,} × {base.batch_size}"),
        (
            "MLP: snapshots (log-spaced + evenly spaced + early)",
            f"{base.n_snapshots} + {base.n_late_snapshots} + step {settings.early_steps:,}",
        ),
        ("MLP: seeds", seeds_text(settings.seeds)),
        ("MLP init sweeps: steps", f"{settings.early_steps:,}"),
    ]


def data_description(settings: MLPChapterSettings) -> str:
    """The provenance row "data" of an MLP chapter."""
    base = settings.base
    return f"`{base.dataset}`" + (f", first {base.max_train} training examples" if base.max_train else "")


#: What each MLP chapter parameter means (the notebooks' parameters cells carry the same words).
PARAMETER_HELP: dict[str, str] = {
    "scale": "smoke | cpu | paper: the whole preset, see geocont.chapters.mlp_runs",
    "seeds": "an int n (seeds 0..n-1) or a list; None keeps the scale's default",
    "steps": "the horizon (optimizer steps) of every long run; any of these overrides one setting of the preset; None keeps it",
    "conditions": "a list of geocont.mlp.CONDITIONS",
    "extra_init_scales": "init scales tried besides the base one (baseline condition only)",
    "width": "hidden width",
    "depth": "number of hidden layers",
    "dataset": "fashion-mnist (offline, 60k) | mnist-10k (offline, 10k real digits) | mnist-subset (offline, 5k) | mnist",
    "init_scale": "multiplies the initial weights' standard deviation",
    "lr": "the base optimizer's learning rate",
    "n_snapshots": "log-spaced snapshots per run",
    "n_directions": "k: how many singular directions are compared",
    "precision": "fp32 | bf16-autocast (matrix products in bf16; weights, optimizer state and metrics stay fp32)",
}


def parameters(*names: str) -> dict[str, str]:
    """An MLP chapter's ``PARAMETERS``: these names, in this order, with their help text."""
    return {name: PARAMETER_HELP[name] for name in names}

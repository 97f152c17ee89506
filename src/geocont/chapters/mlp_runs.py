"""The MLP experiments shared by the MLP chapters: presets per scale, optimizers, sweeps.

``mlp_conditions``, ``activation_vs_norm`` and ``timeline`` train the same residual MLP at
the same three scales; each chapter picks its conditions and departures here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from IPython.display import Markdown

from ..config import MLPRunConfig, OptimizerConfig, check_positive
from ..mlp import block_spec
from ..book.chapter import verdict_list
from ..scales import apply_overrides, check_scale, parameter_errors
from ..statistics import at_final_step, estimate, per_run


#: Optimizer settings compared in the robustness experiment (the same for every
#: condition). Adam with beta2 = 0 divides by the current |gradient|, so coordinates whose
#: gradient is momentarily ~0 get huge steps: with eps = 1e-8 or 1e-6 it diverged within
#: 10 steps at lr 1e-3 and 1e-4, and with eps = 1e-4 at lr 1e-4 res-none diverged after
#: 437 steps; lr 3e-5 with eps = 1e-4 trained all 3 seeds of both conditions for 30
#: epochs. SGD with momentum 0.9 at lr 0.03 diverged; 0.01 trains.
ROBUSTNESS_OPTIMIZERS: dict[str, OptimizerConfig] = {
    "adam": OptimizerConfig("adam", lr=1e-3),
    "adam(beta2=0)": OptimizerConfig("adam", lr=3e-5, beta2=0.0, eps=1e-4),
    "sgd(momentum=0.9)": OptimizerConfig("sgd", lr=0.01, momentum=0.9),
}


#: The conditions each MLP chapter compares (any may be overridden with ``conditions=``).
CHAPTER_CONDITIONS: dict[str, tuple[str, ...]] = {
    "mlp_conditions": ("res-relu", "res-gelu", "res-silu", "nores-relu", "res-none", "res-radial"),
    "activation_vs_norm": ("res-relu", "res-ln", "res-ln-relu", "res-none", "res-rms", "res-rms-relu"),
    "timeline": ("res-relu", "nores-relu", "res-none", "res-radial"),
}


#: Per-chapter departures from the scale presets and from the MLPChapterSettings defaults.
#: The timeline chapter needs a fine snapshot schedule (so it records only v1/u1, k = 1,
#: which keeps the recorder cheap) and sweeps the initialisation scale over two orders
#: of magnitude on the baseline condition.
_CHAPTER_PRESETS: dict[str, dict[str, Any]] = {
    "timeline": dict(n_snapshots={"smoke": 12, "cpu": 32, "paper": 48}, n_directions=1,
                     robustness_conditions=("res-relu",), extra_init_scales=(0.03, 0.1, 0.3, 3.0)),
}


_MLP_SCALES: dict[str, dict[str, Any]] = {
    "smoke": dict(dataset="mnist-subset", max_train=1024, width=32, depth=16, epochs=3,
                  batch_size=64, n_snapshots=8, seeds=(0, 1)),
    "cpu": dict(dataset="mnist-subset", max_train=None, width=256, depth=16, epochs=30,
                batch_size=128, n_snapshots=12, seeds=(0, 1, 2)),
    "paper": dict(dataset="mnist", max_train=None, width=256, depth=16, epochs=20,
                  batch_size=128, n_snapshots=24, seeds=(0, 1, 2), device="auto"),
}


@dataclass(frozen=True)
class MLPChapterSettings:
    """Everything the MLP chapter runs: a base config, seeds, conditions, optimizers."""

    scale: str
    base: MLPRunConfig
    seeds: tuple[int, ...]
    #: the chapter parameters that were set (not None), as a re-run must repeat them
    overrides: dict[str, Any] = field(default_factory=dict)
    conditions: tuple[str, ...] = CHAPTER_CONDITIONS["mlp_conditions"]
    robustness_conditions: tuple[str, ...] = ("res-relu", "res-none")
    optimizers: dict[str, OptimizerConfig] = field(default_factory=lambda: dict(ROBUSTNESS_OPTIMIZERS))
    #: extra initialisation scales tried on the robustness conditions (base optimizer)
    extra_init_scales: tuple[float, ...] = (4.0,)

    def condition_configs(self) -> list[MLPRunConfig]:
        """Every condition x seed under the base optimizer."""
        return [self.base.replace(condition=c, seed=s) for c in self.conditions for s in self.seeds]

    def robustness_configs(self) -> list[MLPRunConfig]:
        """The robustness conditions x every optimizer setting x seed."""
        return [
            self.base.replace(condition=c, optimizer=o, seed=s)
            for c in self.robustness_conditions for o in self.optimizers.values() for s in self.seeds
        ]

    def init_configs(self) -> list[MLPRunConfig]:
        """The robustness conditions at the base and every extra init scale, x seed."""
        scales = (self.base.init_scale, *self.extra_init_scales)
        return [
            self.base.replace(condition=c, init_scale=i, seed=s)
            for c in self.robustness_conditions for i in scales for s in self.seeds
        ]


def mlp_chapter_settings(scale: str, chapter: str = "mlp_conditions", **overrides: Any) -> MLPChapterSettings:
    """Settings of an MLP chapter at ``scale``, with optional overrides.

    ``chapter`` picks the default conditions (:data:`CHAPTER_CONDITIONS`). Overrides may
    name any :class:`MLPRunConfig` field, ``seeds`` (an int n means ``range(n)``, or a
    list), ``conditions``, ``lr``, ``beta1``, ``beta2``, ``momentum`` or ``optimizer``
    ("adam" / "sgd") for the base optimizer.
    """
    check_scale(scale)
    if chapter not in CHAPTER_CONDITIONS:
        raise ValueError(f"unknown chapter {chapter!r}; valid choices: {', '.join(CHAPTER_CONDITIONS)}")
    optimizer_fields = {"lr", "beta1", "beta2", "momentum", "weight_decay"}
    run_fields = {f.name for f in dataclasses.fields(MLPRunConfig)} - {"condition", "seed"}
    sweep_fields = {"robustness_conditions", "extra_init_scales"}
    chapter_preset = dict(_CHAPTER_PRESETS.get(chapter, {}))
    if isinstance(chapter_preset.get("n_snapshots"), dict):
        chapter_preset["n_snapshots"] = chapter_preset["n_snapshots"][scale]
    preset, seeds = apply_overrides({**_MLP_SCALES[scale], **chapter_preset}, overrides,
                                     run_fields | optimizer_fields | sweep_fields | {"seeds", "conditions"})
    conditions = tuple(preset.pop("conditions", CHAPTER_CONDITIONS[chapter]))
    sweeps = {name: tuple(preset.pop(name)) for name in sweep_fields if name in preset}
    for condition in conditions + sweeps.get("robustness_conditions", ()):
        block_spec(condition)
    for init_scale in sweeps.get("extra_init_scales", ()):
        check_positive("extra_init_scales", init_scale, integer=False)
    optimizer_changes = {k: preset.pop(k) for k in list(preset) if k in optimizer_fields}
    if isinstance(preset.get("optimizer"), str):
        optimizer_changes["name"] = preset.pop("optimizer")
    optimizer = dataclasses.replace(ROBUSTNESS_OPTIMIZERS["adam"], **optimizer_changes)
    base = MLPRunConfig(optimizer=optimizer, **preset)
    return MLPChapterSettings(scale=scale, base=base, seeds=seeds, conditions=conditions, **sweeps,
                              overrides={k: v for k, v in overrides.items() if v is not None})


def configure_chapter(chapter: str, parameters: dict[str, str], scale: str, params: dict[str, Any]) -> MLPChapterSettings:
    """An MLP chapter's ``configure``: reject names outside ``parameters``, then build and validate
    :func:`mlp_chapter_settings`; every bad name or value raises a one-line ``ParameterError``."""
    unknown = sorted(set(params) - set(parameters))
    with parameter_errors():
        if unknown:
            raise ValueError(f"unknown parameter(s) {', '.join(unknown)}; valid choices: {', '.join(parameters)}")
        return mlp_chapter_settings(scale, chapter, **params)


def final_summary(table: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """The chapter's summary table: final values (mean ± sd over seeds) per group."""
    by = by or ["condition"]
    quantities = {
        "weight v1": ("weight_cos", "input", 1),
        "weight u1": ("weight_cos", "output", 1),
        "gradient v1": ("grad_cos", "input", 1),
        "gradient u1": ("grad_cos", "output", 1),
        "sigma²-align (in)": ("weight_align", "input", 0),
        "test accuracy": ("test_acc", "", 0),
    }
    out = {}
    for label, (metric, space, direction) in quantities.items():
        frame = at_final_step(per_run(table, metric, space, direction))
        out[label] = frame.groupby(by, observed=True)["value"].apply(lambda v: str(estimate(v)))
    return pd.DataFrame(out)


def verdict(settings: MLPChapterSettings, claims: pd.DataFrame) -> Markdown:
    """An MLP chapter's closing list: one bullet per claim, under the scale, seeds and data."""
    return Markdown(verdict_list(claims, f"At the `{settings.scale}` scale ({len(settings.seeds)} seeds, "
                                         f"{settings.base.epochs} epochs on `{settings.base.dataset}`):"))


#: What each MLP chapter parameter means (the notebooks' parameters cells carry the same words).
PARAMETER_HELP: dict[str, str] = {
    "scale": "smoke | cpu | paper: the whole preset, see geocont.chapters.mlp_runs",
    "seeds": "an int n (seeds 0..n-1) or a list; None keeps the scale's default",
    "epochs": "any of these overrides one setting of the preset; None keeps it",
    "conditions": "a list of geocont.mlp.CONDITIONS",
    "extra_init_scales": "init scales tried besides the base one (baseline condition only)",
    "width": "hidden width",
    "depth": "number of hidden layers",
    "dataset": "mnist-subset (offline, 5k real digits) | mnist-10k (offline, 10k) | mnist | fashion-mnist",
    "init_scale": "multiplies the initial weights' standard deviation",
    "lr": "the base optimizer's learning rate",
    "n_snapshots": "log-spaced snapshots per run",
    "n_directions": "k: how many singular directions are compared",
}


def parameters(*names: str) -> dict[str, str]:
    """An MLP chapter's ``PARAMETERS``: these names, in this order, with their help text."""
    return {name: PARAMETER_HELP[name] for name in names}

"""The timeline chapter's settings: the conditions it compares, its three sweeps (conditions,
optimizers, init scales) and its :class:`~geocont.book.chapter.Chapter`."""

from __future__ import annotations

from typing import Any

from ...book.chapter import Chapter
from ...config import MLPRunConfig
from .. import mlp_runs
from ..mlp_runs import MLPChapterSettings

#: The conditions the chapter compares (the ``conditions`` parameter replaces them).
CONDITIONS_COMPARED = ("res-relu", "nores-relu", "res-none", "res-radial", "res-radial-tau")


#: The symmetric conditions whose late drift the claims compare with the reference (claim ``<condition>-late-drift``).
DRIFT_CONDITIONS = ("res-none", "res-radial", "res-radial-tau")


#: The condition without residual connections the step-0 claim compares the reference condition with.
NO_RESIDUAL = "nores-relu"


#: The chapter sweeps the initialisation scale over two orders of magnitude on the baseline
#: condition (``extra_init_scales``); that sweep is short (its events happen in the first few
#: hundred steps) and snapshots it finely (this many log-spaced snapshots per scale), recording
#: v1/u1 only (k = 1, which keeps it cheap).
INIT_SWEEP_SNAPSHOTS = {"smoke": 12, "cpu": 32, "paper": 48}


def sweep_configs(settings: MLPChapterSettings) -> tuple[list[MLPRunConfig], ...]:
    """The three sweeps: the conditions, the optimizers (robustness), the initialisation scales."""
    return settings.condition_configs(), settings.robustness_configs(), settings.init_configs()


def describe(settings: MLPChapterSettings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    base = settings.base
    return dict(
        seeds=settings.seeds,
        data=mlp_runs.data_description(settings),
        model=f"residual MLP, {base.depth} hidden layers of width {base.width}; init scales "
        f"{', '.join(f'{s:g}' for s in (base.init_scale, *settings.extra_init_scales))}",
        training=mlp_runs.training_description(settings) + "; the optimizers below",
    )


CHAPTER = Chapter(
    name="timeline",
    parameters=mlp_runs.parameters(
        "scale",
        "seeds",
        "steps",
        "conditions",
        "extra_init_scales",
        "width",
        "depth",
        "dataset",
        "lr",
        "n_snapshots",
        "precision",
    ),
    presets=mlp_runs.mlp_presets(
        {scale: dict(short_run=dict(n_snapshots=n, n_directions=1)) for scale, n in INIT_SWEEP_SNAPSHOTS.items()},
        conditions=CONDITIONS_COMPARED,
        robustness_conditions=("res-relu",),
        extra_init_scales=(0.03, 0.1, 0.3, 3.0),
    ),
    build=mlp_runs.build_settings,
    describe=describe,
    runs=lambda settings: [c for configs in sweep_configs(settings) for c in configs],
    scale_rows=lambda settings: [
        ("MLP timeline init sweep: snapshots (v1/u1 only)", str(settings.short_base.n_snapshots)),
        (
            "MLP timeline: init scales",
            ", ".join(f"{x:g}" for x in sorted((settings.base.init_scale, *settings.extra_init_scales))),
        ),
    ],
)

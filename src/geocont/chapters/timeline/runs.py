"""The timeline chapter's runs: its three sweeps trained (or loaded from the cache) and their transfer events."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ... import metrics
from ...mlp import CONDITIONS
from ...statistics import Estimate, estimate
from ...training import run_sweep
from ..mlp_runs import MLPChapterSettings
from .events import transfer_events
from .settings import sweep_configs

#: Metrics the timeline chapter needs in every run table (older cached runs lack them).
TIMELINE_METRICS = ("rel_update_spectral", "turn", "co_rotation", "weight_cumgrad_cos")


@dataclass
class Results:
    """The chapter's three sweeps (conditions, optimizers, init scales) and their transfer events."""

    settings: MLPChapterSettings
    table: pd.DataFrame
    optimizer_table: pd.DataFrame
    init_table: pd.DataFrame
    baseline: float
    events: pd.DataFrame
    optimizer_events: pd.DataFrame
    init_events: pd.DataFrame

    @property
    def order(self) -> list[str]:
        """The conditions in the book's fixed order."""
        return [c for c in CONDITIONS if c in self.settings.conditions]

    @property
    def reference(self) -> str:
        """The baseline condition of the optimizer and init-scale sweeps."""
        return self.settings.robustness_conditions[0]

    def of(self, condition: str, column: str) -> Estimate:
        """Mean ± sd over seeds of one events column for one condition."""
        return estimate(self.events.loc[self.events["condition"] == condition, column])


def run(settings: MLPChapterSettings) -> Results:
    """Train (or load from the cache) the three sweeps; older cached runs without
    :data:`TIMELINE_METRICS` are re-run."""
    table, optimizer_table, init_table = (
        run_sweep(configs, require_metrics=TIMELINE_METRICS) for configs in sweep_configs(settings)
    )
    return Results(
        settings=settings,
        table=table,
        optimizer_table=optimizer_table,
        init_table=init_table,
        baseline=metrics.random_abs_cos(settings.base.width),
        events=transfer_events(table),
        optimizer_events=transfer_events(optimizer_table),
        init_events=transfer_events(init_table),
    )

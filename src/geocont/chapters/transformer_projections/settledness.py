"""Where the chapter's claims are judged: the first snapshot at which every quantity a claim reads has
settled (the horizon rule), the quantities still moving there, and when each claim holds."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ...metrics import random_abs_cos
from ...statistics import (
    SETTLED_TOLERANCE,
    Estimate,
    Horizon,
    holds_when,
    judging_horizon,
    near_random_tolerance,
    per_run,
)
from ...tables import split_claim_key
from ..common import short_projection
from ..lm_runs import PROJECTION_PREDICTIONS
from .runs import Results, projection_values

#: The claims judged on one projection's continuity in one space, V's two included: ``{key: (projection, space)}``.
#: The horizon watches these quantities; the claims' notes, the lost continuities and the pretrained
#: comparison read them.
CLAIM_QUANTITIES = {f"{short_projection(p)}-{s}-continuity": (p, s) for p, s in PROJECTION_PREDICTIONS} | {
    "v-low-input": ("v_proj", "input"),
    "v-low-output": ("v_proj", "output"),
}


def quantity_name(projection: str, space: str) -> str:
    """A claim's quantity as the horizon names it (``"up_proj input"``)."""
    return f"{projection} {space}"


def horizon(results: Results) -> Horizon:
    """Where the chapter's claims are judged (:func:`geocont.statistics.judging_horizon`): the first snapshot of the
    reference variant from the early horizon on at which every quantity a claim reads (each predicted projection's
    continuity and V's) has settled in every seed and no run's validation loss has risen above its minimum; else
    the budget (the last snapshot before the validation loss rose), with the quantities still moving named."""
    mine = results.table[results.table["condition"] == results.reference]
    values = projection_values(mine)
    quantities = {
        quantity_name(p, s): values[(values["group"] == p) & (values["space"] == s)]
        for p, s in CLAIM_QUANTITIES.values()
    }
    val_loss = per_run(mine, "val_loss")
    return judging_horizon(
        quantities,
        val_loss if len(val_loss) else None,
        sorted(values["step"].unique()),
        not_before=results.settings.early_step,
        tolerance=tolerances(results, quantities),
    )


def tolerances(results: Results, quantities: dict[str, pd.DataFrame]) -> dict[str, float]:
    """Each quantity's settledness tolerance: :func:`geocont.statistics.near_random_tolerance` at its space's
    dimension and the model's layer pairs where its seed mean at the last snapshot lies within that tolerance of its
    random level (its movement would be its own noise), else :data:`geocont.statistics.SETTLED_TOLERANCE`."""
    names = {quantity_name(p, s): (p, s) for p, s in CLAIM_QUANTITIES.values()}
    pairs = results.settings.base.shape.n_layers - 1
    found = {}
    for name, frame in quantities.items():
        projection, space = names[name]
        d = results.dims[projection][space]
        wide = near_random_tolerance(d, pairs)
        final = frame[frame["step"] == frame["step"].max()]["value"].mean() if len(frame) else float("nan")
        found[name] = wide if abs(final - random_abs_cos(d)) <= wide else SETTLED_TOLERANCE
    return found


@dataclass(frozen=True)
class StillMoving:
    """A quantity a claim reads that moved by more than the tolerance over the last third in some seed: its
    projection, space, and the seeds' changes."""

    projection: str
    space: str
    change: Estimate
    per_seed: tuple[float, ...]


@dataclass(frozen=True)
class SettledFinding:
    """Where the claims are judged (:func:`horizon`): ``case`` "settled" (every quantity in every seed, at step
    ``end``, whose last third starts at ``start``), or "moving" (judged at the budget ``end``, with ``moving``);
    ``memorising_after``: the last snapshot before the validation loss rose (None where it did not)."""

    case: str
    reference: str
    start: int
    end: int
    budget: int
    tolerance: float
    moving: tuple[StillMoving, ...]
    memorising_after: int | None


def _third_start(results: Results, step: int) -> int:
    """The first snapshot at or after two thirds of ``step``: where the last third up to ``step`` starts."""
    steps = sorted(int(s) for s in results.table["step"].unique() if s * 3 >= 2 * step)
    return steps[0] if steps else step


def settled_finding(results: Results) -> SettledFinding:
    """Which quantities were still moving, seed by seed, where the claims are judged (reference variant)."""
    judged = horizon(results)
    names = {quantity_name(p, s): (p, s) for p, s in CLAIM_QUANTITIES.values()}
    moving = tuple(
        StillMoving(*names[name], judged.quantities[name].trend, tuple(judged.quantities[name].changes))
        for name in judged.moving()
    )
    return SettledFinding(
        "settled" if judged.settled else "moving",
        results.reference,
        _third_start(results, judged.step),
        judged.step,
        results.settings.base.steps,
        max(found.tolerance for found in judged.quantities.values()),
        moving,
        judged.memorising_after,
    )


@dataclass(frozen=True)
class HoldsFinding:
    """The claims' keys grouped by when they hold (:func:`geocont.statistics.holds_when`), in order
    of first appearance."""

    early_step: int
    end: int
    groups: tuple[tuple[str, tuple[str, ...]], ...]


def holds_finding(results: Results, claims: pd.DataFrame) -> HoldsFinding:
    """:class:`HoldsFinding` of a claims table with early verdicts (claims without one left out)."""
    groups: dict[str, list[str]] = {}
    for row in claims[claims["early_verdict"].fillna("") != ""].itertuples():
        groups.setdefault(holds_when(row.early_verdict, row.verdict), []).append(split_claim_key(row.key)[0])
    return HoldsFinding(
        results.settings.early_step, horizon(results).step, tuple((when, tuple(keys)) for when, keys in groups.items())
    )

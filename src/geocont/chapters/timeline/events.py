"""When, in one run, the update overtakes the initial weights (the crossing), when weight continuity
rises, whether the rise follows the crossing, and how fast v1 turns late in training (rotation drift)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ...statistics import DIFFERENCE_MARGIN, Estimate, at_final_step, drift_window_mean, estimate, per_run, turn_rates
from ...tables import RUN_KEYS, select

#: The crossing: ||W(t) - W(0)|| / ||W(0)|| (layer mean) reaches this value.
CROSSING_LEVEL = 1.0


#: The update/initial-weight ratios compared, by event column: the paper does not say which
#: norm "||Delta W|| dominates ||W(0)||" means, so both the Frobenius norm (the whole
#: matrix) and the spectral norm (its largest singular value) are tested.
CROSSINGS = {"crossing_step": "rel_update", "spectral_crossing_step": "rel_update_spectral"}


#: The two norms of the crossing: (events column, part of the claim key). The claims name a norm by the variant of
#: the ``norm`` choice in the chapter's ``prose.md`` that the key part names.
NORMS = (("crossing_step", "frobenius"), ("spectral_crossing_step", "spectral"))


def _first_step_at_or_above(frame: pd.DataFrame, thresholds: pd.Series) -> pd.Series:
    """Per run (index = RUN_KEYS), the first snapshot step whose value reaches the run's threshold."""
    frame = frame.join(thresholds.rename("threshold"), on=RUN_KEYS)
    reached = frame[frame["value"] >= frame["threshold"]]
    first = reached.groupby(RUN_KEYS, observed=True)["step"].min()
    return first.reindex(thresholds.index).astype(float)


def _crossings(table: pd.DataFrame, index: pd.Index) -> pd.DataFrame:
    """Per run (``index``), the first snapshot where each of :data:`CROSSINGS` reaches :data:`CROSSING_LEVEL`."""
    crossing_threshold = pd.Series(CROSSING_LEVEL, index=index)
    return pd.DataFrame(
        {
            column: _first_step_at_or_above(per_run(table, metric), crossing_threshold)
            for column, metric in CROSSINGS.items()
        }
    )


def _run_values(
    table: pd.DataFrame, *, space: str, weight: pd.DataFrame, initial: pd.Series, final: pd.Series
) -> dict[str, pd.Series]:
    """Per run: the half-rise step, weight v1 at the start and the end, gradient v1 at step 0, and the final
    relative update and weight / cumulative-gradient alignment (the columns in this order)."""
    grad = per_run(table, "grad_cos", space, 1)
    return {
        "rise_step": _first_step_at_or_above(weight, initial + (final - initial) / 2),
        "weight_v1_initial": initial,
        "weight_v1_final": final,
        "grad_v1_step0": grad[grad["step"] == 0].set_index(RUN_KEYS)["value"],
        "rel_update_final": at_final_step(per_run(table, "rel_update")).set_index(RUN_KEYS)["value"],
        "weight_cumgrad_final": at_final_step(per_run(table, "weight_cumgrad_cos", space, 1)).set_index(RUN_KEYS)[
            "value"
        ],
    }


def _add_peak(events: pd.DataFrame, *, table: pd.DataFrame, weight: pd.DataFrame, space: str) -> None:
    """Add each run's peak of weight v1, its step, and the weight / cumulative-gradient alignment there."""
    peak_rows = weight.loc[weight.groupby(RUN_KEYS, observed=True)["value"].idxmax()]
    peak_step = peak_rows.set_index(RUN_KEYS)["step"]
    alignment = per_run(table, "weight_cumgrad_cos", space, 1).join(peak_step.rename("peak_step"), on=RUN_KEYS)
    events["weight_v1_peak"] = peak_rows.set_index(RUN_KEYS)["value"]
    events["peak_step"] = peak_step
    events["weight_cumgrad_at_peak"] = alignment[alignment["step"] == alignment["peak_step"]].set_index(RUN_KEYS)[
        "value"
    ]


def _add_rise(events: pd.DataFrame, *, table: pd.DataFrame, rise: pd.Series) -> None:
    """Add each run's rise (no rise step where it is under the margin), the relative update at the rise step, and
    the rise step over each crossing step."""
    events["rise"] = rise
    events.loc[events["rise"] < DIFFERENCE_MARGIN, "rise_step"] = math.nan
    at_rise = per_run(table, "rel_update").join(events["rise_step"], on=RUN_KEYS)
    events["rel_update_at_rise"] = at_rise[at_rise["step"] == at_rise["rise_step"]].set_index(RUN_KEYS)["value"]
    for crossing in CROSSINGS:
        events[_ratio_column(crossing)] = _log10_rise_over(events["rise_step"], events[crossing])


def transfer_events(table: pd.DataFrame, space: str = "input") -> pd.DataFrame:
    """One row per run: when the update overtakes the initial weights, and when continuity rises.

    * ``crossing_step``: first snapshot where the layer-mean ``||W(t) - W(0)||_F / ||W(0)||_F``
      reaches :data:`CROSSING_LEVEL` (NaN if it never does); ``spectral_crossing_step``: the
      same with spectral norms (NaN if the table has no ``rel_update_spectral``);
    * ``rise_step``: first snapshot where layer-mean weight v1 (``space``) continuity has
      covered half of its rise, ``initial + (final - initial) / 2``. It differs from "half
      its final value" only by the initial value (random level, about 0.05 at d = 256).
      NaN when continuity gained less than :data:`geocont.statistics.DIFFERENCE_MARGIN`;
    * ``rel_update_at_rise``: the layer-mean relative update at the rise step;
    * the initial, peak and final weight continuity, the peak's step, the step-0 gradient
      continuity, and the weight / cumulative-gradient alignment of each layer's leading
      vector at the peak and at the end (before and after a fall).

    Steps are snapshot steps, so they are resolved to the snapshot grid (log-spaced).
    """
    weight = per_run(table, "weight_cos", space, 1)
    keyed = weight.set_index(RUN_KEYS)
    initial = keyed[keyed["step"] == 0]["value"]
    final = at_final_step(weight).set_index(RUN_KEYS)["value"]
    events = _crossings(table, final.index)
    events = events.assign(**_run_values(table, space=space, weight=weight, initial=initial, final=final))
    _add_peak(events, table=table, weight=weight, space=space)
    _add_rise(events, table=table, rise=final - initial)
    return events.reset_index()


def _ratio_column(crossing: str) -> str:
    """``crossing_step`` -> ``log10_rise_over_crossing``, and likewise for the spectral one."""
    return "log10_rise_over_" + crossing.removesuffix("_step")


def _log10_rise_over(rise: pd.Series, crossing: pd.Series) -> pd.Series:
    """log10(rise / crossing) per run; -inf for a rise at step 0 or a rise without any
    crossing (it precedes the crossing without bound); NaN where there was no rise."""
    ratio = (rise / crossing).apply(lambda r: math.log10(r) if r > 0 else -math.inf)
    ratio[crossing.isna()] = -math.inf
    ratio[rise.isna()] = math.nan
    return ratio


#: The rise may precede the crossing by at most this factor (a third: 10**-0.48) and
#: still count as "after the update dominates", given the snapshot grid and the spread.
RISE_BEFORE_CROSSING_TOLERANCE_LOG10 = -0.48


def verdict_for_order(events: pd.DataFrame, crossing: str = "crossing_step") -> str:
    """Does weight continuity rise only once the update dominates (``crossing``: which
    norm, see :data:`CROSSINGS`), in every run?

    Runs whose continuity did not rise (``rise_step`` NaN) cannot tell and are left out.
    "reproduced" if in every other run the rise is no earlier than a third of the
    crossing step; "not reproduced" if in none (a run that rose but never crossed counts
    against); "partly" otherwise.
    """
    ratios = events[_ratio_column(crossing)].dropna()
    if ratios.empty:
        return "not tested"
    ok = ratios >= RISE_BEFORE_CROSSING_TOLERANCE_LOG10
    if ok.all():
        return "reproduced"
    return "not reproduced" if not ok.any() else "partly reproduced"


@dataclass(frozen=True)
class Order:
    """The order of the rise and the crossing over some runs: ``order``, the mean ± sd of log10(rise / crossing)
    over the runs that both rose and crossed; the crossing step, the rise step and the relative update at the
    rise (over all runs); and the runs left out of ``order``: ``no_rise`` of ``runs`` without a rise,
    ``before_crossing`` that rose before any crossing."""

    order: Estimate
    crossing_step: Estimate
    rise_step: Estimate
    rel_update_at_rise: Estimate
    no_rise: int
    runs: int
    before_crossing: int


def order_estimate(runs: pd.DataFrame, crossing: str = "crossing_step") -> Order:
    """The :class:`Order` of ``runs`` with the crossing in the norm of ``crossing`` (see :data:`CROSSINGS`)."""
    ratios = runs[_ratio_column(crossing)]
    return Order(
        order=estimate(ratios[ratios.apply(math.isfinite)]),
        crossing_step=estimate(runs[crossing]),
        rise_step=estimate(runs["rise_step"]),
        rel_update_at_rise=estimate(runs["rel_update_at_rise"]),
        no_rise=int(ratios.isna().sum()),
        runs=len(runs),
        before_crossing=int((ratios == -math.inf).sum()),
    )


#: Rotation drift is averaged over the steps after this fraction of training: it leaves out
#: the initial transient and covers the rise, the fall (if any) and the end.
DRIFT_WINDOW_START = 0.1


def drift(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per run, the input-space ``turn`` as a rate (degrees per 1,000 steps) or the
    ``co_rotation`` (signed cos), time-averaged over the drift window (:data:`DRIFT_WINDOW_START`)."""
    frame = turn_rates(table) if metric == "turn" else select(table, metric, "input", 1)
    return drift_window_mean(frame, DRIFT_WINDOW_START)

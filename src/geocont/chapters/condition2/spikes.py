"""A spike detector calibrated on the data it judges."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ... import instability
from ...statistics import Estimate, estimate, verdict_for_difference
from ...tables import RUN_KEYS, select
from .runs import Results, recorded

# A spike detector calibrated on the data it judges. The rules compared: a trace point is a spike when its loss
# exceeds f x the running minimum of the earlier trace points (f in SPIKE_FACTORS), or RECENT_MEDIAN_FACTOR x the
# median of the previous RECENT_MEDIAN_WINDOW trace points, and the memorisation floor in both.
# The choice, fixed before any count was read: the rules are tried in the order of spike_rules() (the running
# minimum from its most sensitive factor up, then the recent median); the chosen rule is the first whose mean number
# of events per res-relu run (headline dataset, Adam: runs the paper does not expect to spike) is at most
# CALIBRATION_EVENTS_PER_RUN. It is then read on res-none: res-none spikes when its events per run exceed
# res-relu's by more than SPIKE_EXCESS and two pooled seed sds (the difference rule with that margin).
SPIKE_FACTORS = (2.0, 3.0, 10.0)
RECENT_MEDIAN_FACTOR, RECENT_MEDIAN_WINDOW = 3.0, 10
CALIBRATION_EVENTS_PER_RUN = 1.0
SPIKE_EXCESS = 1.0


@dataclass(frozen=True)
class SpikeRule:
    """A spike rule: loss above ``factor`` x the running minimum (``window`` None) or x the median of the previous
    ``window`` trace points (:func:`geocont.instability.instability_events`)."""

    factor: float
    window: int | None = None

    @property
    def label(self) -> str:
        reference = "running minimum" if self.window is None else f"median of the previous {self.window}"
        return f"{self.factor:g}× {reference}"


def spike_rules() -> tuple[SpikeRule, ...]:
    """The rules in the order the calibration tries them."""
    return (*(SpikeRule(f) for f in SPIKE_FACTORS), SpikeRule(RECENT_MEDIAN_FACTOR, RECENT_MEDIAN_WINDOW))


def spike_counts(table: pd.DataFrame, rule: SpikeRule) -> pd.DataFrame:
    """Per run with a trace: its events under ``rule`` and the step of the first (NaN where none)."""
    runs = select(table, "trace_loss")[RUN_KEYS].drop_duplicates()
    events = instability.instability_events(table, factor=rule.factor, window=rule.window)
    counts = events.groupby(RUN_KEYS, observed=True).agg(events=("event", "size"), first_event=("start", "min"))
    out = runs.merge(counts.reset_index(), on=RUN_KEYS, how="left")
    return out.assign(events=out["events"].fillna(0).astype(int))


@dataclass(frozen=True)
class SpikeCalibration:
    """Per rule and condition (``rows``: runs, runs with events, events per run, first spike steps), the chosen rule
    (None where none passes the calibration), its events per run on res-relu and res-none, and ``reading``: "spikes",
    "unclear" (partly by the rule), "no-spikes", or "no-rule"."""

    rows: pd.DataFrame
    chosen: SpikeRule | None
    relu: Estimate
    none: Estimate
    verdict: str
    reading: str


#: The verdict of the claim "res-none spikes no more than res-relu" from the calibrated detector's reading.
SPIKE_CLAIM = {"spikes": "not reproduced", "unclear": "inconclusive", "no-spikes": "reproduced"}


def spike_calibration(results: Results) -> SpikeCalibration | None:
    """The calibrated spike detector on the headline comparison (None where its runs have no trace)."""
    table = results.comparison[results.settings.headline]
    if not recorded(table, "trace_loss"):
        return None
    rows, per_rule = [], {}
    for rule in spike_rules():
        counts = spike_counts(table, rule)
        for condition in ("res-relu", "res-none"):
            mine = counts[counts["condition"] == condition]
            per_rule[(rule, condition)] = estimate(mine["events"].astype(float))
            rows.append(
                dict(
                    rule=rule.label,
                    condition=condition,
                    runs=len(mine),
                    runs_with_events=int((mine["events"] > 0).sum()),
                    events_mean=per_rule[(rule, condition)].mean,
                    events_sd=per_rule[(rule, condition)].std,
                    first_events=tuple(int(s) for s in mine["first_event"].dropna().sort_values()),
                )
            )
    chosen = next(
        (rule for rule in spike_rules() if per_rule[(rule, "res-relu")].mean <= CALIBRATION_EVENTS_PER_RUN), None
    )
    if chosen is None:
        nothing = Estimate(math.nan, math.nan, 0)
        return SpikeCalibration(pd.DataFrame(rows), None, nothing, nothing, "not tested", "no-rule")
    relu, none = per_rule[(chosen, "res-relu")], per_rule[(chosen, "res-none")]
    verdict = verdict_for_difference(none, relu, margin=SPIKE_EXCESS)
    reading = {"reproduced": "spikes", "partly reproduced": "unclear"}.get(verdict, "no-spikes")
    return SpikeCalibration(pd.DataFrame(rows), chosen, relu, none, verdict, reading)

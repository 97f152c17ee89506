"""Instability, rotation drift and memorisation, each judged by a rule stated before the runs were read;
what Adam's shared axes and weight decay add."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ... import instability
from ...statistics import Estimate, verdict_for_difference
from .comparison import comparison_rows, intervention_rows, weight_v1
from .drift_tests import DRIFT_GROUPINGS, grouped_readings, tally
from .motion_and_spectrum import function_preserving_motion
from .runs import Results


@dataclass(frozen=True)
class Explanation:
    """One candidate explanation of the linear net's fall: its computed verdict ("supported", "not supported"
    or "inconclusive") and the numbers it rests on (the chapter's prose words them)."""

    name: str
    verdict: str
    numbers: dict[str, Any]


def explanations(results: Results) -> list[Explanation]:
    """Instability, drift and memorisation judged by the rules stated in the chapter, each with its numbers (the
    rules: :func:`instability_explanation`, :func:`memorisation_explanation`, :func:`drift_explanation`). A fall is
    the book's fall rule (:class:`geocont.statistics.Fall`: ``falls``, a clear fall; ``holds``, less than the
    margin)."""
    fall = FallSplit.of(results)
    instability_found = instability_explanation(results, fall)
    memorisation_found = memorisation_explanation(results, fall)
    drift_found = drift_explanation(results, fall, alternatives=(instability_found.verdict, memorisation_found.verdict))
    return [instability_found, drift_found, memorisation_found]


@dataclass(frozen=True)
class FallSplit:
    """res-none's fall under Adam on the headline dataset, read off the trace run by run: the mean fall from each
    run's peak to its end (``fall``), the part of it across instability events (``across``), the change after the
    memorised step (``after_memorised``, a fall positive); the interventions' rows (``rows``) and those whose
    res-none runs had no event (``stable``) and still fall (``falls_without_events``)."""

    fall: float
    across: float
    after_memorised: float
    rows: pd.DataFrame
    stable: list[str]
    falls_without_events: list[str]

    @property
    def share(self) -> float:
        """The share of the fall that happened across events (NaN where nothing fell)."""
        return self.across / self.fall if self.fall > 0 else math.nan

    @classmethod
    def of(cls, results: Results) -> FallSplit:
        rows = intervention_rows(results).set_index(["intervention", "condition"])
        headline = results.comparison[results.settings.headline]
        summaries = instability.run_summary(headline[headline["condition"] == "res-none"])
        stable = [
            name
            for name in rows.index.get_level_values(0).unique()
            if rows.loc[(name, "res-none"), "runs_with_events"] == 0
        ]
        return cls(
            fall=float(summaries["fall_from_peak"].mean()),
            across=float(summaries["fall_across_events"].mean()),
            after_memorised=-float(summaries["change_after_memorised"].mean()),
            rows=rows,
            stable=stable,
            falls_without_events=[name for name in stable if rows.loc[(name, "res-none"), "falls"]],
        )


def instability_explanation(results: Results, split: FallSplit) -> Explanation:
    """Instability is supported when at least half of res-none's fall (peak to final, headline, Adam) happens across
    instability events and no intervention without events makes res-none fall; not supported when an intervention
    whose runs had no event still makes it fall while less than half the Adam fall happened across events."""
    share, rows, base = split.share, split.rows, split.rows.loc[("adam", "res-none")]
    if not math.isnan(share) and share >= 0.5 and not split.falls_without_events:
        verdict = "supported"
    elif split.falls_without_events and (math.isnan(share) or share < 0.5):
        verdict = "not supported"
    else:
        verdict = "inconclusive"
    return Explanation(
        "instability",
        verdict,
        dict(
            headline=results.settings.headline,
            runs_with_events=int(base["runs_with_events"]),
            runs=int(base["seeds"]),
            events=int(base["events"]),
            fall=split.fall,
            across=split.across,
            share=share,
            without_events=[
                (name, float(rows.loc[(name, "res-none"), "fall"]), float(rows.loc[(name, "res-relu"), "fall"]))
                for name in split.stable
            ],
        ),
    )


def memorisation_explanation(results: Results, split: FallSplit) -> Explanation:
    """Memorisation is supported when every dataset on which res-none falls has every run memorised and most of the
    headline fall comes after the memorised step; not supported when res-none falls on a dataset where no run
    memorised its training set."""
    comparison = comparison_rows(results)
    linear = comparison[comparison["condition"] == "res-none"].set_index("dataset")
    falling = linear[linear["falls"].astype(bool)]
    if any(row["memorised_runs"] == 0 for _, row in falling.iterrows()):
        verdict = "not supported"
    elif (
        len(falling)
        and (falling["memorised_runs"] == falling["seeds"]).all()
        and split.fall > 0
        and split.after_memorised >= 0.5 * split.fall
    ):
        verdict = "supported"
    else:
        verdict = "inconclusive"
    return Explanation(
        "memorisation",
        verdict,
        dict(
            datasets=[
                (d, float(r["v1_peak"] - r["v1_final"]), int(r["memorised_runs"]), int(r["seeds"]))
                for d, r in linear.iterrows()
            ]
        ),
    )


def drift_vote(motions: dict[str, str], readings: dict[str, str], alternatives: tuple[str, str]) -> str:
    """The drift rule on one grouping of its tests (:func:`drift_explanation`)."""
    votes = (tally(motions), tally(readings))
    if not motions and not readings:
        return "not tested"
    if votes == ("for", "for") and "supported" not in alternatives:
        return "supported"
    if "against" in votes and "for" not in votes:
        return "not supported"
    return "inconclusive"


def drift_explanation(results: Results, split: FallSplit, alternatives: tuple[str, str]) -> Explanation:
    """Rotation drift rests on two groups of positive tests, each group a vote "for", "against" or "neither"
    (:func:`.drift_tests.tally`: more "for" than "against", the reverse, else neither): motion along the symmetry
    (:func:`.drift_tests.motion_readings`: the logits' function-preserving motion and the conserved balance) and how
    continuity follows the learning rate and batch (:func:`.drift_tests.drift_readings`). It is supported when both
    vote "for" and neither alternative (instability, memorisation) is supported; not supported when one votes
    "against" and none "for"; not tested when no test of either group could be read; inconclusive otherwise. The
    verdict of record is that of the first of :data:`.drift_tests.DRIFT_GROUPINGS`; where another grouping the book
    has used gives another verdict, it is "inconclusive" (``groupings`` holds each grouping's)."""
    by_grouping = {}
    for grouping in DRIFT_GROUPINGS:
        motions, readings = grouped_readings(results, grouping)
        by_grouping[grouping] = (motions, readings, drift_vote(motions, readings, alternatives))
    record = next(iter(DRIFT_GROUPINGS))
    motions, readings, verdict = by_grouping[record]
    votes = (tally(motions), tally(readings))
    grouping_verdicts = {grouping: found[2] for grouping, found in by_grouping.items()}
    changes_with_grouping = len(set(grouping_verdicts.values())) > 1
    if changes_with_grouping:
        verdict = "inconclusive"
    rows = split.rows
    return Explanation(
        "rotation drift",
        verdict,
        dict(
            motion=function_preserving_motion(results),
            motion_vote=votes[0],
            motions=motions,
            readings=readings,
            tests_vote=votes[1],
            groupings=grouping_verdicts,
            changes_with_grouping=changes_with_grouping,
            alternatives=alternatives,
            none_rate=float(rows.loc[("adam", "res-none"), "drift_rate"]),
            none_rate_sd=float(rows.loc[("adam", "res-none"), "drift_rate_sd"]),
            relu_rate=float(rows.loc[("adam", "res-relu"), "drift_rate"]),
            relu_rate_sd=float(rows.loc[("adam", "res-relu"), "drift_rate_sd"]),
            kept=[name for name in split.falls_without_events if rows.loc[(name, "res-relu"), "holds"]],
        ),
    )


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

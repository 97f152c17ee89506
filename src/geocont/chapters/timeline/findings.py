"""What the timeline chapter's computed prose states, as values (the findings). :mod:`.present` words each
one from the templates in ``prose.md``; which case applies is decided here, never there."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ...book.chapter import claim, has_claim
from ...statistics import Estimate, estimate, estimate_at_step
from ...tables import RUN_KEYS
from .events import DRIFT_WINDOW_START, NORMS, drift
from .runs import Results
from .settings import DRIFT_CONDITIONS, NO_RESIDUAL


@dataclass(frozen=True)
class RunSummary:
    """The run note: the random baseline at the width, how many runs the three sweeps hold (a run
    shared between sweeps counts once per sweep) and how many snapshots a run of the conditions has."""

    width: int
    baseline: float
    runs: int
    snapshots: int


def run_summary(results: Results) -> RunSummary:
    """The numbers of the run note."""
    runs = sum(
        frame.groupby(RUN_KEYS, observed=True).ngroups
        for frame in (results.table, results.optimizer_table, results.init_table)
    )
    return RunSummary(
        width=results.settings.base.width,
        baseline=results.baseline,
        runs=runs,
        snapshots=results.table["step"].nunique(),
    )


@dataclass(frozen=True)
class ConditionStepZero:
    """One condition's gradient v1 (input) and u1 (output) continuity at step 0, over seeds."""

    condition: str
    v1: Estimate
    u1: Estimate


@dataclass(frozen=True)
class StepZero:
    """Gradient continuity before any update.

    ``case``: "compared" when the condition without residuals (``no_residual``) ran, so the reading
    compares the reference condition with it; "no-control" when it did not (nothing to compare).
    """

    case: str
    reference: str
    no_residual: str
    reference_v1: Estimate
    no_residual_v1: Estimate
    baseline: float
    conditions: tuple[ConditionStepZero, ...]


def step_zero(results: Results) -> StepZero:
    """Step-0 gradient continuity: the reference against the no-residual control (from the events),
    and v1 / u1 per condition (from the run table)."""

    def at_start(space: str, condition: str) -> Estimate:
        return estimate_at_step(results.table, 0, "grad_cos", space, 1, condition=condition)

    return StepZero(
        case="compared" if NO_RESIDUAL in results.order else "no-control",
        reference=results.reference,
        no_residual=NO_RESIDUAL,
        reference_v1=results.of(results.reference, "grad_v1_step0"),
        no_residual_v1=results.of(NO_RESIDUAL, "grad_v1_step0"),
        baseline=results.baseline,
        conditions=tuple(ConditionStepZero(c, at_start("input", c), at_start("output", c)) for c in results.order),
    )


@dataclass(frozen=True)
class EventStep:
    """One run's event step on the snapshot grid. ``case``: "at" (it happened, at ``step``) or
    "never" (it did not happen within training; ``step`` NaN)."""

    case: str
    step: float


def event_step(step: float) -> EventStep:
    """The :class:`EventStep` of a step of the events table (NaN: the event never happened)."""
    return EventStep("never" if math.isnan(step) else "at", float(step))


@dataclass(frozen=True)
class SeedEvents:
    """One run's three event steps: the Frobenius and the spectral crossing, and the rise."""

    crossing: EventStep
    spectral_crossing: EventStep
    rise: EventStep


@dataclass(frozen=True)
class TransferSummary:
    """One run group's transfer timeline (a condition, or the reference under one optimizer): each
    seed's events, and final values and the relative update at the rise over seeds."""

    label: str
    seeds: tuple[SeedEvents, ...]
    weight_v1_final: Estimate
    weight_cumgrad_final: Estimate
    rel_update_final: Estimate
    rel_update_at_rise: Estimate


def transfer_summary(runs: pd.DataFrame, label: str) -> TransferSummary:
    """The :class:`TransferSummary` of some rows of an events table (:func:`transfer_events`)."""
    seeds = tuple(
        SeedEvents(event_step(f), event_step(s), event_step(r))
        for f, s, r in zip(runs["crossing_step"], runs["spectral_crossing_step"], runs["rise_step"])
    )
    return TransferSummary(
        label=label,
        seeds=seeds,
        weight_v1_final=estimate(runs["weight_v1_final"]),
        weight_cumgrad_final=estimate(runs["weight_cumgrad_final"]),
        rel_update_final=estimate(runs["rel_update_final"]),
        rel_update_at_rise=estimate(runs["rel_update_at_rise"]),
    )


def condition_summaries(results: Results) -> list[TransferSummary]:
    """One :class:`TransferSummary` per condition, in the book's order."""
    events = results.events
    return [transfer_summary(events[events["condition"] == c], c) for c in results.order]


def optimizer_summaries(results: Results) -> list[TransferSummary]:
    """One :class:`TransferSummary` per optimizer of the reference condition, in the sweep's order."""
    events = results.optimizer_events
    return [transfer_summary(events[events["optimizer"] == o], o) for o in events["optimizer"].unique()]


@dataclass(frozen=True)
class ConditionRise:
    """One condition's relative update at the rise, spectral crossing step and rise step, over seeds."""

    condition: str
    rel_update_at_rise: Estimate
    spectral_crossing_step: Estimate
    rise_step: Estimate


@dataclass(frozen=True)
class RiseAgainstPrediction:
    """Where the rise happens: the relative update at which the leading direction of W(0) + ΔW
    should switch to a low-rank update's, 2/√width (``predicted``), against each condition's."""

    width: int
    predicted: float
    conditions: tuple[ConditionRise, ...]


def rise_against_prediction(results: Results) -> RiseAgainstPrediction:
    """The numbers of the rise note."""
    width = results.settings.base.width
    return RiseAgainstPrediction(
        width=width,
        predicted=2 / math.sqrt(width),
        conditions=tuple(
            ConditionRise(
                c,
                results.of(c, "rel_update_at_rise"),
                results.of(c, "spectral_crossing_step"),
                results.of(c, "rise_step"),
            )
            for c in results.order
        ),
    )


@dataclass(frozen=True)
class WeightsFollow:
    """When the reference condition's weights follow its updates (the reading's second paragraph).

    ``case``: "never-crossed" when the Frobenius crossing never came within training in some run
    (``never_crossed`` of ``runs``), else "crossed" (at ``crossing_step``). The verdicts are those of
    the claims ``order-frobenius`` and ``order-spectral``.
    """

    case: str
    reference: str
    rise_step: Estimate
    rel_update_at_rise: Estimate
    crossing_step: Estimate
    spectral_crossing_step: Estimate
    never_crossed: int
    runs: int
    frobenius_verdict: str
    spectral_verdict: str


def weights_follow(results: Results, claims: pd.DataFrame) -> WeightsFollow:
    """The reference condition's rise, crossings and order verdicts."""
    ref = results.events[results.events["condition"] == results.reference]
    never = int(ref["crossing_step"].isna().sum())
    verdicts = {key: claim(claims, f"order-{key}")["verdict"] for _, key in NORMS}
    return WeightsFollow(
        case="never-crossed" if never else "crossed",
        reference=results.reference,
        rise_step=estimate(ref["rise_step"]),
        rel_update_at_rise=estimate(ref["rel_update_at_rise"]),
        crossing_step=estimate(ref["crossing_step"]),
        spectral_crossing_step=estimate(ref["spectral_crossing_step"]),
        never_crossed=never,
        runs=len(ref),
        frobenius_verdict=verdicts["frobenius"],
        spectral_verdict=verdicts["spectral"],
    )


@dataclass(frozen=True)
class InitScaleSteps:
    """One init scale's crossing steps (Frobenius, spectral) and rise step, over seeds."""

    init_scale: float
    crossing_step: Estimate
    spectral_crossing_step: Estimate
    rise_step: Estimate


@dataclass(frozen=True)
class InitScaleEvents:
    """The init-scale sweep's events. ``case``: "some-never-crossed" when some runs' Frobenius
    crossing never came (``never_crossed``: their (init scale, seed); they cannot be drawn), else
    "all-crossed"."""

    case: str
    never_crossed: tuple[tuple[float, int], ...]
    scales: tuple[InitScaleSteps, ...]


def init_scale_events(results: Results) -> InitScaleEvents:
    """The runs of the init sweep that never crossed, and each init scale's event steps."""
    events = results.init_events
    never = tuple((float(r.init_scale), int(r.seed)) for r in events[events["crossing_step"].isna()].itertuples())
    scales = tuple(
        InitScaleSteps(
            float(i), estimate(g["crossing_step"]), estimate(g["spectral_crossing_step"]), estimate(g["rise_step"])
        )
        for i, g in events.groupby("init_scale")
    )
    return InitScaleEvents(case="some-never-crossed" if never else "all-crossed", never_crossed=never, scales=scales)


@dataclass(frozen=True)
class ConditionDrift:
    """One condition's v1 turn rate (degrees per 1,000 steps) and co-rotation, averaged over the
    drift window, and its weight / cumulative-gradient alignment at the peak of weight continuity
    and at the end, over seeds."""

    condition: str
    turn: Estimate
    co_rotation: Estimate
    cumgrad_at_peak: Estimate
    cumgrad_final: Estimate


@dataclass(frozen=True)
class RotationDrift:
    """Rotation drift per condition after ``window_start`` of training (:data:`DRIFT_WINDOW_START`)."""

    window_start: float
    conditions: tuple[ConditionDrift, ...]


def rotation_drift(results: Results) -> RotationDrift:
    """The numbers of the rotation figure's caption and of the reading's drift paragraph."""
    turn, co = drift(results.table, "turn"), drift(results.table, "co_rotation")

    def of(frame: pd.DataFrame, condition: str) -> Estimate:
        return estimate(frame[frame["condition"] == condition]["value"])

    return RotationDrift(
        window_start=DRIFT_WINDOW_START,
        conditions=tuple(
            ConditionDrift(
                c,
                of(turn, c),
                of(co, c),
                results.of(c, "weight_cumgrad_at_peak"),
                results.of(c, "weight_cumgrad_final"),
            )
            for c in results.order
        ),
    )


@dataclass(frozen=True)
class DriftVerdicts:
    """What the drift claims say together. ``case``: "not-faster" when no symmetric condition turns
    faster than the reference (every drift claim not reproduced), "faster" when every one does (every
    one reproduced), else "mixed". ``verdicts``: (condition, verdict) of each drift claim."""

    case: str
    verdicts: tuple[tuple[str, str], ...]


def drift_verdicts(claims: pd.DataFrame) -> DriftVerdicts:
    """The drift claims of :data:`DRIFT_CONDITIONS` that the claims table holds, and their common reading."""
    verdicts = tuple(
        (c, claim(claims, f"{c}-late-drift")["verdict"])
        for c in DRIFT_CONDITIONS
        if has_claim(claims, f"{c}-late-drift")
    )
    if all(v == "not reproduced" for _, v in verdicts):
        case = "not-faster"
    elif all(v == "reproduced" for _, v in verdicts):
        case = "faster"
    else:
        case = "mixed"
    return DriftVerdicts(case=case, verdicts=verdicts)

"""timeline: what the chapter computes, without figures or matplotlib, gathered from the modules that answer
each question (the chapter package reads its names from here):

* :mod:`.settings`: which conditions and sweeps the chapter runs (``CHAPTER``);
* :mod:`.events`: when, in one run, the update overtakes the initial weights, when continuity rises, how fast v1 turns;
* :mod:`.runs`: the three sweeps trained and their events (``run``, ``Results``);
* :mod:`.verdicts`: the claims table (``claims``);
* :mod:`.findings`: what the computed prose states."""

from .settings import (CHAPTER, CONDITIONS_COMPARED, describe, DRIFT_CONDITIONS, INIT_SWEEP_SNAPSHOTS, NO_RESIDUAL,
                       sweep_configs)
from .events import (CROSSING_LEVEL, CROSSINGS, drift, DRIFT_WINDOW_START, NORMS, order_estimate,
                     RISE_BEFORE_CROSSING_TOLERANCE_LOG10, transfer_events, verdict_for_order)
from .runs import Results, run, TIMELINE_METRICS
from .verdicts import claims, drift_claims, init_scale_claims, optimizer_order_claims, timeline_claims, transfer_claims
from .findings import (condition_summaries, ConditionDrift, ConditionRise, ConditionStepZero, drift_verdicts,
                       DriftVerdicts, event_step, EventStep, init_scale_events, InitScaleEvents, InitScaleSteps,
                       optimizer_summaries, rise_against_prediction, RiseAgainstPrediction, rotation_drift,
                       RotationDrift, run_summary, RunSummary, SeedEvents, step_zero, StepZero, transfer_summary,
                       TransferSummary, weights_follow, WeightsFollow)

__all__ = [
    "CHAPTER", "CONDITIONS_COMPARED", "describe", "DRIFT_CONDITIONS", "INIT_SWEEP_SNAPSHOTS", "NO_RESIDUAL",
    "sweep_configs", "CROSSING_LEVEL", "CROSSINGS", "drift", "DRIFT_WINDOW_START", "NORMS", "order_estimate",
    "RISE_BEFORE_CROSSING_TOLERANCE_LOG10", "transfer_events", "verdict_for_order", "Results", "run",
    "TIMELINE_METRICS", "claims", "drift_claims", "init_scale_claims", "optimizer_order_claims", "timeline_claims",
    "transfer_claims", "condition_summaries", "ConditionDrift", "ConditionRise", "ConditionStepZero", "drift_verdicts",
    "DriftVerdicts", "event_step", "EventStep", "init_scale_events", "InitScaleEvents", "InitScaleSteps",
    "optimizer_summaries", "rise_against_prediction", "RiseAgainstPrediction", "rotation_drift", "RotationDrift",
    "run_summary", "RunSummary", "SeedEvents", "step_zero", "StepZero", "transfer_summary", "TransferSummary",
    "weights_follow", "WeightsFollow",
]

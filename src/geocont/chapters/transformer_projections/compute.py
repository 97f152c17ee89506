"""transformer_projections: what the chapter computes, without figures or matplotlib, gathered from the modules
that answer each question (the chapter package reads its names from here):

* :mod:`.settings`: what the chapter runs (``CHAPTER``);
* :mod:`.budget`: what the runs cost at ``cpu`` against the book's budget;
* :mod:`.runs`: the runs trained, the pretrained checkpoint analysed, per-projection values (``run``, ``Results``);
* :mod:`.settledness`: where the claims are judged (the horizon rule) and when each holds;
* :mod:`.up_o_gap`: the Up/O gap's explanations and the claims that test them;
* :mod:`.verdicts`: the claims table (``claims``);
* :mod:`.findings`: what the computed sentences state."""

from .settings import CHAPTER, describe, LONG_FACTOR, PARAMETERS
from .budget import (BUDGET_CPU_DESIGN, budget_finding, BudgetFinding, CPU_BUDGET_MINUTES, CPU_SECONDS_PER_STEP,
                     FULL_CPU_DESIGN, predicted_minutes, run_counts, run_seconds, RunCount)
from .runs import (late_changes, pretrained_estimate, projection_finals, projection_values, Results, run,
                   variant_estimate)
from .settledness import (CLAIM_QUANTITIES, holds_finding, HoldsFinding, horizon, quantity_name, settled_finding,
                          SettledFinding, StillMoving)
from .up_o_gap import (cross_cos_recorded, explanation_case, explanation_verdicts, ExplanationVerdict, gap_claims,
                       GAP_EXPLANATIONS, long_run_finding, LongRunFinding, RISING, rising_claims, StillRising, UP_GATE,
                       up_o_baseline, up_o_claims, up_o_estimates, up_o_finding, UP_O_QUANTITIES, up_o_values,
                       UpOFinding, UpOQuantity)
from .verdicts import (activation_ablation_claims, claims, projection_claims, softmax_ablation_claims, softmax_finding,
                       SOFTMAX_KEYS, SoftmaxFinding, transformer_claims)
from .findings import (ClaimValue, depth_finding, depth_profile_finding, DepthComparison, DepthFinding,
                       DepthProfileFinding, final_estimates, gap_finding, gap_values, GapFinding, loss_finding,
                       LossFinding, lost_finding, LostContinuity, LostFinding, MovedContinuity, pretrained_finding,
                       PretrainedComparison, PretrainedFinding, ProjectionEstimates, VariantLoss)
from ..lm_runs import PROJECTION_PREDICTIONS  # the paper's per-projection prediction, which the claims test

__all__ = [
    "PROJECTION_PREDICTIONS", "CHAPTER", "describe", "LONG_FACTOR", "PARAMETERS", "BUDGET_CPU_DESIGN", "budget_finding",
    "BudgetFinding", "CPU_BUDGET_MINUTES", "CPU_SECONDS_PER_STEP", "FULL_CPU_DESIGN", "predicted_minutes", "run_counts",
    "run_seconds", "RunCount", "late_changes", "pretrained_estimate", "projection_finals", "projection_values",
    "Results", "run", "variant_estimate", "CLAIM_QUANTITIES", "holds_finding", "HoldsFinding", "horizon",
    "quantity_name", "settled_finding", "SettledFinding", "StillMoving", "cross_cos_recorded", "explanation_case",
    "explanation_verdicts", "ExplanationVerdict", "gap_claims", "GAP_EXPLANATIONS", "long_run_finding",
    "LongRunFinding", "RISING", "rising_claims", "StillRising", "UP_GATE", "up_o_baseline", "up_o_claims",
    "up_o_estimates", "up_o_finding", "UP_O_QUANTITIES", "up_o_values", "UpOFinding", "UpOQuantity",
    "activation_ablation_claims", "claims", "projection_claims", "softmax_ablation_claims", "softmax_finding",
    "SOFTMAX_KEYS", "SoftmaxFinding", "transformer_claims", "ClaimValue", "depth_finding", "depth_profile_finding",
    "DepthComparison", "DepthFinding", "DepthProfileFinding", "final_estimates", "gap_finding", "gap_values",
    "GapFinding", "loss_finding", "LossFinding", "lost_finding", "LostContinuity", "LostFinding", "MovedContinuity",
    "pretrained_finding", "PretrainedComparison", "PretrainedFinding", "ProjectionEstimates", "VariantLoss",
]

"""compression: what the chapter computes, without figures or matplotlib, gathered from the modules that answer
each question (the chapter package reads its names from here):

* :mod:`.settings`: the paper's guideline and what the chapter runs (``CHAPTER``);
* :mod:`.measurements`: the sharing, pruning and grouping experiments and their summaries (``run``, ``Results``);
* :mod:`.verdicts`: the claims table (``claims``) and the chapter's words (``PROSE``, its ``prose.md``);
* :mod:`.findings`: what the computed sentences state."""

from .findings import (
    BudgetEquality,
    CheapestFinding,
    ErrorLossFinding,
    EvaluationCounts,
    GroupingFinding,
    GuidelineFinding,
    ModelAdvantage,
    advantage_findings,
    budget_equality,
    cheapest_finding,
    error_loss_finding,
    evaluation_counts,
    grouping_findings,
    guideline_findings,
    mean_loss_by_scheme,
    scheme_counts,
    spread_case,
)
from .measurements import (
    NEGLIGIBLE_LOSS,
    Results,
    block_correlations,
    grouping_penalty,
    input_advantage,
    paired_difference,
    run,
    sharing_summary,
)
from .settings import CHAPTER, GUIDELINE, OURS, CompressionSettings, build_settings, describe
from .verdicts import (
    GROUPING_MARGIN,
    PROSE,
    SHARING_MARGIN,
    add_grouping_claim,
    add_pruning_claim,
    add_sharing_claims,
    claims,
    compression_claims,
    model_key,
    sharing_key,
)

__all__ = [
    "build_settings",
    "CHAPTER",
    "CompressionSettings",
    "describe",
    "GUIDELINE",
    "OURS",
    "block_correlations",
    "grouping_penalty",
    "input_advantage",
    "NEGLIGIBLE_LOSS",
    "paired_difference",
    "Results",
    "run",
    "sharing_summary",
    "add_grouping_claim",
    "add_pruning_claim",
    "add_sharing_claims",
    "claims",
    "compression_claims",
    "GROUPING_MARGIN",
    "model_key",
    "PROSE",
    "sharing_key",
    "SHARING_MARGIN",
    "advantage_findings",
    "budget_equality",
    "BudgetEquality",
    "cheapest_finding",
    "CheapestFinding",
    "error_loss_finding",
    "ErrorLossFinding",
    "evaluation_counts",
    "EvaluationCounts",
    "grouping_findings",
    "GroupingFinding",
    "guideline_findings",
    "GuidelineFinding",
    "mean_loss_by_scheme",
    "ModelAdvantage",
    "scheme_counts",
    "spread_case",
]

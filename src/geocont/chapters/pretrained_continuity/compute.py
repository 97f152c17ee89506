"""pretrained_continuity: what the chapter computes, without figures or matplotlib, gathered from the modules that
answer each question (the chapter package reads its names from here):

* :mod:`.settings`: which checkpoints and trained models the chapter analyses (``CHAPTER``);
* :mod:`.analyses`: every checkpoint analysed, and continuity over layer pairs (``run``, ``Results``);
* :mod:`.quantization`: what GGUF quantization does to the metric;
* :mod:`.output_gains`: what Gemma-3's post-norm gains do to output continuity;
* :mod:`.large_models`: the large checkpoints found here, and their cost;
* :mod:`.verdicts`: the claims table (``claims``), the claims by verdict, and the chapter's words (``PROSE``, its
  ``prose.md``);
* :mod:`.findings`: what the computed sentences state."""

from .analyses import PairEstimate, Results, gemma, layer_pair_estimate, llama_like, run
from .findings import (
    CheckpointFinding,
    GemmaFinding,
    PredictedContinuity,
    QuantizationFinding,
    WritingContinuity,
    checkpoint_findings,
    continuity_overview,
    gemma_finding,
    quantization_finding,
    trained_seed_means,
)
from .large_models import LargeModelCost, LargeModelFinding, large_model_cost, large_model_finding
from .output_gains import cached_output_gain_continuity, gain_estimates, output_gain_continuity
from .quantization import (
    QUANTIZATION_LIMIT,
    QuantizationChange,
    cached_quantization_effect,
    quantization_changes,
    quantization_effect,
    quantization_shift,
    quantization_shifts,
    quantization_verdict,
)
from .settings import (
    ANALYSIS_KIND,
    CHAPTER,
    PRETRAINED_LARGE,
    PRETRAINED_OFFLINE,
    PretrainedChapterSettings,
    build_settings,
    describe,
)
from .verdicts import (
    CLAIMS_DATASET,
    PROSE,
    VERDICT_GROUPS,
    CheckpointVerdicts,
    GainFinding,
    VerdictFinding,
    chapter_claims,
    claims,
    verdict_finding,
    verdict_tally,
)

__all__ = [
    "ANALYSIS_KIND",
    "build_settings",
    "CHAPTER",
    "describe",
    "PRETRAINED_LARGE",
    "PRETRAINED_OFFLINE",
    "PretrainedChapterSettings",
    "gemma",
    "layer_pair_estimate",
    "llama_like",
    "PairEstimate",
    "Results",
    "run",
    "cached_quantization_effect",
    "quantization_changes",
    "quantization_effect",
    "QUANTIZATION_LIMIT",
    "quantization_shift",
    "quantization_shifts",
    "quantization_verdict",
    "QuantizationChange",
    "cached_output_gain_continuity",
    "gain_estimates",
    "output_gain_continuity",
    "large_model_cost",
    "large_model_finding",
    "LargeModelCost",
    "LargeModelFinding",
    "chapter_claims",
    "CheckpointVerdicts",
    "claims",
    "CLAIMS_DATASET",
    "GainFinding",
    "PROSE",
    "verdict_finding",
    "VERDICT_GROUPS",
    "verdict_tally",
    "VerdictFinding",
    "checkpoint_findings",
    "CheckpointFinding",
    "continuity_overview",
    "gemma_finding",
    "GemmaFinding",
    "PredictedContinuity",
    "quantization_finding",
    "QuantizationFinding",
    "trained_seed_means",
    "WritingContinuity",
]

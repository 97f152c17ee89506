"""pretrained_continuity: what the chapter computes, without figures or matplotlib, gathered from the modules that
answer each question (the chapter package reads its names from here):

* :mod:`.settings`: which checkpoints and trained models the chapter analyses (``CHAPTER``);
* :mod:`.analyses`: every checkpoint analysed, and continuity over layer pairs (``run``, ``Results``);
* :mod:`.quantization`: what GGUF quantization does to the metric;
* :mod:`.output_gains`: what Gemma-3's post-norm gains do to output continuity;
* :mod:`.large_models`: the large checkpoints found here, and their cost;
* :mod:`.verdicts`: the claims table (``claims``) and the claims by verdict;
* :mod:`.findings`: what the computed sentences state."""

from .settings import (ANALYSIS_KIND, build_settings, CHAPTER, describe, PRETRAINED_LARGE, PRETRAINED_OFFLINE,
                       PretrainedChapterSettings)
from .analyses import gemma, layer_pair_estimate, llama_like, PairEstimate, Results, run
from .quantization import (cached_quantization_effect, quantization_changes, quantization_effect, QUANTIZATION_LIMIT,
                           quantization_shift, quantization_shifts, quantization_verdict, QuantizationChange)
from .output_gains import cached_output_gain_continuity, gain_estimates, output_gain_continuity
from .large_models import large_model_cost, large_model_finding, LargeModelCost, LargeModelFinding
from .verdicts import (chapter_claims, CheckpointVerdicts, claims, CLAIMS_DATASET, GainFinding, verdict_finding,
                       VERDICT_GROUPS, verdict_tally, VerdictFinding)
from .findings import (checkpoint_findings, CheckpointFinding, continuity_overview, gemma_finding, GemmaFinding,
                       PredictedContinuity, quantization_finding, QuantizationFinding, trained_seed_means,
                       WritingContinuity)

__all__ = [
    "ANALYSIS_KIND", "build_settings", "CHAPTER", "describe", "PRETRAINED_LARGE", "PRETRAINED_OFFLINE",
    "PretrainedChapterSettings", "gemma", "layer_pair_estimate", "llama_like", "PairEstimate", "Results", "run",
    "cached_quantization_effect", "quantization_changes", "quantization_effect", "QUANTIZATION_LIMIT",
    "quantization_shift", "quantization_shifts", "quantization_verdict", "QuantizationChange",
    "cached_output_gain_continuity", "gain_estimates", "output_gain_continuity", "large_model_cost",
    "large_model_finding", "LargeModelCost", "LargeModelFinding", "chapter_claims", "CheckpointVerdicts", "claims",
    "CLAIMS_DATASET", "GainFinding", "verdict_finding", "VERDICT_GROUPS", "verdict_tally", "VerdictFinding",
    "checkpoint_findings", "CheckpointFinding", "continuity_overview", "gemma_finding", "GemmaFinding",
    "PredictedContinuity", "quantization_finding", "QuantizationFinding", "trained_seed_means", "WritingContinuity",
]

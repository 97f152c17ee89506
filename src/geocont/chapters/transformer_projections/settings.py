"""The transformer chapter's settings: its parameters, the longer reference run per scale and its
:class:`~geocont.book.chapter.Chapter` (the runs, presets and variants are :mod:`geocont.chapters.lm_runs`)."""

from __future__ import annotations

from typing import Any

from ...book.chapter import Chapter, presets
from ...transformer import build_llama, parameter_count
from .. import lm_runs
from ..lm_runs import LMChapterSettings

#: The notebook's parameters, in the order of its ``parameters`` cell.
PARAMETERS: dict[str, str] = {
    "scale": "smoke | cpu | paper: the whole preset, see geocont.chapters.transformer_projections",
    "seeds": "seeds of silu and none: an int n (seeds 0..n-1) or a list; None keeps the scale's default",
    "steps": "any of these overrides one setting of the preset; None keeps it",
    "early_step": "the earlier horizon shown beside the settled values (a snapshot of every run)",
    "variants": "a list of labels from geocont.chapters.lm_runs.LM_VARIANTS",
    "other_seeds": "seeds of relu and linear attention (0 or [] runs none of them)",
    "depth_layers": "layers of the deeper silu model (same width)",
    "depth_seeds": "seeds of the deeper model (0 or [] runs none)",
    "long_factor": "the longer silu run: this many times steps, first seed, read at steps too (0 or 1 runs none)",
    "corpus": "offline-english or kjv (offline) | wikitext-103 (needs a network or a HF cache)",
    "control_corpus": 'the memorisation control: silu on this corpus, trained as the others ("none": not run)',
    "control_seeds": "seeds of the memorisation control",
    "n_layers": "transformer blocks",
    "d_model": "residual-stream width",
    "batch_size": "sequences per step",
    "lr": "Adam's learning rate",
    "eval_windows": "validation windows per snapshot",
    "pretrained": 'pretrained checkpoint to compare with: "smollm2-135m" (offline) or "none"',
    "precision": "fp32 | bf16-autocast (matrix products in bf16; weights, optimizer state and metrics stay fp32)",
}


#: The longer reference run per scale, in multiples of ``steps`` (the chapter's own preset; 0 or 1: none).
#: It asks whether Up and O were still rising at the chapter's horizon. ``cpu``: none, since its horizon is
#: already the step budget of the settledness rule (16,000 steps, 2.6 epochs of its corpus; four times that
#: would read the corpus ten times). ``paper``: none, since 4 × 20,000 steps of the 34M model would more than
#: double the chapter's device time (set 4 to run it).
LONG_FACTOR = {"smoke": 4, "cpu": 1, "paper": 1}

#: The memorisation control per scale: the reference variant on a second corpus, small enough that a run
#: sees it many times, trained exactly as the others (None: not run). It asks whether what the chapter reads
#: needs the model to memorise its text. ``cpu``: ``kjv`` (1.04M training tokens, 31 epochs by step 16,000);
#: ``smoke`` and ``paper`` run none.
CONTROL_CORPUS = {"smoke": None, "cpu": "kjv", "paper": None}


def describe(settings: LMChapterSettings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    base = settings.base
    shape = base.shape
    runs = ", ".join(f"`{label}` × {len(configs)}" for label, configs in settings.all_configs().items())
    long = "".join(
        f"; `{label}`: {c[0].steps} steps, also snapshotted at step {base.steps}"
        for label, c in settings.long_configs().items()
    )
    return dict(
        seeds=settings.seeds,
        data=f"`{base.corpus}`, byte-level BPE tokenizer with {shape.vocab_size} tokens trained on its training split",
        model=f"transformers' LlamaForCausalLM: {shape.n_layers} layers, d = {shape.d_model}, {shape.n_heads} heads, "
        f"SwiGLU width {shape.ffn_dim}, {parameter_count(build_llama(shape)) / 1e6:.2f}M parameters; "
        f"runs (label × seeds): {runs}",
        training=f"{base.steps} steps of {base.batch_size} × {shape.max_seq_len} tokens, {base.optimizer.label} "
        f"(lr {base.optimizer.lr:g}, constant); {len(base.schedule())} snapshots ({base.n_snapshots} "
        f"log-spaced, {base.n_late_snapshots} evenly spaced, and step {settings.early_step}), each with the validation "
        f"loss on {base.eval_windows} windows{long}",
    )


CHAPTER = Chapter(
    name="transformer_projections",
    parameters=PARAMETERS,
    presets=presets(
        lm_runs.lm_preset,
        {
            scale: dict(long_factor=LONG_FACTOR[scale], control_corpus=CONTROL_CORPUS[scale], control_seeds=(0,))
            for scale in LONG_FACTOR
        },
    ),
    build=lm_runs.build_settings,
    describe=describe,
    runs=lm_runs.run_configs,
    scale_rows=lm_runs.scale_rows,
)

"""One module per chapter of the book: its presets per scale, parameters, configure step, runs,
claims, figures and computed prose. :data:`CHAPTERS` maps a notebook's name to its module."""

from __future__ import annotations

import importlib
from types import ModuleType

from ..scales import SCALES

#: Notebook stem -> module (imported on demand: the transformer chapters import transformers).
CHAPTER_MODULES: dict[str, str] = {
    "mlp_conditions": "geocont.chapters.mlp_conditions",
    "condition2": "geocont.chapters.condition2",
    "activation_vs_norm": "geocont.chapters.activation_vs_norm",
    "transformer_projections": "geocont.chapters.transformer_projections",
    "timeline": "geocont.chapters.timeline",
    "pretrained_continuity": "geocont.chapters.pretrained_continuity",
    "compression": "geocont.chapters.compression",
}


def chapter_module(name: str) -> ModuleType:
    """The module of chapter ``name`` (a notebook stem); an unknown name lists the valid ones."""
    if name not in CHAPTER_MODULES:
        raise ValueError(f"unknown chapter {name!r}; valid choices: {', '.join(CHAPTER_MODULES)}")
    return importlib.import_module(CHAPTER_MODULES[name])


def _seeds_text(seeds) -> str:
    seeds = tuple(range(seeds)) if isinstance(seeds, int) else tuple(seeds)
    return f"{len(seeds)} ({', '.join(map(str, seeds))})"


def scales_markdown() -> str:
    """The three scales of the MLP and transformer chapters as one Markdown table.

    The methods page (``book/methods.md``) holds this table verbatim; a test keeps the two equal.
    """
    from .mlp_runs import _CHAPTER_PRESETS, _MLP_SCALES
    from .transformer_projections import _LM_SCALES, LM_SHAPES, MAIN_VARIANTS, lm_chapter_settings

    rows: list[tuple[str, ...]] = []

    def add(label: str, values) -> None:
        rows.append((label, *(str(v) for v in values)))

    mlp = [_MLP_SCALES[s] for s in SCALES]
    add("MLP: data", (f"`{p['dataset']}`" + (f", first {p['max_train']} training digits" if p["max_train"] else "")
                      for p in mlp))
    add("MLP: hidden layers × width", (f"{p['depth']} × {p['width']}" for p in mlp))
    add("MLP: optimizer steps × batch (every long run)", (f"{p['steps']:,} × {p['batch_size']}" for p in mlp))
    add("MLP: snapshots (log-spaced + evenly spaced + early)",
        (f"{p['n_snapshots']} + {p['n_late_snapshots']} + step {p['early_steps']:,}" for p in mlp))
    add("MLP: seeds", (_seeds_text(p["seeds"]) for p in mlp))
    timeline = _CHAPTER_PRESETS["timeline"]
    add("MLP init sweeps: steps", (f"{p['early_steps']:,}" for p in mlp))
    add("MLP timeline init sweep: snapshots (v1/u1 only)", (timeline["short_run"]["n_snapshots"][s] for s in SCALES))
    add("MLP timeline: init scales", [", ".join(f"{x:g}" for x in sorted((1.0, *timeline["extra_init_scales"])))] * len(SCALES))
    lm = [_LM_SCALES[s] for s in SCALES]
    shapes = [LM_SHAPES[s] for s in SCALES]
    add("transformer: corpus", (f"`{p['corpus']}`" for p in lm))
    add("transformer: layers × d_model (heads)", (f"{s.n_layers} × {s.d_model} ({s.n_heads})" for s in shapes))
    add("transformer: SwiGLU width, vocabulary", (f"{s.ffn_dim}, {s.vocab_size}" for s in shapes))
    add("transformer: steps × batch × sequence", (f"{p['steps']} × {p['batch_size']} × {s.max_seq_len}"
                                                    for p, s in zip(lm, shapes)))
    add("transformer: early horizon (a snapshot of every run)", (p["early_step"] for p in lm))
    add("transformer: snapshots (log-spaced, evenly spaced; repeats merged)",
        (f"{len(lm_chapter_settings(s).base.schedule())} ({p['n_snapshots']}, {p['n_late_snapshots']})"
         for s, p in zip(SCALES, lm)))
    add("transformer: seeds of silu and none", (_seeds_text(p["seeds"]) for p in lm))
    add("transformer: other variants; deeper model", (
        (", ".join(f"`{v}`" for v in p["variants"] if v not in MAIN_VARIANTS) + f" × {len(p['other_seeds'])} seed"
         if p["other_seeds"] and set(p["variants"]) - set(MAIN_VARIANTS) else "not run")
        + "; " + (f"{p['depth_layers']} layers × {len(p['depth_seeds'])} seed" if p["depth_seeds"] else "not run")
        for p in lm))
    lines = ["| setting | " + " | ".join(f"`{s}`" for s in SCALES) + " |", "|---" * (len(SCALES) + 1) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)

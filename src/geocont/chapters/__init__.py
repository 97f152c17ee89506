"""The book's chapters, one package per chapter, and the run families they share
(:mod:`.mlp_runs`, :mod:`.lm_runs`). :data:`CHAPTER_MODULES` maps a notebook's name to its package.

A new chapter ``<name>`` needs:

* ``book/<name>.ipynb``: a cell tagged ``parameters`` (``scale = "smoke"`` first, then
  ``<parameter> = None  # <help>`` per line), one cell ``from geocont.chapters import <name> as
  chapter`` and ``settings = chapter.CHAPTER.from_notebook(globals())``, one call per result, and
  ``chapter.CHAPTER.publish(settings, claims)`` last; an entry in ``_toc.yml``;
* ``src/geocont/chapters/<name>/``: ``__init__.py`` (its docstring, and
  ``__getattr__ = chapter_attribute(__name__)``), ``compute.py`` (``CHAPTER``, a
  :class:`geocont.book.chapter.Chapter`; ``run(settings)``; ``claims(results)``) and
  ``present.py`` (figures and computed prose); an entry in :data:`CHAPTER_MODULES`.

An MLP chapter takes its parameters, presets and settings from :mod:`.mlp_runs`::

    CHAPTER = Chapter(name="<name>", parameters=mlp_runs.parameters("scale", "seeds", "steps", "conditions"),
                      presets=mlp_runs.mlp_presets(conditions=("res-relu", "res-none")),
                      build=mlp_runs.build_settings, describe=describe, runs=mlp_runs.all_run_configs)

where ``describe(settings)`` returns the provenance rows ``seeds``, ``data``, ``model`` and ``training``.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from ..scales import SCALES

if TYPE_CHECKING:
    from ..book.chapter import Chapter

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


def chapter(name: str) -> "Chapter":
    """The :class:`~geocont.book.chapter.Chapter` of chapter ``name`` (a notebook stem)."""
    return chapter_module(name).CHAPTER


def _seeds_text(seeds) -> str:
    seeds = tuple(range(seeds)) if isinstance(seeds, int) else tuple(seeds)
    return f"{len(seeds)} ({', '.join(map(str, seeds))})"


def scales_markdown() -> str:
    """The three scales of the MLP and transformer chapters as one Markdown table, from their
    presets (each chapter's settings at each scale); the book build writes it into the methods page."""
    from .lm_runs import MAIN_VARIANTS

    rows: list[tuple[str, ...]] = []

    def add(label: str, values) -> None:
        rows.append((label, *(str(v) for v in values)))

    mlp = [chapter("mlp_conditions").configure(s) for s in SCALES]
    add("MLP: data", (f"`{m.base.dataset}`" + (f", first {m.base.max_train} training digits" if m.base.max_train else "")
                      for m in mlp))
    add("MLP: hidden layers × width", (f"{m.base.depth} × {m.base.width}" for m in mlp))
    add("MLP: optimizer steps × batch (every long run)", (f"{m.base.steps:,} × {m.base.batch_size}" for m in mlp))
    add("MLP: snapshots (log-spaced + evenly spaced + early)",
        (f"{m.base.n_snapshots} + {m.base.n_late_snapshots} + step {m.early_steps:,}" for m in mlp))
    add("MLP: seeds", (_seeds_text(m.seeds) for m in mlp))
    timeline = [chapter("timeline").configure(s) for s in SCALES]
    add("MLP init sweeps: steps", (f"{m.early_steps:,}" for m in mlp))
    add("MLP timeline init sweep: snapshots (v1/u1 only)", (t.short_base.n_snapshots for t in timeline))
    add("MLP timeline: init scales", (", ".join(f"{x:g}" for x in sorted((t.base.init_scale, *t.extra_init_scales)))
                                      for t in timeline))
    c2 = [chapter("condition2").configure(s) for s in SCALES]
    add("Condition 2: datasets (headline first)", (", ".join(f"`{d}`" for d in c.datasets) for c in c2))
    add("Condition 2: seeds of the comparison; of the linear net under Adam and SGD",
        (f"{len(c.seeds)}; {len(c.many_seeds)}" for c in c2))
    add("Condition 2: trace point every (steps); SGD probe steps",
        (f"{c.base.trace_every}; {c.sgd_probe_steps:,}" for c in c2))
    lm = [chapter("transformer_projections").configure(s) for s in SCALES]
    shapes = [p.base.shape for p in lm]
    add("transformer: corpus", (f"`{p.base.corpus}`" for p in lm))
    add("transformer: layers × d_model (heads)", (f"{s.n_layers} × {s.d_model} ({s.n_heads})" for s in shapes))
    add("transformer: SwiGLU width, vocabulary", (f"{s.ffn_dim}, {s.vocab_size}" for s in shapes))
    add("transformer: steps × batch × sequence", (f"{p.base.steps} × {p.base.batch_size} × {s.max_seq_len}"
                                                    for p, s in zip(lm, shapes)))
    add("transformer: early horizon (a snapshot of every run)", (p.early_step for p in lm))
    add("transformer: snapshots (log-spaced, evenly spaced; repeats merged)",
        (f"{len(p.base.schedule())} ({p.base.n_snapshots}, {p.base.n_late_snapshots})" for p in lm))
    add(f"transformer: seeds of {' and '.join(MAIN_VARIANTS)}", (_seeds_text(p.seeds) for p in lm))
    add("transformer: other variants; deeper model", (
        (", ".join(f"`{v}`" for v in p.variants if v not in MAIN_VARIANTS) + f" × {len(p.other_seeds)} seed"
         if p.other_seeds and set(p.variants) - set(MAIN_VARIANTS) else "not run")
        + "; " + (f"{p.depth_layers} layers × {len(p.depth_seeds)} seed" if p.depth_seeds else "not run")
        for p in lm))
    lines = ["| setting | " + " | ".join(f"`{s}`" for s in SCALES) + " |", "|---" * (len(SCALES) + 1) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)

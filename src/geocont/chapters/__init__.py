"""The book's chapters, one package per chapter, and the run families they share
(:mod:`.mlp_runs`, :mod:`.lm_runs`). Every subpackage is a chapter: :data:`CHAPTER_MODULES` maps a
notebook's name to its package, found by looking, so that this module names no chapter.

A new chapter ``<name>`` needs:

* ``book/<name>.ipynb``: a cell tagged ``parameters`` (``scale = "smoke"`` first, then
  ``<parameter> = None  # <help>`` per line), one cell ``from geocont.chapters import <name> as
  chapter`` and ``settings = chapter.CHAPTER.from_notebook(globals())``, one call per result, and
  ``chapter.CHAPTER.publish(settings, claims)`` last; an entry in ``_toc.yml``;
* ``src/geocont/chapters/<name>/``: ``__init__.py`` (its docstring, and
  ``__getattr__ = chapter_attribute(__name__)``), ``compute.py`` (``CHAPTER``, a
  :class:`geocont.book.chapter.Chapter`; ``run(settings)``; ``claims(results)``; the findings its
  prose words), ``present.py`` (figures, and the findings worded) and ``prose.md`` (the templates of
  its computed prose and the words of its claims, ``## claim.<key>``, :mod:`geocont.book.prose`).

An MLP chapter takes its parameters, presets and settings from :mod:`.mlp_runs`::

    CHAPTER = Chapter(name="<name>", parameters=mlp_runs.parameters("scale", "seeds", "steps", "conditions"),
                      presets=mlp_runs.mlp_presets(conditions=("res-relu", "res-none")),
                      build=mlp_runs.build_settings, describe=describe, runs=mlp_runs.all_run_configs)

where ``describe(settings)`` returns the provenance rows ``seeds``, ``data``, ``model`` and ``training``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..book.chapter import Chapter

#: Notebook stem -> module, for every subpackage of this package (imported on demand: the transformer
#: chapters import transformers).
CHAPTER_MODULES: dict[str, str] = {
    info.name: f"{__name__}.{info.name}"
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name)
    if info.ispkg
}


def check_chapter_names(names: Iterable[str]) -> None:
    """A one-line :class:`ValueError` naming every name that is not a chapter, and listing the valid ones."""
    unknown = [name for name in names if name not in CHAPTER_MODULES]
    if unknown:
        raise ValueError(f"unknown chapter {', '.join(unknown)}; valid choices: {', '.join(CHAPTER_MODULES)}")


def chapter_module(name: str) -> ModuleType:
    """The module of chapter ``name`` (a notebook stem); an unknown name lists the valid ones."""
    check_chapter_names([name])
    return importlib.import_module(CHAPTER_MODULES[name])


def chapter(name: str) -> Chapter:
    """The :class:`~geocont.book.chapter.Chapter` of chapter ``name`` (a notebook stem)."""
    return chapter_module(name).CHAPTER


def scales_markdown(order: Iterable[str] | None = None) -> str:
    """The three scales as one Markdown table: every chapter's rows (its ``scale_rows`` hook, its settings at
    each scale), chapter by chapter in ``order`` (notebook stems; default: every chapter, by name). The
    book build writes it into the methods page."""
    from ..scales import SCALES

    rows = [
        row
        for name in (order or CHAPTER_MODULES)
        if name in CHAPTER_MODULES
        for row in chapter(name).scales_table_rows()
    ]
    lines = ["| setting | " + " | ".join(f"`{s}`" for s in SCALES) + " |", "|---" * (len(SCALES) + 1) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)

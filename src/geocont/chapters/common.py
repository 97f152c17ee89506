"""What several chapters share beyond the chapter protocol (:mod:`geocont.book.chapter`): the closing verdict
list of an MLP chapter, and the short names that claim keys, figure names and labels use."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
from IPython.display import Markdown

from . import mlp_presentation


def mlp_verdict(results: Any, claims: pd.DataFrame) -> Markdown:
    """An MLP chapter's closing list, one bullet per claim (:func:`geocont.chapters.mlp_presentation.verdict`),
    from the chapter's results (any results with ``settings``)."""
    return mlp_presentation.verdict(results.settings, claims)


def slug(name: str) -> str:
    """``adam(beta2=0)`` -> ``adam-beta2-0``: ``name`` in lower-case letters, digits and '-', for claim keys and
    figure names (an optimizer label, a model's name or id, a GGUF type)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def short_projection(projection: str) -> str:
    """``q_proj`` -> ``q``: a transformer projection's name in claim keys and figure labels."""
    return projection.replace("_proj", "")

"""What the chapter measures: every checkpoint analysed (pretrained, large, and our trained transformers in
fp32 and quantized), and a projection's continuity over its adjacent layer pairs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from ...analyzer import analyze, plan
from ...lm import trained_lm
from ...pretrained import ModelNotAvailable
from ...statistics import Estimate, estimate
from ...transformer import parameter_count
from .output_gains import cached_output_gain_continuity
from .quantization import cached_quantization_effect
from .settings import PretrainedChapterSettings

_SPACE_COLUMNS = {"input": ("v1_cos", "v1_baseline"), "output": ("u1_cos", "u1_baseline")}


class PairEstimate(NamedTuple):
    """A projection's continuity over adjacent layer pairs (mean ± sd over pairs) and its space's random baseline."""

    estimate: Estimate
    baseline: float


def layer_pair_estimate(table: pd.DataFrame, projection: str, space: str) -> PairEstimate:
    """Mean ± sd over adjacent layer pairs of an analyzer table's v1 (input) or u1 (output)
    |cos| for one projection, and that space's random baseline."""
    column, baseline = _SPACE_COLUMNS[space]
    rows = table[table["projection"] == projection]
    return PairEstimate(estimate(rows[column]), float(rows[baseline].iloc[0]) if len(rows) else math.nan)


@dataclass
class Results:
    """Everything the chapter measured.

    ``tables``: the analyzer's table per pretrained checkpoint; ``large_tables``: those of the
    large checkpoints found here; ``large_status``: one row per large checkpoint looked for;
    ``trained_tables``: per seed, the table of a trained transformer; ``gains``: per post-norm
    checkpoint, :func:`output_gain_continuity`; ``effects``: :func:`quantization_effect` of
    every trained model (column ``seed``).
    """

    settings: PretrainedChapterSettings
    tables: dict[str, pd.DataFrame]
    large_tables: dict[str, pd.DataFrame]
    large_status: list[dict[str, str]]
    trained_tables: dict[int, pd.DataFrame]
    trained_parameters: int
    gains: dict[str, pd.DataFrame]
    effects: pd.DataFrame

    @property
    def llama_like(self) -> list[str]:
        """The pretrained checkpoints with a Llama (or GGUF Llama) layout."""
        return llama_like(self.tables)

    @property
    def gemma(self) -> list[str]:
        """The pretrained checkpoints with a Gemma-3 layout (post-norms)."""
        return gemma(self.tables)


def llama_like(tables: dict[str, pd.DataFrame]) -> list[str]:
    """The checkpoints of ``tables`` (analyzer tables by name) with a Llama (or GGUF Llama) layout."""
    return [m for m, t in tables.items() if t.attrs["layout"] in ("gguf", "llama")]


def gemma(tables: dict[str, pd.DataFrame]) -> list[str]:
    """The checkpoints of ``tables`` (analyzer tables by name) with a Gemma-3 layout (post-norms)."""
    return [m for m, t in tables.items() if t.attrs["layout"].startswith("gemma3")]


def run(settings: PretrainedChapterSettings) -> Results:
    """Analyse every checkpoint of the chapter, and the trained transformers (from the cache, or
    trained once), in fp32 and after each GGUF round trip; look for the large checkpoints. Every
    analysis is cached (``pretrained`` kind), so the results store captures them all."""
    tables = {name: analyze(name, max_layers=settings.max_layers) for name in settings.models}
    gains = {model: cached_output_gain_continuity(model, max_layers=settings.max_layers) for model in gemma(tables)}
    trained_tables, effects, trained_parameters = {}, [], 0
    for config in settings.trained_configs():
        model = trained_lm(config, progress=False)
        trained_parameters = parameter_count(model)
        effect = cached_quantization_effect(config, model, settings.quantize)
        trained_tables[config.seed] = effect[effect["format"] == "fp32"].drop(columns="format").reset_index(drop=True)
        effects.append(effect.assign(seed=config.seed))
    large_tables, large_status = {}, []
    for model_id in settings.large_models:
        try:
            src, _, _ = plan(model_id)
        except (ModelNotAvailable, FileNotFoundError) as error:
            large_status.append(dict(model=model_id, status="not available", detail=str(error).split(". ")[0]))
            continue
        large_tables[model_id] = analyze(model_id)
        large_status.append(dict(model=model_id, status="analysed", detail=src.description))
    return Results(
        settings=settings,
        tables=tables,
        large_tables=large_tables,
        large_status=large_status,
        trained_tables=trained_tables,
        trained_parameters=trained_parameters,
        gains=gains,
        effects=pd.concat(effects, ignore_index=True),
    )

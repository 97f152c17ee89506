"""What the chapter's computed sentences state, as values (the findings). :mod:`.present` words them from the
templates in ``prose.md``; every comparison and "which case applies" is decided here."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ...layouts import PROJECTIONS
from ...pretrained import OFFLINE_MODELS
from ...statistics import Estimate
from ..common import slug
from ..lm_runs import PROJECTION_PREDICTIONS
from .analyses import Results, layer_pair_estimate
from .quantization import QuantizationChange, quantization_changes, quantization_shifts


def continuity_overview(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (model, projection, space) of several analyzer tables: layer-pair mean and
    sd, number of pairs, and the random baseline. ``tables`` maps a label to a table."""
    rows = []
    for label, table in tables.items():
        for projection in (
            table["projection"].cat.categories if hasattr(table["projection"], "cat") else table["projection"].unique()
        ):
            for space in ("input", "output"):
                ours, baseline = layer_pair_estimate(table, projection, space)
                rows.append(
                    dict(
                        model=label,
                        projection=projection,
                        space=space,
                        mean=ours.mean,
                        sd=ours.std,
                        pairs=ours.n,
                        baseline=baseline,
                    )
                )
    return pd.DataFrame(rows)


def trained_seed_means(results: Results) -> pd.DataFrame:
    """:func:`continuity_overview` of each trained transformer (column ``seed``)."""
    label = f"trained ({results.settings.trained_scale})"
    return pd.concat(
        [continuity_overview({label: table}).assign(seed=seed) for seed, table in results.trained_tables.items()]
    )


@dataclass(frozen=True)
class PredictedContinuity:
    """A projection's continuity in the space the paper predicts for it (mean ± sd over layer pairs)
    and that space's random baseline."""

    projection: str
    space: str
    estimate: Estimate
    baseline: float


@dataclass(frozen=True)
class CheckpointFinding:
    """One pretrained checkpoint as its depth figure describes it: the predicted-continuous
    projections present in it, and V in both spaces."""

    name: str
    slug: str
    description: str
    layout: str
    predicted: tuple[PredictedContinuity, ...]
    v_input: Estimate
    v_output: Estimate


def checkpoint_findings(results: Results) -> tuple[CheckpointFinding, ...]:
    """:class:`CheckpointFinding` of every pretrained checkpoint, in order."""
    findings = []
    for name, table in results.tables.items():
        predicted = tuple(
            PredictedContinuity(projection, space, *layer_pair_estimate(table, projection, space))
            for projection, space in PROJECTION_PREDICTIONS
            if projection in set(table.projection)
        )
        findings.append(
            CheckpointFinding(
                name,
                slug(name),
                OFFLINE_MODELS[name].description if name in OFFLINE_MODELS else name,
                table.attrs["layout"],
                predicted,
                layer_pair_estimate(table, "v_proj", "input")[0],
                layer_pair_estimate(table, "v_proj", "output")[0],
            )
        )
    return tuple(findings)


@dataclass(frozen=True)
class WritingContinuity:
    """One writing projection's output-space continuity in the Gemma-3 and the Llama-layout model."""

    projection: str
    gemma: Estimate
    llama: Estimate


@dataclass(frozen=True)
class GemmaFinding:
    """Gemma-3 (post-norms) next to a Llama-layout model. ``case``: "compared", or "missing-layout"
    where one of the two layouts is not analysed (``models``: those analysed)."""

    case: str
    models: tuple[str, ...]
    llama: tuple[str, ...] = ()
    gemma: tuple[str, ...] = ()
    writing: tuple[WritingContinuity, ...] = ()


def gemma_finding(results: Results) -> GemmaFinding:
    """:class:`GemmaFinding` of ``results`` (the first model of each layout is compared)."""
    llama, gemma_models, tables = results.llama_like, results.gemma, results.tables
    if not (llama and gemma_models):
        return GemmaFinding("missing-layout", tuple(results.settings.models))
    return GemmaFinding(
        "compared",
        tuple(results.settings.models),
        tuple(llama),
        tuple(gemma_models),
        tuple(
            WritingContinuity(
                projection,
                layer_pair_estimate(tables[gemma_models[0]], projection, "output")[0],
                layer_pair_estimate(tables[llama[0]], projection, "output")[0],
            )
            for projection in ("o_proj", "down_proj")
        ),
    )


@dataclass(frozen=True)
class QuantizationFinding:
    """Per GGUF type its :class:`QuantizationChange`, and for scale the seed-to-seed sd of the trained
    models' layer means per projection (in its predicted space; V in the input space), where defined."""

    changes: tuple[tuple[str, QuantizationChange], ...]
    seed_spread: tuple[tuple[str, float], ...]


def quantization_finding(results: Results) -> QuantizationFinding:
    """:class:`QuantizationFinding` of ``results``."""
    changes = quantization_changes(quantization_shifts(results.effects), results.settings.quantize)
    seed_means = trained_seed_means(results)
    predicted_space = dict(PROJECTION_PREDICTIONS) | {"v_proj": "input"}
    spread = {
        p: seed_means[(seed_means.projection == p) & (seed_means.space == predicted_space[p])]["mean"].std()
        for p in PROJECTIONS
    }
    return QuantizationFinding(
        tuple((fmt, changes[fmt]) for fmt in results.settings.quantize),
        tuple((p, s) for p, s in spread.items() if not math.isnan(s)),
    )

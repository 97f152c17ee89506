"""The chapter's claims: the paper's projection pattern in every checkpoint, Gemma-3's post-norms, the output
gains, the quantization check and the large checkpoints; and the claims grouped by verdict."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ...book.chapter import ClaimsBuilder, claim
from ...book.prose import Prose
from ...metrics import vector_name
from ...statistics import V_LOW_MARGIN, Estimate, difference, known, verdict_for_difference, verdict_v_low
from ..common import short_projection, slug
from ..lm_runs import PROJECTION_PREDICTIONS
from .analyses import Results, gemma, layer_pair_estimate, llama_like
from .output_gains import gain_estimates
from .quantization import (
    QUANTIZATION_LIMIT,
    QuantizationChange,
    quantization_changes,
    quantization_shifts,
    quantization_verdict,
)
from .settings import CHAPTER

#: The chapter's words (``prose.md``): its claims and its computed sentences.
PROSE = Prose.of(__package__)

#: What the chapter's claims are judged on: the weights of the checkpoints (each named in its claim's key), no data.
CLAIMS_DATASET = "checkpoints"


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table."""
    changes = quantization_changes(quantization_shifts(results.effects), results.settings.quantize)
    return chapter_claims(
        results.tables,
        results.large_tables,
        gain_estimates(results.gains),
        changes,
        results.large_status,
        n_trained=len(results.trained_tables),
    )


def _post_norm_claims(out: ClaimsBuilder, tables: dict[str, pd.DataFrame]) -> None:
    """Gemma-3's post-norms against the first Llama-like model: O and Down output-space continuity."""
    llama, gemma_models = llama_like(tables), gemma(tables)
    if not (llama and gemma_models):
        return
    for projection in ("o_proj", "down_proj"):
        g, baseline = layer_pair_estimate(tables[gemma_models[0]], projection, "output")
        l, _ = layer_pair_estimate(tables[llama[0]], projection, "output")
        out.add(
            key=f"gemma-post-norm-{short_projection(projection)}-u1",
            template="gemma-post-norm",
            ours=difference(l, g),
            baseline=math.nan,  # a difference of two measured models: no random level in the verdict
            verdict=verdict_for_difference(l, g),
            fill={"projection": projection, "llama": llama[0], "gemma": gemma_models[0], "llama_u1": l, "gemma_u1": g},
        )


def _gain_claims(out: ClaimsBuilder, gains: dict[tuple[str, str], tuple[Estimate, Estimate]]) -> None:
    """Per post-norm projection, what it writes into the stream against the gain-only control."""
    for (model, projection), (gained, control) in gains.items():
        out.add(
            key=f"{slug(model)}-{short_projection(projection)}-gain-scaled-u1",
            template="gain-scaled",
            ours=difference(gained, control),
            baseline=control.mean,
            verdict=verdict_for_difference(gained, control),
            fill={"model": model, "projection": projection, "gained": gained, "control": control},
        )


def _quantization_claims(out: ClaimsBuilder, quantization: dict[str, QuantizationChange], n_trained: int) -> None:
    """Per quantization format, the largest change it makes to v1/u1 |cos| of the trained models."""
    for fmt, change in quantization.items():
        out.add(
            key=f"quantization-{slug(fmt)}",
            template="quantization",
            ours=change.worst,
            baseline=0.0,
            verdict=quantization_verdict(change.worst),
            fill={"format": fmt, "limit": QUANTIZATION_LIMIT, "typical": change.typical},
            n=n_trained,
            unit="trained models",
        )


def _large_claims(out: ClaimsBuilder, large_status: Sequence[dict[str, str]]) -> None:
    """A "not tested" claim per large checkpoint that was looked for but not analysed."""
    for status in large_status:
        if status["status"] != "analysed":
            out.not_tested(
                key=f"large-{slug(status['model'])}",
                template="large-model",
                reason="not-available",
                fill={"model": status["model"]},
            )


def chapter_claims(
    tables: dict[str, pd.DataFrame],
    large_tables: dict[str, pd.DataFrame],
    gains: dict[tuple[str, str], tuple[Estimate, Estimate]],
    quantization: dict[str, QuantizationChange],
    large_status: Sequence[dict[str, str]],
    n_trained: int,
) -> pd.DataFrame:
    """The chapter's claims from its measurements.

    ``tables`` / ``large_tables``: analyzer tables of the pretrained and the large checkpoints;
    ``gains``: :func:`gain_estimates`; ``quantization``: :func:`quantization_changes`;
    ``large_status``: the large checkpoints looked for; ``n_trained``: trained models quantized.
    """
    out = ClaimsBuilder(CHAPTER.name, dataset=CLAIMS_DATASET, prose=PROSE, unit="layer pairs")
    for label, table in {**tables, **large_tables}.items():
        _checkpoint_claims(out, label, table)
    _post_norm_claims(out, tables)
    _gain_claims(out, gains)
    _quantization_claims(out, quantization, n_trained)
    _large_claims(out, large_status)
    return out.table()


def _checkpoint_claim_specs(label: str, table: pd.DataFrame) -> list[tuple[str, str, str, bool]]:
    """The claims one checkpoint supports, in order: (key, projection, space, predicted); ``predicted`` is
    False for the "V is low" claims."""
    present, prefix = set(table["projection"]), slug(label)
    specs = [
        (f"{prefix}-{short_projection(p)}-{vector_name(s)}", p, s, True)
        for p, s in PROJECTION_PREDICTIONS
        if p in present
    ]
    if "v_proj" in present:
        specs += [(f"{prefix}-v-low-{vector_name(s)}", "v_proj", s, False) for s in ("input", "output")]
    return specs


def _short_claim(projection: str, space: str, predicted: bool) -> str:
    """A checkpoint claim's short name, without the checkpoint (``q_proj has input-space continuity``)."""
    return PROSE.choose("short-claim", "predicted" if predicted else "v-low", projection=projection, space=space)


def _checkpoint_claims(out: ClaimsBuilder, label: str, table: pd.DataFrame) -> None:
    """The paper's projection pattern in one checkpoint (spread and n over its adjacent layer pairs).

    A projection "has continuity" by :func:`verdict_for_difference` against its space's random
    baseline; V "is low" by :func:`geocont.statistics.verdict_v_low`, on V's own numbers and the
    projections of its space whose continuity is reproduced (the V claims follow the others in
    :func:`_checkpoint_claim_specs`).
    """
    reproduced: dict[str, list[tuple[str, Estimate]]] = {"input": [], "output": []}
    for key, projection, space, predicted in _checkpoint_claim_specs(label, table):
        ours, baseline = layer_pair_estimate(table, projection, space)
        fill = {
            "label": label,
            "short": _short_claim(projection, space, predicted),
            "projection": projection,
            "vector": vector_name(space),
        }
        if predicted:
            verdict = verdict_for_difference(ours, known(baseline))
            if verdict == "reproduced":
                reproduced[space].append((projection, ours))
            fill["why"] = PROSE.choose("prediction", projection)
            out.add(key=key, template="checkpoint-continuity", ours=ours, baseline=baseline, verdict=verdict, fill=fill)
            continue
        out.add(
            key=key,
            template="checkpoint-v-low",
            ours=ours,
            baseline=baseline,
            verdict=verdict_v_low(ours, baseline, [e for _, e in reproduced[space]]),
            fill=fill
            | {
                "margin": V_LOW_MARGIN,
                "reproduced": ", ".join(n for n, _ in reproduced[space]) or PROSE.render("none"),
            },
        )


def verdict_tally(claims: pd.DataFrame) -> tuple[tuple[str, int], ...]:
    """How many claims got each verdict, the most frequent first."""
    return tuple(claims["verdict"].value_counts().to_dict().items())


#: The verdicts :func:`verdict_finding` groups each checkpoint's claims by, in order.
VERDICT_GROUPS = ("reproduced", "partly reproduced", "not reproduced", "not tested")


@dataclass(frozen=True)
class CheckpointVerdicts:
    """One checkpoint's claims (their short names), grouped by :data:`VERDICT_GROUPS`."""

    label: str
    groups: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class GainFinding:
    """A post-norm projection's u1 continuity: of its weights, of what it writes into the stream
    (diag(g) W), of the gains alone (diag(g) G), and the random baseline."""

    model: str
    projection: str
    own: Estimate
    gained: Estimate
    control: Estimate
    baseline: float


@dataclass(frozen=True)
class VerdictFinding:
    """Per checkpoint, its claims by verdict; per post-norm projection, its :class:`GainFinding`."""

    checkpoints: tuple[CheckpointVerdicts, ...]
    gains: tuple[GainFinding, ...]


def verdict_finding(results: Results, claims: pd.DataFrame) -> VerdictFinding:
    """:class:`VerdictFinding` of ``results`` and its claims table."""
    checkpoints = []
    for label, table in {**results.tables, **results.large_tables}.items():
        verdicts = [
            (claim(claims, key)["verdict"], _short_claim(projection, space, predicted))
            for key, projection, space, predicted in _checkpoint_claim_specs(label, table)
        ]
        checkpoints.append(
            CheckpointVerdicts(
                label, tuple((v, tuple(short for got, short in verdicts if got == v)) for v in VERDICT_GROUPS)
            )
        )
    gains = []
    for (model, projection), (gained, control) in gain_estimates(results.gains).items():
        own, baseline = layer_pair_estimate(results.tables[model], projection, "output")
        gains.append(GainFinding(model, projection, own, gained, control, baseline))
    return VerdictFinding(tuple(checkpoints), tuple(gains))

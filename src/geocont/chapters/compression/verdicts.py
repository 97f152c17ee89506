"""The compression chapter's claims, per model: the sharing guideline per projection, pruning against
continuity, and adjacent against distant groups."""

from __future__ import annotations

import pandas as pd

from ...book.chapter import ClaimsBuilder
from ...book.prose import Prose
from ...layouts import PROJECTIONS
from ...statistics import (
    DepthCorrelation,
    Estimate,
    estimate,
    known,
    verdict_for_difference,
    verdict_for_interval,
    verdict_for_value,
)
from ..common import short_projection
from .measurements import Results, grouping_penalty
from .settings import CHAPTER, GUIDELINE, OURS

#: The chapter's words (``prose.md``): its claims and its computed sentences.
PROSE = Prose.of(__package__)

#: The sharing claims' margin: an advantage of one space over the other (in nats/token) counts when it is larger.
SHARING_MARGIN = 0.10


#: The grouping claim's margin: distant groups must raise the reconstruction error by more than this share (10%).
GROUPING_MARGIN = 0.10


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table."""
    return compression_claims(
        results.advantage,
        results.paired,
        results.pruning,
        results.grouping,
        results.correlations,
        dataset=results.settings.lm.base.corpus,
    )


def compression_claims(
    advantage: pd.DataFrame,
    paired: pd.DataFrame,
    pruning: pd.DataFrame,
    grouping: pd.DataFrame,
    correlations: dict[str, DepthCorrelation],
    *,
    dataset: str,
) -> pd.DataFrame:
    """The chapter's claims, per model (in the order of ``pruning``): the sharing guideline per
    projection, pruning against continuity (also without block 0), adjacent against distant groups; ``dataset``:
    the held-out text every loss is measured on."""
    out = ClaimsBuilder(CHAPTER.name, dataset=dataset, prose=PROSE)
    for model, frame in pruning.groupby("model", sort=False):
        spread = "seeds" if model == OURS else "budgets"
        add_sharing_claims(
            out, advantage[advantage["model"] == model], model, spread, paired=paired[paired["model"] == model]
        )
        pooled = PROSE.choose(
            "pruning-pooled", model_key(model), seeds=frame["seed"].nunique(), blocks=frame["layer"].nunique()
        )
        add_pruning_claim(out, f"{model_key(model)}-pruning", correlations[model], model, pooled=pooled)
        add_grouping_claim(out, grouping[grouping["model"] == model], model, spread)
    return out.table()


def model_key(model: str) -> str:
    """The claim-key prefix of a model: ``ours`` for our trained transformers, else ``pretrained``."""
    return "ours" if model == OURS else "pretrained"


def sharing_key(model: str, projection: str) -> str:
    """The key of a model's sharing claim for one projection (``ours-share-q``)."""
    return f"{model_key(model)}-share-{short_projection(projection)}"


def _guideline_sign(projection: str) -> int:
    """+1 where the guideline's space is the input space (or none: V is scored as input), -1 for output."""
    return -1 if GUIDELINE[projection] == "output" else 1


def _sharing_details(*, projection: str, spread: str, per_budget: pd.Series, paired: pd.DataFrame | None) -> str:
    """A sharing claim's note: the spread and the advantage per budget, and with ``paired`` each budget's gap in
    nats with its window standard error."""
    parts = [
        PROSE.choose("sharing-spread", spread, per_budget=", ".join(f"{b:g}: {v:+.2f}" for b, v in per_budget.items()))
    ]
    if paired is not None:
        gaps = paired[paired["projection"] == projection].groupby("budget")[["difference", "difference_se"]].mean()
        sign = _guideline_sign(projection) if GUIDELINE[projection] else 1
        other, space = ("output", "input") if sign > 0 else ("input", "output")
        gaps_text = ", ".join(f"{b:g}: {sign * r.difference:+.2g} ± {r.difference_se:.1g}" for b, r in gaps.iterrows())
        parts.append(PROSE.render("sharing-paired", other=other, space=space, gaps=gaps_text))
    return "; ".join(parts)


def _sharing_claim(out: ClaimsBuilder, *, model: str, projection: str, value: Estimate, details: str) -> None:
    """One projection's sharing claim: the guideline's space is the cheaper one (V: neither space is)."""
    space = GUIDELINE[projection]
    key = sharing_key(model, projection)
    if space is None:
        out.add(
            key=key,
            template="share-neither",
            ours=value,
            baseline=0.0,
            verdict=verdict_for_value(value, 0.0, SHARING_MARGIN),
            fill={"model": model, "details": details},
        )
        return
    out.add(
        key=key,
        template="share-guided",
        ours=value,
        baseline=0.0,
        verdict=verdict_for_difference(value, known(0.0), margin=SHARING_MARGIN),
        fill={
            "model": model,
            "projection": projection,
            "space": space,
            "other": "output" if space == "input" else "input",
            "details": details,
        },
    )


def add_sharing_claims(
    out: ClaimsBuilder, advantage: pd.DataFrame, model: str, spread: str, paired: pd.DataFrame | None = None
) -> None:
    """One claim per projection: is the guideline's space the cheaper one to share?

    The quantity is the advantage of the guideline's space over the other one
    (:func:`input_advantage`, sign flipped for output-space projections; plain input-space
    advantage for V). The spread is over ``spread``: "seeds" (our trained models: per-seed
    mean over budgets) or "budgets" (a single pretrained model: one value per budget).
    ``paired`` (:func:`paired_difference`), if given, adds each budget's gap in nats with
    its window standard error to the note.
    """
    if spread not in ("seeds", "budgets"):
        raise ValueError(f"unknown spread {spread!r}; valid choices: seeds, budgets")
    for projection in [p for p in PROJECTIONS if p in set(advantage["projection"])]:
        frame = advantage[advantage["projection"] == projection]
        signed = frame["advantage"] * _guideline_sign(projection)
        per_budget = signed.groupby(frame["budget"]).mean()
        value = estimate(signed.groupby(frame["seed"]).mean() if spread == "seeds" else per_budget)
        details = _sharing_details(projection=projection, spread=spread, per_budget=per_budget, paired=paired)
        _sharing_claim(out, model=model, projection=projection, value=value, details=details)


def add_grouping_claim(out: ClaimsBuilder, grouping: pd.DataFrame, model: str, spread: str) -> None:
    """Do adjacent layers share a basis better than distant ones (same parameters)?

    The value is the relative increase in reconstruction error from adjacent to distant
    groups, averaged over projections and both spaces; spread over seeds (our models) or over
    the projection x space cases (a single pretrained model). Margin: 10%.
    """
    penalty = grouping_penalty(grouping)
    value = estimate(penalty.groupby("seed")["penalty"].mean() if spread == "seeds" else penalty["penalty"])
    worse = int((penalty.groupby(["projection", "sharing"])["penalty"].mean() > 0).sum())
    cases = penalty.groupby(["projection", "sharing"]).ngroups
    out.add(
        key=f"{model_key(model)}-adjacent-sharing",
        template="adjacent-sharing",
        ours=value,
        baseline=0.0,
        verdict=verdict_for_difference(value, known(0.0), GROUPING_MARGIN),
        fill={
            "model": model,
            "spread": PROSE.choose("grouping-spread", spread),
            "worse": worse,
            "cases": cases,
            "margin": GROUPING_MARGIN,
        },
    )


def add_pruning_claim(
    out: ClaimsBuilder, key: str, correlation: DepthCorrelation, model: str, *, template: str = "pruning", **fill: str
) -> None:
    """Is pruning a block cheaper where adjacent-layer continuity is higher, at equal depth? Judged on the rank
    correlation with depth partialled out, by its circular-block-bootstrap interval
    (:func:`geocont.statistics.depth_correlation`); the raw and edge-free correlations stand in the note; ``n`` is
    the number of depth positions."""
    partial = correlation.partial
    out.add(
        key=key,
        template=template,
        ours=partial.rho,
        baseline=0.0,
        verdict=verdict_for_interval(partial.low, partial.high, expected_sign=-1),
        fill={"model": model, "correlation": correlation, **fill},
        std=(partial.high - partial.low) / (2 * 1.96),
        n=correlation.n,
        unit="depth positions",
    )

"""What the chapter's computed sentences state, as values (the findings). :mod:`.present` words them from the
templates in ``prose.md``; every comparison, threshold and "which case applies" is decided here."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...statistics import DIFFERENCE_MARGIN, Estimate, at_final_step, at_step, estimate, per_run, up_to_step
from ...tables import RUN_KEYS, split_claim_key
from ...transformer import PROJECTIONS
from ..lm_runs import PROJECTION_PREDICTIONS
from .runs import Results, pretrained_estimate, projection_finals, projection_values, variant_estimate
from .settledness import CLAIM_QUANTITIES, horizon
from .verdicts import transformer_claims


@dataclass(frozen=True)
class VariantLoss:
    """One run label's validation loss (seed mean ± sd) at the early horizon and at the end."""

    label: str
    early: Estimate
    final: Estimate


@dataclass(frozen=True)
class LossFinding:
    """Every run label's validation loss at ``early_step`` and at the end; ``uniform``: uniform guessing."""

    early_step: int
    variants: tuple[VariantLoss, ...]
    uniform: float


def loss_finding(results: Results) -> LossFinding:
    """:class:`LossFinding` of ``results``."""
    early = results.settings.early_step
    val = per_run(results.table, "val_loss", "", 0)
    return LossFinding(
        early,
        tuple(
            VariantLoss(
                v,
                estimate(at_step(val, early).query("condition == @v")["value"]),
                estimate(at_final_step(val).query("condition == @v")["value"]),
            )
            for v in results.variants
        ),
        math.log(results.settings.base.shape.vocab_size),
    )


def gap_values(table: pd.DataFrame) -> pd.DataFrame:
    """Per run, projection (``group``) and step: the relative gap (s1 - s2) / s1 of the weight
    matrix, mean over layers (``weight_gap``, direction 1). v1 and u1 are only as well defined as
    this gap: where it is small, a small change of the weights can swap the leading direction."""
    rows = table[(table["metric"] == "weight_gap") & (table["direction"] == 1)]
    return rows.groupby(RUN_KEYS + ["group", "step"], observed=True)["value"].mean().reset_index()


@dataclass(frozen=True)
class MovedContinuity:
    """A predicted continuity that moved by more than :data:`DIFFERENCE_MARGIN`: its seed mean and its
    projection's spectral gap (seed mean), at the early horizon and at the end."""

    projection: str
    space: str
    before: float
    after: float
    gap_before: float
    gap_after: float


@dataclass(frozen=True)
class GapFinding:
    """``case``: "moved" (``moved`` lists them) or "none-moved"."""

    case: str
    reference: str
    early_step: int
    end: int
    threshold: float
    moved: tuple[MovedContinuity, ...]


def gap_finding(results: Results) -> GapFinding:
    """For the reference variant: the predicted continuities that moved by more than :data:`DIFFERENCE_MARGIN`
    between the early horizon and the end, each beside its projection's spectral gap at both steps
    (an association across projections, not a test of cause)."""
    early_step, end = results.settings.early_step, results.settings.base.steps
    continuity, gaps = projection_values(results.table), gap_values(results.table)
    reference = results.reference
    continuity, gaps = continuity[continuity.condition == reference], gaps[gaps.condition == reference]
    moved = []
    for projection, space in PROJECTION_PREDICTIONS:
        frame = continuity[(continuity.group == projection) & (continuity.space == space)]
        before, after = estimate(at_step(frame, early_step)["value"]), estimate(at_final_step(frame)["value"])
        if math.isnan(before.mean) or abs(after.mean - before.mean) <= DIFFERENCE_MARGIN:
            continue
        gap = gaps[gaps.group == projection]
        gap_before, gap_after = estimate(at_step(gap, early_step)["value"]), estimate(at_final_step(gap)["value"])
        moved.append(MovedContinuity(projection, space, before.mean, after.mean, gap_before.mean, gap_after.mean))
    return GapFinding("moved" if moved else "none-moved", reference, early_step, end, DIFFERENCE_MARGIN, tuple(moved))


@dataclass(frozen=True)
class ProjectionEstimates:
    """One projection's continuity (seed mean ± sd) in the input (v1) and the output (u1) space."""

    projection: str
    input: Estimate
    output: Estimate


def final_estimates(results: Results) -> tuple[ProjectionEstimates, ...]:
    """Every projection's final continuity in both spaces, for the reference variant."""
    return tuple(
        ProjectionEstimates(
            p, *(variant_estimate(results.finals, results.reference, p, s) for s in ("input", "output"))
        )
        for p in PROJECTIONS
    )


@dataclass(frozen=True)
class DepthProfileFinding:
    """The run labels the depth profile shows (the reference, and the deeper model where it ran);
    ``case``: "with-deeper" or "reference-only"."""

    case: str
    labels: tuple[str, ...]
    depth_label: str


def depth_profile_finding(results: Results) -> DepthProfileFinding:
    """:class:`DepthProfileFinding` of ``results``."""
    labels = tuple(v for v in results.variants if v in (results.reference, results.settings.depth_label))
    return DepthProfileFinding(
        "with-deeper" if len(labels) > 1 else "reference-only", labels, results.settings.depth_label
    )


@dataclass(frozen=True)
class LostContinuity:
    """A predicted continuity that does not hold at the end: its value and verdict early and at the
    end (reference variant), and the pretrained checkpoint's (None where it was not analysed)."""

    projection: str
    space: str
    early: Estimate
    early_verdict: str
    final: Estimate
    verdict: str
    pretrained: Estimate | None

    @property
    def case(self) -> str:
        """ "with-pretrained" where the pretrained checkpoint's value is known, else "alone"."""
        return "alone" if self.pretrained is None else "with-pretrained"


@dataclass(frozen=True)
class LostFinding:
    """``case``: "some-lost" (``lost`` lists them), "some-moving" (none lost, some still moving) or "all-kept"."""

    case: str
    reference: str
    early_step: int
    pretrained: str | None
    lost: tuple[LostContinuity, ...]


def lost_finding(results: Results, claims: pd.DataFrame) -> LostFinding:
    """The predicted continuities that do not hold where the claims are judged (lost, or never reached; a
    quantity still moving there is not settled, not lost), with their values there (:func:`horizon`)."""
    lost = []
    judged = projection_finals(up_to_step(results.table, horizon(results).step))
    for row in claims.itertuples():
        name = split_claim_key(row.key)[0]
        if name not in CLAIM_QUANTITIES or name.startswith("v-low") or row.verdict in ("reproduced", "not settled"):
            continue
        projection, space = CLAIM_QUANTITIES[name]
        lost.append(
            LostContinuity(
                projection,
                space,
                variant_estimate(results.early_finals, results.reference, projection, space),
                row.early_verdict,
                variant_estimate(judged, results.reference, projection, space),
                row.verdict,
                None if results.pretrained is None else pretrained_estimate(results, projection, space),
            )
        )
    moving = any(
        row.verdict == "not settled" for row in claims.itertuples() if split_claim_key(row.key)[0] in CLAIM_QUANTITIES
    )
    case = "some-lost" if lost else "some-moving" if moving else "all-kept"
    return LostFinding(case, results.reference, results.settings.early_step, results.settings.pretrained, tuple(lost))


@dataclass(frozen=True)
class ClaimValue:
    """A claim's value as the claims table has it (mean, sd, n) and its verdict."""

    ours_mean: float
    ours_std: float
    n_seeds: int
    verdict: str


@dataclass(frozen=True)
class DepthComparison:
    """One claim judged on the reference variant (``shallow``) and on the deeper model (``deep``)."""

    key: str
    shallow: ClaimValue
    deep: ClaimValue

    @property
    def same(self) -> bool:
        return self.shallow.verdict == self.deep.verdict


@dataclass(frozen=True)
class DepthFinding:
    """Whether the deeper model changes the pattern. ``case``: "not-run", or "one-seed" / "several-seeds"
    (the deeper model's seeds); ``same`` and ``changed``: the claims whose verdict it keeps or changes."""

    case: str
    depth_label: str
    depth_layers: int
    reference: str
    n_layers: int
    steps: int
    same: tuple[DepthComparison, ...] = ()
    changed: tuple[DepthComparison, ...] = ()


def depth_finding(results: Results) -> DepthFinding:
    """The deeper model's verdicts beside the reference variant's, claim by claim."""
    settings = results.settings
    finding = DepthFinding(
        "not-run",
        settings.depth_label,
        settings.depth_layers,
        results.reference,
        settings.base.shape.n_layers,
        settings.base.steps,
    )
    if settings.depth_label not in results.variants:
        return finding
    shallow = transformer_claims(
        results.table, results.dims, reference=results.reference, no_activation=None, linear_attention=None
    )
    deep = transformer_claims(
        results.table, results.dims, reference=settings.depth_label, no_activation=None, linear_attention=None
    ).set_index("key")

    def value(row: Any) -> ClaimValue:
        return ClaimValue(float(row.ours_mean), float(row.ours_std), int(row.n_seeds), row.verdict)

    comparisons = [DepthComparison(row.key, value(row), value(deep.loc[row.key])) for row in shallow.itertuples()]
    return dataclasses.replace(
        finding,
        case="one-seed" if len(settings.depth_seeds) == 1 else "several-seeds",
        same=tuple(c for c in comparisons if c.same),
        changed=tuple(c for c in comparisons if not c.same),
    )


@dataclass(frozen=True)
class PretrainedComparison:
    """One projection's continuity in the space of its claim: ours at the end and at the early
    horizon (spread over seeds), and the pretrained checkpoint's (spread over its layer pairs)."""

    projection: str
    space: str
    final: Estimate
    early: Estimate
    pretrained: Estimate


@dataclass(frozen=True)
class PretrainedFinding:
    """``case``: "compared" or "not-analysed" (``status`` says why, or what was analysed)."""

    case: str
    status: str
    early_step: int
    comparisons: tuple[PretrainedComparison, ...] = ()


def pretrained_finding(results: Results) -> PretrainedFinding:
    """Our settled values beside the pretrained checkpoint's, for the predicted projections and V."""
    step = results.settings.early_step
    if results.pretrained is None:
        return PretrainedFinding("not-analysed", results.pretrained_status, step)
    return PretrainedFinding(
        "compared",
        results.pretrained_status,
        step,
        tuple(
            PretrainedComparison(
                projection,
                space,
                variant_estimate(results.finals, results.reference, projection, space),
                variant_estimate(results.early_finals, results.reference, projection, space),
                pretrained_estimate(results, projection, space),
            )
            for projection, space in dict.fromkeys(CLAIM_QUANTITIES.values())
        ),
    )

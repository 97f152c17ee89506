"""The chapter's claims: the paper's projection pattern and the ablations, judged at the horizon
(:mod:`.settledness`) and at the early step, with the Up/O gap's claims (:mod:`.up_o_gap`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...book.chapter import ClaimsBuilder, claim, concat_claims, has_claim, on_dataset, with_early
from ...metrics import random_abs_cos, vector_name
from ...statistics import (
    SETTLED_TOLERANCE,
    V_LOW_MARGIN,
    Estimate,
    Horizon,
    Settledness,
    continued,
    difference,
    holds_when,
    known,
    movement_could_change,
    near_random_tolerance,
    settledness,
    up_to_step,
    verdict_for_difference,
    verdict_v_low,
)
from .. import lm_runs
from ..common import short_projection
from ..lm_runs import PROJECTION_PREDICTIONS
from .residual_channel import channel_claims
from .runs import Results, projection_finals, projection_values, variant_estimate
from .settings import CHAPTER
from .settledness import CLAIM_QUANTITIES, horizon, quantity_name
from .up_o_gap import PROSE, RISING, rising_claims, up_o_claims, up_o_values

#: Keys of the linear-attention claims (our direct test of the paper's Q/K claim).
SOFTMAX_KEYS = ("softmax-anchors-q", "softmax-anchors-k")


def claims(results: Results, channel: pd.DataFrame | None = None) -> pd.DataFrame:
    """The chapter's claims table, judged at the :func:`horizon` (every variant at its step), with the same claims
    judged at ``early_step`` in its ``early`` column (:func:`geocont.book.chapter.with_early`; the longer run's
    claims have none). A claim on one projection's continuity whose quantity is still moving in some seed there is
    "not settled" (its verdict by the rules in the note); each note adds when the claim holds
    (:func:`geocont.statistics.holds_when`) and the quantity's change over the last third, seed by seed. ``channel``
    (:func:`.residual_channel.reference_channel`) adds the claims on O's and Down's residual channel."""
    reference, dims = results.reference, results.dims
    judged = horizon(results)
    at_horizon = up_to_step(results.table, judged.step)
    continued_verdicts = _continued_verdicts(at_horizon, dims, reference)
    unsettled = set()
    for key, quantity in CLAIM_QUANTITIES.items():
        if not judged.quantities[quantity_name(*quantity)].settled:
            now = transformer_claims(at_horizon, dims, reference=reference).set_index("key")["verdict"]
            if movement_could_change(now[key], continued_verdicts[key]):
                unsettled.add(quantity)
    table = pd.concat(
        [
            transformer_claims(at_horizon, dims, reference=reference, unsettled=unsettled),
            up_o_claims(at_horizon, dims, reference),
        ],
        ignore_index=True,
    )
    early = pd.concat(
        [transformer_claims(results.early, dims, reference=reference), up_o_claims(results.early, dims, reference)],
        ignore_index=True,
    )
    table = concat_claims(with_early(table, early, results.settings.early_step), rising_claims(results))
    others = other_settledness(results, judged.step)
    judged_rows = [
        _horizon_note(row, judged, others.get(row.key), continued_verdicts.get(row.key)) for row in table.itertuples()
    ]
    table = table.assign(note=[note for note, _ in judged_rows], verdict=[verdict for _, verdict in judged_rows])
    if channel is not None:  # the residual channel of the trained weights (:mod:`.residual_channel`)
        table = concat_claims(table, channel_claims(results, channel))
    return on_dataset(table, results.settings.base.corpus)


#: The claims that read other quantities than one projection's continuity in ``silu``: each quantity as
#: ``(variant or None for the reference, source, projection or Up/O quantity, space)``; source "projection" reads
#: :func:`projection_values`, "up-o" :func:`.up_o_gap.up_o_values`. The still-rising claims read a change itself
#: and are not judged for settledness.
OTHER_QUANTITIES = {
    "activation-lowers-gate": (
        (None, "projection", "gate_proj", "input"),
        ("none", "projection", "gate_proj", "input"),
    ),
    "activation-lowers-up": ((None, "projection", "up_proj", "input"), ("none", "projection", "up_proj", "input")),
    "softmax-anchors-q": (
        (None, "projection", "q_proj", "input"),
        ("silu, linear attention", "projection", "q_proj", "input"),
    ),
    "softmax-anchors-k": (
        (None, "projection", "k_proj", "input"),
        ("silu, linear attention", "projection", "k_proj", "input"),
    ),
    "up-gate-shared-v1": ((None, "up-o", "up-gate-v1", ""),),
    "up-gate-shared-u1": ((None, "up-o", "up-gate-u1", ""),),
    "up-align-vs-v1": ((None, "up-o", "up-align", ""), (None, "up-o", "up-v1", "")),
    "o-align-vs-v1": ((None, "up-o", "o-align", ""), (None, "up-o", "o-u1", "")),
}


def other_settledness(results: Results, step: int) -> dict[str, tuple[tuple[str, Settledness], ...]]:
    """For each claim of :data:`OTHER_QUANTITIES`, each quantity it reads (named ``"<variant> <quantity>"``) and its
    :func:`geocont.statistics.settledness` at ``step``; a quantity of a variant not run is left out."""
    values = {"projection": projection_values(results.table), "up-o": up_o_values(results.table)}
    found = {}
    for key, quantities in OTHER_QUANTITIES.items():
        judged = []
        for variant, source, name, space in quantities:
            variant = variant or results.reference
            frame = values[source][values[source]["condition"] == variant]
            if source == "projection":
                frame = frame[(frame["group"] == name) & (frame["space"] == space)]
            else:
                frame = frame[frame["quantity"] == name]
            if len(frame):
                label = f"{variant} {short_projection(name)} {vector_name(space)}" if space else f"{variant} {name}"
                frame = frame.drop(columns=["group", "space", "quantity"], errors="ignore")
                tolerance = _tolerance(frame, step, results, name, space) if source == "projection" else None
                judged.append((label, settledness(frame, step, tolerance=tolerance or SETTLED_TOLERANCE)))
        found[key] = tuple(judged)
    return found


def _continued_verdicts(at_horizon: pd.DataFrame, dims, reference: str) -> dict[str, str]:
    """Each claim's verdict on the :func:`geocont.statistics.continued` table: every quantity another third on at
    its last-third rate (the V claims read the projections reproduced there)."""
    moved = continued(at_horizon)
    table = pd.concat(
        [transformer_claims(moved, dims, reference=reference), up_o_claims(moved, dims, reference)], ignore_index=True
    )
    return dict(zip(table["key"], table["verdict"]))


def _tolerance(frame: pd.DataFrame, step: int, results: Results, projection: str, space: str) -> float:
    """A projection's settledness tolerance at ``step``: wider within noise of its random level
    (:func:`geocont.statistics.near_random_tolerance`)."""
    d = results.dims[projection][space]
    wide = near_random_tolerance(d, results.settings.base.shape.n_layers - 1)
    upto = frame[frame["step"] <= step]
    final = upto[upto["step"] == upto["step"].max()]["value"].mean()
    return wide if abs(final - random_abs_cos(d)) <= wide else SETTLED_TOLERANCE


def _measured(found: Settledness) -> bool:
    """Whether every seed's last-third change could be measured (a last third holding one snapshot cannot: such a
    quantity always blocks its verdict)."""
    values = found.changes.to_numpy(dtype=float)
    return len(values) > 0 and bool(np.isfinite(values).all())


def _horizon_note(
    row: Any,
    judged: Horizon,
    others: tuple[tuple[str, Settledness], ...] | None = None,
    continued_verdict: str | None = None,
) -> tuple[str, str]:
    """A claim's note and verdict where it is judged: a claim whose quantity (one projection's continuity, or any
    of ``others``: :func:`other_settledness`) is still moving in some seed is "not settled" where that movement,
    continued another third at its last-third rate, would change its verdict (``continued_verdict``:
    :func:`_continued_verdicts`); its note adds its rule's verdict then, the quantity's change over the last third,
    seed by seed, and (where the claim has an early value) when it holds. A claim still moving whose verdict the
    movement would not change keeps its verdict, and its note says so."""
    parts, verdict = [], row.verdict
    could_change = continued_verdict is None or movement_could_change(row.verdict, continued_verdict)
    if row.key in CLAIM_QUANTITIES:  # the keys name no dataset yet: on_dataset names it below
        found = judged.quantities[quantity_name(*CLAIM_QUANTITIES[row.key])]
        blocks = could_change or not _measured(found)
        if not found.settled:
            if blocks:
                parts.append(PROSE.render("note-not-settled", step=judged.step, verdict=row.verdict))
                verdict = "not settled"
            else:
                parts.append(PROSE.render("note-moving-verdict-holds", continued=continued_verdict))
        parts.append(_changes_text(found))
    elif others:
        if not all(found.settled for _, found in others):
            if could_change or not all(_measured(found) for _, found in others):
                parts.append(PROSE.render("note-not-settled", step=judged.step, verdict=row.verdict))
                verdict = "not settled"
            else:
                parts.append(PROSE.render("note-moving-verdict-holds", continued=continued_verdict))
        parts += [PROSE.render("note-named-changes", name=name, changes=_changes_text(found)) for name, found in others]
    elif row.key in RISING:
        parts.append(PROSE.render("note-reads-a-change"))
    if row.early_verdict and verdict != "not settled":  # the not-settled part says when it holds
        parts.insert(0, PROSE.render("note-holds", when=holds_when(row.early_verdict, verdict)))
    return "; ".join(([row.note] if row.note else []) + parts), verdict


def _changes_text(found: Settledness) -> str:
    """A quantity's change over the last third, the seed mean and each seed's, for a claim's note."""
    seeds = ", ".join(f"{value:+.2f}" for value in found.changes)
    return PROSE.render("note-changes", mean=found.trend.mean, seeds=seeds)


def transformer_claims(
    table: pd.DataFrame,
    dims: dict[str, dict[str, int]],
    reference: str = lm_runs.REFERENCE,
    no_activation: str | None = "none",
    linear_attention: str | None = "silu, linear attention",
    unsettled: set[tuple[str, str]] = frozenset(),
) -> pd.DataFrame:
    """Claims table of a run table, judged at each run's last step.

    ``dims`` gives each projection's input/output dimension (for the random baselines). The
    ablation claims are left out where their variant (``no_activation``, ``linear_attention``;
    None: never) was not run. ``unsettled``: the (projection, space) quantities still moving there, whose
    claims V is not compared with (:func:`projection_claims`).
    """
    finals = projection_finals(table)
    out = ClaimsBuilder(CHAPTER.name, prose=PROSE)
    projection_claims(out, finals, dims, reference=reference, unsettled=unsettled)
    variants = set(table["condition"])
    if no_activation in variants:
        activation_ablation_claims(out, finals, dims, reference=reference, ablated=no_activation)
    if linear_attention in variants:
        softmax_ablation_claims(out, finals, dims, reference=reference, ablated=linear_attention)
    return out.table()


def projection_claims(
    out: ClaimsBuilder,
    finals: pd.DataFrame,
    dims: dict[str, dict[str, int]],
    *,
    reference: str,
    unsettled: set[tuple[str, str]] = frozenset(),
) -> None:
    """The paper's pattern in the ``reference`` variant (``finals``: :func:`projection_finals`): each projection
    continuous in the space it predicts, above its random baseline; then V low in both spaces, near random and
    below the projections of that space whose continuity is reproduced and not blocked by its movement (not in ``unsettled``: a claim
    still moving reads "not settled", not reproduced)."""
    reproduced: dict[str, list[tuple[str, Estimate]]] = {"input": [], "output": []}
    for projection, space in PROJECTION_PREDICTIONS:
        ours = variant_estimate(finals, reference, projection, space)
        base = known(random_abs_cos(dims[projection][space]))
        verdict = verdict_for_difference(ours, base)
        if verdict == "reproduced" and (projection, space) not in unsettled:
            reproduced[space].append((projection, ours))
        out.add(
            key=f"{short_projection(projection)}-{space}-continuity",
            template="projection-continuity",
            ours=ours,
            baseline=base.mean,
            verdict=verdict,
            fill={
                "projection": projection,
                "space": space,
                "vector": vector_name(space),
                "reference": reference,
                "why": PROSE.choose("prediction", projection),
            },
        )
    for space in ("input", "output"):
        v = variant_estimate(finals, reference, "v_proj", space)
        random_level = random_abs_cos(dims["v_proj"][space])
        out.add(
            key=f"v-low-{space}",
            template="v-low",
            ours=v,
            baseline=random_level,
            verdict=verdict_v_low(v, random_level, [e for _, e in reproduced[space]]),
            fill={
                "space": space,
                "vector": vector_name(space),
                "margin": V_LOW_MARGIN,
                "reproduced": ", ".join(name for name, _ in reproduced[space]) or PROSE.render("none"),
            },
        )


def activation_ablation_claims(
    out: ClaimsBuilder, finals: pd.DataFrame, dims: dict[str, dict[str, int]], *, reference: str, ablated: str
) -> None:
    """Removing the MLP activation (the ``ablated`` variant) lowers Gate's and Up's input continuity."""
    for projection in ("gate_proj", "up_proj"):
        with_act = variant_estimate(finals, reference, projection, "input")
        without = variant_estimate(finals, ablated, projection, "input")
        out.add(
            key=f"activation-lowers-{short_projection(projection)}",
            template="activation-lowers",
            ours=difference(with_act, without),
            baseline=math.nan,  # a difference of two measured conditions: no random level in the verdict
            verdict=verdict_for_difference(with_act, without),
            fill={
                "projection": projection,
                "reference": reference,
                "ablated": ablated,
                "with_activation": with_act,
                "without": without,
            },
        )


def softmax_ablation_claims(
    out: ClaimsBuilder, finals: pd.DataFrame, dims: dict[str, dict[str, int]], *, reference: str, ablated: str
) -> None:
    """(ours) Without the softmax (the linear-attention variant ``ablated``), Q's and K's input continuity drops."""
    for key, projection in zip(SOFTMAX_KEYS, ("q_proj", "k_proj")):
        soft = variant_estimate(finals, reference, projection, "input")
        lin = variant_estimate(finals, ablated, projection, "input")
        out.add(
            key=key,
            template="softmax-anchors",
            ours=difference(soft, lin),
            baseline=math.nan,  # a difference of two measured conditions: no random level in the verdict
            verdict=verdict_for_difference(soft, lin),
            fill={"projection": projection, "softmax": soft, "linear": lin},
        )


@dataclass(frozen=True)
class SoftmaxFinding:
    """What the linear-attention ablation says of the softmax claim. ``case``: "not-run" (no
    ablation claims), "supported" (one of them is reproduced) or "not-supported"; ``evidence``:
    each claim's estimates (the first part of its note)."""

    case: str
    evidence: tuple[str, ...] = ()


def softmax_finding(claims: pd.DataFrame) -> SoftmaxFinding:
    """:class:`SoftmaxFinding` of a claims table."""
    rows = [claim(claims, key) for key in SOFTMAX_KEYS if has_claim(claims, key)]
    if not rows:
        return SoftmaxFinding("not-run")
    if any(row["verdict"] == "reproduced" for row in rows):
        return SoftmaxFinding("supported")
    return SoftmaxFinding("not-supported", tuple(row["note"].split("; ")[0] for row in rows))

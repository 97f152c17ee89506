"""The timeline chapter's claims: each of the paper's claims on the transfer, judged at the end of training and
after ``early_steps``, one function per family of claims."""

from __future__ import annotations

import math

import pandas as pd

from ...book.chapter import ClaimsBuilder, with_early
from ...statistics import (
    Estimate,
    difference,
    estimate,
    known,
    rank_correlation,
    up_to_step,
    verdict_for_correlation,
    verdict_for_difference,
    verdict_for_value,
)
from ..common import slug
from .events import DRIFT_WINDOW_START, NORMS, drift, order_estimate, transfer_events, verdict_for_order
from .runs import Results
from .settings import CHAPTER, DRIFT_CONDITIONS, NO_RESIDUAL


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table, judged at the end of training, with each claim's value after
    ``early_steps`` in the ``early`` column (the init sweep is that long already)."""
    early = results.settings.early_steps
    dataset = results.settings.base.dataset
    at_end = timeline_claims(
        results.table, results.init_table, results.optimizer_table, results.baseline, results.reference, dataset=dataset
    )
    at_early = timeline_claims(
        up_to_step(results.table, early),
        results.init_table,
        up_to_step(results.optimizer_table, early),
        results.baseline,
        results.reference,
        dataset=dataset,
    )
    return with_early(at_end, at_early, early)


def timeline_claims(
    conditions: pd.DataFrame,
    init_sweep: pd.DataFrame,
    optimizers: pd.DataFrame,
    baseline: float,
    reference: str = "res-relu",
    no_residual: str = NO_RESIDUAL,
    *,
    dataset: str,
) -> pd.DataFrame:
    """Claims table of the timeline chapter, from its three sweeps' run tables.

    ``conditions``: the chapter's conditions under the base optimizer; ``init_sweep``: the
    ``reference`` condition at several init scales; ``optimizers``: the ``reference`` condition
    under each robustness optimizer. The step-0 claim compares ``reference`` with
    ``no_residual``, its counterpart without residual connections.
    """
    out = ClaimsBuilder(CHAPTER.name, dataset=dataset)
    events = transfer_events(conditions)
    transfer_claims(out, events, baseline, reference=reference, no_residual=no_residual)
    init_scale_claims(out, transfer_events(init_sweep))
    drift_claims(out, conditions, events, baseline, reference=reference)
    optimizer_order_claims(out, transfer_events(optimizers))
    return out.table()


def _condition_estimate(events: pd.DataFrame, condition: str, column: str) -> Estimate:
    """Mean ± sd over seeds of one events column for one condition."""
    return estimate(events[events["condition"] == condition][column])


def transfer_claims(
    out: ClaimsBuilder, events: pd.DataFrame, baseline: float, *, reference: str, no_residual: str
) -> None:
    """The transfer in the ``reference`` condition: gradient coherence at step 0 (against ``no_residual``),
    weight continuity rising once the update dominates (both norms), and the weights aligned with the
    cumulative gradient at the end."""
    res = _condition_estimate(events, reference, "grad_v1_step0")
    nores = _condition_estimate(events, no_residual, "grad_v1_step0")
    out.add(
        key="step0-gradient-coherence",
        claim="Gradient coherence across layers exists at initialisation, before any update",
        quantity=f"{reference} minus {no_residual} gradient v1 |cos| at step 0",
        paper="present at init (no number)",
        ours=difference(res, nores),
        baseline=baseline,
        verdict=verdict_for_difference(res, nores),
        note=f"{reference} {res}; {no_residual} {nores}",
    )
    relu_events = events[events["condition"] == reference]
    for crossing, norm, key in NORMS:
        order, note = order_estimate(relu_events, crossing)
        out.add(
            key=f"order-{key}",
            claim="Weight continuity forms once the cumulative update dominates the initial weights",
            quantity=f"{reference} log10(rise step / crossing step), {norm} norm",
            paper="rise after ‖ΔW‖ > ‖W(0)‖",
            ours=order,
            baseline=math.nan,
            verdict=verdict_for_order(relu_events, crossing),
            note=note,
        )
    aligned = _condition_estimate(events, reference, "weight_cumgrad_final")
    out.add(
        key="weight-cumgrad-alignment",
        claim="... and the weights align with the cumulative gradient",
        quantity=f"{reference} final |cos(v1(W), v1(ΣdL/dW))|",
        paper="aligned (no number)",
        ours=aligned,
        baseline=baseline,
        verdict=verdict_for_difference(aligned, known(baseline)),
    )


def init_scale_claims(out: ClaimsBuilder, sweep: pd.DataFrame) -> None:
    """Across the init-scale sweep (its events, ``sweep``): a smaller initialisation moves the crossing and
    the rise earlier, and the rise follows the crossing (both norms); a run that never crossed ranks last."""
    never_crossed = int(sweep["crossing_step"].isna().sum())
    crossing_rank = sweep["crossing_step"].fillna(math.inf)  # never crossed = later than any crossing
    for values, label, key, left_out in (
        (crossing_rank, "crossing", "crossing", f"{never_crossed} runs never crossed (ranked last)"),
        (
            sweep["rise_step"],
            "continuity rise",
            "rise",
            f"{int(sweep['rise_step'].isna().sum())} runs without a rise (left out)",
        ),
    ):
        correlation = rank_correlation(sweep["init_scale"], values)
        out.add(
            key=f"init-moves-{key}",
            claim=f"A smaller initialisation moves the {label} earlier",
            quantity=f"Spearman ρ(init scale, {label} step)",
            paper="earlier (no number)",
            ours=correlation.rho,
            baseline=math.nan,
            verdict=verdict_for_correlation(correlation, +1),
            note=f"{correlation}; {left_out}",
            n=correlation.n,
        )
    for crossing, norm, key in NORMS:
        together = rank_correlation(sweep[crossing].fillna(math.inf), sweep["rise_step"])
        out.add(
            key=f"init-rise-follows-{key}",
            claim="Across initialisations the rise follows the crossing",
            quantity=f"Spearman ρ(crossing step, rise step), {norm} norm",
            paper="follows (no number)",
            ours=together.rho,
            baseline=math.nan,
            verdict=verdict_for_correlation(together, +1),
            note=f"{together}; never crossed (ranked last): {int(sweep[crossing].isna().sum())}",
            n=together.n,
        )


def drift_claims(
    out: ClaimsBuilder, conditions: pd.DataFrame, events: pd.DataFrame, baseline: float, *, reference: str
) -> None:
    """Rotation drift after the drift window's start: each symmetric condition of :data:`DRIFT_CONDITIONS` that
    ran turns faster than ``reference`` and is less aligned with its cumulative gradient; in the linear
    residual net adjacent layers rotate independently."""
    turn = drift(conditions, "turn")
    relu_turn = estimate(turn[turn["condition"] == reference]["value"])
    aligned = _condition_estimate(events, reference, "weight_cumgrad_final")
    for condition in DRIFT_CONDITIONS:
        if condition not in set(conditions["condition"]):
            continue
        rate = estimate(turn[turn["condition"] == condition]["value"])
        out.add(
            key=f"{condition}-late-drift",
            claim="Without symmetry breaking, v1 keeps drifting",
            quantity=f"{condition} minus {reference} v1 turn rate after {DRIFT_WINDOW_START:.0%} of training "
            "(degrees per 1,000 steps)",
            paper="drift",
            ours=difference(rate, relu_turn),
            baseline=math.nan,
            verdict=verdict_for_difference(rate, relu_turn, margin=1.0),
            note=f"{condition} {rate}°; {reference} {relu_turn}°",
        )
        decoupled = _condition_estimate(events, condition, "weight_cumgrad_final")
        out.add(
            key=f"{condition}-decoupled",
            claim="... which decouples the weights from the cumulative gradient",
            quantity=f"{reference} minus {condition} final weight/cum.-gradient v1 |cos|",
            paper="lower without",
            ours=difference(aligned, decoupled),
            baseline=baseline,
            verdict=verdict_for_difference(aligned, decoupled),
            note=f"{reference} {aligned}; {condition} {decoupled}",
        )
    co = drift(conditions, "co_rotation")
    none_co = estimate(co[co["condition"] == "res-none"]["value"])
    out.add(
        key="linear-independent-rotation",
        claim="In a linear residual net each layer rotates independently",
        quantity=f"res-none co-rotation of adjacent v1 after {DRIFT_WINDOW_START:.0%} of training (signed cos)",
        paper="independent (≈ 0)",
        ours=none_co,
        baseline=baseline,
        verdict=verdict_for_value(none_co, 0.0),
    )


def optimizer_order_claims(out: ClaimsBuilder, optimizer_events: pd.DataFrame) -> None:
    """The order (rise after the crossing, both norms) under each optimizer of the robustness sweep."""
    for optimizer in optimizer_events["optimizer"].unique():
        runs = optimizer_events[optimizer_events["optimizer"] == optimizer]
        for crossing, norm, key in NORMS:
            order, note = order_estimate(runs, crossing)
            out.add(
                key=f"optimizer-{slug(optimizer)}-order-{key}",
                claim="The order holds under other optimizers",
                quantity=f"{optimizer}: log10(rise step / crossing step), {norm} norm",
                paper="holds",
                ours=order,
                baseline=math.nan,
                verdict=verdict_for_order(runs, crossing),
                note=f"step-0 gradient v1 {estimate(runs['grad_v1_step0'])}; {note}",
            )

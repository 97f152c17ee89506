"""The timeline chapter's claims: each of the paper's claims on the transfer, judged at the end of training and
after ``early_steps``, one function per family of claims, worded from the chapter's ``prose.md``."""

from __future__ import annotations

import math

import pandas as pd

from ...book.chapter import ClaimsBuilder, with_early
from ...book.prose import Prose
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

#: The chapter's words (``prose.md``): its claims and its computed sentences.
PROSE = Prose.of(__package__)


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
    out = ClaimsBuilder(CHAPTER.name, dataset=dataset, prose=PROSE)
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
        ours=difference(res, nores),
        baseline=math.nan,  # a difference of two measured conditions: no random level in the verdict
        verdict=verdict_for_difference(res, nores),
        fill={"reference": reference, "no_residual": no_residual, "res": res, "nores": nores},
    )
    relu_events = events[events["condition"] == reference]
    for crossing, key in NORMS:
        order = order_estimate(relu_events, crossing)
        out.add(
            key=f"order-{key}",
            template="order",
            ours=order.order,
            baseline=math.nan,
            verdict=verdict_for_order(relu_events, crossing),
            fill={"reference": reference, "norm": PROSE.choose("norm", key), **vars(order)},
        )
    aligned = _condition_estimate(events, reference, "weight_cumgrad_final")
    out.add(
        key="weight-cumgrad-alignment",
        ours=aligned,
        baseline=baseline,
        verdict=verdict_for_difference(aligned, known(baseline)),
        fill={"reference": reference},
    )


def init_scale_claims(out: ClaimsBuilder, sweep: pd.DataFrame) -> None:
    """Across the init-scale sweep (its events, ``sweep``): a smaller initialisation moves the crossing and
    the rise earlier, and the rise follows the crossing (both norms); a run that never crossed ranks last."""
    crossing_rank = sweep["crossing_step"].fillna(math.inf)  # never crossed = later than any crossing
    for key, values, left_out in (
        ("init-moves-crossing", crossing_rank, int(sweep["crossing_step"].isna().sum())),
        ("init-moves-rise", sweep["rise_step"], int(sweep["rise_step"].isna().sum())),
    ):
        correlation = rank_correlation(sweep["init_scale"], values)
        out.add(
            key=key,
            ours=correlation.rho,
            baseline=math.nan,
            verdict=verdict_for_correlation(correlation, +1),
            fill={"correlation": correlation, "left_out": left_out},
            n=correlation.n,
            unit="runs",
        )
    for crossing, key in NORMS:
        together = rank_correlation(sweep[crossing].fillna(math.inf), sweep["rise_step"])
        out.add(
            key=f"init-rise-follows-{key}",
            template="init-rise-follows",
            ours=together.rho,
            baseline=math.nan,
            verdict=verdict_for_correlation(together, +1),
            fill={
                "norm": PROSE.choose("norm", key),
                "correlation": together,
                "never_crossed": int(sweep[crossing].isna().sum()),
            },
            n=together.n,
            unit="runs",
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
        names = {"condition": condition, "reference": reference}
        out.add(
            key=f"{condition}-late-drift",
            template="late-drift",
            ours=difference(rate, relu_turn),
            baseline=math.nan,
            verdict=verdict_for_difference(rate, relu_turn, margin=1.0),
            fill={**names, "window": DRIFT_WINDOW_START, "rate": rate, "reference_rate": relu_turn},
        )
        decoupled = _condition_estimate(events, condition, "weight_cumgrad_final")
        out.add(
            key=f"{condition}-decoupled",
            template="decoupled",
            ours=difference(aligned, decoupled),
            baseline=math.nan,  # a difference of two measured conditions: no random level in the verdict
            verdict=verdict_for_difference(aligned, decoupled),
            fill={**names, "aligned": decoupled, "reference_aligned": aligned},
        )
    co = drift(conditions, "co_rotation")
    none_co = estimate(co[co["condition"] == "res-none"]["value"])
    out.add(
        key="linear-independent-rotation",
        ours=none_co,
        baseline=baseline,
        verdict=verdict_for_value(none_co, 0.0),
        fill={"window": DRIFT_WINDOW_START},
    )


def optimizer_order_claims(out: ClaimsBuilder, optimizer_events: pd.DataFrame) -> None:
    """The order (rise after the crossing, both norms) under each optimizer of the robustness sweep."""
    for optimizer in optimizer_events["optimizer"].unique():
        runs = optimizer_events[optimizer_events["optimizer"] == optimizer]
        for crossing, key in NORMS:
            order = order_estimate(runs, crossing)
            out.add(
                key=f"optimizer-{slug(optimizer)}-order-{key}",
                template="optimizer-order",
                ours=order.order,
                baseline=math.nan,
                verdict=verdict_for_order(runs, crossing),
                fill={
                    "optimizer": optimizer,
                    "norm": PROSE.choose("norm", key),
                    "gradient": estimate(runs["grad_v1_step0"]),
                    **vars(order),
                },
            )

"""Does the function stand still while the layers move? The logits' function-preserving motion, and the
spectral gap and top subspaces beside the turn rate of v1."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ... import instability, metrics, recorder
from ...statistics import (
    Estimate,
    Fall,
    RankCorrelation,
    at_final_step,
    change_over_last_per_run,
    estimate,
    fall_from_peak,
    per_run,
    rank_correlation,
    turn_rates,
    verdict_for_correlation,
    verdict_for_difference,
)
from ...tables import RUN_KEYS, select
from .comparison import weight_v1, weight_v1_fall
from .runs import Results, finite_runs, recorded


def second_half_mean(table: pd.DataFrame, metric: str) -> pd.Series:
    """Per seed, the mean over the snapshots after half of the run's last step of a layer-mean metric."""
    frame = finite_runs(per_run(table, metric), table)
    last = frame.groupby(RUN_KEYS, observed=True)["step"].transform("max")
    return frame[frame["step"] > last / 2].groupby("seed")["value"].mean()


#: Function-preserving motion (drift along flat directions moves the W_l and leaves the function alone): per run
#: R = (mean over the second half's snapshots of the layer-mean ``step_change``) / (the same mean of ``logit_change``).
#: The rule, fixed before any run recorded the motion: res-none's log2 R exceeds res-relu's by more than this margin,
#: a factor of two, and two pooled seed sds (:func:`geocont.statistics.verdict_for_difference` with this margin).
#: The test reads the seeds whose training-set loss did not rise (:func:`loss_rose_seeds`): a run whose loss rises
#: moves its function with it, and its R measures the loss event, not the motion.
MOTION_LOG2_MARGIN = 1.0


def loss_rose_seeds(table: pd.DataFrame) -> list[int]:
    """The seeds in ``table`` (one condition) whose training-set loss ends above
    :data:`geocont.instability.LOSS_RISE_FACTOR` x its minimum over training and is not memorised there (the book's
    rule for a loss that "rose again", :class:`geocont.instability.LossCourse`, read run by run)."""
    if not recorded(table, "train_set_loss"):
        return []
    loss = per_run(table, "train_set_loss").groupby("seed")["value"].agg(["min", "last"])
    rose = instability.loss_rose(loss["last"], loss["min"])
    return sorted(int(seed) for seed in loss.index[rose])


@dataclass(frozen=True)
class Motion:
    """One condition's motion over the second half of training (headline dataset, mean ± sd over the seeds whose
    loss did not rise): the layer-mean relative weight change per snapshot (``weights``), the logits'
    (``function``), log2 of their ratio R, the end-to-end map's (``product``, res-none only; None elsewhere), and the
    test loss's change (end minus half). ``left_out``: the seeds whose loss rose (:func:`loss_rose_seeds`);
    ``all_seeds_log2_ratio``: log2 R over every seed."""

    condition: str
    weights: Estimate
    function: Estimate
    log2_ratio: Estimate
    product: Estimate | None
    test_loss_change: Estimate
    left_out: tuple[int, ...] = ()
    all_seeds_log2_ratio: Estimate | None = None


@dataclass(frozen=True)
class FunctionPreservingMotion:
    """res-none's and res-relu's :class:`Motion`, and the verdict of :data:`MOTION_LOG2_MARGIN`'s rule."""

    none: Motion
    relu: Motion
    verdict: str


def motion(table: pd.DataFrame, condition: str) -> Motion:
    """:class:`Motion` of ``condition``'s runs in ``table``, the seeds whose loss rose left out."""
    runs = table[table["condition"] == condition]
    all_ratio = _log2_motion_ratio(runs)
    left_out = loss_rose_seeds(runs)
    runs = runs[~runs["seed"].isin(left_out)]
    weights, function = second_half_mean(runs, "step_change"), second_half_mean(runs, "logit_change")
    product = (
        estimate(second_half_mean(runs, "product_change"))
        if condition == "res-none" and recorded(runs, "product_change")
        else None
    )
    loss_change = (
        change_over_last_per_run(finite_runs(per_run(runs, "test_loss"), runs), fraction=0.5)["value"]
        if recorded(runs, "test_loss")
        else pd.Series(dtype=float)
    )
    return Motion(
        condition,
        estimate(weights),
        estimate(function),
        estimate(_log2_motion_ratio(runs)),
        product,
        estimate(loss_change),
        left_out=tuple(left_out),
        all_seeds_log2_ratio=estimate(all_ratio),
    )


def _log2_motion_ratio(runs: pd.DataFrame) -> pd.Series:
    """Per seed, log2 R (:data:`MOTION_LOG2_MARGIN`)."""
    weights, function = second_half_mean(runs, "step_change"), second_half_mean(runs, "logit_change")
    return np.log2(weights / function).replace([np.inf, -np.inf], np.nan)


def function_preserving_motion(results: Results) -> FunctionPreservingMotion | None:
    """The motion test on the headline comparison (None where its runs did not record the motion metrics)."""
    table = results.comparison[results.settings.headline]
    if not recorded(table, "step_change", "logit_change"):
        return None
    none, relu = motion(table, "res-none"), motion(table, "res-relu")
    return FunctionPreservingMotion(
        none, relu, verdict_for_difference(none.log2_ratio, relu.log2_ratio, margin=MOTION_LOG2_MARGIN)
    )


#: The sizes k of the top singular subspaces compared beside v1 (``subspace_cos``, direction = k): the recorder's.
SUBSPACE_KS = recorder.SUBSPACE_KS


def spectral_gaps(table: pd.DataFrame) -> pd.DataFrame:
    """Per run, layer and snapshot, a layer's spectral gap sigma1 / sigma2 (column ``value``)."""
    keys = RUN_KEYS + ["step", "layer"]
    s1 = select(table, "sigma1", "", 1).set_index(keys)["value"]
    s2 = select(table, "sigma2", "", 2).set_index(keys)["value"]
    return (s1 / s2).rename("value").dropna().reset_index()


def gap_per_run(table: pd.DataFrame) -> pd.DataFrame:
    """Per run and snapshot, the median over layers of the spectral gap sigma1 / sigma2."""
    return spectral_gaps(table).groupby(RUN_KEYS + ["step"], observed=True)["value"].median().reset_index()


def gap_and_turn(table: pd.DataFrame) -> pd.DataFrame:
    """Per run, layer and snapshot interval: the rate at which the layer's v1 turned (degrees per 1,000 steps,
    :func:`geocont.statistics.turn_rates`) and its spectral gap at the interval's start (``gap``)."""
    rates = turn_rates(table).dropna(subset=["value", "previous"])
    gaps = spectral_gaps(table).rename(columns={"value": "gap", "step": "previous"})
    rates = rates.astype({"previous": int}).merge(gaps, on=RUN_KEYS + ["previous", "layer"])
    return rates[["condition", "seed", "layer", "step", "value", "gap"]].rename(columns={"value": "turn_rate"})


@dataclass(frozen=True)
class Subspace:
    """The top-``k`` singular subspaces' continuity (input space) at the end, for res-none and res-relu, with its
    random level, and res-none's fall from its peak (the book's fall rule)."""

    k: int
    baseline: float
    none: Estimate
    relu: Estimate
    none_fall: Fall


@dataclass(frozen=True)
class Spectrum:
    """What the linear net loses: v1 alone or its top subspaces. ``reading`` is "only-v1" (v1 falls and every top-k
    subspace holds: v1 is ill-defined inside a subspace that stays), "subspace-lost" (every top-k subspace falls too),
    "no-v1-fall" (res-none's v1 does not fall) or "mixed". ``gap`` is the layer-median sigma1 / sigma2 at the end per
    condition; ``turn_vs_gap``: the rank correlation over (run, layer, interval) of res-none's turn rate against its
    gap (expected negative), ``per_run``: the same per run (mean ± sd over seeds), ``relu_turn_vs_gap`` res-relu's."""

    v1_fall: Fall
    subspaces: tuple[Subspace, ...]
    reading: str
    gap: dict[str, Estimate]
    turn_vs_gap: RankCorrelation
    per_run: Estimate
    relu_turn_vs_gap: RankCorrelation
    verdict: str


#: The expected sign of the correlation of the turn rate with the gap: v1 turns more where sigma1 / sigma2 is small;
#: and the bootstrap draws of its interval (:func:`geocont.statistics.rank_correlation`'s default).
GAP_TURN_SIGN = -1
GAP_TURN_DRAWS = 2000


def _per_run_rank_correlation(frame: pd.DataFrame) -> Estimate:
    rhos = frame.groupby("seed").apply(
        lambda run: run["turn_rate"].corr(run["gap"], method="spearman"), include_groups=False
    )
    return estimate(rhos)


def spectrum(results: Results) -> Spectrum | None:
    """The spectrum finding on the headline comparison (None where its runs did not record sigma2 and subspace_cos)."""
    table = results.comparison[results.settings.headline]
    if not recorded(table, "sigma1", "sigma2", "subspace_cos"):
        return None
    width = results.settings.base.width
    subspaces = tuple(
        Subspace(
            k,
            metrics.random_subspace_cos(width, k),
            weight_v1(table, "res-none", "subspace_cos", "input", k),
            weight_v1(table, "res-relu", "subspace_cos", "input", k),
            fall_from_peak(table, "subspace_cos", "input", k, condition="res-none"),
        )
        for k in SUBSPACE_KS
    )
    v1_fall = weight_v1_fall(table, "res-none")
    if not v1_fall.falls:
        reading = "no-v1-fall"
    elif all(s.none_fall.holds for s in subspaces):
        reading = "only-v1"
    elif all(s.none_fall.falls for s in subspaces):
        reading = "subspace-lost"
    else:
        reading = "mixed"
    gaps = at_final_step(finite_runs(gap_per_run(table), table))
    pairs = gap_and_turn(table)
    none, relu = pairs[pairs["condition"] == "res-none"], pairs[pairs["condition"] == "res-relu"]
    correlation = rank_correlation(none["turn_rate"], none["gap"], n_boot=GAP_TURN_DRAWS)
    return Spectrum(
        v1_fall,
        subspaces,
        reading,
        {c: estimate(gaps.loc[gaps["condition"] == c, "value"]) for c in ("res-none", "res-relu")},
        correlation,
        _per_run_rank_correlation(none),
        rank_correlation(relu["turn_rate"], relu["gap"], n_boot=GAP_TURN_DRAWS),
        verdict_for_correlation(correlation, GAP_TURN_SIGN),
    )

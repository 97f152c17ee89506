"""Condition 2 on every dataset: final weight v1 per condition, the interventions' table, every seed,
formation under SGD beside Adam, and the comparison's claims."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ... import instability, paper
from ...book.chapter import ClaimsBuilder
from ...statistics import (
    Estimate,
    Fall,
    difference,
    estimate,
    final_estimate,
    final_per_run,
    formed,
    peak_and_final,
    peaks_per_seed,
    random_level_margin,
    verdict_at_random_level,
    verdict_for_difference,
    verdict_for_value,
)
from ...tables import diverged_runs
from .runs import Results

#: Seeds' final values are called bimodal when the largest gap between consecutive sorted values
#: is at least this large, exceeds 3 x the pooled sd within the two groups it separates, and each
#: group holds at least 2 seeds (a rule stated before the seeds were run).
BIMODAL_GAP = 0.15


def weight_v1(
    table: pd.DataFrame, condition: str, metric: str = "weight_cos", space: str = "input", direction: int = 1
) -> Estimate:
    """``condition``'s final value of a layer-mean metric (weight v1 by default): mean ± sd over its
    finite seeds, diverged seeds counted (:func:`geocont.statistics.final_estimate`)."""
    return final_estimate(table, metric, space, direction, condition=condition)


def weight_v1_fall(table: pd.DataFrame, condition: str) -> Fall:
    """``condition``'s weight v1 from its peak to its end (the book's fall rule, :class:`geocont.statistics.Fall`)."""
    return Fall(*peak_and_final(table, "weight_cos", "input", 1, condition=condition))


def comparison_rows(results: Results) -> pd.DataFrame:
    """Per dataset and condition, as numbers: weight v1 final / peak (mean, sd) and whether it falls (the fall
    rule), gradient v1 final, the final trace loss, test accuracy, runs with instability events, events,
    memorised and diverged runs."""
    rows = []
    for dataset, table in results.comparison.items():
        summaries = instability.run_summary(table)
        for condition in results.settings.conditions:
            one = table[table["condition"] == condition]
            mine = summaries[summaries["condition"] == condition]
            fall = weight_v1_fall(one, condition)
            gradient = weight_v1(one, condition, "grad_cos")
            rows.append(
                dict(
                    dataset=dataset,
                    condition=condition,
                    seeds=one["seed"].nunique(),
                    diverged=len(diverged_runs(one)),
                    v1_final=fall.final.mean,
                    v1_final_sd=fall.final.std,
                    v1_peak=fall.peak.mean,
                    v1_peak_sd=fall.peak.std,
                    falls=fall.falls,
                    gradient_v1=gradient.mean,
                    gradient_v1_sd=gradient.std,
                    train_loss=float(mine["final_loss"].mean()),
                    test_acc=weight_v1(one, condition, "test_acc", "", 0).mean,
                    runs_with_events=int((mine["events"] > 0).sum()),
                    events=int(mine["events"].sum()),
                    memorised_runs=int(mine["memorised_step"].notna().sum()),
                )
            )
    return pd.DataFrame(rows)


def intervention_rows(results: Results) -> pd.DataFrame:
    """Per intervention ("adam" = none) and condition, as numbers: weight v1 final and peak, its fall (and the
    fall rule's ``falls`` / ``holds``), its fall per 1,000 steps after the peak, instability events, the
    stable-window drift rate (degrees per 1,000 steps), final trace loss and test accuracy (means and sds
    over seeds)."""
    rows = []
    for name, table in results.interventions.items():
        summaries = instability.run_summary(table)
        summaries["fall_rate"] = instability.fall_rate_after_peak(summaries)
        events = instability.instability_events(table)
        drift = instability.stable_windows_turn_rate(table, events)
        for condition in ("res-none", "res-relu"):
            mine = summaries[summaries["condition"] == condition]
            fall = weight_v1_fall(table, condition)
            rate = estimate(drift.loc[drift["condition"] == condition, "turn_rate"])
            fall_rate = estimate(mine["fall_rate"])
            rows.append(
                dict(
                    intervention=name,
                    condition=condition,
                    seeds=len(mine),
                    v1_final=fall.final.mean,
                    v1_final_sd=fall.final.std,
                    v1_peak=fall.peak.mean,
                    v1_peak_sd=fall.peak.std,
                    fall=fall.amount,
                    falls=fall.falls,
                    holds=fall.holds,
                    fall_per_1000=fall_rate.mean,
                    fall_per_1000_sd=fall_rate.std,
                    runs_with_events=int((mine["events"] > 0).sum()),
                    events=int(mine["events"].sum()),
                    drift_rate=rate.mean,
                    drift_rate_sd=rate.std,
                    train_loss=float(mine["final_loss"].mean()),
                    test_acc=weight_v1(table, condition, "test_acc", "", 0).mean,
                )
            )
    return pd.DataFrame(rows)


def seed_groups(results: Results) -> list[tuple[str, str, pd.DataFrame]]:
    """The runs of every seed on the headline dataset, as (condition, optimizer, its runs): the linear net
    and the baseline under Adam, and under SGD when some SGD run trained."""
    headline = results.comparison[results.settings.headline]
    groups = [("res-none", "adam", results.linear_seeds), ("res-relu", "adam", headline)]
    if not results.sgd.empty:
        groups += [("res-none", "sgd", results.sgd), ("res-relu", "sgd", results.sgd)]
    return [(condition, optimizer, table[table["condition"] == condition]) for condition, optimizer, table in groups]


def seed_values(results: Results) -> pd.DataFrame:
    """Every seed's final weight v1 on the headline dataset: the linear net and the baseline under Adam
    and under SGD (column ``optimizer``); diverged seeds are rows with ``diverged`` True and no value."""
    rows = []
    for condition, optimizer, table in seed_groups(results):
        finals = final_per_run(table, "weight_cos", "input", 1)
        rows += [
            dict(condition=condition, optimizer=optimizer, seed=int(r.seed), value=float(r.value), diverged=False)
            for r in finals.itertuples()
        ]
        rows += [
            dict(condition=condition, optimizer=optimizer, seed=int(r.seed), value=math.nan, diverged=True)
            for r in diverged_runs(table).itertuples()
        ]
    return (
        pd.DataFrame(rows)
        .drop_duplicates(["condition", "optimizer", "seed"])
        .sort_values(["condition", "optimizer", "seed"], ignore_index=True)
    )


def formation_rows(results: Results) -> pd.DataFrame:
    """Whether continuity formed at all, per condition and optimizer on the headline dataset: every finite
    seed's peak of weight v1 (lowest, highest, mean, sd), and ``formed`` (the formation rule,
    :func:`geocont.statistics.formed`)."""
    rows = []
    for condition, optimizer, table in seed_groups(results):
        peaks = peaks_per_seed(table, "weight_cos", "input", 1, condition=condition)
        if not peaks.empty:
            peak = estimate(peaks)
            rows.append(
                dict(
                    condition=condition,
                    optimizer=optimizer,
                    seeds=len(peaks),
                    peak_min=float(peaks.min()),
                    peak_max=float(peaks.max()),
                    peak_mean=peak.mean,
                    peak_sd=peak.std,
                    formed=formed(peak, results.baseline),
                )
            )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Modality:
    """Whether one group of seeds' final values splits into two clusters (:data:`BIMODAL_GAP`)."""

    bimodal: bool
    gap: float
    low: tuple[float, ...]
    high: tuple[float, ...]


def modality(values: pd.Series) -> Modality:
    ordered = sorted(float(v) for v in values.dropna())
    if len(ordered) < 4:
        return Modality(False, math.nan, tuple(ordered), ())
    gaps = [b - a for a, b in zip(ordered, ordered[1:])]
    cut = max(range(len(gaps)), key=gaps.__getitem__)
    low, high = ordered[: cut + 1], ordered[cut + 1 :]
    within = math.sqrt(
        (sum((v - sum(low) / len(low)) ** 2 for v in low) + sum((v - sum(high) / len(high)) ** 2 for v in high))
        / max(1, len(ordered) - 2)
    )
    bimodal = len(low) >= 2 and len(high) >= 2 and gaps[cut] >= BIMODAL_GAP and gaps[cut] > 3 * within
    return Modality(bimodal, gaps[cut], tuple(low), tuple(high))


def half_verdicts(results: Results) -> pd.DataFrame:
    """The linear net's weight-v1 claims judged on two disjoint halves of its seeds (even and odd
    seeds), for each optimizer: the verdict is stable when both halves give the one of all seeds."""
    values = seed_values(results)
    rows = []
    for optimizer, group in values.groupby("optimizer"):
        linear = group[(group["condition"] == "res-none") & ~group["diverged"]]
        relu = estimate(group.loc[(group["condition"] == "res-relu") & ~group["diverged"], "value"])
        for half, seeds in (
            ("all", linear),
            ("even seeds", linear[linear["seed"] % 2 == 0]),
            ("odd seeds", linear[linear["seed"] % 2 == 1]),
        ):
            none = estimate(seeds["value"])
            rows.append(
                dict(
                    optimizer=optimizer,
                    seeds=half,
                    n=none.n,
                    mean=none.mean,
                    sd=none.std,
                    low_verdict=verdict_for_value(none, PAPER_LINEAR_WEIGHT),
                    relu_above_verdict=verdict_for_difference(relu, none),
                )
            )
    return pd.DataFrame(rows)


#: The paper's numbers for Condition 2 (:mod:`geocont.paper`).
PAPER_LINEAR_WEIGHT = paper.LINEAR_WEIGHT_V1
PAPER_LINEAR_GRADIENT = paper.LINEAR_GRADIENT_V1


def comparison_claims(results: Results, builder: ClaimsBuilder) -> None:
    """The Condition-2 claims on every dataset, into ``builder`` (whose dataset, the headline one, is each claim's
    verdict of record); on the headline dataset they are the book's headline claims (``headline=True``)."""
    for dataset, table in results.comparison.items():
        where = dict(headline=dataset == results.settings.headline, dataset=dataset)
        linear_claims(results, table, builder, where)
        if "res-radial-tau" in results.settings.conditions:
            radial_claims(results, table, builder, where)
        if "nores-relu" in results.settings.conditions:
            no_residual_claims(results, table, builder, where)
        fall = weight_v1_fall(table, "res-none")
        builder.add(
            key="linear-rise-then-fall",
            ours=fall.drop,
            baseline=results.baseline,
            verdict=fall.verdict,
            fill={"peak": fall.peak, "final": fall.final},
            **where,
        )


def linear_claims(results: Results, table: pd.DataFrame, builder: ClaimsBuilder, where: dict[str, Any]) -> None:
    """The linear net's weight and gradient continuity, and the element-wise baseline above it, on one dataset."""
    none, relu = weight_v1(table, "res-none"), weight_v1(table, "res-relu")
    gradient = weight_v1(table, "res-none", "grad_cos")
    builder.add(
        key="linear-weight-v1",
        ours=none,
        baseline=results.baseline,
        verdict=verdict_for_value(none, PAPER_LINEAR_WEIGHT),
        fill={"paper": PAPER_LINEAR_WEIGHT},
        **where,
    )
    builder.add(
        key="linear-gradient-v1",
        ours=gradient,
        baseline=results.baseline,
        verdict=verdict_for_value(gradient, PAPER_LINEAR_GRADIENT),
        fill={"paper": PAPER_LINEAR_GRADIENT},
        **where,
    )
    builder.add(
        key="relu-above-linear",
        ours=difference(relu, none),
        baseline=math.nan,  # a difference of two measured conditions: no random level in the verdict
        verdict=verdict_for_difference(relu, none),
        fill={"relu": relu, "none": none},
        **where,
    )


def radial_claims(results: Results, table: pd.DataFrame, builder: ClaimsBuilder, where: dict[str, Any]) -> None:
    """The rotation-equivariant nonlinearity: low, and below the element-wise baseline, on one dataset."""
    radial, relu = weight_v1(table, "res-radial-tau"), weight_v1(table, "res-relu")
    builder.add(
        key="radial-tau-low",
        ours=radial,
        baseline=results.baseline,
        verdict=verdict_for_value(radial, paper.RADIAL_WEIGHT_V1),
        fill={"paper": paper.RADIAL_WEIGHT_V1},
        **where,
    )
    builder.add(
        key="relu-above-radial-tau",
        ours=difference(relu, radial),
        baseline=math.nan,  # a difference of two measured conditions: no random level in the verdict
        verdict=verdict_for_difference(relu, radial),
        fill={"relu": relu, "radial": radial},
        **where,
    )


def no_residual_claims(results: Results, table: pd.DataFrame, builder: ClaimsBuilder, where: dict[str, Any]) -> None:
    """Without residuals: gradient and weight continuity at the random level, on one dataset."""
    margin = random_level_margin(results.settings.base.width)
    gradient, weight = weight_v1(table, "nores-relu", "grad_cos"), weight_v1(table, "nores-relu")
    builder.add(
        key="nores-gradient-v1",
        ours=gradient,
        baseline=results.baseline,
        verdict=verdict_at_random_level(gradient, results.baseline, margin),
        fill={"paper": paper.NORES_GRADIENT},
        **where,
    )
    builder.add(
        key="nores-weight-v1",
        ours=weight,
        baseline=results.baseline,
        verdict=verdict_at_random_level(weight, results.baseline, margin),
        fill={"gradient": gradient},
        **where,
    )


@dataclass(frozen=True)
class Formation:
    """Whether continuity formed at all under SGD, beside Adam (what the SGD rows can say).

    ``linear``: "no-sgd" (no SGD run trained), "all-diverged", "never-formed" or "formed"
    (:func:`geocont.statistics.formed`); ``baseline``: how res-relu's peaks compare across the optimizers,
    "not-comparable", "lower-under-sgd" / "higher-under-sgd" (a difference by the book's rule) or "alike".
    """

    lr: float | None
    rows: pd.DataFrame
    linear: str
    baseline: str
    relu_gap: float


def formation(results: Results) -> Formation:
    """The :class:`Formation` finding from :func:`formation_rows`."""
    rows = formation_rows(results)
    if rows.empty or "sgd" not in set(rows["optimizer"]):
        return Formation(results.sgd_choice.lr, rows, "no-sgd", "not-comparable", math.nan)
    by = rows.set_index(["condition", "optimizer"])

    def peak(condition: str, optimizer: str) -> Estimate | None:
        if (condition, optimizer) not in by.index:
            return None
        one = by.loc[(condition, optimizer)]
        return Estimate(one.peak_mean, one.peak_sd, int(one.seeds))

    if ("res-none", "sgd") not in by.index:
        linear = "all-diverged"
    else:
        linear = "formed" if by.loc[("res-none", "sgd"), "formed"] else "never-formed"
    adam, sgd = peak("res-relu", "adam"), peak("res-relu", "sgd")
    if adam is None or sgd is None:
        return Formation(results.sgd_choice.lr, rows, linear, "not-comparable", math.nan)
    if verdict_for_difference(adam, sgd) == "reproduced":
        baseline = "lower-under-sgd"
    elif verdict_for_difference(sgd, adam) == "reproduced":
        baseline = "higher-under-sgd"
    else:
        baseline = "alike"
    return Formation(results.sgd_choice.lr, rows, linear, baseline, adam.mean - sgd.mean)


@dataclass(frozen=True)
class SeedGroup:
    """One group of seeds' final weight v1 (headline dataset): its estimate, diverged seeds, and its shape."""

    condition: str
    optimizer: str
    value: Estimate
    diverged: int
    shape: Modality


def seed_groups_found(results: Results) -> list[SeedGroup]:
    """Every group of :func:`seed_values`, with whether it is bimodal (:func:`modality`)."""
    out = []
    for (condition, optimizer), group in seed_values(results).groupby(["condition", "optimizer"]):
        finite = group.loc[~group["diverged"], "value"]
        out.append(SeedGroup(condition, optimizer, estimate(finite), int(group["diverged"].sum()), modality(finite)))
    return out


def halves_agree(results: Results) -> dict[str, bool]:
    """Per optimizer: whether both halves of the linear net's seeds give the verdicts of all its seeds."""
    return {
        optimizer: group["low_verdict"].nunique() == 1 and group["relu_above_verdict"].nunique() == 1
        for optimizer, group in half_verdicts(results).groupby("optimizer")
    }

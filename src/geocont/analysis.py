"""From run tables to the numbers a chapter reports: per-run means, finals, verdicts.

Aggregation is always two-stage: first the mean over a run's layer pairs (one number per
run and step), then the mean and standard deviation over seeds. The spread reported
everywhere is therefore the seed-to-seed spread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from .tables import RUN_KEYS, claim_row, select


def per_run(table: pd.DataFrame, metric: str, space: str = "", direction: int | None = None) -> pd.DataFrame:
    """Mean over layers (pairs) of one metric: one row per run x step, column ``value``."""
    rows = select(table, metric, space, direction)
    return rows.groupby(RUN_KEYS + ["step"], observed=True)["value"].mean().reset_index()


def at_final_step(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``frame`` at each run's last step."""
    last = frame.groupby(RUN_KEYS, observed=True)["step"].transform("max")
    return frame[frame["step"] == last]


@dataclass(frozen=True)
class Estimate:
    """Mean and seed-to-seed standard deviation of one quantity."""

    mean: float
    std: float
    n: int

    def __str__(self) -> str:
        if math.isnan(self.mean):
            return "n/a"
        return f"{self.mean:.2f} ± {self.std:.2f}" if self.n > 1 else f"{self.mean:.2f} (1 seed)"


def estimate(values: pd.Series) -> Estimate:
    values = values.dropna()
    n = len(values)
    if n == 0:
        return Estimate(math.nan, math.nan, 0)
    return Estimate(float(values.mean()), float(values.std()) if n > 1 else math.nan, n)


def final_estimate(
    table: pd.DataFrame, metric: str, space: str = "", direction: int | None = None, **equal
) -> Estimate:
    """Mean ± sd over seeds of a metric's layer-mean at the last step, for one condition."""
    frame = at_final_step(per_run(table, metric, space, direction))
    for column, value in equal.items():
        frame = frame[frame[column] == value]
    return estimate(frame["value"])


def estimate_at_step(
    table: pd.DataFrame, step: int, metric: str, space: str = "", direction: int | None = None, **equal
) -> Estimate:
    """Mean ± sd over seeds of a metric's layer-mean at one step (e.g. 0, before any update)."""
    frame = per_run(table, metric, space, direction)
    frame = frame[frame["step"] == step]
    for column, value in equal.items():
        frame = frame[frame[column] == value]
    return estimate(frame["value"])


def peak_and_final(table: pd.DataFrame, metric: str, space: str, direction: int, **equal) -> tuple[Estimate, Estimate]:
    """Per seed, the maximum over training and the final value of a layer-mean metric."""
    frame = per_run(table, metric, space, direction)
    for column, value in equal.items():
        frame = frame[frame[column] == value]
    peaks = frame.groupby("seed")["value"].max()
    finals = at_final_step(frame).set_index("seed")["value"]
    return estimate(peaks), estimate(finals)


def final_direction_profile(table: pd.DataFrame, metric: str = "weight_cos", space: str = "input") -> pd.DataFrame:
    """Continuity of the i-th singular direction at each run's last step, layer-pair mean.

    One row per run x direction (column ``direction``, 1 = leading), column ``value``.
    """
    rows = select(table, metric, space)
    last = rows.groupby(RUN_KEYS, observed=True)["step"].transform("max")
    rows = rows[rows["step"] == last]
    return rows.groupby(RUN_KEYS + ["direction"], observed=True)["value"].mean().reset_index()


def concentration(profile: pd.DataFrame) -> pd.DataFrame:
    """Per run: ``lead`` (direction 1), ``rest`` (mean of directions 2..k) and ``lead - rest``."""
    lead = profile[profile["direction"] == 1].set_index(RUN_KEYS)["value"]
    rest = profile[profile["direction"] > 1].groupby(RUN_KEYS, observed=True)["value"].mean()
    frame = pd.DataFrame({"lead": lead, "rest": rest})
    frame["concentration"] = frame["lead"] - frame["rest"]
    return frame.reset_index()


def final_summary(table: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """The chapter's summary table: final values (mean ± sd over seeds) per group."""
    by = by or ["condition"]
    quantities = {
        "weight v1": ("weight_cos", "input", 1),
        "weight u1": ("weight_cos", "output", 1),
        "gradient v1": ("grad_cos", "input", 1),
        "gradient u1": ("grad_cos", "output", 1),
        "sigma²-align (in)": ("weight_align", "input", 0),
        "test accuracy": ("test_acc", "", 0),
    }
    out = {}
    for label, (metric, space, direction) in quantities.items():
        frame = at_final_step(per_run(table, metric, space, direction))
        out[label] = frame.groupby(by, observed=True)["value"].apply(lambda v: str(estimate(v)))
    return pd.DataFrame(out)


def verdict_for_value(ours: Estimate, paper: float, tolerance: float = 0.10) -> str:
    """"reproduced" within ``tolerance`` of the paper's number, "partly" within 2.5x that."""
    if math.isnan(ours.mean):
        return "not tested"
    gap = abs(ours.mean - paper)
    if gap <= tolerance:
        return "reproduced"
    return "partly reproduced" if gap <= 2.5 * tolerance else "not reproduced"


def _pooled_sd(*estimates: Estimate) -> float:
    """Root-mean-square seed sd of several estimates (0 for single-seed ones)."""
    return math.sqrt(sum((e.std if e.n > 1 and not math.isnan(e.std) else 0.0) ** 2 for e in estimates) / len(estimates))


def verdict_for_difference(high: Estimate, low: Estimate, margin: float = 0.10) -> str:
    """Does ``high`` exceed ``low``?

    "reproduced" if the difference exceeds both ``margin`` and two pooled seed sds;
    "partly reproduced" if it exceeds half the margin and one pooled sd (right sign, small
    or noisy); otherwise "not reproduced".
    """
    if math.isnan(high.mean) or math.isnan(low.mean):
        return "not tested"
    pooled = _pooled_sd(high, low)
    difference = high.mean - low.mean
    if difference > max(margin, 2 * pooled):
        return "reproduced"
    return "partly reproduced" if difference > max(margin / 2, pooled) else "not reproduced"


def verdict_for_interval(low: float, high: float, expected_sign: int) -> str:
    """Does a 95% interval ``[low, high]`` show the expected sign (+1 or -1)?

    "reproduced" if it excludes 0 on the expected side, "not reproduced" if it excludes 0
    on the other side, "inconclusive" if it contains 0.
    """
    if expected_sign not in (1, -1):
        raise ValueError(f"expected_sign must be +1 or -1, got {expected_sign}")
    if math.isnan(low) or math.isnan(high):
        return "not tested"
    low, high = sorted((expected_sign * low, expected_sign * high))
    if low > 0:
        return "reproduced"
    return "not reproduced" if high < 0 else "inconclusive"


def mlp_condition_claims(table: pd.DataFrame, robustness: pd.DataFrame, baseline: float) -> pd.DataFrame:
    """Claims table of the "Conditions 1 and 2" chapter, computed from its run tables."""
    chapter = "mlp_conditions"
    base_optimizer = table["optimizer"].iloc[0]

    def final(metric: str, space: str, condition: str, frame: pd.DataFrame = table, optimizer: str | None = None) -> Estimate:
        return final_estimate(frame, metric, space, 1, condition=condition, optimizer=optimizer or base_optimizer)

    rows = []
    for space, vector in (("input", "v1"), ("output", "u1")):
        nores_grad = final("grad_cos", space, "nores-relu")
        rows.append(claim_row(chapter, "Without residuals, gradient continuity falls to random level",
                              f"NoRes gradient {vector} |cos|", "~0.05", nores_grad.mean, nores_grad.std,
                              nores_grad.n, baseline, verdict_for_value(nores_grad, 0.05)))
    nores_weight = final("weight_cos", "input", "nores-relu")
    rows.append(claim_row(chapter, "Without residuals, weight continuity never forms",
                          "NoRes weight v1 |cos|", "random level", nores_weight.mean, nores_weight.std,
                          nores_weight.n, baseline, verdict_for_value(nores_weight, baseline)))
    none_grad = final("grad_cos", "input", "res-none")
    rows.append(claim_row(chapter, "A linear residual net has high gradient continuity",
                          "Res+None gradient v1 |cos|", "0.93", none_grad.mean, none_grad.std, none_grad.n,
                          baseline, verdict_for_value(none_grad, 0.93)))
    none_weight = final("weight_cos", "input", "res-none")
    rows.append(claim_row(chapter, "... but low weight continuity (rotation drift)",
                          "Res+None weight v1 |cos|", "0.22", none_weight.mean, none_weight.std, none_weight.n,
                          baseline, verdict_for_value(none_weight, 0.22)))
    radial_weight = final("weight_cos", "input", "res-radial")
    rows.append(claim_row(chapter, "A rotation-equivariant nonlinearity fails too",
                          "Res+Radial weight v1 |cos|", "~0.22", radial_weight.mean, radial_weight.std,
                          radial_weight.n, baseline, verdict_for_value(radial_weight, 0.22)))
    for condition in ("res-relu", "res-gelu", "res-silu"):
        if condition not in set(table["condition"]):
            continue
        ours = final("weight_cos", "input", condition)
        rows.append(claim_row(chapter, "Element-wise activations keep weight continuity",
                              f"{condition} minus Res+None weight v1", "higher (no number)",
                              ours.mean - none_weight.mean, ours.std, ours.n, baseline,
                              verdict_for_difference(ours, none_weight),
                              note=f"{condition} {ours}; res-none {none_weight}"))
    for condition in ("res-none", "res-radial"):
        peak, last = peak_and_final(table, "weight_cos", "input", 1, condition=condition, optimizer=base_optimizer)
        rows.append(claim_row(chapter, "Weight continuity first forms, then is lost to rotation drift",
                              f"{condition} weight v1: peak minus final", "rise, then collapse",
                              peak.mean - last.mean, math.nan, peak.n, baseline,
                              verdict_for_difference(peak, last), note=f"peak {peak}, final {last}"))
    optimizers = list(robustness["optimizer"].unique())
    random_level = Estimate(baseline, 0.0, 1)
    above, gaps, details = [], [], []
    for optimizer in optimizers:
        relu = final("weight_cos", "input", "res-relu", robustness, optimizer)
        none = final("weight_cos", "input", "res-none", robustness, optimizer)
        above.append(verdict_for_difference(relu, random_level))
        gaps.append(verdict_for_difference(relu, none))
        details.append(f"{optimizer}: res-relu {relu}, res-none {none}")
    rank = ["not tested", "not reproduced", "inconclusive", "partly reproduced", "reproduced"].index
    relu_min = min(final("weight_cos", "input", "res-relu", robustness, o).mean for o in optimizers)
    rows.append(claim_row(chapter, "Continuity is not an optimizer artefact (Adam, Adam beta2=0, SGD)",
                          "lowest res-relu weight v1 over optimizers", "present under every optimizer",
                          relu_min, math.nan, len(optimizers), baseline, min(above, key=rank),
                          note="; ".join(details)))
    gap_min = min(final("weight_cos", "input", "res-relu", robustness, o).mean
                  - final("weight_cos", "input", "res-none", robustness, o).mean for o in optimizers)
    rows.append(claim_row(chapter, "Symmetry breaking matters under every optimizer",
                          "smallest (res-relu minus res-none) weight v1 over optimizers", "res-relu higher",
                          gap_min, math.nan, len(optimizers), baseline, min(gaps, key=rank),
                          note="; ".join(details)))
    return pd.DataFrame(rows)


def closer_to(value: Estimate, target: Estimate, other: Estimate, margin: float = 0.10) -> str:
    """Is ``value`` nearer ``target`` than ``other``?

    "reproduced" if it is nearer ``target`` by more than the pooled seed sd of the three
    and ``target`` and ``other`` differ by at least ``margin``; "not reproduced" if it is
    nearer ``other`` by more than that sd; "inconclusive" in between.
    """
    if any(math.isnan(e.mean) for e in (value, target, other)):
        return "not tested"
    advantage = abs(value.mean - other.mean) - abs(value.mean - target.mean)
    pooled = _pooled_sd(value, target, other)
    if advantage > pooled and abs(target.mean - other.mean) > margin:
        return "reproduced"
    return "not reproduced" if advantage < -pooled else "inconclusive"


def norm_chapter_claims(table: pd.DataFrame, baseline: float) -> pd.DataFrame:
    """Claims table of the "activation versus LayerNorm" chapter, from its run table."""
    chapter = "activation_vs_norm"
    shape = concentration(final_direction_profile(table, "weight_cos", "input"))

    def per_condition(column: str, condition: str) -> Estimate:
        return estimate(shape.loc[shape["condition"] == condition, column])

    def align(condition: str) -> Estimate:
        return final_estimate(table, "weight_align", "input", 0, condition=condition)

    k = int(table.loc[table["metric"] == "weight_cos", "direction"].max())
    relu, ln, both = (per_condition("concentration", c) for c in ("res-relu", "res-ln", "res-ln-relu"))
    rows = [
        claim_row(chapter, "The activation concentrates continuity in the leading direction",
                  f"v1 minus mean of v2..v{k}: res-relu minus res-ln", "res-relu more concentrated",
                  relu.mean - ln.mean, math.nan, relu.n, baseline, verdict_for_difference(relu, ln),
                  note=f"res-relu {relu}, res-ln {ln}"),
    ]
    ln_rest, relu_rest = per_condition("rest", "res-ln"), per_condition("rest", "res-relu")
    rows.append(claim_row(chapter, "LayerNorm spreads continuity over several directions",
                          f"mean |cos| of v2..v{k}: res-ln minus res-relu", "res-ln higher",
                          ln_rest.mean - relu_rest.mean, math.nan, ln_rest.n, baseline,
                          verdict_for_difference(ln_rest, relu_rest),
                          note=f"res-ln {ln_rest}, res-relu {relu_rest}"))
    ln_align, none_align = align("res-ln"), align("res-none")
    rows.append(claim_row(chapter, "LayerNorm breaks the symmetry: whole-spectrum alignment above the linear control",
                          "sigma^2-alignment (input): res-ln minus res-none", "res-ln higher",
                          ln_align.mean - none_align.mean, math.nan, ln_align.n, 0.0,
                          verdict_for_difference(ln_align, none_align),
                          note=f"res-ln {ln_align}, res-none {none_align}"))
    rows.append(claim_row(chapter, "With both, the activation's v1-concentrated mode dominates",
                          "concentration of res-ln-relu: nearer res-relu than res-ln", "nearer res-relu",
                          both.mean, both.std, both.n, baseline, closer_to(both, relu, ln),
                          note=f"res-ln-relu {both}, res-relu {relu}, res-ln {ln}"))
    if "res-rms" in set(table["condition"]):
        rms_align = align("res-rms")
        rows.append(claim_row(chapter, "(ours) Centring, not rescaling, is what breaks the symmetry",
                              "sigma^2-alignment (input): res-ln minus res-rms", "not in the paper",
                              ln_align.mean - rms_align.mean, math.nan, ln_align.n, 0.0,
                              verdict_for_difference(ln_align, rms_align),
                              note=f"res-ln {ln_align}, res-rms {rms_align}, res-none {none_align}"))
    return pd.DataFrame(rows)


#: The paper's projection-specific prediction: (projection, space, why) that should be continuous.
PROJECTION_PREDICTIONS = [
    ("q_proj", "input", "reads the residual stream, followed by the softmax"),
    ("k_proj", "input", "reads the residual stream, followed by the softmax"),
    ("gate_proj", "input", "reads the residual stream, followed by the MLP activation"),
    ("up_proj", "input", "reads the residual stream, multiplied by the activated gate"),
    ("o_proj", "output", "writes to the residual stream after attention"),
    ("down_proj", "output", "writes to the residual stream after the MLP nonlinearity"),
]


def projection_finals(table: pd.DataFrame, metric: str = "weight_cos", direction: int = 1) -> pd.DataFrame:
    """Per run, projection (``group``) and space: the layer-pair mean at the last step."""
    rows = table[(table["metric"] == metric) & (table["direction"] == direction)]
    rows = at_final_step(rows)
    return (rows.groupby(RUN_KEYS + ["group", "space"], observed=True)["value"].mean().reset_index())


def transformer_claims(table: pd.DataFrame, dims: dict[str, dict[str, int]], reference: str = "silu",
                       no_activation: str = "none", linear_attention: str = "silu, linear attention") -> pd.DataFrame:
    """Claims table of the transformer chapter, from its run table.

    ``dims`` gives each projection's input/output dimension (for the random baselines).
    """
    from .metrics import random_abs_cos

    chapter = "transformer_projections"
    finals = projection_finals(table)

    def est(variant: str, projection: str, space: str) -> Estimate:
        frame = finals[(finals["condition"] == variant) & (finals["group"] == projection) & (finals["space"] == space)]
        return estimate(frame["value"])

    def baseline(projection: str, space: str) -> Estimate:
        return Estimate(random_abs_cos(dims[projection][space]), 0.0, 1)

    rows = []
    for projection, space, why in PROJECTION_PREDICTIONS:
        ours, base = est(reference, projection, space), baseline(projection, space)
        vector = "v1" if space == "input" else "u1"
        rows.append(claim_row(chapter, f"{projection} has {space}-space continuity ({why})",
                              f"{projection} {vector} |cos| ({reference})", "high", ours.mean, ours.std, ours.n,
                              base.mean, verdict_for_difference(ours, base)))
    for space in ("input", "output"):
        v = est(reference, "v_proj", space)
        others = ["q_proj", "k_proj", "gate_proj", "up_proj"] if space == "input" else ["o_proj", "down_proj"]
        lowest = min((est(reference, p, space) for p in others), key=lambda e: e.mean)
        vector = "v1" if space == "input" else "u1"
        rows.append(claim_row(chapter, f"V has low {space}-space continuity (no adjacent nonlinearity)",
                              f"v_proj {vector} |cos| below the lowest of {', '.join(others)}", "low",
                              v.mean, v.std, v.n, random_abs_cos(dims["v_proj"][space]),
                              verdict_for_difference(lowest, v), note=f"lowest other: {lowest}"))
    variants = set(table["condition"])
    if no_activation in variants:
        for projection in ("gate_proj", "up_proj"):
            with_act, without = est(reference, projection, "input"), est(no_activation, projection, "input")
            rows.append(claim_row(chapter, f"Removing the MLP activation lowers {projection} input continuity",
                                  f"{projection} v1: {reference} minus {no_activation}", "drops",
                                  with_act.mean - without.mean, math.nan, with_act.n,
                                  random_abs_cos(dims[projection]["input"]),
                                  verdict_for_difference(with_act, without),
                                  note=f"{reference} {with_act}, {no_activation} {without}"))
    if linear_attention in variants:
        for projection in ("q_proj", "k_proj"):
            soft, lin = est(reference, projection, "input"), est(linear_attention, projection, "input")
            rows.append(claim_row(chapter, f"(ours) Without the softmax, {projection} input continuity drops",
                                  f"{projection} v1: softmax minus linear attention", "implied, not tested",
                                  soft.mean - lin.mean, math.nan, soft.n, random_abs_cos(dims[projection]["input"]),
                                  verdict_for_difference(soft, lin), note=f"softmax {soft}, linear {lin}"))
    return pd.DataFrame(rows)


# --- The gradient-to-weight transfer timeline -------------------------------------------

#: The crossing: ||W(t) - W(0)|| / ||W(0)|| (layer mean) reaches this value.
CROSSING_LEVEL = 1.0
#: The update/initial-weight ratios compared, by event column: the paper does not say which
#: norm "||Delta W|| dominates ||W(0)||" means, so both the Frobenius norm (the whole
#: matrix) and the spectral norm (its largest singular value) are tested.
CROSSINGS = {"crossing_step": "rel_update", "spectral_crossing_step": "rel_update_spectral"}
#: Metrics the timeline chapter needs in every run table (older cached runs lack them).
TIMELINE_METRICS = ("rel_update_spectral", "v1_turn", "co_rotation", "weight_cumgrad_cos")
#: Weight continuity "rises" only if it gains at least this much |cos| over training;
#: below that the rise step would time noise, and is left undefined (NaN).
MIN_RISE = 0.10


def _first_step_at_or_above(frame: pd.DataFrame, thresholds: pd.Series) -> pd.Series:
    """Per run (index = RUN_KEYS), the first snapshot step whose value reaches the run's threshold."""
    frame = frame.join(thresholds.rename("threshold"), on=RUN_KEYS)
    reached = frame[frame["value"] >= frame["threshold"]]
    first = reached.groupby(RUN_KEYS, observed=True)["step"].min()
    return first.reindex(thresholds.index).astype(float)


def transfer_events(table: pd.DataFrame, space: str = "input") -> pd.DataFrame:
    """One row per run: when the update overtakes the initial weights, and when continuity rises.

    * ``crossing_step``: first snapshot where the layer-mean ``||W(t) - W(0)||_F / ||W(0)||_F``
      reaches :data:`CROSSING_LEVEL` (NaN if it never does); ``spectral_crossing_step``: the
      same with spectral norms (NaN if the table has no ``rel_update_spectral``);
    * ``rise_step``: first snapshot where layer-mean weight v1 (``space``) continuity has
      covered half of its rise, ``initial + (final - initial) / 2``. It differs from "half
      its final value" only by the initial value (random level, about 0.05 at d = 256).
      NaN when continuity gained less than :data:`MIN_RISE`;
    * ``rel_update_at_rise``: the layer-mean relative update at the rise step;
    * the initial and final weight continuity, the step-0 gradient continuity, and the
      final weight / cumulative-gradient alignment of each layer's leading vector.

    Steps are snapshot steps, so they are resolved to the snapshot grid (log-spaced).
    """
    weight = per_run(table, "weight_cos", space, 1)
    keyed = weight.set_index(RUN_KEYS)
    initial = keyed[keyed["step"] == 0]["value"]
    final = at_final_step(weight).set_index(RUN_KEYS)["value"]
    update = per_run(table, "rel_update")
    crossing_threshold = pd.Series(CROSSING_LEVEL, index=final.index)
    grad = per_run(table, "grad_cos", space, 1)
    events = pd.DataFrame({
        column: _first_step_at_or_above(per_run(table, metric), crossing_threshold)
        for column, metric in CROSSINGS.items()
    })
    events = events.assign(**{
        "rise_step": _first_step_at_or_above(weight, initial + (final - initial) / 2),
        "weight_v1_initial": initial,
        "weight_v1_final": final,
        "grad_v1_step0": grad[grad["step"] == 0].set_index(RUN_KEYS)["value"],
        "rel_update_final": at_final_step(update).set_index(RUN_KEYS)["value"],
        "weight_cumgrad_final": at_final_step(per_run(table, "weight_cumgrad_cos", space, 1)).set_index(RUN_KEYS)["value"],
    })
    events["rise"] = final - initial
    events.loc[events["rise"] < MIN_RISE, "rise_step"] = math.nan
    at_rise = update.join(events["rise_step"], on=RUN_KEYS)
    events["rel_update_at_rise"] = at_rise[at_rise["step"] == at_rise["rise_step"]].set_index(RUN_KEYS)["value"]
    for crossing in CROSSINGS:
        events[_ratio_column(crossing)] = _log10_rise_over(events["rise_step"], events[crossing])
    return events.reset_index()


def _ratio_column(crossing: str) -> str:
    """``crossing_step`` -> ``log10_rise_over_crossing``, and likewise for the spectral one."""
    return "log10_rise_over_" + crossing.removesuffix("_step")


def _log10_rise_over(rise: pd.Series, crossing: pd.Series) -> pd.Series:
    """log10(rise / crossing) per run; -inf for a rise at step 0 or a rise without any
    crossing (it precedes the crossing without bound); NaN where there was no rise."""
    ratio = (rise / crossing).apply(lambda r: math.log10(r) if r > 0 else -math.inf)
    ratio[crossing.isna()] = -math.inf
    ratio[rise.isna()] = math.nan
    return ratio


def late_mean(table: pd.DataFrame, metric: str, space: str, direction: int = 1, fraction: float = 1 / 3) -> pd.DataFrame:
    """Per run, the layer-mean of a metric averaged over the last ``fraction`` of its snapshots
    (e.g. how far v1 still turns between snapshots late in training)."""
    frame = per_run(table, metric, space, direction)
    rank = frame.groupby(RUN_KEYS, observed=True)["step"].rank(method="first", ascending=False)
    count = frame.groupby(RUN_KEYS, observed=True)["step"].transform("count")
    late = frame[rank <= (count * fraction).clip(lower=1)]
    return late.groupby(RUN_KEYS, observed=True)["value"].mean().reset_index()


@dataclass(frozen=True)
class RankCorrelation:
    """Spearman's rho with a percentile bootstrap interval (resampling the pairs)."""

    rho: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        return f"ρ = {self.rho:.2f} [{self.low:.2f}, {self.high:.2f}] (n = {self.n})"


def rank_correlation(x: pd.Series, y: pd.Series, n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> RankCorrelation:
    """Spearman correlation of paired values (NaN pairs dropped) with a bootstrap interval."""
    import numpy as np
    from scipy.stats import spearmanr

    pairs = pd.DataFrame({"x": pd.Series(x).to_numpy(), "y": pd.Series(y).to_numpy()}).dropna()
    n = len(pairs)
    if n < 3 or pairs["x"].nunique() < 2 or pairs["y"].nunique() < 2:  # undefined for constant input
        return RankCorrelation(math.nan, math.nan, math.nan, n)
    rho = float(spearmanr(pairs["x"], pairs["y"]).statistic)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        sample = pairs.iloc[rng.integers(0, n, n)]
        if sample["x"].nunique() > 1 and sample["y"].nunique() > 1:
            draws.append(spearmanr(sample["x"], sample["y"]).statistic)
    tail = (1 - level) / 2
    low, high = (float(np.nanquantile(draws, q)) for q in (tail, 1 - tail))
    return RankCorrelation(rho, low, high, n)


def verdict_for_correlation(correlation: RankCorrelation, expected_sign: int) -> str:
    """"reproduced" if the whole interval has the expected sign, "partly" if only rho has it."""
    if math.isnan(correlation.rho):
        return "not tested"
    rho, low, high = (expected_sign * v for v in (correlation.rho, correlation.low, correlation.high))
    if min(low, high) > 0:
        return "reproduced"
    return "partly reproduced" if rho > 0 else "not reproduced"


#: The rise may precede the crossing by at most this factor (a third: 10**-0.48) and
#: still count as "after the update dominates", given the snapshot grid and the spread.
RISE_BEFORE_CROSSING_TOLERANCE_LOG10 = -0.48


def verdict_for_order(events: pd.DataFrame, crossing: str = "crossing_step") -> str:
    """Does weight continuity rise only once the update dominates (``crossing``: which
    norm, see :data:`CROSSINGS`), in every run?

    Runs whose continuity did not rise (``rise_step`` NaN) cannot tell and are left out.
    "reproduced" if in every other run the rise is no earlier than a third of the
    crossing step; "not reproduced" if in none (a run that rose but never crossed counts
    against); "partly" otherwise.
    """
    ratios = events[_ratio_column(crossing)].dropna()
    if ratios.empty:
        return "not tested"
    ok = ratios >= RISE_BEFORE_CROSSING_TOLERANCE_LOG10
    if ok.all():
        return "reproduced"
    return "not reproduced" if not ok.any() else "partly reproduced"


def _order_estimate(runs: pd.DataFrame, crossing: str = "crossing_step") -> tuple[Estimate, str]:
    """Mean ± sd of log10(rise / crossing) over runs that both rose and crossed, and a note
    on the runs left out of it."""
    ratios = runs[_ratio_column(crossing)]
    finite = ratios[ratios.apply(math.isfinite)]
    note = (f"crossing step {estimate(runs[crossing])}, rise step {estimate(runs['rise_step'])}, "
            f"‖ΔW‖/‖W(0)‖ at the rise {estimate(runs['rel_update_at_rise'])}; "
            f"{int(ratios.isna().sum())} of {len(runs)} runs without a rise, "
            f"{int((ratios == -math.inf).sum())} rose before any crossing")
    return estimate(finite), note


def timeline_claims(conditions: pd.DataFrame, init_sweep: pd.DataFrame, optimizers: pd.DataFrame,
                    baseline: float) -> pd.DataFrame:
    """Claims table of the timeline chapter, from its three sweeps' run tables.

    ``conditions``: res-relu, nores-relu, res-none, res-radial under the base optimizer;
    ``init_sweep``: the baseline condition at several init scales; ``optimizers``: the
    baseline condition under Adam, Adam beta2 = 0 and SGD.
    """
    chapter = "timeline"
    events = transfer_events(conditions)
    random_level = Estimate(baseline, 0.0, 1)

    def of(condition: str, column: str, frame: pd.DataFrame = events) -> Estimate:
        return estimate(frame[frame["condition"] == condition][column])

    rows = []
    res, nores = of("res-relu", "grad_v1_step0"), of("nores-relu", "grad_v1_step0")
    rows.append(claim_row(chapter, "Gradient coherence across layers exists at initialisation, before any update",
                          "res-relu minus nores-relu gradient v1 |cos| at step 0", "present at init (no number)",
                          res.mean - nores.mean, _pooled_sd(res, nores), res.n, baseline,
                          verdict_for_difference(res, nores), note=f"res-relu {res}; nores-relu {nores}"))
    relu_events = events[events["condition"] == "res-relu"]
    for crossing, norm in (("crossing_step", "Frobenius"), ("spectral_crossing_step", "spectral")):
        order, note = _order_estimate(relu_events, crossing)
        rows.append(claim_row(chapter, "Weight continuity forms once the cumulative update dominates the initial weights",
                              f"res-relu log10(rise step / crossing step), {norm} norm", "rise after ‖ΔW‖ > ‖W(0)‖",
                              order.mean, order.std, order.n, math.nan, verdict_for_order(relu_events, crossing),
                              note=note))
    aligned = of("res-relu", "weight_cumgrad_final")
    rows.append(claim_row(chapter, "... and the weights align with the cumulative gradient",
                          "res-relu final |cos(v1(W), v1(ΣdL/dW))|", "aligned (no number)", aligned.mean,
                          aligned.std, aligned.n, baseline, verdict_for_difference(aligned, random_level)))
    sweep = transfer_events(init_sweep)
    never_crossed = int(sweep["crossing_step"].isna().sum())
    crossing_rank = sweep["crossing_step"].fillna(math.inf)  # never crossed = later than any crossing
    for values, label, left_out in ((crossing_rank, "crossing", f"{never_crossed} runs never crossed (ranked last)"),
                                    (sweep["rise_step"], "continuity rise",
                                     f"{int(sweep['rise_step'].isna().sum())} runs without a rise (left out)")):
        correlation = rank_correlation(sweep["init_scale"], values)
        rows.append(claim_row(chapter, f"A smaller initialisation moves the {label} earlier",
                              f"Spearman ρ(init scale, {label} step)", "earlier (no number)", correlation.rho,
                              math.nan, correlation.n, math.nan, verdict_for_correlation(correlation, +1),
                              note=f"{correlation}; {left_out}"))
    for crossing, norm in (("crossing_step", "Frobenius"), ("spectral_crossing_step", "spectral")):
        together = rank_correlation(sweep[crossing].fillna(math.inf), sweep["rise_step"])
        rows.append(claim_row(chapter, "Across initialisations the rise follows the crossing",
                              f"Spearman ρ(crossing step, rise step), {norm} norm", "follows (no number)", together.rho,
                              math.nan, together.n, math.nan, verdict_for_correlation(together, +1),
                              note=f"{together}; never crossed (ranked last): {int(sweep[crossing].isna().sum())}"))
    turn = late_mean(conditions, "v1_turn", "input")
    relu_turn = estimate(turn[turn["condition"] == "res-relu"]["value"])
    relu_align = of("res-relu", "weight_cumgrad_final")
    for condition in ("res-none", "res-radial"):
        drift = estimate(turn[turn["condition"] == condition]["value"])
        rows.append(claim_row(chapter, "Without symmetry breaking, v1 keeps drifting late in training",
                              f"{condition} minus res-relu late v1 turn (degrees per snapshot)", "drift",
                              drift.mean - relu_turn.mean, _pooled_sd(drift, relu_turn), drift.n, math.nan,
                              verdict_for_difference(drift, relu_turn, margin=1.0),
                              note=f"{condition} {drift}°; res-relu {relu_turn}°"))
        decoupled = of(condition, "weight_cumgrad_final")
        rows.append(claim_row(chapter, "... which decouples the weights from the cumulative gradient",
                              f"res-relu minus {condition} final weight/cum.-gradient v1 |cos|", "lower without",
                              relu_align.mean - decoupled.mean, _pooled_sd(relu_align, decoupled), decoupled.n,
                              baseline, verdict_for_difference(relu_align, decoupled),
                              note=f"res-relu {relu_align}; {condition} {decoupled}"))
    co = late_mean(conditions, "co_rotation", "input")
    none_co = estimate(co[co["condition"] == "res-none"]["value"])
    rows.append(claim_row(chapter, "In a linear residual net each layer rotates independently",
                          "res-none late co-rotation of adjacent v1 (signed cos)", "independent (≈ 0)",
                          none_co.mean, none_co.std, none_co.n, baseline, verdict_for_value(none_co, 0.0)))
    optimizer_events = transfer_events(optimizers)
    for optimizer in optimizer_events["optimizer"].unique():
        runs = optimizer_events[optimizer_events["optimizer"] == optimizer]
        for crossing, norm in (("crossing_step", "Frobenius"), ("spectral_crossing_step", "spectral")):
            order, note = _order_estimate(runs, crossing)
            rows.append(claim_row(chapter, "The order holds under other optimizers",
                                  f"{optimizer}: log10(rise step / crossing step), {norm} norm", "holds",
                                  order.mean, order.std, order.n, math.nan, verdict_for_order(runs, crossing),
                                  note=f"step-0 gradient v1 {estimate(runs['grad_v1_step0'])}; {note}"))
    return pd.DataFrame(rows)


# --- Pretrained checkpoints ----------------------------------------------------------------

_SPACE_COLUMNS = {"input": ("v1_cos", "v1_baseline"), "output": ("u1_cos", "u1_baseline")}


def layer_pair_estimate(table: pd.DataFrame, projection: str, space: str) -> tuple[Estimate, float]:
    """Mean ± sd over adjacent layer pairs of an analyzer table's v1 (input) or u1 (output)
    |cos| for one projection, and that space's random baseline."""
    column, baseline = _SPACE_COLUMNS[space]
    rows = table[table["projection"] == projection]
    return estimate(rows[column]), float(rows[baseline].iloc[0]) if len(rows) else math.nan


def continuity_overview(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (model, projection, space) of several analyzer tables: layer-pair mean and
    sd, number of pairs, and the random baseline. ``tables`` maps a label to a table."""
    rows = []
    for label, table in tables.items():
        for projection in table["projection"].cat.categories if hasattr(table["projection"], "cat") \
                else table["projection"].unique():
            for space in ("input", "output"):
                ours, baseline = layer_pair_estimate(table, projection, space)
                rows.append(dict(model=label, projection=projection, space=space, mean=ours.mean, sd=ours.std,
                                 pairs=ours.n, baseline=baseline))
    return pd.DataFrame(rows)


def pretrained_claims(tables: dict[str, pd.DataFrame], chapter: str = "pretrained_continuity") -> pd.DataFrame:
    """Claims of the pretrained chapter: the paper's projection pattern in each checkpoint.

    Here the spread is over adjacent layer pairs of one checkpoint (there are no seeds),
    and ``n_seeds`` holds the number of pairs. A projection "has continuity" by
    :func:`verdict_for_difference` against its space's random baseline; V "is low" when
    the lowest of the other projections of that space exceeds it by the same rule.
    """
    rows = []
    for label, table in tables.items():
        present = set(table["projection"])
        for projection, space, why in PROJECTION_PREDICTIONS:
            if projection not in present:
                continue
            ours, baseline = layer_pair_estimate(table, projection, space)
            vector = "v1" if space == "input" else "u1"
            rows.append(claim_row(chapter, f"{label}: {projection} has {space}-space continuity ({why})",
                                  f"{projection} {vector} |cos|, mean over layer pairs", "high", ours.mean, ours.std,
                                  ours.n, baseline, verdict_for_difference(ours, Estimate(baseline, 0.0, 1)),
                                  note="spread and n over adjacent layer pairs"))
        if "v_proj" in present:
            for space in ("input", "output"):
                v, baseline = layer_pair_estimate(table, "v_proj", space)
                others = [p for p, s, _ in PROJECTION_PREDICTIONS if s == space and p in present]
                lowest_name, lowest = min(((p, layer_pair_estimate(table, p, space)[0]) for p in others),
                                          key=lambda item: item[1].mean)
                vector = "v1" if space == "input" else "u1"
                rows.append(claim_row(chapter, f"{label}: V has low {space}-space continuity",
                                      f"v_proj {vector} |cos| below the lowest of {', '.join(others)}", "low",
                                      v.mean, v.std, v.n, baseline, verdict_for_difference(lowest, v),
                                      note=f"lowest other: {lowest_name} {lowest}"))
    return pd.DataFrame(rows)

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
    for projection, space, why in [
        ("q_proj", "input", "reads the residual stream, followed by the softmax"),
        ("k_proj", "input", "reads the residual stream, followed by the softmax"),
        ("gate_proj", "input", "reads the residual stream, followed by the MLP activation"),
        ("up_proj", "input", "reads the residual stream, multiplied by the activated gate"),
        ("o_proj", "output", "writes to the residual stream after attention"),
        ("down_proj", "output", "writes to the residual stream after the MLP nonlinearity"),
    ]:
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


#: The paper's projection-specific prediction: (projection, space, why) that should be continuous.
PROJECTION_PREDICTIONS = [
    ("q_proj", "input", "reads the residual stream, followed by the softmax"),
    ("k_proj", "input", "reads the residual stream, followed by the softmax"),
    ("gate_proj", "input", "reads the residual stream, followed by the MLP activation"),
    ("up_proj", "input", "reads the residual stream, multiplied by the activated gate"),
    ("o_proj", "output", "writes to the residual stream after attention"),
    ("down_proj", "output", "writes to the residual stream after the MLP nonlinearity"),
]
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

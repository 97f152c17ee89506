"""Chapter "activation versus LayerNorm": the activation concentrates continuity in v1, LayerNorm
spreads it over several directions."""

from __future__ import annotations

import math
from typing import Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from ..plotting import draw_baseline, palette, quantity_label
from ..statistics import Estimate, closer_to, estimate, final_estimate, verdict_for_difference
from ..tables import RUN_KEYS, claim_row, select


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


def plot_direction_profile(
    profile: pd.DataFrame, *, ax: plt.Axes | None = None, baseline: float | None = None,
    colours: dict | None = None, hue_order: Sequence[str] | None = None, title: str = "",
) -> plt.Axes:
    """Continuity of singular direction i = 1..k (x) per condition: seed mean and ±1 sd band."""
    ax = ax or plt.gca()
    hue_order = list(hue_order or profile["condition"].unique())
    colours = colours or palette(hue_order)
    sns.lineplot(data=profile, x="direction", y="value", hue="condition", hue_order=hue_order,
                 palette=colours, errorbar="sd", marker="o", ax=ax)
    if baseline is not None:
        draw_baseline(ax, baseline)
    ax.set_xticks(sorted(profile["direction"].unique()))
    ax.set_xlabel("singular direction i (1 = leading)")
    ax.set_ylabel("|cos| of i-th singular vectors, adjacent layers")
    ax.set_ylim(0, 1.02)
    if title:
        ax.set_title(title, fontsize="medium")
    return ax

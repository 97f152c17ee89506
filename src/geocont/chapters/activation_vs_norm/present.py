"""activation_vs_norm: what the chapter shows (figures, tables, computed prose), from :mod:`.compute`."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython.display import Markdown

from ... import plotting
from ...book.chapter import claim, undefined_sentence
from ...book.figures import show_figure
from ...plotting import draw_baseline, palette
from ...statistics import final_estimate
from .. import mlp_runs
from .compute import Results, claims


def run_note(results: Results) -> Markdown:
    settings = results.settings
    return Markdown(f"{len(results.order)} conditions × {len(settings.seeds)} seeds; random baseline at "
                    f"d = {settings.base.width}: E|cos| = **{results.baseline:.3f}**. " + undefined_sentence(results.table))


def direction_profile_figure(results: Results) -> None:
    """Final continuity of the i-th singular direction per condition, input and output space."""
    order, colours = results.order, plotting.condition_colours()
    fig, axes = plt.subplots(1, 2, figsize=(14, 5), sharey=True)
    for ax, profile, title in ((axes[0], results.profile_in, "input space: v_i"),
                               (axes[1], results.profile_out, "output space: u_i")):
        plot_direction_profile(profile, ax=ax, baseline=results.baseline, colours=colours, hue_order=order,
                               title=title)
    plotting.figure_legend(fig, axes[0])
    axes[1].get_legend().remove()
    lines = [f"{c}: v1 {results.of_shape('lead', c)}, v2..v{results.settings.base.n_directions} "
             f"{results.of_shape('rest', c)}" for c in order]
    show_figure(fig, "norm-direction-profile", "Final adjacent-layer continuity of the i-th singular direction "
                "(seed mean ± 1 sd). " + "; ".join(lines) + ".")


def alignment_figure(results: Results) -> None:
    """Final v1 continuity and sigma^2-alignment per condition (top), and their course (bottom)."""
    table, order, baseline, colours = results.table, results.order, results.baseline, plotting.condition_colours()
    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    for column, (metric, direction, level) in enumerate((("weight_cos", 1, baseline), ("weight_align", 0, 0.0))):
        plotting.plot_final_by(table, metric, "input", direction, x="condition", hue="condition", order=order,
                               hue_order=order, colours=colours, ax=axes[0, column], baseline=level)
        plotting.plot_over_training(table, metric, "input", direction, ax=axes[1, column], baseline=level,
                                    colours=colours, hue_order=order, legend=False)
    for ax in axes[0]:
        ax.get_legend().remove()
        ax.tick_params(axis="x", labelrotation=20)
    fig.tight_layout()
    lines = [f"{c}: v1 {final_estimate(table, 'weight_cos', 'input', 1, condition=c)}, "
             f"σ²-alignment {final_estimate(table, 'weight_align', 'input', 0, condition=c)}" for c in order]
    show_figure(fig, "norm-v1-versus-alignment", "Final v1 continuity and σ²-weighted alignment (top; bars: seed "
                f"mean, dots: seeds; dashed: random level, {baseline:.3f} for |cos| and 0 for the alignment) and "
                "their course over training (bottom). " + "; ".join(lines) + ".")


def concentration_figure(results: Results) -> None:
    """Per condition, v1 continuity minus the mean of v2..vk (bars: seed mean, dots: seeds)."""
    order = results.order
    fig, ax = plt.subplots(figsize=(9, 4.5))
    plotting.grouped_bars(results.shape, x="condition", hue="condition", value="concentration", order=order,
                          hue_order=order, colours=plotting.condition_colours(), ax=ax)
    ax.get_legend().remove()
    ax.axhline(0, **plotting.BASELINE_STYLE)
    ax.set_ylabel(f"v1 |cos| minus mean of v2..v{results.settings.base.n_directions}")
    ax.tick_params(axis="x", labelrotation=20)
    fig.tight_layout()
    show_figure(fig, "norm-concentration", "Concentration of continuity in the leading direction (bars: seed mean; "
                "dots: seeds). " + "; ".join(f"{c} {results.of_shape('concentration', c)}" for c in order) + ".")


def horizon_summary(results: Results) -> pd.DataFrame:
    """Per condition: each quantity at ``early_steps``, at the end, and its change over the last third."""
    return mlp_runs.horizon_table(results.table, results.settings.early_steps, order=results.order)


def verdict(results: Results, claims: pd.DataFrame) -> Markdown:
    """One bullet per claim (:func:`geocont.chapters.mlp_runs.verdict`)."""
    return mlp_runs.verdict(results.settings, claims)


def rms_note(claims: pd.DataFrame) -> Markdown | None:
    """What it means that RMSNorm is not below LayerNorm (None when the centring claim holds or is absent)."""
    if "centring-breaks-symmetry" not in set(claims["key"]):
        return None
    rms = claim(claims, "centring-breaks-symmetry")
    if rms["verdict"] == "reproduced":
        return None
    return Markdown(
        "**RMSNorm behaves like LayerNorm here.** RMSNorm without a gain is rotation-equivariant, so by the "
        "paper's argument it should leave the SO(d) symmetry intact and look like the linear control; instead "
        f"its whole-spectrum alignment is {rms['note']}. Either the symmetry is broken somewhere else "
        "in the training set-up (Adam's coordinate-wise update is one candidate: the previous chapter found "
        "the linear control far more continuous under Adam than under Adam with β₂ = 0), or the symmetry is "
        "not what decides continuity here. This chapter does not separate the two."
    )


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

"""activation_vs_norm: what the chapter shows (figures, tables, computed prose), from :mod:`.compute`.

The computed prose is worded from the templates in ``prose.md`` (:mod:`geocont.book.prose`); what
it states, and which case applies, is computed in :mod:`.compute` (the findings)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython.display import Markdown

from ... import plotting
from ...book.chapter import undefined_sentence
from ...book.figures import show_figure
from ...plotting import draw_baseline, palette
from .. import mlp_presentation
from ..common import mlp_verdict
from .compute import PROSE, Results, centring_finding, condition_shapes, run_summary

#: The closing list: one bullet per claim, under the run's scale, seeds and data.
verdict = mlp_verdict


def run_note(results: Results) -> Markdown:
    return Markdown(PROSE.render("run-note", **vars(run_summary(results)), undefined=undefined_sentence(results.table)))


def direction_profile_caption(results: Results) -> str:
    """The caption of the direction-profile figure (the finding: :func:`.compute.condition_shapes`)."""
    finding = condition_shapes(results)
    conditions = "; ".join(PROSE.render("direction-profile-item", **vars(c), k=finding.k) for c in finding.conditions)
    return PROSE.render("direction-profile-caption", conditions=conditions)


def direction_profile_figure(results: Results) -> None:
    """Final continuity of the i-th singular direction per condition, input and output space."""
    order, colours = results.order, plotting.condition_colours()
    fig, axes = plt.subplots(1, 2, figsize=(14, 5), sharey=True)
    for ax, profile, title in (
        (axes[0], results.profile_in, "input space: v_i"),
        (axes[1], results.profile_out, "output space: u_i"),
    ):
        plot_direction_profile(profile, ax=ax, baseline=results.baseline, colours=colours, hue_order=order, title=title)
    plotting.figure_legend(fig, axes[0])
    axes[1].get_legend().remove()
    show_figure(fig, "norm-direction-profile", direction_profile_caption(results))


def alignment_caption(results: Results) -> str:
    """The caption of the v1-versus-alignment figure."""
    finding = condition_shapes(results)
    conditions = "; ".join(PROSE.render("alignment-item", **vars(c)) for c in finding.conditions)
    return PROSE.render("alignment-caption", baseline=finding.baseline, conditions=conditions)


def alignment_figure(results: Results) -> None:
    """Final v1 continuity and sigma^2-alignment per condition (top), and their course (bottom)."""
    table, order, baseline, colours = results.table, results.order, results.baseline, plotting.condition_colours()
    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    for column, (metric, direction, level) in enumerate((("weight_cos", 1, baseline), ("weight_align", 0, 0.0))):
        plotting.plot_final_by(
            table,
            metric,
            "input",
            direction,
            x="condition",
            hue="condition",
            order=order,
            hue_order=order,
            colours=colours,
            ax=axes[0, column],
            baseline=level,
        )
        plotting.plot_over_training(
            table,
            metric,
            "input",
            direction,
            ax=axes[1, column],
            baseline=level,
            colours=colours,
            hue_order=order,
            legend=False,
        )
    for ax in axes[0]:
        ax.get_legend().remove()
        ax.tick_params(axis="x", labelrotation=20)
    fig.tight_layout()
    show_figure(fig, "norm-v1-versus-alignment", alignment_caption(results))


def concentration_caption(results: Results) -> str:
    """The caption of the concentration figure."""
    finding = condition_shapes(results)
    conditions = "; ".join(PROSE.render("concentration-item", **vars(c)) for c in finding.conditions)
    return PROSE.render("concentration-caption", conditions=conditions)


def concentration_figure(results: Results) -> None:
    """Per condition, v1 continuity minus the mean of v2..vk (bars: seed mean, dots: seeds)."""
    order = results.order
    fig, ax = plt.subplots(figsize=(9, 4.5))
    plotting.grouped_bars(
        results.shape,
        x="condition",
        hue="condition",
        value="concentration",
        order=order,
        hue_order=order,
        colours=plotting.condition_colours(),
        ax=ax,
    )
    ax.get_legend().remove()
    ax.axhline(0, **plotting.BASELINE_STYLE)
    ax.set_ylabel(f"v1 |cos| minus mean of v2..v{results.settings.base.n_directions}")
    ax.tick_params(axis="x", labelrotation=20)
    fig.tight_layout()
    show_figure(fig, "norm-concentration", concentration_caption(results))


def horizon_summary(results: Results) -> pd.DataFrame:
    """Per condition: each quantity at ``early_steps``, at the end, and its change over the last third."""
    return mlp_presentation.horizon_table(results.table, results.settings.early_steps, order=results.order)


def rms_note(claims: pd.DataFrame) -> Markdown | None:
    """What it means that RMSNorm is not below LayerNorm (the finding: :func:`.compute.centring_finding`);
    None where the chosen variant says nothing (the centring claim holds, or is absent)."""
    finding = centring_finding(claims)
    text = PROSE.choose("rms-note", finding.case, alignment=finding.alignment)
    return Markdown(text) if text else None


def plot_direction_profile(
    profile: pd.DataFrame,
    *,
    ax: plt.Axes | None = None,
    baseline: float | None = None,
    colours: dict | None = None,
    hue_order: Sequence[str] | None = None,
    title: str = "",
) -> plt.Axes:
    """Continuity of singular direction i = 1..k (x) per condition: seed mean and ±1 sd band."""
    ax = ax or plt.gca()
    hue_order = list(hue_order or profile["condition"].unique())
    colours = colours or palette(hue_order)
    sns.lineplot(
        data=profile,
        x="direction",
        y="value",
        hue="condition",
        hue_order=hue_order,
        palette=colours,
        errorbar="sd",
        marker="o",
        ax=ax,
    )
    if baseline is not None:
        draw_baseline(ax, baseline)
    ax.set_xticks(sorted(profile["direction"].unique()))
    ax.set_xlabel("singular direction i (1 = leading)")
    ax.set_ylabel("|cos| of i-th singular vectors, adjacent layers")
    ax.set_ylim(0, 1.02)
    if title:
        ax.set_title(title, fontsize="medium")
    return ax

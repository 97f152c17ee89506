"""The transformer chapter's figures of training: the loss, every projection's continuity over training, the gap
between the spaces, the bars per projection, the depth profile and the ablations."""

from __future__ import annotations

import matplotlib.pyplot as plt
import seaborn as sns

from ... import plotting
from ...book.figures import show_figure
from ...metrics import random_abs_cos, vector_name
from ...statistics import at_final_step
from ...transformer import PROJECTIONS
from ..common import short_projection
from .compute import (
    Results,
    depth_profile_finding,
    final_estimates,
    gap_finding,
    gap_values,
    loss_finding,
    projection_values,
)
from .horizon_figures import settled_sentence
from .page_text import PROSE, mark_early, space_title, symlog_steps


def loss_figure(results: Results) -> None:
    """Training and validation loss of every run over training (symlog step axis, as the continuity curves)."""
    table, variants, early = results.table, results.variants, results.settings.early_step
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.5), sharey=True)
    for ax, metric in zip(axes, ["train_loss", "val_loss"]):
        sns.lineplot(
            data=table[table["metric"] == metric],
            x="step",
            y="value",
            hue="condition",
            hue_order=variants,
            palette=plotting.palette(variants),
            errorbar="sd",
            marker="o",
            markersize=3.5,
            ax=ax,
            legend=ax is axes[0],
        )
        symlog_steps(ax)
        mark_early(ax, early)
        ax.set(
            xlabel="training step (symlog; dotted: the early horizon)",
            ylabel="cross-entropy (nats/token)",
            title="training minibatch loss" if metric == "train_loss" else "validation loss",
        )
    plotting.figure_legend(fig, axes[0])
    finding = loss_finding(results)
    losses = "; ".join(
        PROSE.render("loss-item", label=v.label, early=v.early, early_step=finding.early_step, final=v.final)
        for v in finding.variants
    )
    show_figure(fig, "lm-loss", PROSE.render("loss-caption", losses=losses, uniform=finding.uniform))


def over_training_figure(results: Results) -> None:
    """Every projection's layer-mean continuity over training: one row per projection, v1 (left) and
    u1 (right), each panel with its space's random baseline, one line per run label (band: ±1 sd over seeds)."""
    values, variants, dims = projection_values(results.table), results.variants, results.dims
    colours = plotting.palette(variants)
    fig, axes = plt.subplots(len(PROJECTIONS), 2, figsize=(12, 2.6 * len(PROJECTIONS) + 1), sharex=True, sharey=True)
    for row, projection in enumerate(PROJECTIONS):
        for col, space in enumerate(("input", "output")):
            ax = axes[row, col]
            frame = values[(values.group == projection) & (values.space == space)]
            sns.lineplot(
                data=frame,
                x="step",
                y="value",
                hue="condition",
                hue_order=variants,
                palette=colours,
                errorbar="sd",
                ax=ax,
                legend=row == 0 and col == 0,
            )
            plotting.draw_baseline(ax, random_abs_cos(dims[projection][space]))
            symlog_steps(ax)
            mark_early(ax, results.settings.early_step)
            ax.set(
                ylim=(0, 1.02),
                xlabel="step (symlog)" if row == len(PROJECTIONS) - 1 else "",
                ylabel="|cos|" if col == 0 else "",
                title=f"{short_projection(projection)}: {space_title(space)}",
            )
    plotting.figure_legend(fig, axes[0, 0], ncol=3)
    show_figure(
        fig,
        "lm-over-training",
        PROSE.render(
            "over-training-caption", early_step=results.settings.early_step, settled=settled_sentence(results)
        ),
    )


def gap_figure(results: Results) -> None:
    """Each projection's relative spectral gap over training (layer mean; band: ±1 sd over seeds)."""
    values, variants = gap_values(results.table), results.variants
    columns = 4
    fig, axes = plt.subplots(2, columns, figsize=(15, 7), sharex=True, sharey=True)
    for index, (ax, projection) in enumerate(zip(axes.flat, PROJECTIONS)):
        sns.lineplot(
            data=values[values.group == projection],
            x="step",
            y="value",
            hue="condition",
            hue_order=variants,
            palette=plotting.palette(variants),
            errorbar="sd",
            ax=ax,
            legend=index == 0,
        )
        symlog_steps(ax)
        mark_early(ax, results.settings.early_step)
        ax.set(
            yscale="log",
            xlabel="step (symlog)" if index >= len(PROJECTIONS) - columns else "",
            ylabel="(s1 - s2) / s1" if index % columns == 0 else "",
            title=short_projection(projection),
        )
    for index, ax in enumerate(axes.flat):
        if index >= len(PROJECTIONS):
            ax.set_visible(False)
            axes.flat[index - columns].xaxis.set_tick_params(labelbottom=True)  # the panel above shows the axis
    plotting.figure_legend(fig, axes.flat[0], ncol=3)
    show_figure(fig, "lm-gaps", PROSE.render("gaps-caption", gaps=gap_sentence(results)))


def gap_sentence(results: Results) -> str:
    """For the reference variant: the predicted continuities that moved by more than
    :data:`geocont.statistics.DIFFERENCE_MARGIN` between the early horizon and the end, each beside its projection's
    spectral gap at both steps (:func:`.compute.gap_finding`)."""
    finding = gap_finding(results)
    moved = "; ".join(
        PROSE.render(
            "gaps-item",
            projection=short_projection(m.projection),
            vector=vector_name(m.space),
            before=m.before,
            after=m.after,
            gap_before=m.gap_before,
            gap_after=m.gap_after,
        )
        for m in finding.moved
    )
    return PROSE.choose(
        "gaps",
        finding.case,
        reference=finding.reference,
        threshold=finding.threshold,
        early_step=finding.early_step,
        end=finding.end,
        moved=moved,
    )


#: Legend label of each space in the per-projection bars.
SPACE_LABELS = {"input": "input space (v1)", "output": "output space (u1)"}


def projection_bars_figure(results: Results) -> None:
    """v1 (input) and u1 (output) continuity per projection of the reference variant at the end of
    training, with a black tick at each space's own random baseline E|cos| (its dimension differs)."""
    finals, dims, reference = results.finals, results.dims, results.reference
    frame = finals[finals["condition"] == reference]
    bars = frame.assign(space=frame["space"].map(SPACE_LABELS), group=frame["group"].map(short_projection))
    baselines = {(short_projection(p), SPACE_LABELS[s]): random_abs_cos(dims[p][s]) for p in dims for s in SPACE_LABELS}
    fig, ax = plt.subplots(figsize=(12, 4.8))
    plotting.grouped_bars(
        bars,
        x="group",
        hue="space",
        ax=ax,
        order=[short_projection(p) for p in dims],
        hue_order=list(SPACE_LABELS.values()),
        colours=dict(zip(SPACE_LABELS.values(), sns.color_palette("colorblind", 2))),
        baselines=baselines,
        baseline_label="random baseline (per space)",
    )
    ax.set(
        xlabel="",
        ylabel="|cos|, mean over adjacent layer pairs",
        ylim=(0, 1.02),
        title=f"variant `{reference}`, step {results.settings.base.steps}",
    )
    fig.tight_layout()
    values = "; ".join(
        PROSE.render("bars-item", projection=e.projection, input=e.input, output=e.output)
        for e in final_estimates(results)
    )
    show_figure(fig, "lm-projection-bars", PROSE.render("bars-caption", values=values))


def depth_profile_figure(results: Results) -> None:
    """Each projection's final continuity per adjacent layer pair, in both spaces, for ``silu`` and the deeper model."""
    table, finding = results.table, depth_profile_finding(results)
    labels = list(finding.labels)
    rows = at_final_step(table[(table.metric == "weight_cos") & (table.direction == 1) & table.condition.isin(labels)])
    fig, axes = plt.subplots(len(labels), 2, figsize=(14, 4.2 * len(labels)), sharey=True, squeeze=False)
    for r, label in enumerate(labels):
        for ax, space in zip(axes[r], ["input", "output"]):
            frame = rows[(rows.space == space) & (rows.condition == label)]
            sns.lineplot(
                data=frame,
                x="layer",
                y="value",
                hue="group",
                hue_order=list(PROJECTIONS),
                palette=plotting.projection_colours(),
                errorbar="sd",
                marker="o",
                ax=ax,
                legend=r == 0 and space == "input",
            )
            ax.set(
                xlabel="adjacent layer pair (l, l+1)",
                ylabel="|cos|",
                ylim=(0, 1.02),
                title=f"`{label}`: {space_title(space)}",
            )
            ax.set_xticks(sorted(frame.layer.unique()))
    plotting.figure_legend(fig, axes[0, 0])
    show_figure(
        fig, "lm-depth-profile", PROSE.choose("depth-profile-caption", finding.case, depth_label=finding.depth_label)
    )


def ablations_figure(results: Results) -> None:
    """Final continuity per projection and run label, in both spaces (bars: seed mean; lines: ±1 sd)."""
    finals, variants = results.finals, results.variants
    fig, axes = plt.subplots(1, 2, figsize=(15, 4.8), sharey=True)
    for ax, space in zip(axes, ["input", "output"]):
        sns.barplot(
            data=finals[finals.space == space],
            x="group",
            y="value",
            hue="condition",
            order=list(PROJECTIONS),
            hue_order=variants,
            palette=plotting.palette(variants),
            errorbar="sd",
            ax=ax,
            alpha=0.85,
        )
        ax.set(xlabel="", ylabel="|cos|, mean over layer pairs", ylim=(0, 1.02), title=space_title(space))
        ax.set_xticks(range(len(PROJECTIONS)), [short_projection(p) for p in PROJECTIONS])
    plotting.figure_legend(fig, axes[0])
    if axes[1].get_legend() is not None:
        axes[1].get_legend().remove()
    show_figure(fig, "lm-ablations", PROSE.render("ablations-caption", steps=results.settings.base.steps))

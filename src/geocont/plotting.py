"""Figures for the book: one theme, labelled axes, the random baseline, seeds as a band.

Figures read tables; they never train.
"""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from .analysis import at_final_step, per_run
from .tables import select

BASELINE_STYLE = dict(color="0.35", linestyle="--", linewidth=1.2)

#: Readable names of (metric, space, direction), used for axis labels.
QUANTITY_LABELS = {
    ("weight_cos", "input", 1): "weight v1 |cos| (input space)",
    ("weight_cos", "output", 1): "weight u1 |cos| (output space)",
    ("grad_cos", "input", 1): "gradient v1 |cos| (input space)",
    ("grad_cos", "output", 1): "gradient u1 |cos| (output space)",
    ("cumgrad_cos", "input", 1): "cumulative-gradient v1 |cos|",
    ("weight_align", "input", 0): "σ²-weighted alignment (input)",
    ("weight_align", "output", 0): "σ²-weighted alignment (output)",
    ("rel_update", "", 0): "‖W(t) − W(0)‖ / ‖W(0)‖",
    ("test_acc", "", 0): "test accuracy",
}


def quantity_label(metric: str, space: str = "", direction: int = 0) -> str:
    return QUANTITY_LABELS.get((metric, space, direction), f"{metric} {space} {direction}".strip())


def set_theme() -> None:
    """The book's single figure style (colour-blind-safe palette)."""
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
    plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 110, "axes.titleweight": "bold"})


def palette(names: Sequence[str]) -> dict[str, tuple]:
    """A fixed colour per name, so a condition has the same colour in every figure."""
    colours = sns.color_palette("colorblind", n_colors=max(len(names), 3))
    return dict(zip(names, colours))


def figure_legend(fig: plt.Figure, ax: plt.Axes, ncol: int | None = None) -> None:
    """Move ``ax``'s legend below the whole figure, in one row."""
    handles, labels = ax.get_legend_handles_labels()
    if ax.get_legend() is not None:
        ax.get_legend().remove()
    fig.legend(handles, labels, loc="lower center", ncol=ncol or len(labels), frameon=False,
               bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.05, 1, 1))


#: Index into seaborn's 10-colour colour-blind palette for each condition: fixed across the
#: book, and distinct within each chapter's set of conditions.
_CONDITION_COLOUR_INDEX = {
    "res-relu": 0, "res-gelu": 1, "res-silu": 2, "nores-relu": 3, "res-none": 4, "res-radial": 5,
    "res-ln": 1, "res-ln-relu": 7, "res-rms": 8, "res-rms-relu": 9,
}


def condition_colours() -> dict[str, tuple]:
    """The colour of every MLP condition (the same in every figure of the book)."""
    colours = sns.color_palette("colorblind", n_colors=10)
    return {name: colours[index] for name, index in _CONDITION_COLOUR_INDEX.items()}


def draw_baseline(ax: plt.Axes, value: float, label: str = "random baseline") -> None:
    ax.axhline(value, label=label, **BASELINE_STYLE)


def plot_over_training(
    table: pd.DataFrame, metric: str, space: str = "", direction: int = 1, *, hue: str = "condition",
    ax: plt.Axes | None = None, baseline: float | None = None, colours: dict | None = None,
    hue_order: Sequence[str] | None = None, legend: bool = True,
) -> plt.Axes:
    """Layer-mean of a metric against step (symlog axis): seed mean as a line, ±1 sd as a band."""
    ax = ax or plt.gca()
    frame = per_run(table, metric, space, direction)
    hue_order = list(hue_order or frame[hue].unique())
    colours = colours or palette(hue_order)
    sns.lineplot(
        data=frame, x="step", y="value", hue=hue, hue_order=hue_order, palette=colours,
        errorbar="sd", marker="o", markersize=3.5, ax=ax, legend=legend,
    )
    if baseline is not None:
        draw_baseline(ax, baseline)
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(left=0)
    ax.set_xlabel("training step (symlog)")
    ax.set_title(quantity_label(metric, space, direction), fontsize="medium")
    ax.set_ylabel("|cos|, mean over layer pairs" if metric.endswith("_cos") else quantity_label(metric, space, direction))
    if legend:
        ax.legend(fontsize="small")
    return ax


def plot_layer_heatmap(
    table: pd.DataFrame, metric: str, space: str, direction: int = 1, *, rows: str = "condition",
    row_order: Sequence[str] | None = None, ax: plt.Axes | None = None,
) -> plt.Axes:
    """Adjacent-pair |cos| per layer pair at the last step, mean over seeds: rows x pairs."""
    ax = ax or plt.gca()
    frame = at_final_step(select(table, metric, space, direction))
    grid = frame.groupby([rows, "layer"], observed=True)["value"].mean().unstack("layer")
    if row_order is not None:
        grid = grid.loc[[r for r in row_order if r in grid.index]]
    grid.columns = [f"{l}–{l + 1}" for l in grid.columns]
    sns.heatmap(grid, vmin=0, vmax=1, cmap="viridis", ax=ax, cbar_kws={"label": "|cos|"})
    ax.set_xlabel("adjacent layer pair (l, l+1)")
    ax.set_ylabel("")
    ax.set_title(quantity_label(metric, space, direction))
    return ax


def plot_final_by(
    table: pd.DataFrame, metric: str, space: str, direction: int, *, x: str, hue: str,
    ax: plt.Axes | None = None, baseline: float | None = None, order: Sequence[str] | None = None,
    hue_order: Sequence[str] | None = None, colours: dict | None = None,
) -> plt.Axes:
    """Final layer-mean values as bars (seed mean) with each seed as a dot."""
    ax = ax or plt.gca()
    frame = at_final_step(per_run(table, metric, space, direction))
    hue_order = list(hue_order or frame[hue].unique())
    colours = colours or palette(hue_order)
    sns.barplot(data=frame, x=x, y="value", hue=hue, order=order, hue_order=hue_order, palette=colours,
                errorbar=None, alpha=0.75, ax=ax)
    sns.stripplot(data=frame, x=x, y="value", hue=hue, order=order, hue_order=hue_order, palette=colours,
                  dodge=True, edgecolor="black", linewidth=0.6, size=5, ax=ax, legend=False)
    if baseline is not None:
        draw_baseline(ax, baseline)
    ax.set_ylabel(quantity_label(metric, space, direction))
    ax.set_xlabel(x)
    ax.legend(fontsize="small")
    return ax


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


def plot_projection_bars(
    finals: pd.DataFrame, dims: dict[str, dict[str, int]], *, condition: str, ax: plt.Axes | None = None,
) -> plt.Axes:
    """v1 (input) and u1 (output) continuity per projection: bars (seed mean), dots (seeds),
    and a black tick at each space's own random baseline E|cos| (its dimension differs)."""
    from .metrics import random_abs_cos

    ax = ax or plt.gca()
    frame = finals[finals["condition"] == condition]
    projections = list(dims)
    colours = sns.color_palette("colorblind", 2)
    width = 0.38
    for offset, (space, label, colour) in zip((-width / 2, width / 2), [("input", "input space (v1)", colours[0]),
                                                                          ("output", "output space (u1)", colours[1])]):
        for i, projection in enumerate(projections):
            values = frame[(frame["group"] == projection) & (frame["space"] == space)]["value"]
            x = i + offset
            ax.bar(x, values.mean(), width=width * 0.95, color=colour, alpha=0.8, label=label if i == 0 else None)
            ax.scatter([x] * len(values), values, color="black", s=12, zorder=3)
            ax.hlines(random_abs_cos(dims[projection][space]), x - width / 2, x + width / 2, color="black",
                      linewidth=2, label="random baseline (per space)" if i == 0 and space == "input" else None)
    ax.set_xticks(range(len(projections)), [p.replace("_proj", "") for p in projections])
    ax.set_ylabel("|cos|, mean over adjacent layer pairs")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize="small")
    return ax


def projection_colours() -> dict[str, tuple]:
    """A fixed colour per projection (q_proj ... down_proj), the same in every figure."""
    from .transformer import PROJECTIONS

    return dict(zip(PROJECTIONS, sns.color_palette("colorblind", n_colors=len(PROJECTIONS))))


def plot_depth_continuity(table: pd.DataFrame, *, axes: Sequence[plt.Axes] | None = None, title: str = "") -> plt.Figure:
    """An analyzer table (:func:`geocont.analyzer.analyze`) across depth: v1 |cos| (left) and
    u1 |cos| (right) per adjacent layer pair, one line per projection, and each projection's
    random baseline E|cos| as a dotted line of its colour (it depends on the dimension)."""
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), sharey=True)
    else:
        fig = axes[0].figure
    colours = projection_colours()
    pairs = table.dropna(subset=["v1_cos"])
    projections = [p for p in colours if p in set(pairs["projection"])]
    for ax, (column, baseline, label) in zip(axes, [("v1_cos", "v1_baseline", "input space: v1 |cos|"),
                                                    ("u1_cos", "u1_baseline", "output space: u1 |cos|")]):
        for projection in projections:
            rows = pairs[pairs["projection"] == projection]
            ax.plot(rows["layer"], rows[column], marker="o", markersize=3, color=colours[projection],
                    label=projection.replace("_proj", ""))
            ax.axhline(rows[baseline].iloc[0], color=colours[projection], linestyle=":", linewidth=1, alpha=0.8)
        ax.set(xlabel="adjacent layer pair (l, l+1), labelled by l", ylabel="|cos| with the next layer",
               ylim=(0, 1.02), title=label)
    axes[0].plot([], [], color="0.35", linestyle=":", label="random baseline (per projection)")
    if title:
        fig.suptitle(title, fontsize="medium")
    figure_legend(fig, axes[0], ncol=len(projections) + 1)
    return fig


def plot_continuity_vs_size(overview: pd.DataFrame, *, axes: Sequence[plt.Axes] | None = None) -> plt.Figure:
    """Mean adjacent-layer continuity per projection against parameter count, one point per
    model (``overview``: columns model, parameters, projection, space, mean, sd; error bars
    are ``sd``), the predicted-continuous projections of each space in full colour.

    Left: input space (v1) of Q, K, Gate, Up and V; right: output space (u1) of O, Down and V.
    Each point's random baseline is drawn as a short black tick at the same x."""
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharey=True)
    else:
        fig = axes[0].figure
    colours = projection_colours()
    panels = [("input", ["q_proj", "k_proj", "gate_proj", "up_proj", "v_proj"], "input space: v1 |cos|"),
              ("output", ["o_proj", "down_proj", "v_proj"], "output space: u1 |cos|")]
    models = list(dict.fromkeys(overview["model"]))
    offsets = {p: 1.0 + 0.06 * (i - 3) for i, p in enumerate(colours)}  # spread projections sideways (log x)
    for ax, (space, projections, title) in zip(axes, panels):
        frame = overview[(overview["space"] == space) & overview["projection"].isin(projections)]
        for projection in projections:
            rows = frame[frame["projection"] == projection]
            if rows.empty:
                continue
            x = rows["parameters"] * offsets[projection]
            ax.errorbar(x, rows["mean"], yerr=rows["sd"].fillna(0), fmt="o", color=colours[projection], capsize=2,
                        alpha=0.45 if projection == "v_proj" else 1.0, label=projection.replace("_proj", ""))
            ax.scatter(x, rows["baseline"], marker="_", color="black", s=60, zorder=3)
        ax.set_xscale("log")
        ax.set(xlabel="parameters (log scale)", ylabel="|cos| with the next layer, mean over pairs", ylim=(0, 1.02),
               title=title)
        for model in models:
            rows = overview[overview["model"] == model]
            ax.annotate(model, (rows["parameters"].iloc[0], 0.97), rotation=90, fontsize="x-small", ha="center",
                        va="top", color="0.3")
    axes[0].scatter([], [], marker="_", color="black", label="random baseline")
    handles = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=len(handles), frameon=False,
               bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig

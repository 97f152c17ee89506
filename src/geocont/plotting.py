"""Figures for the book: one theme, labelled axes, the random baseline, seeds as a band.

Figures read tables; they never train.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .extras import require_extra

require_extra("plot", ("matplotlib", "seaborn"), "geocont.plotting (figures)")

import matplotlib.pyplot as plt  # noqa: E402 - after the check that it is installed
import pandas as pd
import seaborn as sns

from .layouts import PROJECTIONS
from .statistics import at_final_step, per_run, without_runs
from .tables import diverged_runs, select

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
    ("cumgrad_cos", "output", 1): "cumulative-gradient u1 |cos|",
    ("weight_cumgrad_cos", "input", 1): "|cos(v1 of W, v1 of cumulative gradient)|",
    ("weight_cumgrad_cos", "output", 1): "|cos(u1 of W, u1 of cumulative gradient)|",
    ("turn", "input", 1): "v1 turn since previous snapshot (degrees)",
    ("turn", "output", 1): "u1 turn since previous snapshot (degrees)",
    ("co_rotation", "input", 1): "co-rotation of adjacent v1 (signed cos)",
    ("co_rotation", "output", 1): "co-rotation of adjacent u1 (signed cos)",
    ("rel_update", "", 0): "‖W(t) − W(0)‖ / ‖W(0)‖",
    ("test_acc", "", 0): "test accuracy",
    ("train_set_loss", "", 0): "training-set cross-entropy",
    ("train_set_acc", "", 0): "training-set accuracy",
    ("grad_norm", "", 0): "‖∂L/∂W‖ (minibatch gradient)",
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
    fig.legend(
        handles, labels, loc="lower center", ncol=ncol or len(labels), frameon=False, bbox_to_anchor=(0.5, -0.02)
    )
    fig.tight_layout(rect=(0, 0.05, 1, 1))


#: Index into seaborn's 10-colour colour-blind palette for each condition: fixed across the
#: book, and distinct within each chapter's set of conditions (and within the sets the new
#: conditions are meant for: the Leaky-ReLU dose with ``res-relu`` and ``res-none`` at its ends,
#: the centred ReLUs with ``res-relu`` and ``nores-relu``, ``res-radial-track`` with the radial ones).
_CONDITION_COLOUR_INDEX = {
    "res-relu": 0,
    "res-gelu": 1,
    "res-silu": 2,
    "nores-relu": 3,
    "res-none": 4,
    "res-radial": 5,
    "res-radial-tau": 6,
    "res-ln": 1,
    "res-ln-relu": 7,
    "res-rms": 8,
    "res-rms-relu": 9,
    "res-radial-track": 7,
    "res-leaky-0.5": 7,
    "res-leaky-0.9": 8,
    "res-leaky-0.99": 9,
    "res-relu-batch-centred": 1,
    "nores-relu-batch-centred": 2,
}


def condition_colours() -> dict[str, tuple]:
    """The colour of every MLP condition (the same in every figure of the book)."""
    colours = sns.color_palette("colorblind", n_colors=10)
    return {name: colours[index] for name, index in _CONDITION_COLOUR_INDEX.items()}


def draw_baseline(ax: plt.Axes, value: float, label: str = "random baseline") -> None:
    ax.axhline(value, label=label, **BASELINE_STYLE)


def plot_over_training(
    table: pd.DataFrame,
    metric: str,
    space: str = "",
    direction: int = 1,
    *,
    hue: str = "condition",
    ax: plt.Axes | None = None,
    baseline: float | None = None,
    colours: dict | None = None,
    hue_order: Sequence[str] | None = None,
    legend: bool = True,
    xscale: str = "symlog",
) -> plt.Axes:
    """Layer-mean of a metric against step (``xscale`` symlog or linear): seed mean as a line, ±1 sd
    as a band."""
    ax = ax or plt.gca()
    frame = per_run(table, metric, space, direction)
    hue_order = list(hue_order or frame[hue].unique())
    colours = colours or palette(hue_order)
    sns.lineplot(
        data=frame,
        x="step",
        y="value",
        hue=hue,
        hue_order=hue_order,
        palette=colours,
        errorbar="sd",
        marker="o",
        markersize=3.5,
        ax=ax,
        legend=legend,
    )
    mark_diverged(ax, table, frame, hue, colours)
    if baseline is not None:
        draw_baseline(ax, baseline)
    if xscale == "symlog":
        ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(left=0)
    ax.set_xlabel(f"training step ({xscale})")
    ax.set_title(quantity_label(metric, space, direction), fontsize="medium")
    ax.set_ylabel(
        "|cos|, mean over layer pairs" if metric.endswith("_cos") else quantity_label(metric, space, direction)
    )
    if legend:
        ax.legend(fontsize="small")
    return ax


#: How a run that did not train is drawn: an x at the step where its loss became non-finite (diverged), or where it
#: exploded (:mod:`geocont.validity`; its curve is cut there).
DIVERGED_STYLE = dict(marker="x", s=70, linewidths=2, zorder=5)


def mark_diverged(ax: plt.Axes, table: pd.DataFrame, frame: pd.DataFrame, hue: str, colours: dict) -> None:
    """An x per run of ``table`` that diverged or exploded, at that step, at its last value in ``frame`` (rows
    as :func:`per_run` gives; the bottom of the axes if it has none), in its ``hue`` colour."""
    runs = diverged_runs(table)
    labelled = set()
    for run in runs.itertuples(index=False):
        keys = {
            k: getattr(run, k) for k in runs.columns if k not in ("step", "last_loss", "status") and k in frame.columns
        }
        mine = frame
        for column, value in keys.items():
            mine = mine[mine[column] == value]
        mine = mine[mine["step"] < run.step].dropna(subset=["value"])
        y = float(mine.sort_values("step")["value"].iloc[-1]) if len(mine) else ax.get_ylim()[0]
        colour = colours.get(keys.get(hue), "black") if hue in keys else "black"
        label = f"{run.status} (x: step)"
        ax.scatter([run.step], [y], color=colour, label=None if label in labelled else label, **DIVERGED_STYLE)
        labelled.add(label)


def note_diverged(ax: plt.Axes, table: pd.DataFrame) -> None:
    """A line inside the axes naming the runs that diverged or exploded, which final values leave out."""
    runs = diverged_runs(table)
    if runs.empty:
        return
    names = [
        ", ".join(str(v) for k, v in run._asdict().items() if k not in ("step", "last_loss", "seed", "status"))
        + f" seed {run.seed} ({run.status} at step {run.step:,})"
        if "seed" in runs.columns
        else f"step {run.step:,}"
        for run in runs.itertuples(index=False)
    ]
    ax.text(
        0.01,
        0.99,
        f"x did not train, left out: {'; '.join(names)}",
        transform=ax.transAxes,
        va="top",
        fontsize="x-small",
        color="firebrick",
    )


def plot_layer_heatmap(
    table: pd.DataFrame,
    metric: str,
    space: str,
    direction: int = 1,
    *,
    rows: str = "condition",
    row_order: Sequence[str] | None = None,
    ax: plt.Axes | None = None,
) -> plt.Axes:
    """Adjacent-pair |cos| per layer pair at the last step, mean over seeds: rows x pairs."""
    ax = ax or plt.gca()
    frame = without_runs(at_final_step(select(table, metric, space, direction)), diverged_runs(table))
    grid = frame.groupby([rows, "layer"], observed=True)["value"].mean().unstack("layer")
    if row_order is not None:
        grid = grid.loc[[r for r in row_order if r in grid.index]]
    grid.columns = [f"{l}–{l + 1}" for l in grid.columns]
    sns.heatmap(grid, vmin=0, vmax=1, cmap="viridis", ax=ax, cbar_kws={"label": "|cos|"})
    ax.set_xlabel("adjacent layer pair (l, l+1)")
    ax.set_ylabel("")
    ax.set_title(quantity_label(metric, space, direction))
    return ax


def grouped_bars(
    frame: pd.DataFrame,
    *,
    x: str,
    hue: str,
    value: str = "value",
    ax: plt.Axes | None = None,
    order: Sequence | None = None,
    hue_order: Sequence | None = None,
    colours: dict | None = None,
    baselines: dict | None = None,
    baseline_label: str = "random baseline",
) -> plt.Axes:
    """Bars of the mean of ``value`` per (``x``, ``hue``), every row as a dot (a seed, a layer
    pair...), and optionally a black tick per bar at ``baselines[(x value, hue value)]``.

    The book's one grouped-bar figure: used for final values per condition, per projection and
    space, and per compression scheme.
    """
    ax = ax or plt.gca()
    order = list(order if order is not None else dict.fromkeys(frame[x]))
    hue_order = list(hue_order if hue_order is not None else dict.fromkeys(frame[hue]))
    colours = colours or palette(hue_order)
    _draw_bars(
        ax,
        frame,
        x=x,
        hue=hue,
        value=value,
        order=order,
        hue_order=hue_order,
        colours=colours,
        baselines=baselines,
        baseline_label=baseline_label,
    )
    ax.set_xticks(range(len(order)), [str(g) for g in order])
    ax.set_xlabel(x)
    ax.legend(fontsize="small")
    return ax


def _draw_bars(
    ax: plt.Axes,
    frame: pd.DataFrame,
    *,
    x: str,
    hue: str,
    value: str,
    order: list,
    hue_order: list,
    colours: dict,
    baselines: dict | None,
    baseline_label: str,
) -> None:
    """The bars of :func:`grouped_bars`, with their dots and baseline ticks; the legend labels go on each
    level's first bar and on the first tick."""
    one_bar = x == hue  # colour by the x groups: one centred bar per group
    width = 0.8 if one_bar else 0.8 / len(hue_order)
    baseline_labelled = False
    for j, level in enumerate(hue_order):
        labelled = False  # the legend entry goes on the level's first bar (its first groups may lack values)
        for i, group in enumerate(order):
            values = frame[(frame[x] == group) & (frame[hue] == level)][value].dropna()
            position = i if one_bar else i - 0.4 + width * (j + 0.5)
            if len(values):
                _bar_with_dots(
                    ax,
                    position=position,
                    values=values,
                    width=width,
                    colour=colours[level],
                    label=None if labelled else str(level),
                )
                labelled = True
            if baselines is not None and (group, level) in baselines:
                _baseline_tick(
                    ax,
                    baselines[(group, level)],
                    position=position,
                    width=width,
                    label=None if baseline_labelled else baseline_label,
                )
                baseline_labelled = True


def _bar_with_dots(
    ax: plt.Axes, *, position: float, values: pd.Series, width: float, colour: Any, label: str | None
) -> None:
    """One bar at ``position`` at the mean of ``values``, with each value as a dot on it."""
    ax.bar(position, values.mean(), width=width * 0.95, color=colour, alpha=0.75, label=label)
    ax.scatter(
        [position] * len(values),
        values,
        color=colour,
        edgecolors="black",
        linewidths=0.6,
        s=25,
        zorder=3,
    )


def _baseline_tick(ax: plt.Axes, level: float, *, position: float, width: float, label: str | None) -> None:
    """A black tick at height ``level`` across the bar at ``position``."""
    ax.hlines(
        level,
        position - width / 2,
        position + width / 2,
        color="black",
        linewidth=2,
        zorder=4,
        label=label,
    )


def plot_final_by(
    table: pd.DataFrame,
    metric: str,
    space: str,
    direction: int,
    *,
    x: str,
    hue: str,
    ax: plt.Axes | None = None,
    baseline: float | None = None,
    order: Sequence[str] | None = None,
    hue_order: Sequence[str] | None = None,
    colours: dict | None = None,
    step: int | None = None,
) -> plt.Axes:
    """Final layer-mean values (or those at ``step``, e.g. 0) as bars (seed mean) with each seed as a dot."""
    frame = per_run(table, metric, space, direction)
    frame = at_final_step(frame) if step is None else frame[frame["step"] == step]
    diverged = diverged_runs(table)
    if step is not None:
        diverged = diverged[diverged["step"] <= step]
    frame = without_runs(frame, diverged)
    ax = grouped_bars(frame, x=x, hue=hue, ax=ax, order=order, hue_order=hue_order, colours=colours)
    if len(diverged):
        note_diverged(ax, table if step is None else table[table["step"] <= step])
    if baseline is not None:
        draw_baseline(ax, baseline)
        ax.legend(fontsize="small")
    ax.set_ylabel(quantity_label(metric, space, direction))
    return ax


def projection_colours() -> dict[str, tuple]:
    """A fixed colour per projection (q_proj ... down_proj), the same in every figure."""
    return dict(zip(PROJECTIONS, sns.color_palette("colorblind", n_colors=len(PROJECTIONS))))


def plot_depth_continuity(
    table: pd.DataFrame, *, axes: Sequence[plt.Axes] | None = None, title: str = ""
) -> plt.Figure:
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
    for ax, (column, baseline, label) in zip(
        axes, [("v1_cos", "v1_baseline", "input space: v1 |cos|"), ("u1_cos", "u1_baseline", "output space: u1 |cos|")]
    ):
        for projection in projections:
            rows = pairs[pairs["projection"] == projection]
            ax.plot(
                rows["layer"],
                rows[column],
                marker="o",
                markersize=3,
                color=colours[projection],
                label=projection.replace("_proj", ""),
            )
            ax.axhline(rows[baseline].iloc[0], color=colours[projection], linestyle=":", linewidth=1, alpha=0.8)
        ax.set(
            xlabel="adjacent layer pair (l, l+1), labelled by l",
            ylabel="|cos| with the next layer",
            ylim=(0, 1.02),
            title=label,
        )
    axes[0].plot([], [], color="0.35", linestyle=":", label="random baseline (per projection)")
    if title:
        fig.suptitle(title, fontsize="medium")
    figure_legend(fig, axes[0], ncol=len(projections) + 1)
    return fig

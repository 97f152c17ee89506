"""Figures for the book: one theme, labelled axes, the random baseline, seeds as a band.

Figures read tables; they never train.
"""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
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
    ("cumgrad_cos", "output", 1): "cumulative-gradient u1 |cos|",
    ("weight_cumgrad_cos", "input", 1): "|cos(v1 of W, v1 of cumulative gradient)|",
    ("weight_cumgrad_cos", "output", 1): "|cos(u1 of W, u1 of cumulative gradient)|",
    ("v1_turn", "input", 1): "v1 turn since previous snapshot (degrees)",
    ("v1_turn", "output", 1): "u1 turn since previous snapshot (degrees)",
    ("co_rotation", "input", 1): "co-rotation of adjacent v1 (signed cos)",
    ("co_rotation", "output", 1): "co-rotation of adjacent u1 (signed cos)",
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
    hue_order: Sequence[str] | None = None, colours: dict | None = None, step: int | None = None,
) -> plt.Axes:
    """Final layer-mean values (or those at ``step``, e.g. 0) as bars (seed mean) with each seed as a dot."""
    ax = ax or plt.gca()
    frame = per_run(table, metric, space, direction)
    frame = at_final_step(frame) if step is None else frame[frame["step"] == step]
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


#: The four continuity curves of a transfer timeline: (metric, label).
TIMELINE_CURVES = (
    ("grad_cos", "gradient v1 (adjacent layers)"),
    ("cumgrad_cos", "cumulative gradient v1 (adjacent layers)"),
    ("weight_cos", "weight v1 (adjacent layers)"),
    ("weight_cumgrad_cos", "weight v1 vs its cumulative gradient's v1 (same layer)"),
)


#: How each event step is drawn on a timeline: column -> (legend label, line style).
EVENT_STYLES = {
    "crossing_step": ("‖ΔW‖_F = ‖W(0)‖_F (per seed)", dict(color="black", linestyle="--", linewidth=0.9, alpha=0.7)),
    "spectral_crossing_step": ("‖ΔW‖₂ = ‖W(0)‖₂ (per seed)", dict(color="tab:purple", linestyle="-.", linewidth=0.9,
                                                                 alpha=0.7)),
    "rise_step": ("half of the continuity rise (per seed)", dict(color="tab:red", linestyle=":", linewidth=1.3, alpha=0.8)),
}


def _mark_events(ax: plt.Axes, events: pd.DataFrame) -> None:
    """Each seed's event steps (:data:`EVENT_STYLES`) as vertical lines."""
    for column, (_, style) in EVENT_STYLES.items():
        for step in events[column].dropna() if column in events else ():
            ax.axvline(step, **style)


def plot_transfer_timeline(
    table: pd.DataFrame, events: pd.DataFrame, *, baseline: float, title: str = "", space: str = "input",
) -> plt.Figure:
    """One run group's gradient-to-weight timeline on a shared log-step axis.

    Left: the four continuity curves of :data:`TIMELINE_CURVES` (seed mean, ±1 sd band)
    with the random baseline. Right: ``||W(t) - W(0)|| / ||W(0)||`` in the Frobenius and
    the spectral norm (log scale) with the crossing level 1. Vertical lines: each seed's
    crossing steps and the step where weight continuity covered half its rise
    (:data:`EVENT_STYLES`).
    """
    from .analysis import CROSSING_LEVEL

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4), sharex=True, gridspec_kw={"width_ratios": [1.6, 1]})
    colours = sns.color_palette("colorblind", len(TIMELINE_CURVES))
    for (metric, label), colour in zip(TIMELINE_CURVES, colours):
        frame = per_run(table, metric, space, 1)
        sns.lineplot(data=frame, x="step", y="value", errorbar="sd", color=colour, label=label, ax=left,
                     marker="o", markersize=3)
    draw_baseline(left, baseline)
    left.set_ylim(0, 1.02)
    left.set_ylabel("|cos|, layer mean")
    for metric, colour, label in (("rel_update", "0.2", "Frobenius ‖·‖_F"), ("rel_update_spectral", "tab:purple",
                                                                             "spectral ‖·‖₂")):
        update = per_run(table, metric)
        if not update.empty:
            sns.lineplot(data=update, x="step", y="value", errorbar="sd", color=colour, marker="o", markersize=3,
                         ax=right, label=label)
    right.axhline(CROSSING_LEVEL, color="black", linewidth=0.8)
    right.set_yscale("log")
    right.set_ylabel("‖W(t) − W(0)‖ / ‖W(0)‖")
    right.legend(fontsize="small")
    for ax in (left, right):
        _mark_events(ax, events)
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlim(left=0)
        ax.set_xlabel("training step (symlog)")
    for label, style in EVENT_STYLES.values():
        left.plot([], [], label=label, **style)
    if title:
        fig.suptitle(title, fontweight="bold")
    handles, labels = left.get_legend_handles_labels()
    left.get_legend().remove()
    fig.legend(handles, labels, loc="lower center", ncol=2, frameon=False, fontsize="small")
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    return fig


def plot_event_steps(events: pd.DataFrame, *, crossing: str = "crossing_step", hue: str = "init_scale",
                     ax: plt.Axes | None = None) -> plt.Axes:
    """Crossing step (x; ``crossing`` names the norm's column) against continuity-rise step
    (y), one dot per run, log-log, with the diagonal "rise = crossing"."""
    ax = ax or plt.gca()
    frame = events.dropna(subset=[crossing, "rise_step"])
    levels = sorted(events[hue].unique())
    colours = dict(zip(levels, sns.color_palette("viridis", len(levels))))
    sns.scatterplot(data=frame, x=crossing, y="rise_step", hue=hue, hue_order=levels, palette=colours,
                    s=60, edgecolor="black", ax=ax)
    positive = frame[[crossing, "rise_step"]].to_numpy()
    positive = positive[positive > 0]
    if positive.size:
        low, high = positive.min() / 2, positive.max() * 2
        ax.plot([low, high], [low, high], color="0.4", linestyle="--", linewidth=1, label="rise = crossing")
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1)
    ax.set_xlabel(f"step where {EVENT_STYLES[crossing][0].split(' (')[0].replace('=', '>')} first")
    ax.set_ylabel("step of half the continuity rise")
    ax.legend(title=hue, fontsize="small")
    return ax


def show_figure(fig: plt.Figure, name: str, caption: str) -> None:
    """Show a finished figure as a numbered book figure with ``caption``; ``name`` is its label.

    Prose elsewhere in the book refers to it with ``{numref}`name``` ("Figure 3"). Names
    are global to the book: prefix them with the chapter (``"mlp-weight-over-training"``).
    The caption is MyST Markdown and may hold computed numbers.

    Under ``python -m geocont.book`` (``$GEOCONT_BOOK`` set) the figure is glued with
    myst-nb and a ``{glue:figure}`` directive is emitted, which the book numbers; anywhere
    else (Jupyter, nbval, plain papermill) it is simply shown with its caption below.
    Use it instead of ``plt.show()`` as the last figure call of a cell::

        fig, ax = plt.subplots()
        ...
        plotting.show_figure(fig, "mlp-final-v1", f"Final v1 continuity; res-relu {estimate}.")
    """
    import os

    from IPython.display import Markdown, display

    if not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"figure name {name!r} must be letters, digits, '-' and '_' only")
    if os.environ.get("GEOCONT_BOOK"):
        from myst_nb import glue

        glue(name, fig, display=False)
        plt.close(fig)
        display(Markdown(f"```{{glue:figure}} {name}\n:name: {name}\n\n{caption}\n```"))
    else:
        plt.show()
        display(Markdown(f"**{name}.** {caption}"))
#: Colours of the three sharing schemes (fixed across the compression chapter's figures).
SHARING_STYLE = {
    "input": dict(label="input-space basis shared (V)", marker="o"),
    "output": dict(label="output-space basis shared (U)", marker="s"),
    "none": dict(label="no sharing (per-layer rank k)", marker="^", linestyle=":"),
}


def sharing_colours() -> dict[str, tuple]:
    colours = sns.color_palette("colorblind", 3)
    return dict(zip(SHARING_STYLE, colours))


def plot_sharing_tradeoff(summary: pd.DataFrame, projections: Sequence[str], guideline: dict[str, str | None],
                          *, title: str = "", ncols: int = 4) -> plt.Figure:
    """Per projection: loss increase (nats/token) against the parameters kept (% of dense),
    one line per sharing scheme (mean over seeds; a band of ±1 sd where there are several);
    the paper's recommended space is named in each panel's title."""
    colours = sharing_colours()
    nrows = -(-len(projections) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 3.1 * nrows), squeeze=False)
    for ax, projection in zip(axes.flat, projections):
        frame = summary[summary["projection"] == projection]
        for sharing, style in SHARING_STYLE.items():
            rows = frame[frame["sharing"] == sharing]
            per_budget = rows.groupby("budget").agg(x=("budget_used", "mean"), y=("loss_increase", "mean"),
                                                    sd=("loss_increase", "std")).reset_index()
            x = 100 * per_budget["x"]
            ax.plot(x, per_budget["y"], color=colours[sharing], label=style["label"], marker=style["marker"],
                    linestyle=style.get("linestyle", "-"))
            if rows["seed"].nunique() > 1:
                ax.fill_between(x, per_budget["y"] - per_budget["sd"], per_budget["y"] + per_budget["sd"],
                                color=colours[sharing], alpha=0.2)
        advice = guideline.get(projection)
        ax.set_title(f"{projection.replace('_proj', '')} (paper: {advice or 'neither'})", fontsize="medium")
        ax.set_xlabel("parameters kept (% of dense)")
        ax.set_ylabel("loss increase (nats/token)")
        ax.axhline(0, **BASELINE_STYLE)
    for ax in list(axes.flat)[len(projections):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False, bbox_to_anchor=(0.5, -0.01))
    if title:
        fig.suptitle(title, fontweight="bold")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def plot_sharing_advice(advantage: pd.DataFrame, projections: Sequence[str], guideline: dict[str, str | None],
                        *, ax: plt.Axes | None = None, models: Sequence[str] | None = None) -> plt.Axes:
    """Which space to share, per projection and model: the input-space advantage
    ``(dL_out - dL_in) / (dL_out + dL_in)`` (> 0: share the input space), mean as a bar and
    each budget (x seed) as a dot; the paper's advice is written under each projection."""
    ax = ax or plt.gca()
    models = list(models or dict.fromkeys(advantage["model"]))
    colours = palette(models)
    width = 0.8 / len(models)
    for j, model in enumerate(models):
        for i, projection in enumerate(projections):
            values = advantage[(advantage["model"] == model) & (advantage["projection"] == projection)]["advantage"]
            x = i - 0.4 + width * (j + 0.5)
            ax.bar(x, values.mean(), width=width * 0.9, color=colours[model], alpha=0.8, label=model if i == 0 else None)
            ax.scatter([x] * len(values), values, color="black", s=10, zorder=3)
    ax.axhline(0, **BASELINE_STYLE)
    ax.set_xticks(range(len(projections)),
                  [f"{p.replace('_proj', '')}\n(paper: {guideline.get(p) or 'neither'})" for p in projections])
    ax.set_ylim(-1.05, 1.05)
    ax.set_ylabel("input-space advantage\n(+: share input, −: share output)")
    ax.legend(fontsize="small")
    return ax


def plot_pruning(pruning: pd.DataFrame, correlations: dict, *, axes: Sequence[plt.Axes]) -> None:
    """Per model: the loss increase of dropping each block against the block's continuity."""
    for ax, (model, frame) in zip(axes, pruning.groupby("model", sort=False)):
        per_layer = frame.groupby(["seed", "layer"])[["loss_increase", "continuity"]].mean().reset_index()
        points = ax.scatter(per_layer["continuity"], per_layer["loss_increase"], c=per_layer["layer"], cmap="viridis",
                            edgecolor="black", linewidth=0.4)
        ax.figure.colorbar(points, ax=ax, label="block index")
        values = per_layer["loss_increase"].abs()
        if values.max() > 30 * max(values.median(), 1e-3):  # one catastrophic block: show the rest too
            ax.set_yscale("symlog", linthresh=float(max(values.median(), 1e-3)))
            ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%g"))
        ax.set_xlabel("block continuity (mean |cos| of v1/u1 with its neighbours)")
        ax.set_ylabel("loss increase when dropped (nats/token)")
        ax.set_title(f"{model}: {correlations[model]}", fontsize="medium")


def plot_grouping_control(grouping: pd.DataFrame, projections: Sequence[str], *, ax: plt.Axes | None = None,
                          title: str = "") -> plt.Axes:
    """How much worse sharing gets when the group holds distant instead of adjacent layers:
    the reconstruction error's increase in percent, per projection and space (bar: mean over
    seeds; dots: seeds)."""
    ax = ax or plt.gca()
    wide = grouping.pivot_table(index=["seed", "projection", "sharing"], columns="grouping",
                                values="relative_error").reset_index()
    wide["penalty"] = 100 * (wide["distant"] / wide["adjacent"] - 1)
    colours = sharing_colours()
    width = 0.38
    for offset, sharing in zip((-width / 2, width / 2), ("input", "output")):
        for i, projection in enumerate(projections):
            values = wide[(wide["projection"] == projection) & (wide["sharing"] == sharing)]["penalty"]
            x = i + offset
            ax.bar(x, values.mean(), width=width * 0.95, color=colours[sharing], alpha=0.8,
                   label=SHARING_STYLE[sharing]["label"] if i == 0 else None)
            ax.scatter([x] * len(values), values, color="black", s=10, zorder=3)
    ax.axhline(0, **BASELINE_STYLE)
    ax.set_xticks(range(len(projections)), [p.replace("_proj", "") for p in projections])
    ax.set_ylabel("reconstruction error, distant\nvs adjacent groups (% larger)")
    if title:
        ax.set_title(title, fontsize="medium")
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

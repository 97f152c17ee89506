"""timeline: what the chapter shows (figures, tables, computed prose), from :mod:`.compute`.

The computed prose is worded from the templates in ``prose.md`` (:mod:`geocont.book.prose`); what
it states, and which case applies, is computed in :mod:`.compute` (the findings)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython.display import Markdown

from ... import metrics, plotting
from ...book.chapter import undefined_sentence
from ...book.figures import show_figure
from ...plotting import draw_baseline
from ...statistics import per_run, turn_rates
from ..common import mlp_verdict
from .compute import (
    CROSSING_LEVEL,
    CROSSINGS,
    PROSE,
    EventStep,
    Results,
    TransferSummary,
    condition_summaries,
    drift_verdicts,
    init_scale_events,
    optimizer_summaries,
    rise_against_prediction,
    rotation_drift,
    run_summary,
    step_zero,
    weights_follow,
)

#: The closing list: one bullet per claim, under the run's scale, seeds and data.
verdict = mlp_verdict


def run_note(results: Results) -> Markdown:
    summary = run_summary(results)
    return Markdown(PROSE.render("run-note", **vars(summary), undefined=undefined_sentence(results.table)))


def step0_caption(results: Results) -> str:
    """The caption of the step-0 figure (the finding: :func:`.compute.step_zero`)."""
    finding = step_zero(results)
    conditions = "; ".join(PROSE.render("step0-item", **vars(c)) for c in finding.conditions)
    return PROSE.render("step0-caption", baseline=finding.baseline, conditions=conditions)


def step0_figure(results: Results) -> None:
    """Gradient v1 and u1 continuity at step 0 per condition."""
    table, order, baseline = results.table, results.order, results.baseline
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), sharey=True)
    for ax, space in zip(axes, ("input", "output")):
        plotting.plot_final_by(
            table,
            "grad_cos",
            space,
            1,
            x="condition",
            hue="condition",
            order=order,
            hue_order=order,
            colours=plotting.condition_colours(),
            ax=ax,
            baseline=baseline,
            step=0,
        )
        ax.set_title(f"step 0, {plotting.quantity_label('grad_cos', space, 1)}", fontsize="medium")
        ax.set_ylim(0, 1.02)
        ax.get_legend().remove()
    fig.tight_layout()
    show_figure(fig, "timeline-step0", step0_caption(results))


def _seed_events(summary: TransferSummary) -> str:
    """Each seed's crossing steps (Frobenius / spectral), then each seed's rise step."""

    def crossing(event: EventStep) -> str:
        return PROSE.choose("crossing-step", event.case, step=event.step)

    crossings = ", ".join(
        PROSE.render("seed-crossings-item", frobenius=crossing(s.crossing), spectral=crossing(s.spectral_crossing))
        for s in summary.seeds
    )
    rises = ", ".join(PROSE.choose("rise-step", s.rise.case, step=s.rise.step) for s in summary.seeds)
    return PROSE.render("seed-events", crossings=crossings, rises=rises)


def condition_timeline_caption(summary: TransferSummary) -> str:
    """The caption of one condition's transfer timeline."""
    return PROSE.render(
        "condition-timeline-caption", **vars(summary), condition=summary.label, seed_events=_seed_events(summary)
    )


def condition_timelines(results: Results) -> None:
    """One transfer-timeline figure per condition."""
    for summary in condition_summaries(results):
        condition = summary.label
        fig = plot_transfer_timeline(
            results.table[results.table["condition"] == condition],
            results.events[results.events["condition"] == condition],
            baseline=results.baseline,
            title=condition,
        )
        show_figure(fig, f"timeline-{condition}", condition_timeline_caption(summary))


def _per_condition(items) -> str:
    """``c1 x; c2 y``: (condition, value) pairs as a list of ``condition-item``."""
    return "; ".join(PROSE.render("condition-item", condition=c, value=v) for c, v in items)


def rise_note(results: Results) -> Markdown:
    """The relative update at the rise against 2/sqrt(n), and the spectral crossing against the rise."""
    finding = rise_against_prediction(results)
    conditions = finding.conditions
    return Markdown(
        PROSE.render(
            "rise-note",
            width=finding.width,
            predicted=finding.predicted,
            rel_update_at_rise=_per_condition((c.condition, c.rel_update_at_rise) for c in conditions),
            spectral_crossing_step=_per_condition((c.condition, c.spectral_crossing_step) for c in conditions),
            rise_step=_per_condition((c.condition, c.rise_step) for c in conditions),
        )
    )


#: The events table's columns and their headings.
EVENT_COLUMNS = {
    "crossing_step": "crossing step (F)",
    "spectral_crossing_step": "crossing step (2)",
    "rise_step": "rise step",
    "rel_update_at_rise": "‖ΔW‖_F/‖W(0)‖_F at rise",
    "log10_rise_over_crossing": "log10(rise/crossing F)",
    "log10_rise_over_spectral_crossing": "log10(rise/crossing 2)",
    "weight_v1_final": "final weight v1",
    "weight_cumgrad_final": "final weight/cum.-grad. v1",
    "rel_update_final": "final ‖ΔW‖/‖W(0)‖",
}


EVENTS_TABLE_NOTE = Markdown(PROSE.render("events-table-note"))


def events_table(results: Results):
    """Event steps and final values per run (a pandas Styler), conditions in the book's order."""
    frame = results.events.set_index(["condition", "seed"])[list(EVENT_COLUMNS)].rename(columns=EVENT_COLUMNS)
    return frame.loc[results.order].style.format(precision=2, na_rep="–")


def init_scale_caption(results: Results) -> str:
    """The caption of the init-scale figure (the finding: :func:`.compute.init_scale_events`)."""
    finding = init_scale_events(results)
    runs = ", ".join(PROSE.render("init-never-crossed-item", init_scale=i, seed=s) for i, s in finding.never_crossed)
    scales = "; ".join(PROSE.render("init-scale-item", **vars(s)) for s in finding.scales)
    return PROSE.render(
        "init-scale-caption", never_crossed=PROSE.choose("init-never-crossed", finding.case, runs=runs), scales=scales
    )


def init_scale_figure(results: Results) -> None:
    """Weight v1 and relative update per init scale (top), crossing against rise step per run (bottom)."""
    init_table, init_events = results.init_table, results.init_events
    init_order = sorted(init_table["init_scale"].unique())
    init_colours = dict(zip(init_order, sns.color_palette("viridis", len(init_order))))
    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    for ax, (metric, space, direction) in zip(axes[0], [("weight_cos", "input", 1), ("rel_update", "", 0)]):
        plotting.plot_over_training(
            init_table,
            metric,
            space,
            direction,
            hue="init_scale",
            ax=ax,
            colours=init_colours,
            hue_order=init_order,
            baseline=results.baseline if metric.endswith("_cos") else None,
        )
    axes[0, 1].axhline(CROSSING_LEVEL, color="black", linewidth=0.8)
    axes[0, 1].set_yscale("log")
    for ax, crossing in zip(axes[1], CROSSINGS):
        plot_event_steps(init_events, crossing=crossing, ax=ax)
    fig.tight_layout()
    show_figure(fig, "timeline-init-scale", init_scale_caption(results))


def rotation_caption(results: Results) -> str:
    """The caption of the rotation figure (the finding: :func:`.compute.rotation_drift`)."""
    finding = rotation_drift(results)
    conditions = "; ".join(PROSE.render("rotation-item", **vars(c)) for c in finding.conditions)
    return PROSE.render("rotation-caption", window_start=finding.window_start, conditions=conditions)


def rotation_figure(results: Results) -> None:
    """v1 / u1 turn per snapshot and co-rotation of adjacent layers over training."""
    table, order, colours = results.table, results.order, plotting.condition_colours()
    fig, axes = plt.subplots(2, 2, figsize=(14, 8.5), sharex=True)
    for row, space in enumerate(("input", "output")):
        rates = turn_rates(table, space)
        sns.lineplot(
            data=per_run(rates, "turn", space, 1),
            x="step",
            y="value",
            hue="condition",
            hue_order=order,
            palette=colours,
            errorbar="sd",
            marker="o",
            markersize=3.5,
            ax=axes[row, 0],
            legend=False,
        )
        axes[row, 0].set(
            xscale="symlog",
            yscale="log",
            xlabel="training step (symlog)",
            ylabel="degrees per 1,000 steps",
            title=f"{metrics.vector_name(space)} turn rate since the previous snapshot",
        )
        plotting.plot_over_training(
            table, "co_rotation", space, 1, ax=axes[row, 1], colours=colours, hue_order=order, legend=row == 1
        )
        axes[row, 1].axhline(0, color="black", linewidth=0.8)
        axes[row, 1].set_ylabel("signed cos")
        axes[row, 1].set_ylim(-1.02, 1.02)
    plotting.figure_legend(fig, axes[1, 1])
    show_figure(fig, "timeline-rotation", rotation_caption(results))


def alignment_before_after(results: Results) -> pd.DataFrame:
    """Per condition: weight v1 at its peak and at the end, and the weight / cumulative-gradient
    alignment at those two steps (mean ± sd over seeds): before and after a fall."""
    columns = {
        "peak_step": "step of the peak",
        "weight_v1_peak": "weight v1 at peak",
        "weight_v1_final": "weight v1 final",
        "weight_cumgrad_at_peak": "weight/cum.-grad. v1 at peak",
        "weight_cumgrad_final": "weight/cum.-grad. v1 final",
    }
    return pd.DataFrame(
        {label: {c: str(results.of(c, column)) for c in results.order} for column, label in columns.items()}
    ).rename_axis("condition")


def optimizer_timeline_caption(results: Results, summary: TransferSummary) -> str:
    """The caption of the reference condition's transfer timeline under one optimizer."""
    return PROSE.render(
        "optimizer-timeline-caption",
        **vars(summary),
        reference=results.reference,
        optimizer=summary.label,
        seed_events=_seed_events(summary),
    )


def optimizer_timelines(results: Results) -> None:
    """One transfer-timeline figure per optimizer of the baseline condition."""
    events, table = results.optimizer_events, results.optimizer_table
    for number, summary in enumerate(optimizer_summaries(results), start=1):
        optimizer = summary.label
        fig = plot_transfer_timeline(
            table[table["optimizer"] == optimizer],
            events[events["optimizer"] == optimizer],
            baseline=results.baseline,
            title=f"{results.reference}, {optimizer}",
        )
        show_figure(fig, f"timeline-optimizer-{number}", optimizer_timeline_caption(results, summary))


def _drift_reading(claims: pd.DataFrame) -> str:
    """The drift claims together (the finding: :func:`.compute.drift_verdicts`)."""
    finding = drift_verdicts(claims)
    verdicts = "; ".join(PROSE.render("drift-verdict-item", condition=c, verdict=v) for c, v in finding.verdicts)
    return PROSE.choose(
        "drift-verdict", finding.case, conditions=", ".join(c for c, _ in finding.verdicts), verdicts=verdicts
    )


def reading(results: Results, claims: pd.DataFrame) -> Markdown:
    """The chapter's reading of its numbers: step 0, when the weights follow, rotation drift."""
    start, follow, rotation = step_zero(results), weights_follow(results, claims), rotation_drift(results)
    frobenius = PROSE.choose(
        "frobenius-crossing",
        follow.case,
        never_crossed=follow.never_crossed,
        runs=follow.runs,
        crossing_step=follow.crossing_step,
    )
    drifts = rotation.conditions
    paragraphs = [
        PROSE.choose("reading-step0", start.case, **vars(start)),
        PROSE.render("reading-follow", **vars(follow), frobenius_crossing=frobenius),
        PROSE.render(
            "reading-drift",
            window_start=rotation.window_start,
            turn_rates=", ".join(PROSE.render("turn-item", **vars(c)) for c in drifts),
            co_rotations=", ".join(
                PROSE.render("condition-item", condition=c.condition, value=c.co_rotation) for c in drifts
            ),
            alignments=", ".join(PROSE.render("alignment-item", **vars(c)) for c in drifts),
            drift_verdict=_drift_reading(claims),
        ),
    ]
    return Markdown("\n\n".join(p for p in paragraphs if p))


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
    "spectral_crossing_step": (
        "‖ΔW‖₂ = ‖W(0)‖₂ (per seed)",
        dict(color="tab:purple", linestyle="-.", linewidth=0.9, alpha=0.7),
    ),
    "rise_step": (
        "half of the continuity rise (per seed)",
        dict(color="tab:red", linestyle=":", linewidth=1.3, alpha=0.8),
    ),
}


def _mark_events(ax: plt.Axes, events: pd.DataFrame) -> None:
    """Each seed's event steps (:data:`EVENT_STYLES`) as vertical lines."""
    for column, (_, style) in EVENT_STYLES.items():
        for step in events[column].dropna() if column in events else ():
            ax.axvline(step, **style)


def _continuity_panel(ax: plt.Axes, table: pd.DataFrame, *, baseline: float, space: str) -> None:
    """The four continuity curves of :data:`TIMELINE_CURVES` (seed mean, ±1 sd band) and the random baseline."""
    colours = sns.color_palette("colorblind", len(TIMELINE_CURVES))
    for (metric, label), colour in zip(TIMELINE_CURVES, colours):
        frame = per_run(table, metric, space, 1)
        sns.lineplot(
            data=frame, x="step", y="value", errorbar="sd", color=colour, label=label, ax=ax, marker="o", markersize=3
        )
    draw_baseline(ax, baseline)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("|cos|, layer mean")


def _update_panel(ax: plt.Axes, table: pd.DataFrame) -> None:
    """The relative update in the Frobenius and the spectral norm (log scale), with the crossing level."""
    for metric, colour, label in (
        ("rel_update", "0.2", "Frobenius ‖·‖_F"),
        ("rel_update_spectral", "tab:purple", "spectral ‖·‖₂"),
    ):
        update = per_run(table, metric)
        if not update.empty:
            sns.lineplot(
                data=update,
                x="step",
                y="value",
                errorbar="sd",
                color=colour,
                marker="o",
                markersize=3,
                ax=ax,
                label=label,
            )
    ax.axhline(CROSSING_LEVEL, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("‖W(t) − W(0)‖ / ‖W(0)‖")
    ax.legend(fontsize="small")


def _timeline_legend(fig: plt.Figure, left: plt.Axes) -> None:
    """The left panel's legend, with the event lines' styles, moved below the figure."""
    for label, style in EVENT_STYLES.values():
        left.plot([], [], label=label, **style)
    handles, labels = left.get_legend_handles_labels()
    left.get_legend().remove()
    fig.legend(handles, labels, loc="lower center", ncol=2, frameon=False, fontsize="small")


def plot_transfer_timeline(
    table: pd.DataFrame,
    events: pd.DataFrame,
    *,
    baseline: float,
    title: str = "",
    space: str = "input",
) -> plt.Figure:
    """One run group's gradient-to-weight timeline on a shared log-step axis.

    Left: the four continuity curves of :data:`TIMELINE_CURVES` (seed mean, ±1 sd band)
    with the random baseline. Right: ``||W(t) - W(0)|| / ||W(0)||`` in the Frobenius and
    the spectral norm (log scale) with the crossing level 1. Vertical lines: each seed's
    crossing steps and the step where weight continuity covered half its rise
    (:data:`EVENT_STYLES`).
    """

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4), sharex=True, gridspec_kw={"width_ratios": [1.6, 1]})
    _continuity_panel(left, table, baseline=baseline, space=space)
    _update_panel(right, table)
    for ax in (left, right):
        _mark_events(ax, events)
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlim(left=0)
        ax.set_xlabel("training step (symlog)")
    if title:
        fig.suptitle(title, fontweight="bold")
    _timeline_legend(fig, left)
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    return fig


def plot_event_steps(
    events: pd.DataFrame, *, crossing: str = "crossing_step", hue: str = "init_scale", ax: plt.Axes | None = None
) -> plt.Axes:
    """Crossing step (x; ``crossing`` names the norm's column) against continuity-rise step
    (y), one dot per run, log-log, with the diagonal "rise = crossing"."""
    ax = ax or plt.gca()
    frame = events.dropna(subset=[crossing, "rise_step"])
    levels = sorted(events[hue].unique())
    colours = dict(zip(levels, sns.color_palette("viridis", len(levels))))
    sns.scatterplot(
        data=frame,
        x=crossing,
        y="rise_step",
        hue=hue,
        hue_order=levels,
        palette=colours,
        s=60,
        edgecolor="black",
        ax=ax,
    )
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

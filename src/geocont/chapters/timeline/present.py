"""timeline: what the chapter shows (figures, tables, computed prose), from :mod:`.compute`."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython.display import Markdown

from ... import metrics, plotting
from ...book.chapter import claim, undefined_sentence
from ...book.figures import show_figure
from ...plotting import draw_baseline
from ...statistics import Estimate, estimate, estimate_at_step, per_run, turn_rates
from ...tables import RUN_KEYS
from .. import mlp_runs
from .compute import CROSSINGS, CROSSING_LEVEL, DRIFT_WINDOW_START, NO_RESIDUAL, Results, _NORMS, claims, drift


def run_note(results: Results) -> Markdown:
    n_runs = sum(frame.groupby(RUN_KEYS, observed=True).ngroups
                 for frame in (results.table, results.optimizer_table, results.init_table))
    return Markdown(f"Random baseline at d = {results.settings.base.width}: E|cos| = **{results.baseline:.3f}**. "
                    f"{n_runs} runs (some shared between the sweeps), {results.table['step'].nunique()} snapshots each. "
                    + undefined_sentence(results.table))


def step0_figure(results: Results) -> None:
    """Gradient v1 and u1 continuity at step 0 per condition."""
    table, order, baseline = results.table, results.order, results.baseline
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), sharey=True)
    for ax, space in zip(axes, ("input", "output")):
        plotting.plot_final_by(table, "grad_cos", space, 1, x="condition", hue="condition", order=order,
                               hue_order=order, colours=plotting.condition_colours(), ax=ax, baseline=baseline, step=0)
        ax.set_title(f"step 0, {plotting.quantity_label('grad_cos', space, 1)}", fontsize="medium")
        ax.set_ylim(0, 1.02)
        ax.get_legend().remove()
    fig.tight_layout()

    def at_start(space: str, condition: str) -> Estimate:
        return estimate_at_step(table, 0, "grad_cos", space, 1, condition=condition)

    show_figure(fig, "timeline-step0", "Gradient continuity at step 0 (bars: seed mean; dots: seeds; dashed: "
                f"random baseline {baseline:.3f}). v1 / u1: "
                + "; ".join(f"{c} {at_start('input', c)} / {at_start('output', c)}" for c in order) + ".")


def _step_text(step: float, missing: str) -> str:
    return missing if math.isnan(step) else f"{step:g}"


def _seed_events(runs: pd.DataFrame) -> str:
    """Each seed's crossing steps (Frobenius / spectral), then each seed's rise step."""
    crossings = ", ".join(f"{_step_text(f, 'never')} / {_step_text(s, 'never')}"
                          for f, s in zip(runs["crossing_step"], runs["spectral_crossing_step"]))
    rises = ", ".join(_step_text(s, "none") for s in runs["rise_step"])
    return f"crossing step per seed (Frobenius / spectral) {crossings}; rise step per seed {rises}"


def condition_timelines(results: Results) -> None:
    """One transfer-timeline figure per condition."""
    for condition in results.order:
        runs = results.events[results.events["condition"] == condition]
        fig = plot_transfer_timeline(results.table[results.table["condition"] == condition], runs,
                                     baseline=results.baseline, title=condition)
        show_figure(fig, f"timeline-{condition}",
                    f"Transfer timeline of `{condition}`: {_seed_events(runs)}; final weight v1 "
                    f"{estimate(runs['weight_v1_final'])}, final weight/cumulative-gradient alignment "
                    f"{estimate(runs['weight_cumgrad_final'])}, final relative update "
                    f"{estimate(runs['rel_update_final'])}; ‖ΔW‖_F/‖W(0)‖_F at the rise "
                    f"{estimate(runs['rel_update_at_rise'])}.")


def rise_note(results: Results) -> Markdown:
    """The relative update at the rise against 2/sqrt(n), and the spectral crossing against the rise."""
    width, order = results.settings.base.width, results.order

    def per_condition(column: str) -> str:
        return "; ".join(f"{c} {results.of(c, column)}" for c in order)

    return Markdown(
        f"Predicted from the initial spectrum: 2/√{width} = **{2 / math.sqrt(width):.3f}**. Measured "
        "‖ΔW‖_F/‖W(0)‖_F at the rise (seed mean ± sd; on the snapshot grid): " + per_condition("rel_update_at_rise")
        + ". Spectral crossing step (mean ± sd): " + per_condition("spectral_crossing_step")
        + ", against the rise step: " + per_condition("rise_step") + ".")


#: The events table's columns and their headings.
EVENT_COLUMNS = {
    "crossing_step": "crossing step (F)", "spectral_crossing_step": "crossing step (2)", "rise_step": "rise step",
    "rel_update_at_rise": "‖ΔW‖_F/‖W(0)‖_F at rise", "log10_rise_over_crossing": "log10(rise/crossing F)",
    "log10_rise_over_spectral_crossing": "log10(rise/crossing 2)", "weight_v1_final": "final weight v1",
    "weight_cumgrad_final": "final weight/cum.-grad. v1", "rel_update_final": "final ‖ΔW‖/‖W(0)‖",
}


EVENTS_TABLE_NOTE = Markdown("Event steps and final values per run (the steps are snapshot steps; "
                             "`NaN` = never crossed / no rise; −∞ = rose before any crossing).")


def events_table(results: Results):
    """Event steps and final values per run (a pandas Styler), conditions in the book's order."""
    frame = results.events.set_index(["condition", "seed"])[list(EVENT_COLUMNS)].rename(columns=EVENT_COLUMNS)
    return frame.loc[results.order].style.format(precision=2, na_rep="–")


def init_scale_figure(results: Results) -> None:
    """Weight v1 and relative update per init scale (top), crossing against rise step per run (bottom)."""
    init_table, init_events = results.init_table, results.init_events
    init_order = sorted(init_table["init_scale"].unique())
    init_colours = dict(zip(init_order, sns.color_palette("viridis", len(init_order))))
    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    for ax, (metric, space, direction) in zip(axes[0], [("weight_cos", "input", 1), ("rel_update", "", 0)]):
        plotting.plot_over_training(init_table, metric, space, direction, hue="init_scale", ax=ax,
                                    colours=init_colours, hue_order=init_order,
                                    baseline=results.baseline if metric.endswith("_cos") else None)
    axes[0, 1].axhline(CROSSING_LEVEL, color="black", linewidth=0.8)
    axes[0, 1].set_yscale("log")
    for ax, crossing in zip(axes[1], CROSSINGS):
        plot_event_steps(init_events, crossing=crossing, ax=ax)
    fig.tight_layout()
    never = init_events[init_events["crossing_step"].isna()]
    show_figure(fig, "timeline-init-scale", (
        "Top: weight v1 continuity and the Frobenius relative update over training per init scale "
        "(seed mean ± sd). Bottom: each run's crossing step (left Frobenius, right spectral norm) against its rise "
        "step; runs that never crossed cannot be drawn (Frobenius: "
        + (", ".join(f"init {r.init_scale:g} seed {r.seed}" for r in never.itertuples()) or "none")
        + "). Per init scale, crossing step F / crossing step 2 / rise step: "
        + "; ".join(f"{i:g}: {estimate(g['crossing_step'])} / {estimate(g['spectral_crossing_step'])}"
                    f" / {estimate(g['rise_step'])}" for i, g in init_events.groupby("init_scale")) + "."))


def _late(table: pd.DataFrame, metric: str, condition: str) -> Estimate:
    """Mean ± sd over seeds of :func:`drift` for one condition."""
    late = drift(table, metric)
    return estimate(late[late["condition"] == condition]["value"])


def rotation_figure(results: Results) -> None:
    """v1 / u1 turn per snapshot and co-rotation of adjacent layers over training."""
    table, order, colours = results.table, results.order, plotting.condition_colours()
    fig, axes = plt.subplots(2, 2, figsize=(14, 8.5), sharex=True)
    for row, space in enumerate(("input", "output")):
        rates = turn_rates(table, space)
        sns.lineplot(data=per_run(rates, "turn", space, 1), x="step", y="value", hue="condition",
                     hue_order=order, palette=colours, errorbar="sd", marker="o", markersize=3.5,
                     ax=axes[row, 0], legend=False)
        axes[row, 0].set(xscale="symlog", yscale="log", xlabel="training step (symlog)",
                         ylabel="degrees per 1,000 steps",
                         title=f"{metrics.vector_name(space)} turn rate since the previous snapshot")
        plotting.plot_over_training(table, "co_rotation", space, 1, ax=axes[row, 1], colours=colours,
                                    hue_order=order, legend=row == 1)
        axes[row, 1].axhline(0, color="black", linewidth=0.8)
        axes[row, 1].set_ylabel("signed cos")
        axes[row, 1].set_ylim(-1.02, 1.02)
    plotting.figure_legend(fig, axes[1, 1])
    show_figure(fig, "timeline-rotation", (
        "Rotation drift of v1 (top) and u1 (bottom): turn since the previous snapshot as a rate (degrees per 1,000 "
        "steps, log axis) and co-rotation of adjacent layers (layer mean, seed mean ± sd). Time-averaged over the "
        f"steps after {DRIFT_WINDOW_START:.0%} of training, v1 turn rate / co-rotation: "
        + "; ".join(f"{c} {_late(table, 'turn', c)}° / {_late(table, 'co_rotation', c)}" for c in order) + "."))


def alignment_before_after(results: Results) -> pd.DataFrame:
    """Per condition: weight v1 at its peak and at the end, and the weight / cumulative-gradient
    alignment at those two steps (mean ± sd over seeds): before and after a fall."""
    columns = {"peak_step": "step of the peak", "weight_v1_peak": "weight v1 at peak",
               "weight_v1_final": "weight v1 final", "weight_cumgrad_at_peak": "weight/cum.-grad. v1 at peak",
               "weight_cumgrad_final": "weight/cum.-grad. v1 final"}
    return pd.DataFrame({label: {c: str(results.of(c, column)) for c in results.order}
                         for column, label in columns.items()}).rename_axis("condition")


def optimizer_timelines(results: Results) -> None:
    """One transfer-timeline figure per optimizer of the baseline condition."""
    events, table = results.optimizer_events, results.optimizer_table
    for number, optimizer in enumerate(events["optimizer"].unique(), start=1):
        runs = events[events["optimizer"] == optimizer]
        fig = plot_transfer_timeline(table[table["optimizer"] == optimizer], runs, baseline=results.baseline,
                                     title=f"{results.reference}, {optimizer}")
        show_figure(fig, f"timeline-optimizer-{number}",
                    f"`{results.reference}` under {optimizer}: {_seed_events(runs)}; final weight v1 "
                    f"{estimate(runs['weight_v1_final'])}.")


def verdict(results: Results, claims: pd.DataFrame) -> Markdown:
    """One bullet per claim (:func:`geocont.chapters.mlp_runs.verdict`)."""
    return mlp_runs.verdict(results.settings, claims)


def _drift_reading(claims: pd.DataFrame) -> str:
    keys = [k for k in ("res-none-late-drift", "res-radial-late-drift", "res-radial-tau-late-drift")
            if k in set(claims["key"])]
    verdicts = {k.removesuffix("-late-drift"): claim(claims, k)["verdict"] for k in keys}
    if all(v == "not reproduced" for v in verdicts.values()):
        return ("The symmetric conditions (" + ", ".join(verdicts) + ") do not turn faster than the baseline, so at "
                "this horizon rotation drift is not what separates them from it.")
    if all(v == "reproduced" for v in verdicts.values()):
        return ("The symmetric conditions (" + ", ".join(verdicts) + ") keep turning faster than the baseline, as "
                "predicted: symmetry breaking stops the drift.")
    return "The drift comparison is mixed: " + "; ".join(f"{c} {v}" for c, v in verdicts.items()) + "."


def reading(results: Results, claims: pd.DataFrame) -> Markdown:
    """The chapter's reading of its numbers: step 0, when the weights follow, rotation drift."""
    reference, order, table = results.reference, results.order, results.table
    ref = results.events[results.events["condition"] == reference]
    order_by_norm = {norm: claim(claims, f"order-{key}")["verdict"] for _, norm, key in _NORMS}
    never = int(ref["crossing_step"].isna().sum())
    frobenius_text = (f"the Frobenius crossing never came within training in {never} of {len(ref)} runs"
                      if never else f"the Frobenius crossing came at step {estimate(ref['crossing_step'])}")
    paragraphs = [
        f"**Step 0.** Before any update, {reference} has gradient v1 continuity {estimate(ref['grad_v1_step0'])} "
        f"across adjacent layers; without residuals ({NO_RESIDUAL}) {results.of(NO_RESIDUAL, 'grad_v1_step0')}, "
        f"random level {results.baseline:.3f}." if NO_RESIDUAL in order else "",
        f"**When the weights follow.** In {reference}, weight v1 continuity covers half its rise at step "
        f"{estimate(ref['rise_step'])}, when ‖ΔW‖_F/‖W(0)‖_F is only {estimate(ref['rel_update_at_rise'])}; "
        f"{frobenius_text}, and the spectral crossing (‖ΔW‖₂ > ‖W(0)‖₂) came at step "
        f"{estimate(ref['spectral_crossing_step'])}. Read in the Frobenius norm the paper's order is "
        f"**{order_by_norm['Frobenius']}**; read in the spectral norm, the one that decides the leading direction, "
        f"it is **{order_by_norm['spectral']}**.",
        f"**Rotation drift.** After {DRIFT_WINDOW_START:.0%} of training, v1 turns at "
        + ", ".join(f"{c} {_late(table, 'turn', c)}° per 1,000 steps" for c in order)
        + "; adjacent layers co-rotate with signed cosine "
        + ", ".join(f"{c} {_late(table, 'co_rotation', c)}" for c in order)
        + ". The weight/cumulative-gradient alignment is, at the peak of weight continuity and at the end, "
        + ", ".join(f"{c} {results.of(c, 'weight_cumgrad_at_peak')} → {results.of(c, 'weight_cumgrad_final')}"
                    for c in order)
        + ". " + _drift_reading(claims),
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

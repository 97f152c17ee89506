"""Chapter "the gradient-to-weight transfer timeline": coherence at step 0, the crossing of
||Delta W|| over ||W(0)||, the rise of weight continuity, rotation drift (``book/timeline.ipynb``)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython.display import Markdown

from .. import metrics, plotting
from ..book.chapter import Chapter, ClaimsBuilder, claim, undefined_sentence, with_early
from ..book.figures import show_figure
from ..config import MLPRunConfig
from ..mlp import CONDITIONS
from ..plotting import draw_baseline
from ..statistics import (Estimate, pooled_sd, at_final_step, drift_window_mean, estimate, estimate_at_step, per_run,
                          rank_correlation, turn_rates, up_to_step, verdict_for_correlation, verdict_for_difference,
                          verdict_for_value)
from ..tables import RUN_KEYS, select
from ..training import run_sweep
from . import mlp_runs
from .mlp_runs import MLPChapterSettings

#: The conditions the chapter compares (the ``conditions`` parameter replaces them).
CONDITIONS_COMPARED = ("res-relu", "nores-relu", "res-none", "res-radial", "res-radial-tau")


#: The condition without residual connections the step-0 claim compares the reference condition with.
NO_RESIDUAL = "nores-relu"


#: The chapter sweeps the initialisation scale over two orders of magnitude on the baseline
#: condition (``extra_init_scales``); that sweep is short (its events happen in the first few
#: hundred steps) and snapshots it finely (this many log-spaced snapshots per scale), recording
#: v1/u1 only (k = 1, which keeps it cheap).
INIT_SWEEP_SNAPSHOTS = {"smoke": 12, "cpu": 32, "paper": 48}


def describe(settings: MLPChapterSettings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    base = settings.base
    return dict(
        seeds=settings.seeds,
        data=mlp_runs.data_description(settings),
        model=f"residual MLP, {base.depth} hidden layers of width {base.width}; init scales "
              f"{', '.join(f'{s:g}' for s in (base.init_scale, *settings.extra_init_scales))}",
        training=mlp_runs.training_description(settings) + "; the optimizers below",
    )


CHAPTER = Chapter(
    name="timeline",
    parameters=mlp_runs.parameters("scale", "seeds", "steps", "conditions", "extra_init_scales", "width", "depth",
                                   "dataset", "lr", "n_snapshots"),
    presets=mlp_runs.mlp_presets({scale: dict(short_run=dict(n_snapshots=n, n_directions=1))
                                  for scale, n in INIT_SWEEP_SNAPSHOTS.items()},
                                 conditions=CONDITIONS_COMPARED, robustness_conditions=("res-relu",),
                                 extra_init_scales=(0.03, 0.1, 0.3, 3.0)),
    build=mlp_runs.build_settings,
    describe=describe,
    runs=lambda settings: [c for configs in sweep_configs(settings) for c in configs],
)


#: The crossing: ||W(t) - W(0)|| / ||W(0)|| (layer mean) reaches this value.
CROSSING_LEVEL = 1.0


#: The update/initial-weight ratios compared, by event column: the paper does not say which
#: norm "||Delta W|| dominates ||W(0)||" means, so both the Frobenius norm (the whole
#: matrix) and the spectral norm (its largest singular value) are tested.
CROSSINGS = {"crossing_step": "rel_update", "spectral_crossing_step": "rel_update_spectral"}


#: Metrics the timeline chapter needs in every run table (older cached runs lack them).
TIMELINE_METRICS = ("rel_update_spectral", "turn", "co_rotation", "weight_cumgrad_cos")


#: Weight continuity "rises" only if it gains at least this much |cos| over training;
#: below that the rise step would time noise, and is left undefined (NaN).
MIN_RISE = 0.10


def _first_step_at_or_above(frame: pd.DataFrame, thresholds: pd.Series) -> pd.Series:
    """Per run (index = RUN_KEYS), the first snapshot step whose value reaches the run's threshold."""
    frame = frame.join(thresholds.rename("threshold"), on=RUN_KEYS)
    reached = frame[frame["value"] >= frame["threshold"]]
    first = reached.groupby(RUN_KEYS, observed=True)["step"].min()
    return first.reindex(thresholds.index).astype(float)


def transfer_events(table: pd.DataFrame, space: str = "input") -> pd.DataFrame:
    """One row per run: when the update overtakes the initial weights, and when continuity rises.

    * ``crossing_step``: first snapshot where the layer-mean ``||W(t) - W(0)||_F / ||W(0)||_F``
      reaches :data:`CROSSING_LEVEL` (NaN if it never does); ``spectral_crossing_step``: the
      same with spectral norms (NaN if the table has no ``rel_update_spectral``);
    * ``rise_step``: first snapshot where layer-mean weight v1 (``space``) continuity has
      covered half of its rise, ``initial + (final - initial) / 2``. It differs from "half
      its final value" only by the initial value (random level, about 0.05 at d = 256).
      NaN when continuity gained less than :data:`MIN_RISE`;
    * ``rel_update_at_rise``: the layer-mean relative update at the rise step;
    * the initial, peak and final weight continuity, the peak's step, the step-0 gradient
      continuity, and the weight / cumulative-gradient alignment of each layer's leading
      vector at the peak and at the end (before and after a fall).

    Steps are snapshot steps, so they are resolved to the snapshot grid (log-spaced).
    """
    weight = per_run(table, "weight_cos", space, 1)
    keyed = weight.set_index(RUN_KEYS)
    initial = keyed[keyed["step"] == 0]["value"]
    final = at_final_step(weight).set_index(RUN_KEYS)["value"]
    update = per_run(table, "rel_update")
    crossing_threshold = pd.Series(CROSSING_LEVEL, index=final.index)
    grad = per_run(table, "grad_cos", space, 1)
    events = pd.DataFrame({
        column: _first_step_at_or_above(per_run(table, metric), crossing_threshold)
        for column, metric in CROSSINGS.items()
    })
    events = events.assign(**{
        "rise_step": _first_step_at_or_above(weight, initial + (final - initial) / 2),
        "weight_v1_initial": initial,
        "weight_v1_final": final,
        "grad_v1_step0": grad[grad["step"] == 0].set_index(RUN_KEYS)["value"],
        "rel_update_final": at_final_step(update).set_index(RUN_KEYS)["value"],
        "weight_cumgrad_final": at_final_step(per_run(table, "weight_cumgrad_cos", space, 1)).set_index(RUN_KEYS)["value"],
    })
    peak_rows = weight.loc[weight.groupby(RUN_KEYS, observed=True)["value"].idxmax()]
    peak_step = peak_rows.set_index(RUN_KEYS)["step"]
    alignment = per_run(table, "weight_cumgrad_cos", space, 1).join(peak_step.rename("peak_step"), on=RUN_KEYS)
    events["weight_v1_peak"] = peak_rows.set_index(RUN_KEYS)["value"]
    events["peak_step"] = peak_step
    events["weight_cumgrad_at_peak"] = (alignment[alignment["step"] == alignment["peak_step"]]
                                        .set_index(RUN_KEYS)["value"])
    events["rise"] = final - initial
    events.loc[events["rise"] < MIN_RISE, "rise_step"] = math.nan
    at_rise = update.join(events["rise_step"], on=RUN_KEYS)
    events["rel_update_at_rise"] = at_rise[at_rise["step"] == at_rise["rise_step"]].set_index(RUN_KEYS)["value"]
    for crossing in CROSSINGS:
        events[_ratio_column(crossing)] = _log10_rise_over(events["rise_step"], events[crossing])
    return events.reset_index()


def _ratio_column(crossing: str) -> str:
    """``crossing_step`` -> ``log10_rise_over_crossing``, and likewise for the spectral one."""
    return "log10_rise_over_" + crossing.removesuffix("_step")


def _log10_rise_over(rise: pd.Series, crossing: pd.Series) -> pd.Series:
    """log10(rise / crossing) per run; -inf for a rise at step 0 or a rise without any
    crossing (it precedes the crossing without bound); NaN where there was no rise."""
    ratio = (rise / crossing).apply(lambda r: math.log10(r) if r > 0 else -math.inf)
    ratio[crossing.isna()] = -math.inf
    ratio[rise.isna()] = math.nan
    return ratio


#: The rise may precede the crossing by at most this factor (a third: 10**-0.48) and
#: still count as "after the update dominates", given the snapshot grid and the spread.
RISE_BEFORE_CROSSING_TOLERANCE_LOG10 = -0.48


def verdict_for_order(events: pd.DataFrame, crossing: str = "crossing_step") -> str:
    """Does weight continuity rise only once the update dominates (``crossing``: which
    norm, see :data:`CROSSINGS`), in every run?

    Runs whose continuity did not rise (``rise_step`` NaN) cannot tell and are left out.
    "reproduced" if in every other run the rise is no earlier than a third of the
    crossing step; "not reproduced" if in none (a run that rose but never crossed counts
    against); "partly" otherwise.
    """
    ratios = events[_ratio_column(crossing)].dropna()
    if ratios.empty:
        return "not tested"
    ok = ratios >= RISE_BEFORE_CROSSING_TOLERANCE_LOG10
    if ok.all():
        return "reproduced"
    return "not reproduced" if not ok.any() else "partly reproduced"


def _order_estimate(runs: pd.DataFrame, crossing: str = "crossing_step") -> tuple[Estimate, str]:
    """Mean ± sd of log10(rise / crossing) over runs that both rose and crossed, and a note
    on the runs left out of it."""
    ratios = runs[_ratio_column(crossing)]
    finite = ratios[ratios.apply(math.isfinite)]
    note = (f"crossing step {estimate(runs[crossing])}, rise step {estimate(runs['rise_step'])}, "
            f"‖ΔW‖/‖W(0)‖ at the rise {estimate(runs['rel_update_at_rise'])}; "
            f"{int(ratios.isna().sum())} of {len(runs)} runs without a rise, "
            f"{int((ratios == -math.inf).sum())} rose before any crossing")
    return estimate(finite), note


@dataclass
class Results:
    """The chapter's three sweeps (conditions, optimizers, init scales) and their transfer events."""

    settings: MLPChapterSettings
    table: pd.DataFrame
    optimizer_table: pd.DataFrame
    init_table: pd.DataFrame
    baseline: float
    events: pd.DataFrame
    optimizer_events: pd.DataFrame
    init_events: pd.DataFrame

    @property
    def order(self) -> list[str]:
        """The conditions in the book's fixed order."""
        return [c for c in CONDITIONS if c in self.settings.conditions]

    @property
    def reference(self) -> str:
        """The baseline condition of the optimizer and init-scale sweeps."""
        return self.settings.robustness_conditions[0]

    def of(self, condition: str, column: str) -> Estimate:
        """Mean ± sd over seeds of one events column for one condition."""
        return estimate(self.events.loc[self.events["condition"] == condition, column])


def sweep_configs(settings: MLPChapterSettings) -> tuple[list[MLPRunConfig], ...]:
    """The three sweeps: the conditions, the optimizers (robustness), the initialisation scales."""
    return settings.condition_configs(), settings.robustness_configs(), settings.init_configs()


def run(settings: MLPChapterSettings) -> Results:
    """Train (or load from the cache) the three sweeps; older cached runs without
    :data:`TIMELINE_METRICS` are re-run."""
    table, optimizer_table, init_table = (run_sweep(configs, require_metrics=TIMELINE_METRICS)
                                          for configs in sweep_configs(settings))
    return Results(settings=settings, table=table, optimizer_table=optimizer_table, init_table=init_table,
                   baseline=metrics.random_abs_cos(settings.base.width), events=transfer_events(table),
                   optimizer_events=transfer_events(optimizer_table), init_events=transfer_events(init_table))


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


#: Rotation drift is averaged over the steps after this fraction of training: it leaves out
#: the initial transient and covers the rise, the fall (if any) and the end.
DRIFT_WINDOW_START = 0.1


def drift(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per run, the input-space ``turn`` as a rate (degrees per 1,000 steps) or the
    ``co_rotation`` (signed cos), time-averaged over the drift window (:data:`DRIFT_WINDOW_START`)."""
    frame = turn_rates(table) if metric == "turn" else select(table, metric, "input", 1)
    return drift_window_mean(frame, DRIFT_WINDOW_START)


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


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table, judged at the end of training, with each claim's value after
    ``early_steps`` in the ``early`` column (the init sweep is that long already)."""
    early = results.settings.early_steps
    at_end = timeline_claims(results.table, results.init_table, results.optimizer_table, results.baseline,
                             results.reference)
    at_early = timeline_claims(up_to_step(results.table, early), results.init_table,
                               up_to_step(results.optimizer_table, early), results.baseline, results.reference)
    return with_early(at_end, at_early, early)


def _slug(label: str) -> str:
    """``adam(beta2=0)`` -> ``adam-beta2-0``: an optimizer label as part of a claim key."""
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


#: The two norms of the crossing: (events column, name in the claims, part of the claim key).
_NORMS = (("crossing_step", "Frobenius", "frobenius"), ("spectral_crossing_step", "spectral", "spectral"))


def timeline_claims(conditions: pd.DataFrame, init_sweep: pd.DataFrame, optimizers: pd.DataFrame,
                    baseline: float, reference: str = "res-relu", no_residual: str = NO_RESIDUAL) -> pd.DataFrame:
    """Claims table of the timeline chapter, from its three sweeps' run tables.

    ``conditions``: the chapter's conditions under the base optimizer; ``init_sweep``: the
    ``reference`` condition at several init scales; ``optimizers``: the ``reference`` condition
    under each robustness optimizer. The step-0 claim compares ``reference`` with
    ``no_residual``, its counterpart without residual connections.
    """
    events = transfer_events(conditions)
    random_level = Estimate(baseline, 0.0, 1)
    out = ClaimsBuilder(CHAPTER.name)

    def of(condition: str, column: str) -> Estimate:
        return estimate(events[events["condition"] == condition][column])

    res, nores = of(reference, "grad_v1_step0"), of(no_residual, "grad_v1_step0")
    out.add("step0-gradient-coherence", "Gradient coherence across layers exists at initialisation, before any update",
            f"{reference} minus {no_residual} gradient v1 |cos| at step 0", "present at init (no number)",
            res.mean - nores.mean, baseline, verdict_for_difference(res, nores),
            note=f"{reference} {res}; {no_residual} {nores}", std=pooled_sd(res, nores), n=res.n)
    relu_events = events[events["condition"] == reference]
    for crossing, norm, key in _NORMS:
        order, note = _order_estimate(relu_events, crossing)
        out.add(f"order-{key}", "Weight continuity forms once the cumulative update dominates the initial weights",
                f"{reference} log10(rise step / crossing step), {norm} norm", "rise after ‖ΔW‖ > ‖W(0)‖",
                order, math.nan, verdict_for_order(relu_events, crossing), note=note)
    aligned = of(reference, "weight_cumgrad_final")
    out.add("weight-cumgrad-alignment", "... and the weights align with the cumulative gradient",
            f"{reference} final |cos(v1(W), v1(ΣdL/dW))|", "aligned (no number)", aligned, baseline,
            verdict_for_difference(aligned, random_level))
    sweep = transfer_events(init_sweep)
    never_crossed = int(sweep["crossing_step"].isna().sum())
    crossing_rank = sweep["crossing_step"].fillna(math.inf)  # never crossed = later than any crossing
    for values, label, key, left_out in (
            (crossing_rank, "crossing", "crossing", f"{never_crossed} runs never crossed (ranked last)"),
            (sweep["rise_step"], "continuity rise", "rise",
             f"{int(sweep['rise_step'].isna().sum())} runs without a rise (left out)")):
        correlation = rank_correlation(sweep["init_scale"], values)
        out.add(f"init-moves-{key}", f"A smaller initialisation moves the {label} earlier",
                f"Spearman ρ(init scale, {label} step)", "earlier (no number)", correlation.rho, math.nan,
                verdict_for_correlation(correlation, +1), note=f"{correlation}; {left_out}", n=correlation.n)
    for crossing, norm, key in _NORMS:
        together = rank_correlation(sweep[crossing].fillna(math.inf), sweep["rise_step"])
        out.add(f"init-rise-follows-{key}", "Across initialisations the rise follows the crossing",
                f"Spearman ρ(crossing step, rise step), {norm} norm", "follows (no number)", together.rho, math.nan,
                verdict_for_correlation(together, +1),
                note=f"{together}; never crossed (ranked last): {int(sweep[crossing].isna().sum())}", n=together.n)
    turn = drift(conditions, "turn")
    relu_turn = estimate(turn[turn["condition"] == reference]["value"])
    for condition in ("res-none", "res-radial", "res-radial-tau"):
        if condition not in set(conditions["condition"]):
            continue
        rate = estimate(turn[turn["condition"] == condition]["value"])
        out.add(f"{condition}-late-drift", "Without symmetry breaking, v1 keeps drifting",
                f"{condition} minus {reference} v1 turn rate after {DRIFT_WINDOW_START:.0%} of training "
                "(degrees per 1,000 steps)", "drift",
                rate.mean - relu_turn.mean, math.nan, verdict_for_difference(rate, relu_turn, margin=1.0),
                note=f"{condition} {rate}°; {reference} {relu_turn}°", std=pooled_sd(rate, relu_turn), n=rate.n)
        decoupled = of(condition, "weight_cumgrad_final")
        out.add(f"{condition}-decoupled", "... which decouples the weights from the cumulative gradient",
                f"{reference} minus {condition} final weight/cum.-gradient v1 |cos|", "lower without",
                aligned.mean - decoupled.mean, baseline, verdict_for_difference(aligned, decoupled),
                note=f"{reference} {aligned}; {condition} {decoupled}", std=pooled_sd(aligned, decoupled),
                n=decoupled.n)
    co = drift(conditions, "co_rotation")
    none_co = estimate(co[co["condition"] == "res-none"]["value"])
    out.add("linear-independent-rotation", "In a linear residual net each layer rotates independently",
            f"res-none co-rotation of adjacent v1 after {DRIFT_WINDOW_START:.0%} of training (signed cos)",
            "independent (≈ 0)", none_co, baseline,
            verdict_for_value(none_co, 0.0))
    optimizer_events = transfer_events(optimizers)
    for optimizer in optimizer_events["optimizer"].unique():
        runs = optimizer_events[optimizer_events["optimizer"] == optimizer]
        for crossing, norm, key in _NORMS:
            order, note = _order_estimate(runs, crossing)
            out.add(f"optimizer-{_slug(optimizer)}-order-{key}", "The order holds under other optimizers",
                    f"{optimizer}: log10(rise step / crossing step), {norm} norm", "holds", order, math.nan,
                    verdict_for_order(runs, crossing),
                    note=f"step-0 gradient v1 {estimate(runs['grad_v1_step0'])}; {note}")
    return out.table()


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

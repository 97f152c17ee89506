"""Chapter "the gradient-to-weight transfer timeline": coherence at step 0, the crossing of
||Delta W|| over ||W(0)||, the rise of weight continuity, rotation drift."""

from __future__ import annotations

import math
from typing import Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from ..plotting import draw_baseline, quantity_label
from ..statistics import (Estimate, pooled_sd, at_final_step, estimate, late_mean, per_run,
                          rank_correlation, verdict_for_correlation, verdict_for_difference, verdict_for_value)
from ..tables import RUN_KEYS, claim_row


#: The crossing: ||W(t) - W(0)|| / ||W(0)|| (layer mean) reaches this value.
CROSSING_LEVEL = 1.0


#: The update/initial-weight ratios compared, by event column: the paper does not say which
#: norm "||Delta W|| dominates ||W(0)||" means, so both the Frobenius norm (the whole
#: matrix) and the spectral norm (its largest singular value) are tested.
CROSSINGS = {"crossing_step": "rel_update", "spectral_crossing_step": "rel_update_spectral"}


#: Metrics the timeline chapter needs in every run table (older cached runs lack them).
TIMELINE_METRICS = ("rel_update_spectral", "v1_turn", "co_rotation", "weight_cumgrad_cos")


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
    * the initial and final weight continuity, the step-0 gradient continuity, and the
      final weight / cumulative-gradient alignment of each layer's leading vector.

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


def timeline_claims(conditions: pd.DataFrame, init_sweep: pd.DataFrame, optimizers: pd.DataFrame,
                    baseline: float) -> pd.DataFrame:
    """Claims table of the timeline chapter, from its three sweeps' run tables.

    ``conditions``: res-relu, nores-relu, res-none, res-radial under the base optimizer;
    ``init_sweep``: the baseline condition at several init scales; ``optimizers``: the
    baseline condition under Adam, Adam beta2 = 0 and SGD.
    """
    chapter = "timeline"
    events = transfer_events(conditions)
    random_level = Estimate(baseline, 0.0, 1)

    def of(condition: str, column: str, frame: pd.DataFrame = events) -> Estimate:
        return estimate(frame[frame["condition"] == condition][column])

    rows = []
    res, nores = of("res-relu", "grad_v1_step0"), of("nores-relu", "grad_v1_step0")
    rows.append(claim_row(chapter, "Gradient coherence across layers exists at initialisation, before any update",
                          "res-relu minus nores-relu gradient v1 |cos| at step 0", "present at init (no number)",
                          res.mean - nores.mean, pooled_sd(res, nores), res.n, baseline,
                          verdict_for_difference(res, nores), note=f"res-relu {res}; nores-relu {nores}"))
    relu_events = events[events["condition"] == "res-relu"]
    for crossing, norm in (("crossing_step", "Frobenius"), ("spectral_crossing_step", "spectral")):
        order, note = _order_estimate(relu_events, crossing)
        rows.append(claim_row(chapter, "Weight continuity forms once the cumulative update dominates the initial weights",
                              f"res-relu log10(rise step / crossing step), {norm} norm", "rise after ‖ΔW‖ > ‖W(0)‖",
                              order.mean, order.std, order.n, math.nan, verdict_for_order(relu_events, crossing),
                              note=note))
    aligned = of("res-relu", "weight_cumgrad_final")
    rows.append(claim_row(chapter, "... and the weights align with the cumulative gradient",
                          "res-relu final |cos(v1(W), v1(ΣdL/dW))|", "aligned (no number)", aligned.mean,
                          aligned.std, aligned.n, baseline, verdict_for_difference(aligned, random_level)))
    sweep = transfer_events(init_sweep)
    never_crossed = int(sweep["crossing_step"].isna().sum())
    crossing_rank = sweep["crossing_step"].fillna(math.inf)  # never crossed = later than any crossing
    for values, label, left_out in ((crossing_rank, "crossing", f"{never_crossed} runs never crossed (ranked last)"),
                                    (sweep["rise_step"], "continuity rise",
                                     f"{int(sweep['rise_step'].isna().sum())} runs without a rise (left out)")):
        correlation = rank_correlation(sweep["init_scale"], values)
        rows.append(claim_row(chapter, f"A smaller initialisation moves the {label} earlier",
                              f"Spearman ρ(init scale, {label} step)", "earlier (no number)", correlation.rho,
                              math.nan, correlation.n, math.nan, verdict_for_correlation(correlation, +1),
                              note=f"{correlation}; {left_out}"))
    for crossing, norm in (("crossing_step", "Frobenius"), ("spectral_crossing_step", "spectral")):
        together = rank_correlation(sweep[crossing].fillna(math.inf), sweep["rise_step"])
        rows.append(claim_row(chapter, "Across initialisations the rise follows the crossing",
                              f"Spearman ρ(crossing step, rise step), {norm} norm", "follows (no number)", together.rho,
                              math.nan, together.n, math.nan, verdict_for_correlation(together, +1),
                              note=f"{together}; never crossed (ranked last): {int(sweep[crossing].isna().sum())}"))
    turn = late_mean(conditions, "v1_turn", "input")
    relu_turn = estimate(turn[turn["condition"] == "res-relu"]["value"])
    relu_align = of("res-relu", "weight_cumgrad_final")
    for condition in ("res-none", "res-radial"):
        drift = estimate(turn[turn["condition"] == condition]["value"])
        rows.append(claim_row(chapter, "Without symmetry breaking, v1 keeps drifting late in training",
                              f"{condition} minus res-relu late v1 turn (degrees per snapshot)", "drift",
                              drift.mean - relu_turn.mean, pooled_sd(drift, relu_turn), drift.n, math.nan,
                              verdict_for_difference(drift, relu_turn, margin=1.0),
                              note=f"{condition} {drift}°; res-relu {relu_turn}°"))
        decoupled = of(condition, "weight_cumgrad_final")
        rows.append(claim_row(chapter, "... which decouples the weights from the cumulative gradient",
                              f"res-relu minus {condition} final weight/cum.-gradient v1 |cos|", "lower without",
                              relu_align.mean - decoupled.mean, pooled_sd(relu_align, decoupled), decoupled.n,
                              baseline, verdict_for_difference(relu_align, decoupled),
                              note=f"res-relu {relu_align}; {condition} {decoupled}"))
    co = late_mean(conditions, "co_rotation", "input")
    none_co = estimate(co[co["condition"] == "res-none"]["value"])
    rows.append(claim_row(chapter, "In a linear residual net each layer rotates independently",
                          "res-none late co-rotation of adjacent v1 (signed cos)", "independent (≈ 0)",
                          none_co.mean, none_co.std, none_co.n, baseline, verdict_for_value(none_co, 0.0)))
    optimizer_events = transfer_events(optimizers)
    for optimizer in optimizer_events["optimizer"].unique():
        runs = optimizer_events[optimizer_events["optimizer"] == optimizer]
        for crossing, norm in (("crossing_step", "Frobenius"), ("spectral_crossing_step", "spectral")):
            order, note = _order_estimate(runs, crossing)
            rows.append(claim_row(chapter, "The order holds under other optimizers",
                                  f"{optimizer}: log10(rise step / crossing step), {norm} norm", "holds",
                                  order.mean, order.std, order.n, math.nan, verdict_for_order(runs, crossing),
                                  note=f"step-0 gradient v1 {estimate(runs['grad_v1_step0'])}; {note}"))
    return pd.DataFrame(rows)


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

"""What the Condition-2 chapter shows of the comparison: its budget, the comparison on every dataset, the traces
and the interventions (every seed and the answer are in :mod:`.seeds_and_answer`)."""

from __future__ import annotations

import math

import pandas as pd

from ... import instability
from ...book.provenance import measured_cost, run_sources
from ...statistics import final_per_run
from ..mlp_runs import CPU_SECONDS_PER_MLP_STEP, ROTATED_STEP_FACTOR
from .compute import (
    NARROW_CPU_RERUN,
    PAPER_LINEAR_WEIGHT,
    Condition2Settings,
    Results,
    budget,
    comparison_rows,
    intervention_rows,
)
from .formatting import PROSE, condition_colours, count_text, fmt
from .settings import CHAPTER


def _runs_sentence(settings: Condition2Settings, found) -> str:
    """What the chapter trains: its runs, conditions, seeds, datasets, interventions, many seeds and SGD probes."""
    seeds = count_text(len(settings.seeds), "seed")
    interventions = (
        PROSE.render(
            "budget.interventions", interventions=count_text(len(settings.interventions), "intervention"), seeds=seeds
        )
        if settings.interventions
        else PROSE.render("budget.no-interventions")
    )
    return PROSE.render(
        "budget.runs",
        runs=count_text(found.runs, "run"),
        steps=settings.base.steps,
        conditions=count_text(len(settings.conditions), "condition"),
        seeds=seeds,
        datasets=count_text(len(settings.datasets), "dataset"),
        interventions=interventions,
        many_seeds=count_text(len(settings.many_seeds), "seed"),
        probes=found.probes,
        probe_steps=settings.sgd_probe_steps,
        sgd_runs=found.sgd_runs,
    )


def _cost_sentences(settings: Condition2Settings, found) -> list[str]:
    """The predicted cold time at ``cpu``, and the worker-minutes the runs took where they were trained (their
    recorded wall seconds) when any were recorded."""
    parts = [
        PROSE.render(
            "budget.cost",
            minutes=found.minutes,
            step_ms=1000 * CPU_SECONDS_PER_MLP_STEP,
            rotated=ROTATED_STEP_FACTOR,
        )
    ]
    cost = measured_cost(run_sources(CHAPTER.run_configs(settings)))
    if cost.measured:
        parts.append(
            PROSE.render(
                "budget.measured",
                worker_minutes=cost.worker_minutes,
                measured=cost.measured,
                runs=cost.runs,
                two_workers=cost.worker_minutes / 2,
            )
        )
    return parts


def _left_out_sentence(found) -> str:
    """What this build leaves out of the preset, and the preset's predicted time."""
    return PROSE.render(
        "budget.left-out",
        preset_minutes=found.preset_minutes,
        left_out="; ".join(f"{name} {', '.join(str(x) for x in missing)}" for name, missing in found.left_out.items()),
    )


def _narrower_sentence(found) -> str:
    """The flags of a narrower re-run at ``cpu`` and its predicted time."""
    flags = " ".join(f'-p {name} "{list(value)!r}"' for name, value in NARROW_CPU_RERUN.items())
    return PROSE.render("budget.narrower", flags=flags, minutes=found.narrow_minutes)


def budget_note(settings: Condition2Settings):
    """What the chapter trains; at ``cpu`` also its predicted cold time beside the worker-minutes its runs took
    where they were trained (their recorded wall seconds), what this build leaves out of the preset, and a
    narrower re-run (:func:`.compute.budget`)."""
    from IPython.display import Markdown

    found = budget(settings)
    parts = [_runs_sentence(settings, found)]
    if found.minutes is not None:
        parts.extend(_cost_sentences(settings, found))
    if found.left_out:
        parts.append(_left_out_sentence(found))
    if found.narrow_minutes is not None:
        parts.append(_narrower_sentence(found))
    return Markdown(" ".join(parts))


def comparison_table(results: Results) -> pd.DataFrame:
    """The comparison as the chapter shows it: one row per dataset and condition."""
    rows = comparison_rows(results)
    shown = pd.DataFrame(
        {
            "dataset": rows["dataset"],
            "condition": rows["condition"],
            "weight v1 final": [fmt(m, s) for m, s in zip(rows["v1_final"], rows["v1_final_sd"])],
            "weight v1 peak": [fmt(m, s) for m, s in zip(rows["v1_peak"], rows["v1_peak_sd"])],
            "gradient v1 final": [fmt(m, s) for m, s in zip(rows["gradient_v1"], rows["gradient_v1_sd"])],
            "train loss (final trace)": rows["train_loss"].map(lambda v: f"{v:.3g}"),
            "test accuracy": rows["test_acc"].map(lambda v: f"{v:.3f}"),
            "runs with events": [f"{e} of {n}" for e, n in zip(rows["runs_with_events"], rows["seeds"])],
            "memorised runs": [f"{m} of {n}" for m, n in zip(rows["memorised_runs"], rows["seeds"])],
            "diverged runs": rows["diverged"],
        }
    )
    return shown.set_index(["dataset", "condition"])


def _comparison_plot(ax, frame: pd.DataFrame, order: list[str]) -> None:
    """Every seed's final weight v1 per dataset and condition, with their mean and sd."""
    import seaborn as sns

    sns.stripplot(
        data=frame,
        x="dataset",
        y="value",
        hue="condition",
        hue_order=order,
        dodge=True,
        palette=condition_colours(),
        size=6,
        ax=ax,
        jitter=0.15,
    )
    sns.pointplot(
        data=frame,
        x="dataset",
        y="value",
        hue="condition",
        hue_order=order,
        dodge=0.6,
        palette=condition_colours(),
        errorbar="sd",
        markers="_",
        linestyles="none",
        ax=ax,
        legend=False,
    )


def _comparison_caption(results: Results) -> str:
    """The comparison figure's caption: the horizon, the baseline, and the headline dataset's two finals."""
    linear = comparison_rows(results).set_index(["dataset", "condition"])
    headline = results.settings.headline
    return PROSE.render(
        "comparison-caption",
        steps=results.settings.base.steps,
        headline=headline,
        baseline=results.baseline,
        relu=fmt(linear.loc[(headline, "res-relu"), "v1_final"], linear.loc[(headline, "res-relu"), "v1_final_sd"]),
        none=fmt(linear.loc[(headline, "res-none"), "v1_final"], linear.loc[(headline, "res-none"), "v1_final_sd"]),
    )


def comparison_figure(results: Results) -> None:
    """Every seed's final weight v1 per condition and dataset, the random baseline and the paper's 0.22."""
    import matplotlib.pyplot as plt

    from ... import plotting
    from ...book.figures import show_figure

    frame = pd.concat(
        [final_per_run(t, "weight_cos", "input", 1).assign(dataset=d) for d, t in results.comparison.items()],
        ignore_index=True,
    )
    fig, ax = plt.subplots(figsize=(9, 4.2))
    _comparison_plot(ax, frame, order=[c for c in results.settings.conditions])
    plotting.draw_baseline(ax, results.baseline)
    ax.axhline(PAPER_LINEAR_WEIGHT, color="0.6", linestyle=":", label=f"paper's Res+None ({PAPER_LINEAR_WEIGHT})")
    ax.set_ylim(0, 1)
    ax.set_xlabel("dataset")
    ax.set_ylabel("weight v1 |cos| at the end, mean over layer pairs")
    plotting.figure_legend(fig, ax, ncol=3)
    show_figure(fig, "c2-comparison", _comparison_caption(results))


def _trace_panel(ax, *, run: pd.DataFrame, colour: str, baseline: float):
    """One run's training loss (log scale) on ``ax`` and its weight v1 on a twin axis; returns the twin."""
    ax.plot(run["step"], run["loss"], color="0.55", linewidth=0.8, label="train loss (left, log)")
    ax.set_yscale("log")
    twin = ax.twinx()
    cos = run.dropna(subset=["v1"])
    twin.plot(cos["step"], cos["v1"], color=colour, linewidth=1.6, label="weight v1 (right)")
    twin.set_ylim(0, 1)
    twin.axhline(baseline, color="0.35", linestyle="--", linewidth=0.8)
    return twin


def _mark_events(ax, *, events: pd.DataFrame, memorised: pd.Series, trace_every: int) -> None:
    """Shade one run's instability events (each to the next trace) and mark its memorised step, if any."""
    for start, end in zip(events["start"], events["end"]):
        ax.axvspan(start, end + trace_every, color="tab:red", alpha=0.25, linewidth=0)
    if len(memorised) and not math.isnan(memorised.iloc[0]):
        ax.axvline(memorised.iloc[0], color="black", linestyle=":", linewidth=1)


def _trace_caption(results: Results, dataset: str) -> str:
    """The trace figure's caption: the trace interval, the thresholds, and the linear net's event counts."""
    counts = comparison_rows(results).set_index(["dataset", "condition"])
    none = counts.loc[(dataset, "res-none")]
    return PROSE.render(
        "trace-caption",
        dataset=dataset,
        trace_every=results.settings.base.trace_every,
        factor=instability.INSTABILITY_FACTOR,
        memorised_loss=instability.MEMORISED_LOSS,
        runs_with_events=int(none["runs_with_events"]),
        runs=int(none["seeds"]),
        memorised=int(none["memorised_runs"]),
    )


def trace_figure(results: Results, dataset: str) -> None:
    """Training loss (log scale) and weight v1 on one time axis, one seed per row, one condition per
    column, on ``dataset``; instability events shaded, the memorised step marked."""
    import matplotlib.pyplot as plt

    from ...book.figures import show_figure

    table = results.comparison[dataset]
    series = instability.trace_series(table)
    events = instability.instability_events(table)
    summaries = instability.run_summary(table)
    conditions = list(results.settings.conditions)
    seeds = sorted(series["seed"].unique())
    fig, axes = plt.subplots(
        len(seeds), len(conditions), figsize=(3.6 * len(conditions), 2.5 * len(seeds)), squeeze=False, sharex=True
    )
    colours = condition_colours()
    for row, seed in zip(axes, seeds):
        for ax, condition in zip(row, conditions):
            mine = (series["seed"] == seed) & (series["condition"] == condition)
            twin = _trace_panel(ax, run=series[mine], colour=colours[condition], baseline=results.baseline)
            _mark_events(
                ax,
                events=events[(events["seed"] == seed) & (events["condition"] == condition)],
                memorised=summaries.loc[
                    (summaries["seed"] == seed) & (summaries["condition"] == condition), "memorised_step"
                ],
                trace_every=results.settings.base.trace_every,
            )
            ax.set_title(f"{condition}, seed {seed}", fontsize="small")
            if ax is row[0]:
                ax.set_ylabel("train loss (nats)")
            if ax is row[-1]:
                twin.set_ylabel("weight v1 |cos|")
            else:
                twin.set_yticklabels([])
    for ax in axes[-1]:
        ax.set_xlabel("training step")
    fig.tight_layout()
    show_figure(fig, f"c2-trace-{dataset}", _trace_caption(results, dataset))


def events_table(results: Results) -> pd.DataFrame:
    """Per run on the headline dataset and under every intervention: instability events, the first one's step,
    the memorised step, weight v1 at start / peak / end, and its fall from the peak split into the part across
    instability events and the part between them."""
    parts = []
    for name, table in results.interventions.items():
        parts.append(instability.run_summary(table).assign(intervention=name))
    frame = pd.concat(parts, ignore_index=True)
    columns = [
        "intervention",
        "condition",
        "seed",
        "events",
        "first_event",
        "memorised_step",
        "v1_start",
        "v1_peak",
        "peak_step",
        "v1_final",
        "fall_from_peak",
        "fall_across_events",
        "fall_between_events",
        "final_loss",
        "diverged_step",
    ]
    return frame[columns].set_index(["intervention", "condition", "seed"]).round(3)


def intervention_table(results: Results) -> pd.DataFrame:
    """The interventions at the horizon (headline dataset): the table the chapter's answer reads."""
    rows = intervention_rows(results)
    return pd.DataFrame(
        {
            "intervention": rows["intervention"],
            "condition": rows["condition"],
            "weight v1 final": [fmt(m, s) for m, s in zip(rows["v1_final"], rows["v1_final_sd"])],
            "weight v1 peak": [fmt(m, s) for m, s in zip(rows["v1_peak"], rows["v1_peak_sd"])],
            "fall after peak per 1,000 steps": [
                fmt(m, s) for m, s in zip(rows["fall_per_1000"], rows["fall_per_1000_sd"])
            ],
            "runs with events": [
                f"{e} of {n} ({t} events)" for e, n, t in zip(rows["runs_with_events"], rows["seeds"], rows["events"])
            ],
            "drift, stable windows (°/1,000 steps)": [
                fmt(m, s) for m, s in zip(rows["drift_rate"], rows["drift_rate_sd"])
            ],
            "train loss (final trace)": rows["train_loss"].map(lambda v: f"{v:.3g}"),
            "test accuracy": rows["test_acc"].map(lambda v: f"{v:.3f}"),
        }
    ).set_index(["intervention", "condition"])


def _intervention_traces(results: Results) -> pd.DataFrame:
    """Weight v1 over training under every intervention, with each run's steps since its peak."""
    frames = []
    for name, table in results.interventions.items():
        series = instability.trace_series(table).dropna(subset=["v1"]).assign(intervention=name)
        peaks = series.loc[series.groupby(["condition", "seed"])["v1"].idxmax(), ["condition", "seed", "step"]]
        series = series.merge(peaks.rename(columns={"step": "peak_step"}), on=["condition", "seed"])
        frames.append(series.assign(since_peak=series["step"] - series["peak_step"]))
    return pd.concat(frames, ignore_index=True)


def _intervention_caption(results: Results, names: list[str]) -> str:
    """The interventions figure's caption: the linear net's final weight v1 under each intervention."""
    rows = intervention_rows(results).set_index(["intervention", "condition"])
    finals = "; ".join(
        f"{n} {fmt(rows.loc[(n, 'res-none'), 'v1_final'], rows.loc[(n, 'res-none'), 'v1_final_sd'])}" for n in names
    )
    return PROSE.render("interventions-caption", headline=results.settings.headline, finals=finals)


def intervention_figure(results: Results) -> None:
    """Weight v1 over training under every intervention, by step and by steps since each run's peak."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from ... import plotting
    from ...book.figures import show_figure

    frame = _intervention_traces(results)
    names = list(results.interventions)
    colours = plotting.palette(names)
    fig, axes = plt.subplots(2, 2, figsize=(12, 7.5), sharey=True)
    for column, condition in enumerate(("res-none", "res-relu")):
        one = frame[frame["condition"] == condition]
        for row, x in enumerate(("step", "since_peak")):
            ax = axes[row, column]
            data = one if x == "step" else one[one["since_peak"] >= 0]
            sns.lineplot(
                data=data,
                x=x,
                y="v1",
                hue="intervention",
                hue_order=names,
                palette=colours,
                errorbar="sd",
                ax=ax,
                legend=(row == 0 and column == 0),
            )
            plotting.draw_baseline(ax, results.baseline)
            ax.set_ylim(0, 1)
            ax.set_title(
                f"{condition}" + (", aligned at each run's peak" if x == "since_peak" else ""), fontsize="medium"
            )
            ax.set_xlabel("training step" if x == "step" else "steps since the run's peak of weight v1")
            ax.set_ylabel("weight v1 |cos|, mean over layer pairs")
    plotting.figure_legend(fig, axes[0, 0], ncol=len(names) + 1)
    show_figure(fig, "c2-interventions", _intervention_caption(results, names))

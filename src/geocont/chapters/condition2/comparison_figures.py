"""What the Condition-2 chapter shows of the comparison: its budget, the comparison on every dataset, the traces,
the interventions, every seed, formation under SGD, and the answer to the chapter's question."""

from __future__ import annotations

import math

import pandas as pd

from ... import instability
from ...book.provenance import measured_cost, run_sources
from ...statistics import DIFFERENCE_MARGIN, final_per_run
from ..mlp_runs import CPU_SECONDS_PER_MLP_STEP, ROTATED_STEP_FACTOR
from .compute import (
    BIMODAL_GAP,
    NARROW_CPU_RERUN,
    PAPER_LINEAR_WEIGHT,
    SGD_LEARNING_RATES,
    SGD_MOMENTUM,
    Condition2Settings,
    Results,
    budget,
    comparison_rows,
    explanations,
    formation,
    half_verdicts,
    halves_agree,
    intervention_rows,
    seed_groups_found,
    seed_values,
    shared_axes,
    weight_decay_prediction,
)
from .formatting import PROSE, condition_colours, count_text, fmt
from .settings import CHAPTER


def budget_note(settings: Condition2Settings):
    """What the chapter trains; at ``cpu`` also its predicted cold time beside the worker-minutes its runs took
    where they were trained (their recorded wall seconds), what this build leaves out of the preset, and a
    narrower re-run (:func:`.compute.budget`)."""
    from IPython.display import Markdown

    found, seeds = budget(settings), count_text(len(settings.seeds), "seed")
    interventions = (
        PROSE.render(
            "budget.interventions", interventions=count_text(len(settings.interventions), "intervention"), seeds=seeds
        )
        if settings.interventions
        else PROSE.render("budget.no-interventions")
    )
    parts = [
        PROSE.render(
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
    ]
    if found.minutes is not None:
        parts.append(
            PROSE.render(
                "budget.cost",
                minutes=found.minutes,
                step_ms=1000 * CPU_SECONDS_PER_MLP_STEP,
                rotated=ROTATED_STEP_FACTOR,
            )
        )
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
    if found.left_out:
        parts.append(
            PROSE.render(
                "budget.left-out",
                preset_minutes=found.preset_minutes,
                left_out="; ".join(
                    f"{name} {', '.join(str(x) for x in missing)}" for name, missing in found.left_out.items()
                ),
            )
        )
    if found.narrow_minutes is not None:
        flags = " ".join(f'-p {name} "{list(value)!r}"' for name, value in NARROW_CPU_RERUN.items())
        parts.append(PROSE.render("budget.narrower", flags=flags, minutes=found.narrow_minutes))
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


def comparison_figure(results: Results) -> None:
    """Every seed's final weight v1 per condition and dataset, the random baseline and the paper's 0.22."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from ... import plotting
    from ...book.figures import show_figure

    frame = pd.concat(
        [final_per_run(t, "weight_cos", "input", 1).assign(dataset=d) for d, t in results.comparison.items()],
        ignore_index=True,
    )
    order = [c for c in results.settings.conditions]
    fig, ax = plt.subplots(figsize=(9, 4.2))
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
    plotting.draw_baseline(ax, results.baseline)
    ax.axhline(PAPER_LINEAR_WEIGHT, color="0.6", linestyle=":", label=f"paper's Res+None ({PAPER_LINEAR_WEIGHT})")
    ax.set_ylim(0, 1)
    ax.set_xlabel("dataset")
    ax.set_ylabel("weight v1 |cos| at the end, mean over layer pairs")
    plotting.figure_legend(fig, ax, ncol=3)
    linear = comparison_rows(results).set_index(["dataset", "condition"])
    headline = results.settings.headline
    show_figure(
        fig,
        "c2-comparison",
        PROSE.render(
            "comparison-caption",
            steps=results.settings.base.steps,
            headline=headline,
            baseline=results.baseline,
            relu=fmt(linear.loc[(headline, "res-relu"), "v1_final"], linear.loc[(headline, "res-relu"), "v1_final_sd"]),
            none=fmt(linear.loc[(headline, "res-none"), "v1_final"], linear.loc[(headline, "res-none"), "v1_final_sd"]),
        ),
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
            run = series[(series["seed"] == seed) & (series["condition"] == condition)]
            ax.plot(run["step"], run["loss"], color="0.55", linewidth=0.8, label="train loss (left, log)")
            ax.set_yscale("log")
            twin = ax.twinx()
            cos = run.dropna(subset=["v1"])
            twin.plot(cos["step"], cos["v1"], color=colours[condition], linewidth=1.6, label="weight v1 (right)")
            twin.set_ylim(0, 1)
            twin.axhline(results.baseline, color="0.35", linestyle="--", linewidth=0.8)
            mine = events[(events["seed"] == seed) & (events["condition"] == condition)]
            for start, end in zip(mine["start"], mine["end"]):
                ax.axvspan(start, end + results.settings.base.trace_every, color="tab:red", alpha=0.25, linewidth=0)
            memorised = summaries.loc[
                (summaries["seed"] == seed) & (summaries["condition"] == condition), "memorised_step"
            ]
            if len(memorised) and not math.isnan(memorised.iloc[0]):
                ax.axvline(memorised.iloc[0], color="black", linestyle=":", linewidth=1)
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
    counts = comparison_rows(results).set_index(["dataset", "condition"])
    none = counts.loc[(dataset, "res-none")]
    show_figure(
        fig,
        f"c2-trace-{dataset}",
        PROSE.render(
            "trace-caption",
            dataset=dataset,
            trace_every=results.settings.base.trace_every,
            factor=instability.INSTABILITY_FACTOR,
            memorised_loss=instability.MEMORISED_LOSS,
            runs_with_events=int(none["runs_with_events"]),
            runs=int(none["seeds"]),
            memorised=int(none["memorised_runs"]),
        ),
    )


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


def intervention_figure(results: Results) -> None:
    """Weight v1 over training under every intervention, by step and by steps since each run's peak."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from ... import plotting
    from ...book.figures import show_figure

    frames = []
    for name, table in results.interventions.items():
        series = instability.trace_series(table).dropna(subset=["v1"]).assign(intervention=name)
        peaks = series.loc[series.groupby(["condition", "seed"])["v1"].idxmax(), ["condition", "seed", "step"]]
        series = series.merge(peaks.rename(columns={"step": "peak_step"}), on=["condition", "seed"])
        frames.append(series.assign(since_peak=series["step"] - series["peak_step"]))
    frame = pd.concat(frames, ignore_index=True)
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
    rows = intervention_rows(results).set_index(["intervention", "condition"])
    finals = "; ".join(
        f"{n} {fmt(rows.loc[(n, 'res-none'), 'v1_final'], rows.loc[(n, 'res-none'), 'v1_final_sd'])}" for n in names
    )
    show_figure(
        fig,
        "c2-interventions",
        PROSE.render("interventions-caption", headline=results.settings.headline, finals=finals),
    )


def seeds_figure(results: Results) -> None:
    """Every seed's final weight v1 for the linear net and the baseline, under Adam and SGD."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from ... import plotting
    from ...book.figures import show_figure

    values = seed_values(results)
    finite = values[~values["diverged"]]
    fig, ax = plt.subplots(figsize=(8, 4))
    sns.swarmplot(
        data=finite,
        x="optimizer",
        y="value",
        hue="condition",
        hue_order=["res-relu", "res-none"],
        dodge=True,
        palette=condition_colours(),
        size=6,
        ax=ax,
    )
    sns.pointplot(
        data=finite,
        x="optimizer",
        y="value",
        hue="condition",
        hue_order=["res-relu", "res-none"],
        dodge=0.4,
        palette=condition_colours(),
        errorbar="sd",
        markers="_",
        linestyles="none",
        ax=ax,
        legend=False,
    )
    plotting.draw_baseline(ax, results.baseline)
    ax.set_ylim(0, 1)
    ax.set_ylabel("weight v1 |cos| at the end")
    plotting.figure_legend(fig, ax, ncol=3)
    diverged = values[values["diverged"]]
    which = (
        " (" + ", ".join(f"{r.condition} {r.optimizer} seed {r.seed}" for r in diverged.itertuples()) + ")"
        if len(diverged)
        else ""
    )
    show_figure(
        fig,
        "c2-seeds",
        PROSE.render("seeds-caption", headline=results.settings.headline, diverged=len(diverged), which=which),
    )


def seeds_sentences(results: Results) -> str:
    """Whether each group of seeds is bimodal, and whether the verdicts hold on two disjoint halves."""
    groups = []
    for group in seed_groups_found(results):
        shape = group.shape
        if shape.bimodal:
            label = PROSE.choose(
                "seeds-shape",
                "bimodal",
                low=", ".join(f"{v:.2f}" for v in shape.low),
                high=", ".join(f"{v:.2f}" for v in shape.high),
            )
        else:
            label = PROSE.choose("seeds-shape", "not-bimodal" if group.value.n >= 4 else "too-few")
        groups.append(
            PROSE.render(
                "seeds-group",
                condition=group.condition,
                optimizer=group.optimizer,
                value=group.value,
                n=group.value.n,
                shape=label,
                diverged=f" ({group.diverged} diverged)" if group.diverged else "",
            )
        )
    halves = half_verdicts(results)
    stable = []
    for optimizer, agree in halves_agree(results).items():
        rows = halves[halves["optimizer"] == optimizer]
        stable.append(
            PROSE.choose(
                "seeds-halves",
                "agree" if agree else "differ",
                optimizer=optimizer,
                halves="; ".join(
                    f"{r.seeds}: {r.mean:.2f}, {r.low_verdict} / {r.relu_above_verdict}" for r in rows.itertuples()
                ),
            )
        )
    return PROSE.render("seeds", groups="; ".join(groups), gap=BIMODAL_GAP, halves="; ".join(stable))


def sgd_sentence(results: Results) -> str:
    """How SGD's learning rate was chosen (the probes)."""
    choice = results.sgd_choice
    tried = "; ".join(f"lr {lr:g}: {bad} of {n} probe runs diverged" for lr, (bad, n) in choice.probes.items())
    chosen = f"lr {choice.lr:g} was chosen" if choice.lr is not None else "no candidate rate trained stably"
    return PROSE.render(
        "sgd-choice",
        momentum=SGD_MOMENTUM,
        candidates=", ".join(f"{x:g}" for x in SGD_LEARNING_RATES),
        probe_steps=results.settings.sgd_probe_steps,
        tried=tried,
        chosen=chosen,
    )


def formation_sentence(results: Results) -> str:
    """What the SGD rows can say: whether continuity formed at all under SGD at the chosen rate (each seed's
    peak beside Adam's), since a net that never rose has nothing to lose to drift (:func:`.compute.formation`)."""
    found = formation(results)
    if found.linear == "no-sgd":
        return PROSE.choose("formation", "no-sgd")
    by = found.rows.set_index(["condition", "optimizer"])

    def peaks(condition: str, optimizer: str) -> str:
        if (condition, optimizer) not in by.index:
            return "no seed (every run diverged)"
        one = by.loc[(condition, optimizer)]
        span = (
            f"{one.peak_min:.2f}"
            if round(one.peak_min, 2) == round(one.peak_max, 2)
            else f"{one.peak_min:.2f}–{one.peak_max:.2f}"
        )
        return f"{span} over {one.seeds} seeds"

    text = PROSE.render(
        "formation-peaks",
        baseline=results.baseline,
        lr=found.lr,
        margin=DIFFERENCE_MARGIN,
        none_sgd=peaks("res-none", "sgd"),
        none_adam=peaks("res-none", "adam"),
        relu_sgd=peaks("res-relu", "sgd"),
        relu_adam=peaks("res-relu", "adam"),
    )
    return " ".join(
        [
            text,
            PROSE.choose("formation", found.linear),
            PROSE.choose("formation-baseline", found.baseline, gap=abs(found.relu_gap)),
        ]
    )


def evidence(explanation) -> str:
    numbers = explanation.numbers
    if explanation.name == "instability":
        without = [
            PROSE.render("explanation-without-events", name=name, none=fmt(none), relu=fmt(relu))
            for name, none, relu in numbers["without_events"]
        ]
        return PROSE.render(
            "explanation-instability",
            headline=numbers["headline"],
            runs_with_events=numbers["runs_with_events"],
            runs=numbers["runs"],
            events=numbers["events"],
            fall=fmt(numbers["fall"]),
            across=fmt(numbers["across"]),
            share="n/a" if math.isnan(numbers["share"]) else f"{100 * numbers['share']:.0f}%",
            without_events="; ".join(without) or PROSE.render("explanation-no-stable-intervention"),
        )
    if explanation.name == "rotation drift":
        moving = numbers["motion"]
        motion = (
            PROSE.render("explanation-motion-not-recorded")
            if moving is None
            else PROSE.render(
                "explanation-motion",
                none=moving.none.log2_ratio,
                relu=moving.relu.log2_ratio,
                left_out=len(moving.none.left_out),
                verdict=moving.verdict,
            )
        )
        readings = "; ".join(f"{name}: {vote}" for name, vote in numbers["readings"].items())
        motions = "; ".join(f"{name}: {vote}" for name, vote in numbers["motions"].items())
        instability_verdict, memorisation_verdict = numbers["alternatives"]
        return PROSE.render(
            "explanation-rotation-drift",
            motion_vote=numbers["motion_vote"],
            motion=motion,
            motions=motions or PROSE.render("explanation-no-drift-test"),
            tests_vote=numbers["tests_vote"],
            readings=readings or PROSE.render("explanation-no-drift-test"),
            instability=instability_verdict,
            memorisation=memorisation_verdict,
            none_rate=fmt(numbers["none_rate"], numbers["none_rate_sd"]),
            relu_rate=fmt(numbers["relu_rate"], numbers["relu_rate_sd"]),
            kept=", ".join(numbers["kept"]) or "none",
        )
    return PROSE.render(
        "explanation-memorisation",
        datasets="; ".join(
            PROSE.render("explanation-memorisation-dataset", dataset=d, fall=fmt(fall), memorised=m, runs=n)
            for d, fall, m, n in numbers["datasets"]
        ),
    )


def answer(results: Results):
    """The section's answer: one bullet per explanation with its verdict and numbers, the weight-decay
    prediction, and Adam's shared axes."""
    from IPython.display import Markdown

    lines = [
        PROSE.render("explanation", name=e.name, verdict=e.verdict, evidence=evidence(e)) for e in explanations(results)
    ]
    verdict, with_decay, without = weight_decay_prediction(results)
    lines.append(PROSE.render("weight-decay", with_decay=with_decay, without=without, verdict=verdict))
    axes = shared_axes(results)
    if axes is not None:
        lines.append(
            PROSE.render(
                "shared-axes",
                adam=axes.adam,
                rotated=axes.rotated,
                baseline=results.baseline,
                share="n/a" if math.isnan(axes.share) else f"{100 * axes.share:.0f}%",
            )
        )
    return Markdown("\n".join(lines))

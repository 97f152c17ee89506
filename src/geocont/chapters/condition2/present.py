"""condition2: what the chapter shows (figures, tables, computed prose), from :mod:`.compute`."""

from __future__ import annotations

import math

import pandas as pd

from ... import instability
from ...statistics import estimate
from ..mlp_runs import BOOK_BUDGET_MINUTES, CPU_SECONDS_PER_MLP_STEP, ROTATED_STEP_FACTOR
from .compute import (BIMODAL_GAP, CHAPTER, FALL_MARGIN, PAPER_LINEAR_WEIGHT, SGD_LEARNING_RATES, Condition2Settings,
                      Results, _fmt, comparison_rows, explanations, formation_rows, predicted_minutes, probe_configs,
                      half_verdicts, intervention_rows, modality, per_seed_final, run_summaries, seed_values,
                      shared_axes, weight_decay_prediction)


#: The parameters that narrow the design (fewer runs) rather than change the runs.
_BREADTH_PARAMETERS = ("seeds", "many_seeds", "datasets", "conditions", "interventions")

#: A narrower ``cpu`` re-run: the headline dataset with two of the stabilising interventions, the horizon
#: and every seed kept.
NARROW_CPU_RERUN = dict(datasets=("fashion-mnist",), interventions=("clip 1.0", "cosine"))


def budget_note(settings: Condition2Settings):
    """What the chapter trains; at ``cpu`` also its predicted cold time against the book's budget, what this
    build leaves out of the preset, and a narrower re-run."""
    from IPython.display import Markdown

    def count(n: int, noun: str) -> str:
        return f"{n} {noun}{'' if n == 1 else 's'}"

    seeds = count(len(settings.seeds), "seed")
    interventions = (f"{count(len(settings.interventions), 'intervention')} × 2 conditions × {seeds}"
                     if settings.interventions else "no interventions")
    text = (f"**What runs here.** {count(len(settings.run_configs()), 'run')} of {settings.base.steps:,} steps (the "
            f"comparison: {count(len(settings.conditions), 'condition')} × {seeds} on "
            f"{count(len(settings.datasets), 'dataset')}; {interventions}; the linear net on "
            f"{count(len(settings.many_seeds), 'seed')}; runs that coincide are trained once), then up to "
            f"{len(probe_configs(settings))} SGD probe runs of {settings.sgd_probe_steps:,} steps and "
            f"{len(settings.sgd_configs(SGD_LEARNING_RATES[-1]))} SGD runs to the horizon.")
    if settings.scale != "cpu":
        return Markdown(text)
    minutes = predicted_minutes(settings)
    text += (f" Run alone and cold on two one-thread workers it takes about **{minutes:.0f} min** "
             f"({1000 * CPU_SECONDS_PER_MLP_STEP:.1f} ms per step and worker, measured on this project's 2-core machine "
             f"when quiet; `adam-rotated` {ROTATED_STEP_FACTOR:g}× that), {minutes / BOOK_BUDGET_MINUTES:.0%} of the "
             f"whole `cpu` book's {BOOK_BUDGET_MINUTES}-minute budget; a book build trains the runs it shares with the "
             "conditions chapter once, there.")
    kept = {k: v for k, v in settings.overrides.items() if k not in _BREADTH_PARAMETERS}
    preset = CHAPTER.configure(settings.scale, **kept)
    left_out = [f"{name} {', '.join(str(x) for x in missing)}" for name, missing in (
        ("datasets", [d for d in preset.datasets if d not in settings.datasets]),
        ("conditions", [c for c in preset.conditions if c not in settings.conditions]),
        ("interventions", [i for i in preset.interventions if i not in settings.interventions]),
        ("seeds", [s for s in preset.seeds if s not in settings.seeds]),
        ("linear-net seeds", [s for s in preset.many_seeds if s not in settings.many_seeds])) if missing]
    if left_out:
        text += (f" This build leaves out what the `cpu` preset runs: {'; '.join(left_out)} (the preset takes about "
                 f"{predicted_minutes(preset):.0f} min).")
    narrow_minutes = predicted_minutes(CHAPTER.configure(settings.scale, **{**kept, **NARROW_CPU_RERUN}))
    if narrow_minutes < minutes:
        flags = " ".join(f'-p {name} "{list(value)!r}"' for name, value in NARROW_CPU_RERUN.items())
        text += (f" A narrower re-run that keeps the horizon and every seed (`{flags}`) takes about "
                 f"{narrow_minutes:.0f} min.")
    return Markdown(text)


def comparison_table(results: Results) -> pd.DataFrame:
    """The comparison as the chapter shows it: one row per dataset and condition."""
    rows = comparison_rows(results)
    shown = pd.DataFrame({
        "dataset": rows["dataset"], "condition": rows["condition"],
        "weight v1 final": [_fmt(m, s) for m, s in zip(rows["v1_final"], rows["v1_final_sd"])],
        "weight v1 peak": [_fmt(m, s) for m, s in zip(rows["v1_peak"], rows["v1_peak_sd"])],
        "gradient v1 final": [_fmt(m, s) for m, s in zip(rows["gradient_v1"], rows["gradient_v1_sd"])],
        "train loss (final trace)": rows["train_loss"].map(lambda v: f"{v:.3g}"),
        "test accuracy": rows["test_acc"].map(lambda v: f"{v:.3f}"),
        "runs with events": [f"{e} of {n}" for e, n in zip(rows["runs_with_events"], rows["seeds"])],
        "memorised runs": [f"{m} of {n}" for m, n in zip(rows["memorised_runs"], rows["seeds"])],
        "diverged runs": rows["diverged"],
    })
    return shown.set_index(["dataset", "condition"])


def _colours():
    from ... import plotting

    return plotting.condition_colours()


def comparison_figure(results: Results) -> None:
    """Every seed's final weight v1 per condition and dataset, the random baseline and the paper's 0.22."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from ... import plotting
    from ...book.figures import show_figure

    frame = pd.concat([per_seed_final(t).assign(dataset=d) for d, t in results.comparison.items()], ignore_index=True)
    order = [c for c in results.settings.conditions]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    sns.stripplot(data=frame, x="dataset", y="value", hue="condition", hue_order=order, dodge=True,
                  palette=_colours(), size=6, ax=ax, jitter=0.15)
    sns.pointplot(data=frame, x="dataset", y="value", hue="condition", hue_order=order, dodge=0.6,
                  palette=_colours(), errorbar="sd", markers="_", linestyles="none", ax=ax, legend=False)
    plotting.draw_baseline(ax, results.baseline)
    ax.axhline(PAPER_LINEAR_WEIGHT, color="0.6", linestyle=":", label="paper's Res+None (0.22)")
    ax.set_ylim(0, 1)
    ax.set_xlabel("dataset")
    ax.set_ylabel("weight v1 |cos| at the end, mean over layer pairs")
    plotting.figure_legend(fig, ax, ncol=3)
    linear = comparison_rows(results).set_index(["dataset", "condition"])
    headline = results.settings.headline
    show_figure(fig, "c2-comparison",
                f"Final weight v1 continuity of every seed (dots; bars: mean ± sd) after {results.settings.base.steps:,} "
                f"steps on each dataset. On the headline dataset `{headline}` res-relu ends at "
                f"{_fmt(linear.loc[(headline, 'res-relu'), 'v1_final'], linear.loc[(headline, 'res-relu'), 'v1_final_sd'])} "
                f"and res-none at {_fmt(linear.loc[(headline, 'res-none'), 'v1_final'], linear.loc[(headline, 'res-none'), 'v1_final_sd'])}"
                f"; dashed: the random baseline {results.baseline:.3f}.")


def trace_figure(results: Results, dataset: str) -> None:
    """Training loss (log scale) and weight v1 on one time axis, one seed per row, one condition per
    column, on ``dataset``; instability events shaded, the memorised step marked."""
    import matplotlib.pyplot as plt

    from ...book.figures import show_figure

    table = results.comparison[dataset]
    series = instability.trace_series(table)
    events = instability.instability_events(table)
    summaries = run_summaries(table)
    conditions = list(results.settings.conditions)
    seeds = sorted(series["seed"].unique())
    fig, axes = plt.subplots(len(seeds), len(conditions), figsize=(3.6 * len(conditions), 2.5 * len(seeds)),
                             squeeze=False, sharex=True)
    colours = _colours()
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
            memorised = summaries.loc[(summaries["seed"] == seed) & (summaries["condition"] == condition),
                                      "memorised_step"]
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
    show_figure(fig, f"c2-trace-{dataset}",
                f"`{dataset}`: the windowed training loss (grey, log scale, mean of the minibatch losses over "
                f"{results.settings.base.trace_every} steps) and weight v1 continuity (colour, right axis) of every "
                f"run; red bands are instability events (loss above {instability.INSTABILITY_FACTOR:g}x its running "
                f"minimum), the dotted line is the step where the training loss first fell below "
                f"{instability.MEMORISED_LOSS:g}. res-none: {int(none['runs_with_events'])} of {int(none['seeds'])} runs with "
                f"events, {int(none['memorised_runs'])} memorised.")


def events_table(results: Results) -> pd.DataFrame:
    """Per run on the headline dataset and under every intervention: instability events, the first one's step,
    the memorised step, weight v1 at start / peak / end, and its fall from the peak split into the part across
    instability events and the part between them."""
    parts = []
    for name, table in results.interventions.items():
        parts.append(run_summaries(table).assign(intervention=name))
    frame = pd.concat(parts, ignore_index=True)
    columns = ["intervention", "condition", "seed", "events", "first_event", "memorised_step", "v1_start", "v1_peak",
               "peak_step", "v1_final", "fall_from_peak", "fall_across_events", "fall_between_events", "final_loss",
               "diverged_step"]
    return frame[columns].set_index(["intervention", "condition", "seed"]).round(3)


def intervention_table(results: Results) -> pd.DataFrame:
    """The interventions at the horizon (headline dataset): the table the chapter's answer reads."""
    rows = intervention_rows(results)
    return pd.DataFrame({
        "intervention": rows["intervention"], "condition": rows["condition"],
        "weight v1 final": [_fmt(m, s) for m, s in zip(rows["v1_final"], rows["v1_final_sd"])],
        "weight v1 peak": [_fmt(m, s) for m, s in zip(rows["v1_peak"], rows["v1_peak_sd"])],
        "fall after peak per 1,000 steps": [_fmt(m, s) for m, s in zip(rows["fall_per_1000"], rows["fall_per_1000_sd"])],
        "runs with events": [f"{e} of {n} ({t} events)" for e, n, t in
                             zip(rows["runs_with_events"], rows["seeds"], rows["events"])],
        "drift, stable windows (°/1,000 steps)": [_fmt(m, s) for m, s in zip(rows["drift_rate"], rows["drift_rate_sd"])],
        "train loss (final trace)": rows["train_loss"].map(lambda v: f"{v:.3g}"),
        "test accuracy": rows["test_acc"].map(lambda v: f"{v:.3f}"),
    }).set_index(["intervention", "condition"])


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
            sns.lineplot(data=data, x=x, y="v1", hue="intervention", hue_order=names, palette=colours,
                         errorbar="sd", ax=ax, legend=(row == 0 and column == 0))
            plotting.draw_baseline(ax, results.baseline)
            ax.set_ylim(0, 1)
            ax.set_title(f"{condition}" + (", aligned at each run's peak" if x == "since_peak" else ""),
                         fontsize="medium")
            ax.set_xlabel("training step" if x == "step" else "steps since the run's peak of weight v1")
            ax.set_ylabel("weight v1 |cos|, mean over layer pairs")
    plotting.figure_legend(fig, axes[0, 0], ncol=len(names) + 1)
    rows = intervention_rows(results).set_index(["intervention", "condition"])
    text = "; ".join(f"{n} {_fmt(rows.loc[(n, 'res-none'), 'v1_final'], rows.loc[(n, 'res-none'), 'v1_final_sd'])}"
                     for n in names)
    show_figure(fig, "c2-interventions",
                f"Weight v1 continuity on `{results.settings.headline}` under each intervention (seed mean ± sd), "
                f"against the step (top) and against the steps since each run's own peak (bottom), so that runs "
                f"that rise at different speeds are compared at equal progress. res-none at the end: {text}.")


def seeds_figure(results: Results) -> None:
    """Every seed's final weight v1 for the linear net and the baseline, under Adam and SGD."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from ... import plotting
    from ...book.figures import show_figure

    values = seed_values(results)
    finite = values[~values["diverged"]]
    fig, ax = plt.subplots(figsize=(8, 4))
    sns.swarmplot(data=finite, x="optimizer", y="value", hue="condition", hue_order=["res-relu", "res-none"],
                  dodge=True, palette=_colours(), size=6, ax=ax)
    sns.pointplot(data=finite, x="optimizer", y="value", hue="condition", hue_order=["res-relu", "res-none"],
                  dodge=0.4, palette=_colours(), errorbar="sd", markers="_", linestyles="none", ax=ax, legend=False)
    plotting.draw_baseline(ax, results.baseline)
    ax.set_ylim(0, 1)
    ax.set_ylabel("weight v1 |cos| at the end")
    plotting.figure_legend(fig, ax, ncol=3)
    diverged = values[values["diverged"]]
    show_figure(fig, "c2-seeds",
                f"Every seed's final weight v1 on `{results.settings.headline}` (dots; bars: mean ± sd). "
                f"{len(diverged)} seed(s) diverged and are not drawn"
                + (f" ({', '.join(f'{r.condition} {r.optimizer} seed {r.seed}' for r in diverged.itertuples())})"
                   if len(diverged) else "") + ".")


def seeds_sentences(results: Results) -> str:
    """Whether each group of seeds is bimodal, and whether the verdicts hold on two disjoint halves."""
    values = seed_values(results)
    parts = []
    for (condition, optimizer), group in values.groupby(["condition", "optimizer"]):
        finite = group.loc[~group["diverged"], "value"]
        shape = modality(finite)
        diverged = int(group["diverged"].sum())
        label = (f"bimodal (groups at {', '.join(f'{v:.2f}' for v in shape.low)} and "
                 f"{', '.join(f'{v:.2f}' for v in shape.high)})" if shape.bimodal else
                 ("not bimodal" if len(finite) >= 4 else "too few seeds to tell"))
        parts.append(f"{condition} under {optimizer}: {estimate(finite)} over {len(finite)} seeds"
                     + (f" ({diverged} diverged)" if diverged else "") + f", {label}")
    halves = half_verdicts(results)
    stable = []
    for optimizer, group in halves.groupby("optimizer"):
        low = set(group["low_verdict"])
        above = set(group["relu_above_verdict"])
        stable.append(f"under {optimizer} the halves give "
                      + ("the same verdicts as all seeds" if len(low) == 1 and len(above) == 1 else
                         "different verdicts (" + "; ".join(f"{r.seeds}: {r.mean:.2f}, {r.low_verdict} / {r.relu_above_verdict}"
                                                          for r in group.itertuples()) + ")"))
    return ("Final weight v1 of every seed: " + "; ".join(parts) + ". A group is called bimodal when its largest gap "
            f"between sorted values is at least {BIMODAL_GAP:g} and more than 3 pooled within-group sds, with 2 or more "
            "seeds on each side. Split into even and odd seeds, " + "; ".join(stable) + ".")


def sgd_sentence(results: Results) -> str:
    return results.sgd_choice.sentence(results.settings.sgd_probe_steps)


def formation_sentence(results: Results) -> str:
    """What the SGD rows can say: whether continuity formed at all under SGD at the chosen rate (each seed's
    peak beside Adam's), since a net that never rose has nothing to lose to drift."""
    rows = formation_rows(results)
    if rows.empty or "sgd" not in set(rows["optimizer"]):
        return "No SGD run trained stably, so the chapter cannot say how SGD forms continuity."
    by = rows.set_index(["condition", "optimizer"])

    def row(condition: str, optimizer: str):
        return by.loc[(condition, optimizer)] if (condition, optimizer) in by.index else None

    def peaks(condition: str, optimizer: str) -> str:
        one = row(condition, optimizer)
        if one is None:
            return "no seed (every run diverged)"
        span = (f"{one.peak_min:.2f}" if round(one.peak_min, 2) == round(one.peak_max, 2)
                else f"{one.peak_min:.2f}–{one.peak_max:.2f}")
        return f"{span} over {one.seeds} seeds"

    lr = results.sgd_choice.lr
    text = (f"Whether continuity formed at all (each seed's peak weight v1; random level {results.baseline:.3f}): "
            f"under SGD at lr {lr:g} the linear net peaked at {peaks('res-none', 'sgd')} "
            f"(Adam: {peaks('res-none', 'adam')}) and res-relu at {peaks('res-relu', 'sgd')} "
            f"(Adam: {peaks('res-relu', 'adam')}). A group counts as having formed continuity when its mean peak is "
            f"at least {FALL_MARGIN:g} above the random level (the book's margin for any difference). ")
    linear = row("res-none", "sgd")
    if linear is None:
        text += "Every SGD run of the linear net diverged, so the chapter cannot say whether it forms continuity. "
    elif not linear.formed:
        text += ("Under SGD the linear net's continuity never formed, so its low final value there is not a fall: "
                 "there was nothing for drift to remove, and the SGD rows say nothing about drift. ")
    else:
        text += ("Under SGD the linear net did form continuity, so its final value there is read against that "
                 "peak, as under Adam. ")
    relu_adam, relu_sgd = row("res-relu", "adam"), row("res-relu", "sgd")
    if relu_adam is None or relu_sgd is None:
        return text + "The baseline cannot be compared across optimizers: every run of one of them diverged."
    relu_gap = relu_adam.peak_mean - relu_sgd.peak_mean
    if relu_gap >= FALL_MARGIN:
        text += (f"The baseline too peaked {relu_gap:.2f} lower than under Adam: at this rate SGD forms continuity "
                 "slowly for every net, so the SGD comparison is limited by its rate (the rule's larger rates "
                 "diverged), not evidence that SGD removes continuity.")
    elif relu_gap <= -FALL_MARGIN:
        text += f"The baseline peaked {-relu_gap:.2f} higher under SGD than under Adam."
    else:
        text += "The baseline formed about as much continuity as under Adam (peaks within the margin)."
    return text


def answer(results: Results):
    """The section's answer: one bullet per explanation with its verdict and numbers, the weight-decay
    prediction, and Adam's shared axes."""
    from IPython.display import Markdown

    lines = [f"- **{e.name}: {e.verdict}.** {e.evidence}" for e in explanations(results)]
    verdict, with_decay, without = weight_decay_prediction(results)
    lines.append(f"- **Weight decay (our prediction, not the paper's):** AdamW (decoupled decay 0.1) leaves res-none at "
                 f"{with_decay}, Adam at {without}: the prediction that decay keeps more continuity is {verdict}.")
    axes = shared_axes(results)
    if axes is not None:
        adam, rotated = axes
        share = (adam.mean - rotated.mean) / (adam.mean - results.baseline) if adam.mean > results.baseline else math.nan
        lines.append(f"- **Adam's shared axes:** res-relu ends at {adam} under Adam and at {rotated} when every layer "
                     f"gets Adam in its own random frame, so Adam's per-coordinate axes, shared by all layers, supply "
                     + ("n/a" if math.isnan(share) else f"{100 * share:.0f}%")
                     + f" of the baseline's continuity above the random level ({results.baseline:.3f}); the paper "
                     "does not discuss this.")
    return Markdown("\n".join(lines))



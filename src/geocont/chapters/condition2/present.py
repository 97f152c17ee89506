"""condition2: what the chapter shows (figures, tables, and its findings worded from ``prose.md``), from
:mod:`.compute`. Nothing here decides a finding: :mod:`.compute` does, and this module words it."""

from __future__ import annotations

import math

import pandas as pd

from ... import instability
from ...book.prose import Prose
from ...statistics import DIFFERENCE_MARGIN, final_per_run, per_run
from ..mlp_runs import BOOK_BUDGET_MINUTES, CPU_SECONDS_PER_MLP_STEP, ROTATED_STEP_FACTOR
from .compute import (BIMODAL_GAP, CALIBRATION_EVENTS_PER_RUN, MOTION_LOG2_MARGIN, NARROW_CPU_RERUN,
                      PAPER_LINEAR_WEIGHT, SGD_LEARNING_RATES, SGD_MOMENTUM, SPIKE_EXCESS, STILL_RISING_SHARE,
                      SUBSPACE_KS, Condition2Settings, Results, budget, comparison_rows, cosine_course, cosine_lr,
                      drift_tests_found, explanations, formation, forks_found, function_preserving_motion,
                      gap_per_run,
                      intervention_rows, seed_groups_found, halves_agree, half_verdicts, seed_values, shared_axes,
                      spectrum, spike_calibration, switch_step, weight_decay_prediction)

PROSE = Prose.of(__package__)


def _fmt(value: float, sd: float = math.nan) -> str:
    """``0.42 ± 0.03`` (``n/a`` for an undefined value, no ± where the spread is undefined)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.2f}" + (f" ± {sd:.2f}" if isinstance(sd, float) and not math.isnan(sd) else "")


def _sig(value) -> str:
    """An :class:`~geocont.statistics.Estimate` to three significant figures (small quantities: motion, rates, gaps)."""
    if math.isnan(value.mean):
        return "n/a"
    decimals = max(0, 2 - math.floor(math.log10(abs(value.mean)))) if value.mean else 3
    spread = (f" ± {value.std:.{decimals}f}" if value.n > 1 and not math.isnan(value.std)
              else " (1 seed)" if value.n == 1 else "")
    return f"{value.mean:.{decimals}f}{spread}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def budget_note(settings: Condition2Settings):
    """What the chapter trains; at ``cpu`` also its predicted cold time against the book's budget, what this
    build leaves out of the preset, and a narrower re-run (:func:`.compute.budget`)."""
    from IPython.display import Markdown

    found, seeds = budget(settings), _count(len(settings.seeds), "seed")
    interventions = (PROSE.render("budget.interventions", interventions=_count(len(settings.interventions), "intervention"),
                                  seeds=seeds) if settings.interventions else PROSE.render("budget.no-interventions"))
    parts = [PROSE.render("budget.runs", runs=_count(found.runs, "run"), steps=settings.base.steps,
                          conditions=_count(len(settings.conditions), "condition"), seeds=seeds,
                          datasets=_count(len(settings.datasets), "dataset"), interventions=interventions,
                          many_seeds=_count(len(settings.many_seeds), "seed"), probes=found.probes,
                          probe_steps=settings.sgd_probe_steps, sgd_runs=found.sgd_runs)]
    if found.minutes is not None:
        parts.append(PROSE.render("budget.cost", minutes=found.minutes, step_ms=1000 * CPU_SECONDS_PER_MLP_STEP,
                                  rotated=ROTATED_STEP_FACTOR, share=found.minutes / BOOK_BUDGET_MINUTES,
                                  budget=BOOK_BUDGET_MINUTES))
    if found.left_out:
        parts.append(PROSE.render("budget.left-out", preset_minutes=found.preset_minutes, left_out="; ".join(
            f"{name} {', '.join(str(x) for x in missing)}" for name, missing in found.left_out.items())))
    if found.narrow_minutes is not None:
        flags = " ".join(f'-p {name} "{list(value)!r}"' for name, value in NARROW_CPU_RERUN.items())
        parts.append(PROSE.render("budget.narrower", flags=flags, minutes=found.narrow_minutes))
    return Markdown(" ".join(parts))


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

    frame = pd.concat([final_per_run(t, "weight_cos", "input", 1).assign(dataset=d) for d, t in results.comparison.items()],
                      ignore_index=True)
    order = [c for c in results.settings.conditions]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    sns.stripplot(data=frame, x="dataset", y="value", hue="condition", hue_order=order, dodge=True,
                  palette=_colours(), size=6, ax=ax, jitter=0.15)
    sns.pointplot(data=frame, x="dataset", y="value", hue="condition", hue_order=order, dodge=0.6,
                  palette=_colours(), errorbar="sd", markers="_", linestyles="none", ax=ax, legend=False)
    plotting.draw_baseline(ax, results.baseline)
    ax.axhline(PAPER_LINEAR_WEIGHT, color="0.6", linestyle=":", label=f"paper's Res+None ({PAPER_LINEAR_WEIGHT})")
    ax.set_ylim(0, 1)
    ax.set_xlabel("dataset")
    ax.set_ylabel("weight v1 |cos| at the end, mean over layer pairs")
    plotting.figure_legend(fig, ax, ncol=3)
    linear = comparison_rows(results).set_index(["dataset", "condition"])
    headline = results.settings.headline
    show_figure(fig, "c2-comparison", PROSE.render(
        "comparison-caption", steps=results.settings.base.steps, headline=headline, baseline=results.baseline,
        relu=_fmt(linear.loc[(headline, "res-relu"), "v1_final"], linear.loc[(headline, "res-relu"), "v1_final_sd"]),
        none=_fmt(linear.loc[(headline, "res-none"), "v1_final"], linear.loc[(headline, "res-none"), "v1_final_sd"])))


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
    show_figure(fig, f"c2-trace-{dataset}", PROSE.render(
        "trace-caption", dataset=dataset, trace_every=results.settings.base.trace_every,
        factor=instability.INSTABILITY_FACTOR, memorised_loss=instability.MEMORISED_LOSS,
        runs_with_events=int(none["runs_with_events"]), runs=int(none["seeds"]), memorised=int(none["memorised_runs"])))


def events_table(results: Results) -> pd.DataFrame:
    """Per run on the headline dataset and under every intervention: instability events, the first one's step,
    the memorised step, weight v1 at start / peak / end, and its fall from the peak split into the part across
    instability events and the part between them."""
    parts = []
    for name, table in results.interventions.items():
        parts.append(instability.run_summary(table).assign(intervention=name))
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
    finals = "; ".join(f"{n} {_fmt(rows.loc[(n, 'res-none'), 'v1_final'], rows.loc[(n, 'res-none'), 'v1_final_sd'])}"
                       for n in names)
    show_figure(fig, "c2-interventions", PROSE.render("interventions-caption", headline=results.settings.headline,
                                                      finals=finals))


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
    which = (" (" + ", ".join(f"{r.condition} {r.optimizer} seed {r.seed}" for r in diverged.itertuples()) + ")"
             if len(diverged) else "")
    show_figure(fig, "c2-seeds", PROSE.render("seeds-caption", headline=results.settings.headline,
                                              diverged=len(diverged), which=which))


def seeds_sentences(results: Results) -> str:
    """Whether each group of seeds is bimodal, and whether the verdicts hold on two disjoint halves."""
    groups = []
    for group in seed_groups_found(results):
        shape = group.shape
        if shape.bimodal:
            label = PROSE.choose("seeds-shape", "bimodal", low=", ".join(f"{v:.2f}" for v in shape.low),
                                 high=", ".join(f"{v:.2f}" for v in shape.high))
        else:
            label = PROSE.choose("seeds-shape", "not-bimodal" if group.value.n >= 4 else "too-few")
        groups.append(PROSE.render("seeds-group", condition=group.condition, optimizer=group.optimizer,
                                   value=group.value, n=group.value.n, shape=label,
                                   diverged=f" ({group.diverged} diverged)" if group.diverged else ""))
    halves = half_verdicts(results)
    stable = []
    for optimizer, agree in halves_agree(results).items():
        rows = halves[halves["optimizer"] == optimizer]
        stable.append(PROSE.choose("seeds-halves", "agree" if agree else "differ", optimizer=optimizer, halves="; ".join(
            f"{r.seeds}: {r.mean:.2f}, {r.low_verdict} / {r.relu_above_verdict}" for r in rows.itertuples())))
    return PROSE.render("seeds", groups="; ".join(groups), gap=BIMODAL_GAP, halves="; ".join(stable))


def sgd_sentence(results: Results) -> str:
    """How SGD's learning rate was chosen (the probes)."""
    choice = results.sgd_choice
    tried = "; ".join(f"lr {lr:g}: {bad} of {n} probe runs diverged" for lr, (bad, n) in choice.probes.items())
    chosen = f"lr {choice.lr:g} was chosen" if choice.lr is not None else "no candidate rate trained stably"
    return PROSE.render("sgd-choice", momentum=SGD_MOMENTUM, candidates=", ".join(f"{x:g}" for x in SGD_LEARNING_RATES),
                        probe_steps=results.settings.sgd_probe_steps, tried=tried, chosen=chosen)


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
        span = (f"{one.peak_min:.2f}" if round(one.peak_min, 2) == round(one.peak_max, 2)
                else f"{one.peak_min:.2f}–{one.peak_max:.2f}")
        return f"{span} over {one.seeds} seeds"

    text = PROSE.render("formation-peaks", baseline=results.baseline, lr=found.lr, margin=DIFFERENCE_MARGIN,
                        none_sgd=peaks("res-none", "sgd"), none_adam=peaks("res-none", "adam"),
                        relu_sgd=peaks("res-relu", "sgd"), relu_adam=peaks("res-relu", "adam"))
    return " ".join([text, PROSE.choose("formation", found.linear),
                     PROSE.choose("formation-baseline", found.baseline, gap=abs(found.relu_gap))])


def _evidence(explanation) -> str:
    numbers = explanation.numbers
    if explanation.name == "instability":
        without = [PROSE.render("explanation-without-events", name=name, none=_fmt(none), relu=_fmt(relu))
                   for name, none, relu in numbers["without_events"]]
        return PROSE.render("explanation-instability", headline=numbers["headline"],
                            runs_with_events=numbers["runs_with_events"], runs=numbers["runs"], events=numbers["events"],
                            fall=_fmt(numbers["fall"]), across=_fmt(numbers["across"]),
                            share="n/a" if math.isnan(numbers["share"]) else f"{100 * numbers['share']:.0f}%",
                            without_events="; ".join(without) or PROSE.render("explanation-no-stable-intervention"))
    if explanation.name == "rotation drift":
        moving = numbers["motion"]
        motion = (PROSE.render("explanation-motion-not-recorded") if moving is None else PROSE.render(
            "explanation-motion", none=moving.none.log2_ratio, relu=moving.relu.log2_ratio,
            left_out=len(moving.none.left_out), verdict=moving.verdict))
        readings = "; ".join(f"{name}: {vote}" for name, vote in numbers["readings"].items())
        motions = "; ".join(f"{name}: {vote}" for name, vote in numbers["motions"].items())
        instability_verdict, memorisation_verdict = numbers["alternatives"]
        return PROSE.render("explanation-rotation-drift", motion_vote=numbers["motion_vote"], motion=motion,
                            motions=motions or PROSE.render("explanation-no-drift-test"),
                            tests_vote=numbers["tests_vote"], readings=readings or PROSE.render("explanation-no-drift-test"),
                            instability=instability_verdict, memorisation=memorisation_verdict,
                            none_rate=_fmt(numbers["none_rate"], numbers["none_rate_sd"]),
                            relu_rate=_fmt(numbers["relu_rate"], numbers["relu_rate_sd"]),
                            kept=", ".join(numbers["kept"]) or "none")
    return PROSE.render("explanation-memorisation", datasets="; ".join(
        PROSE.render("explanation-memorisation-dataset", dataset=d, fall=_fmt(fall), memorised=m, runs=n)
        for d, fall, m, n in numbers["datasets"]))


def answer(results: Results):
    """The section's answer: one bullet per explanation with its verdict and numbers, the weight-decay
    prediction, and Adam's shared axes."""
    from IPython.display import Markdown

    lines = [PROSE.render("explanation", name=e.name, verdict=e.verdict, evidence=_evidence(e))
             for e in explanations(results)]
    verdict, with_decay, without = weight_decay_prediction(results)
    lines.append(PROSE.render("weight-decay", with_decay=with_decay, without=without, verdict=verdict))
    axes = shared_axes(results)
    if axes is not None:
        lines.append(PROSE.render("shared-axes", adam=axes.adam, rotated=axes.rotated, baseline=results.baseline,
                                  share="n/a" if math.isnan(axes.share) else f"{100 * axes.share:.0f}%"))
    return Markdown("\n".join(lines))


# ---------------------------------------------------------------------------------------------
# The direct tests of drift
# ---------------------------------------------------------------------------------------------

def _note(text: str) -> None:
    """A section's sentence in place of a figure whose runs or metrics are missing."""
    from IPython.display import Markdown, display

    display(Markdown(text))


def _band(ax, frame: pd.DataFrame, colour, label: str, x: str = "step", linestyle: str = "-") -> None:
    """Seed mean of ``value`` against ``x`` as a line, ±1 sd as a band."""
    grouped = frame.groupby(x)["value"]
    mean, sd = grouped.mean(), grouped.std().fillna(0.0)
    ax.plot(mean.index, mean.to_numpy(), color=colour, label=label, linestyle=linestyle, linewidth=1.6)
    ax.fill_between(mean.index, (mean - sd).to_numpy(), (mean + sd).to_numpy(), color=colour, alpha=0.2, linewidth=0)


def motion_figure(results: Results) -> None:
    """The weights' and the logits' relative change per snapshot over training, res-none beside res-relu."""
    found = function_preserving_motion(results)
    if found is None:
        return _note(PROSE.choose("motion", "not-recorded"))
    import matplotlib.pyplot as plt

    from ... import plotting
    from ...book.figures import show_figure

    table = results.comparison[results.settings.headline]
    colours = _colours()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharex=True, sharey=True)
    for ax, metric, title in zip(axes, ("step_change", "logit_change"),
                                 ("weights: ‖W(t) − W(t′)‖ / ‖W(t′)‖, layer mean", "function: the probe batch's logits")):
        for condition in ("res-none", "res-relu"):
            frame = per_run(table[table["condition"] == condition], metric)
            _band(ax, frame[frame["step"] > 0], colours[condition], condition)
        ax.axvspan(results.settings.base.steps / 2, results.settings.base.steps, color="0.92", zorder=0)
        ax.set_yscale("log")
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel("training step")
    linear = table[table["condition"] == "res-none"]
    if found.none.product is not None:
        product = per_run(linear, "product_change")
        _band(axes[1], product[product["step"] > 0], colours["res-none"], "res-none, P = ∏(I + W_l)", linestyle="--")
    axes[0].set_ylabel("relative change since the previous snapshot")
    plotting.figure_legend(fig, axes[1], ncol=3)
    show_figure(fig, "c2-motion", PROSE.render("motion-caption", headline=results.settings.headline,
                                              none_ratio=found.none.log2_ratio, relu_ratio=found.relu.log2_ratio))


def motion_sentence(results: Results) -> str:
    """The motion test's numbers and verdict (:func:`.compute.function_preserving_motion`)."""
    found = function_preserving_motion(results)
    if found is None:
        return PROSE.choose("motion", "not-recorded")
    none, relu = found.none, found.relu
    product = "" if none.product is None else PROSE.render("motion-product", product=_sig(none.product))
    return PROSE.choose("motion", "read", headline=results.settings.headline, none_weights=_sig(none.weights),
                        none_function=_sig(none.function), product=product, relu_weights=_sig(relu.weights),
                        relu_function=_sig(relu.function), none_ratio=none.log2_ratio, relu_ratio=relu.log2_ratio,
                        margin=MOTION_LOG2_MARGIN, verdict=found.verdict, none_loss=_sig(none.test_loss_change),
                        relu_loss=_sig(relu.test_loss_change), none_left_out=len(none.left_out),
                        relu_left_out=len(relu.left_out), rise_factor=instability.LOSS_RISE_FACTOR, none_seeds=none.all_seeds_log2_ratio.n,
                        relu_seeds=relu.all_seeds_log2_ratio.n, none_all=none.all_seeds_log2_ratio,
                        relu_all=relu.all_seeds_log2_ratio)


def spectrum_figure(results: Results) -> None:
    """The layer-median spectral gap over training, and v1 beside the top-2 and top-4 subspaces per condition."""
    found = spectrum(results)
    if found is None:
        return _note(PROSE.choose("spectrum", "not-recorded"))
    import matplotlib.pyplot as plt

    from ... import plotting
    from ...book.figures import show_figure

    table = results.comparison[results.settings.headline]
    colours = _colours()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    gaps = gap_per_run(table)
    for condition in ("res-none", "res-relu"):
        _band(axes[0], gaps[gaps["condition"] == condition], colours[condition], condition)
    axes[0].set_yscale("log")
    axes[0].set_title("spectral gap", fontsize="medium")
    axes[0].set_ylabel("σ1 / σ2, median over layers")
    axes[0].legend(fontsize="small")
    shades = plotting.palette(["v1", *(f"top-{k}" for k in SUBSPACE_KS)])
    for ax, condition in zip(axes[1:], ("res-none", "res-relu")):
        one = table[table["condition"] == condition]
        _band(ax, per_run(one, "weight_cos", "input", 1), shades["v1"], "v1")
        ax.axhline(results.baseline, color=shades["v1"], linestyle="--", linewidth=0.9)
        for sub in found.subspaces:
            _band(ax, per_run(one, "subspace_cos", "input", sub.k), shades[f"top-{sub.k}"], f"top-{sub.k} subspace")
            ax.axhline(sub.baseline, color=shades[f"top-{sub.k}"], linestyle="--", linewidth=0.9)
        ax.set_ylim(0, 1)
        ax.set_title(condition, fontsize="medium")
        ax.set_ylabel("adjacent layers' cos, pair mean")
    for ax in axes:
        ax.set_xlabel("training step")
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), frameon=False, bbox_to_anchor=(0.6, -0.02))
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    show_figure(fig, "c2-spectrum", PROSE.render("spectrum-caption", headline=results.settings.headline,
                                                baseline=results.baseline))


def spectrum_sentence(results: Results) -> str:
    """Whether the linear net loses its top subspaces or only v1, and the turn rate against the gap."""
    found = spectrum(results)
    if found is None:
        return PROSE.choose("spectrum", "not-recorded")
    subspaces = "; ".join(PROSE.render("spectrum-subspace", k=s.k, none=s.none, peak=s.none_fall.peak,
                                       fall=s.none_fall.verdict, relu=s.relu, baseline=s.baseline)
                          for s in found.subspaces)
    return PROSE.choose("spectrum", "read", headline=results.settings.headline, none_gap=_sig(found.gap["res-none"]),
                        relu_gap=_sig(found.gap["res-relu"]), v1_peak=found.v1_fall.peak, v1_final=found.v1_fall.final,
                        v1_fall=found.v1_fall.verdict, subspaces=subspaces,
                        reading=PROSE.choose("spectrum-reading", found.reading), correlation=found.turn_vs_gap,
                        per_run=found.per_run, relu_correlation=found.relu_turn_vs_gap, verdict=found.verdict)


def drift_tests_figure(results: Results) -> None:
    """Weight v1 of the linear net under each lr and batch test that ran: the step tests over steps (the switch
    marked, the base run beside them), ``lr 3e-4 long`` and the base run on a summed-lr axis, and the batch dose."""
    tests = drift_tests_found(results)
    panels = [name for name, test in (("lr step-down", tests.step_down), ("lr step-up", tests.step_up),
                                      ("lr 3e-4 long", tests.equal_distance), ("batch dose", tests.batch))
              if test is not None]
    if not panels:
        return _note(PROSE.choose("drift-tests", "none"))
    import matplotlib.pyplot as plt

    from ... import plotting
    from ...book.figures import show_figure

    base_table = results.interventions["adam"]
    base = per_run(base_table[base_table["condition"] == "res-none"], "weight_cos", "input", 1)
    colours = plotting.palette(["base (lr 1e-3)", "test"])
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 4), squeeze=False)
    for ax, name in zip(axes[0], panels):
        if name == "batch dose":
            sizes = sorted(tests.batch.finals)
            means = [tests.batch.finals[s].mean for s in sizes]
            sds = [0.0 if math.isnan(tests.batch.finals[s].std) else tests.batch.finals[s].std for s in sizes]
            ax.errorbar(sizes, means, yerr=sds, marker="o", color=colours["test"], capsize=3, label="test")
            ax.set_xscale("log", base=2)
            ax.set_xticks(sizes, [str(s) for s in sizes])
            ax.set_xlabel("batch size (same lr and steps)")
            ax.set_ylabel("weight v1 |cos| at the end")
        else:
            frame = per_run(results.drift_tests[name], "weight_cos", "input", 1)
            if name == "lr 3e-4 long":
                found = tests.equal_distance
                _band(ax, base.assign(summed=base["step"] * found.base_lr), colours["base (lr 1e-3)"], "base (lr 1e-3)",
                      x="summed")
                _band(ax, frame.assign(summed=frame["step"] * found.lr), colours["test"], "test", x="summed")
                ax.axvline(found.base_lr * found.base_steps, color="0.4", linestyle=":", linewidth=1)
                ax.set_xlabel("summed learning rate (lr × steps)")
            else:
                _band(ax, base, colours["base (lr 1e-3)"], "base (lr 1e-3)")
                _band(ax, frame, colours["test"], "test")
                ax.axvline(switch_step(results.settings.base.steps), color="0.4", linestyle=":", linewidth=1)
                ax.set_xlabel("training step")
            ax.set_ylabel("weight v1 |cos|, mean over layer pairs")
        plotting.draw_baseline(ax, results.baseline)
        ax.set_ylim(0, 1)
        ax.set_title(name, fontsize="medium")
    plotting.figure_legend(fig, axes[0][0], ncol=3)
    show_figure(fig, "c2-drift-tests", PROSE.render("drift-tests-caption", headline=results.settings.headline,
                                                   tests=", ".join(panels)))


def cosine_figure(results: Results) -> None:
    """The cosine intervention: weight v1 over steps beside its learning rate, so that one sees when the fall slows."""
    found = cosine_course(results)
    if found is None:
        return _note(PROSE.choose("cosine", "not-run"))
    import matplotlib.pyplot as plt

    from ... import plotting
    from ...book.figures import show_figure

    table = results.interventions["cosine"]
    colours = _colours()
    fig, ax = plt.subplots(figsize=(8, 4))
    for condition in ("res-none", "res-relu"):
        _band(ax, per_run(table[table["condition"] == condition], "weight_cos", "input", 1), colours[condition], condition)
    plotting.draw_baseline(ax, results.baseline)
    ax.set_ylim(0, 1)
    ax.set_xlabel("training step")
    ax.set_ylabel("weight v1 |cos|, mean over layer pairs")
    twin = ax.twinx()
    steps = sorted(table["step"].unique())
    twin.plot(steps, cosine_lr(results, steps), color="0.45", linestyle=":", label="learning rate (right)")
    twin.set_ylabel("learning rate")
    twin.set_ylim(bottom=0)
    twin.grid(False)
    handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    ax.legend(handles=handles, fontsize="small", loc="upper right")
    fig.tight_layout()
    show_figure(fig, "c2-cosine", PROSE.render(
        "cosine-caption", headline=results.settings.headline, half=results.settings.base.steps // 2,
        none_before=_sig(found.fall_before["res-none"]), none_after=_sig(found.fall_after["res-none"]),
        relu_before=_sig(found.fall_before["res-relu"]), relu_after=_sig(found.fall_after["res-relu"])))


def drift_tests_sentences(results: Results) -> str:
    """One sentence per lr or batch test: its numbers and its reading (those of ``DRIFT_TESTS``)."""
    tests = drift_tests_found(results)
    if not tests.readings():
        return PROSE.choose("drift-tests", "none")
    parts = []
    for name, test in (("lr step-down", tests.step_down), ("lr step-up", tests.step_up)):
        if test is None:
            parts.append(PROSE.render("drift-not-run", name=name))
        elif name == "lr step-down":
            parts.append(PROSE.render("drift-step-down", switch=test.switch, at_switch=test.at_switch,
                                      at_end=test.at_end, change=test.change,
                                      reading=PROSE.choose("drift-step-down-reading", test.reading)))
        else:
            parts.append(PROSE.render("drift-step-up", switch=test.switch, before=_sig(test.fall_before),
                                      after=_sig(test.fall_after), margin=test.margin, book_margin=DIFFERENCE_MARGIN,
                                      reading=PROSE.choose("drift-step-up-reading", test.reading)))
    equal = tests.equal_distance
    if equal is None:
        parts.append(PROSE.render("drift-not-run", name="lr 3e-4 long"))
    else:
        parts.append(PROSE.render("drift-long", steps=equal.steps, lr=equal.lr, base_lr=equal.base_lr,
                                  base_steps=equal.base_steps, long=equal.long_final, base=equal.base_final,
                                  verdict=equal.verdict, at_base=equal.at_base_steps, rising=equal.still_rising,
                                  runs=equal.runs, share=STILL_RISING_SHARE,
                                  reading=PROSE.choose("drift-long-reading", equal.drift)))
    dose = tests.batch
    if dose is None:
        parts.append(PROSE.render("drift-not-run", name="batch 64 and batch 256"))
    else:
        parts.append(PROSE.render("drift-batch", finals="; ".join(f"batch {s}: {v}" for s, v in dose.finals.items()),
                                  high=max(dose.finals), low=min(dose.finals), verdict=dose.verdict))
    return "\n\n".join(parts)


def forks_figure(results: Results) -> None:
    """The forks from the formed state: weight v1 of both conditions against the summed learning rate after the
    switch (left), and the linear net's pair-balance motion against the step (right), one line per rate."""
    found = forks_found(results)
    if found is None:
        return _note(PROSE.choose("forks", "not-run"))
    import matplotlib.pyplot as plt
    import seaborn as sns

    from ... import plotting
    from ...book.figures import show_figure
    from .forks import fork_switch

    steps, switch, base_lr = found.steps, fork_switch(found.steps), results.settings.base.optimizer.lr
    shades = dict(zip(found.rates, sns.color_palette("viridis", n_colors=len(found.rates))))
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 4.4))
    for rate, table in sorted(results.forks.items()):
        for condition, linestyle in (("res-none", "-"), ("res-relu", "--")):
            frame = per_run(table[table["condition"] == condition], "weight_cos", "input", 1)
            after = frame[frame["step"] >= switch].assign(distance=lambda f: (f["step"] - switch) * rate)
            _band(left, after, shades[rate], f"{condition}, lr {rate:g}", x="distance", linestyle=linestyle)
        balance = per_run(table[table["condition"] == "res-none"], "pair_balance_motion")
        _band(right, balance, shades[rate], f"lr {rate:g}")
    plotting.draw_baseline(left, results.baseline)
    left.set_xlabel("summed learning rate after the switch")
    left.set_ylabel("weight v1 |cos|, mean over layer pairs")
    left.set_ylim(0, 1)
    left.legend(fontsize="x-small", ncol=2)
    right.axvline(switch, color="0.5", linestyle=":")
    right.set_xlabel("training step")
    right.set_ylabel("res-none pair-balance motion")
    right.legend(fontsize="small")
    fig.tight_layout()
    show_figure(fig, "c2-forks", PROSE.render("forks-caption", headline=results.settings.headline, switch=switch,
                                              base_lr=base_lr))


def forks_sentence(results: Results) -> str:
    """What the forks say of each of drift's predictions (:mod:`.forks`)."""
    found = forks_found(results)
    if found is None:
        return PROSE.choose("forks", "not-run")
    grows, grows_verdict = found.fall_grows_with_rate()
    worst, relu_verdict = found.relu_holds()
    balance, balance_verdict = found.balance_grows_with_rate()
    return PROSE.choose(
        "forks", "ran", reference=found.reference_rate, equal_verdict=found.equal_distance_verdict(),
        equal="; ".join(f"lr {r:g}: {found.fork('res-none', r).at_equal_distance}" for r in found.rates),
        low=min(found.rates), high=max(found.rates), grows=grows, grows_verdict=grows_verdict,
        worst_rate=worst.rate, worst_switch=worst.at_switch, worst_end=worst.at_end, relu_verdict=relu_verdict,
        balance=balance, balance_verdict=balance_verdict, rho=str(found.balance_fall),
        rho_verdict=found.balance_fall_verdict())


def spike_table(results: Results) -> pd.DataFrame:
    """Spike counts and first spike steps per rule and condition (headline dataset), the chosen rule marked."""
    found = spike_calibration(results)
    if found is None:
        return pd.DataFrame()
    rows = found.rows
    chosen = None if found.chosen is None else found.chosen.label
    return pd.DataFrame({
        "rule": [f"{r}{' (chosen)' if r == chosen else ''}" for r in rows["rule"]], "condition": rows["condition"],
        "runs with spikes": [f"{e} of {n}" for e, n in zip(rows["runs_with_events"], rows["runs"])],
        "spikes per run": [_fmt(m, s) for m, s in zip(rows["events_mean"], rows["events_sd"])],
        "first spike (step, per run with one)": [", ".join(f"{s:,}" for s in steps) or "–" for steps in rows["first_events"]],
    }).set_index(["rule", "condition"])


def spike_sentence(results: Results) -> str:
    """The calibrated detector's choice and its reading on res-none (:func:`.compute.spike_calibration`)."""
    found = spike_calibration(results)
    if found is None:
        return PROSE.choose("spikes", "no-trace")
    if found.chosen is None:
        return PROSE.choose("spikes", "no-rule", limit=CALIBRATION_EVENTS_PER_RUN)
    row = found.rows[(found.rows["rule"] == found.chosen.label) & (found.rows["condition"] == "res-none")].iloc[0]
    return PROSE.choose("spikes", "chosen", rule=found.chosen.label, relu=found.relu, limit=CALIBRATION_EVENTS_PER_RUN,
                        none=found.none, runs_with_events=int(row["runs_with_events"]), runs=int(row["runs"]),
                        excess=SPIKE_EXCESS, reading=PROSE.choose("spikes-reading", found.reading))

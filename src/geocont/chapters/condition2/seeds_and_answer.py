"""What the Condition-2 chapter shows of every seed and of its answer: each seed's final weight v1 under Adam and
SGD, whether the seeds split in two, how SGD's rate was chosen and whether continuity formed under it, and one
bullet per explanation with its evidence."""

from __future__ import annotations

import math

import pandas as pd

from ...statistics import DIFFERENCE_MARGIN
from .compute import (
    BIMODAL_GAP,
    SGD_LEARNING_RATES,
    SGD_MOMENTUM,
    Results,
    explanations,
    formation,
    half_verdicts,
    halves_agree,
    seed_groups_found,
    seed_values,
    shared_axes,
    weight_decay_prediction,
)
from .drift_tests import DRIFT_GROUPINGS, counts, grouped_readings, tally
from .formatting import PROSE, condition_colours, fmt
from .mechanism import drift_vote


def _seeds_plot(ax, finite) -> None:
    """Each finite seed's final weight v1 per optimizer and condition, with their mean and sd."""
    import seaborn as sns

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


def _diverged_runs(diverged) -> str:
    """The diverged runs named in brackets for the caption, or nothing when none diverged."""
    if not len(diverged):
        return ""
    return " (" + ", ".join(f"{r.condition} {r.optimizer} seed {r.seed}" for r in diverged.itertuples()) + ")"


def seeds_figure(results: Results) -> None:
    """Every seed's final weight v1 for the linear net and the baseline, under Adam and SGD."""
    import matplotlib.pyplot as plt

    from ... import plotting
    from ...book.figures import show_figure

    values = seed_values(results)
    fig, ax = plt.subplots(figsize=(8, 4))
    _seeds_plot(ax, values[~values["diverged"]])
    plotting.draw_baseline(ax, results.baseline)
    ax.set_ylim(0, 1)
    ax.set_ylabel("weight v1 |cos| at the end")
    plotting.figure_legend(fig, ax, ncol=3)
    diverged = values[values["diverged"]]
    show_figure(
        fig,
        "c2-seeds",
        PROSE.render(
            "seeds-caption",
            headline=results.settings.headline,
            diverged=len(diverged),
            which=_diverged_runs(diverged),
        ),
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


def _instability_evidence(numbers: dict) -> str:
    """The evidence for instability: runs with events, the fall from the peak and the part across events, and
    weight v1 under the interventions that left the runs without events."""
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


def _motion_evidence(moving) -> str:
    """How far the linear net's and the baseline's weights moved, or that it was not recorded."""
    if moving is None:
        return PROSE.render("explanation-motion-not-recorded")
    return PROSE.render(
        "explanation-motion",
        none=moving.none.log2_ratio,
        relu=moving.relu.log2_ratio,
        left_out=len(moving.none.left_out),
        verdict=moving.verdict,
    )


def _drift_evidence(numbers: dict) -> str:
    """The evidence for rotation drift: the motion and the direct tests' votes, the alternatives' verdicts, and the
    drift rates in stable windows."""
    readings = "; ".join(f"{name}: {vote}" for name, vote in numbers["readings"].items())
    motions = "; ".join(f"{name}: {vote}" for name, vote in numbers["motions"].items())
    instability_verdict, memorisation_verdict = numbers["alternatives"]
    return PROSE.render(
        "explanation-rotation-drift",
        motion_vote=numbers["motion_vote"],
        motion=_motion_evidence(numbers["motion"]),
        motions=motions or PROSE.render("explanation-no-drift-test"),
        tests_vote=numbers["tests_vote"],
        readings=readings or PROSE.render("explanation-no-drift-test"),
        instability=instability_verdict,
        memorisation=memorisation_verdict,
        none_rate=fmt(numbers["none_rate"], numbers["none_rate_sd"]),
        relu_rate=fmt(numbers["relu_rate"], numbers["relu_rate_sd"]),
        kept=", ".join(numbers["kept"]) or "none",
    )


def _memorisation_evidence(numbers: dict) -> str:
    """The evidence for memorisation: per dataset, the fall from the peak and how many runs memorised."""
    return PROSE.render(
        "explanation-memorisation",
        datasets="; ".join(
            PROSE.render("explanation-memorisation-dataset", dataset=d, fall=fmt(fall), memorised=m, runs=n)
            for d, fall, m, n in numbers["datasets"]
        ),
    )


def evidence(explanation) -> str:
    """The numbers behind one explanation's verdict, as the sentence its bullet ends with."""
    if explanation.name == "instability":
        return _instability_evidence(explanation.numbers)
    if explanation.name == "rotation drift":
        return _drift_evidence(explanation.numbers)
    return _memorisation_evidence(explanation.numbers)


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


def drift_groupings_table(results: Results) -> pd.DataFrame:
    """The drift verdict's sensitivity to how its tests are grouped: per grouping the book has used
    (:data:`.drift_tests.DRIFT_GROUPINGS`, the verdict of record first), each group's tests, counts and vote, and
    the explanation's verdict under it."""
    drift = next(found for found in explanations(results) if found.name == "rotation drift")
    alternatives = drift.numbers["alternatives"]
    rows = []
    for grouping in DRIFT_GROUPINGS:
        motions, readings = grouped_readings(results, grouping)
        rows.append(
            {
                "grouping": grouping,
                "motion tests (for/against/neither)": _counted(motions),
                "motion vote": tally(motions),
                "lr and batch tests (for/against/neither)": _counted(readings),
                "lr and batch vote": tally(readings),
                "verdict": drift_vote(motions, readings, alternatives),
            }
        )
    return pd.DataFrame(rows).set_index("grouping")


def _counted(readings: dict[str, str]) -> str:
    found = counts(readings)
    return f"{found['for']}/{found['against']}/{found['neither']}"

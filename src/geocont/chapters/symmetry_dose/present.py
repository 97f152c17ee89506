"""symmetry_dose: what the chapter shows (figures, tables, computed prose), from :mod:`.compute`.

The computed prose is worded from the templates in ``prose.md`` (:mod:`geocont.book.prose`); what it states,
and which case applies, is computed in :mod:`.compute` (the findings)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown

from ... import paper, plotting
from ...book.chapter import undefined_sentence
from ...book.figures import show_figure
from ...book.prose import listing
from ...statistics import DIFFERENCE_MARGIN, final_per_run
from .. import mlp_presentation
from ..common import mlp_verdict
from .compute import (
    DOSE,
    DOSE_CONDITIONS,
    LINEAR,
    NEAR_LINEAR_SHARE,
    PROSE,
    RADIAL_CONDITIONS,
    RELU,
    TRACK,
    TRANSITION_SHARE,
    Results,
    dose_finding,
    near_linear_percent,
    radial_finding,
    run_summary,
)

#: The closing list: one bullet per claim, under the run's scale, seeds and data.
verdict = mlp_verdict


def run_note(results: Results) -> Markdown:
    return Markdown(PROSE.render("run-note", **vars(run_summary(results)), undefined=undefined_sentence(results.table)))


def dose_rule() -> Markdown:
    """The dose's rules, as stated before any run was read (:data:`.compute.TRANSITION_SHARE`)."""
    return Markdown(
        PROSE.render(
            "dose-rule", share=TRANSITION_SHARE, margin=DIFFERENCE_MARGIN, grid=", ".join(f"{s:g}" for s in DOSE)
        )
    )


def radial_rule() -> Markdown:
    """The radial nets' rule, as stated before any run was read (:data:`.compute.NEAR_LINEAR_SHARE`)."""
    return Markdown(PROSE.render("radial-rule", share=NEAR_LINEAR_SHARE))


def horizon_summary(results: Results) -> pd.DataFrame:
    """Per condition: each quantity at ``early_steps``, at the end, and its change over the last third."""
    return mlp_presentation.horizon_table(results.table, results.settings.early_steps, order=results.order)


# The dose of nonlinearity


def dose_caption(results: Results) -> str:
    """The caption of the dose figure (the finding: :func:`.compute.dose_finding`)."""
    found = dose_finding(results.table, results.baseline)
    points = "; ".join(PROSE.render("dose-item", **vars(p)) for p in found.points)
    return PROSE.render("dose-caption", baseline=found.baseline, points=points)


def dose_figure(results: Results) -> None:
    """Final weight and gradient v1 continuity against 1 - slope (log axis), the linear net as a band."""
    table, colours = results.table, plotting.condition_colours()
    broken = [(s, c) for s, c in DOSE.items() if s < 1]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8), sharey=True)
    for ax, metric in zip(axes, ("weight_cos", "grad_cos")):
        finals = final_per_run(table, metric, "input", 1)
        finals = finals[finals["condition"].isin(DOSE_CONDITIONS)]
        finals = finals.assign(x=1 - finals["condition"].map({c: s for s, c in DOSE.items()}).astype(float))
        dosed, linear = finals[finals["x"] > 0], finals.loc[finals["x"] == 0, "value"]
        means = dosed.groupby("x")["value"].agg(["mean", "std"]).reset_index()
        ax.scatter(dosed["x"], dosed["value"], color=colours[RELU], alpha=0.45, s=20, label="Leaky-ReLU net, one seed")
        ax.errorbar(
            means["x"],
            means["mean"],
            yerr=means["std"].fillna(0),
            color=colours[RELU],
            marker="o",
            capsize=3,
            label="Leaky-ReLU nets, seed mean ± 1 sd",
        )
        if len(linear):
            spread = linear.std() if len(linear) > 1 else 0.0
            ax.axhspan(linear.mean() - spread, linear.mean() + spread, color=colours[LINEAR], alpha=0.2)
            ax.axhline(linear.mean(), color=colours[LINEAR], label="slope 1: res-none (linear), mean ± 1 sd")
        plotting.draw_baseline(ax, results.baseline)
        ax.set_xscale("log")
        ax.set_xticks([1 - s for s, _ in broken], [f"{1 - s:g}\n(slope {s:g})" for s, _ in broken])
        ax.minorticks_off()
        ax.set_xlabel("symmetry break: 1 − negative slope (log axis)")
        ax.set_title(plotting.quantity_label(metric, "input", 1), fontsize="medium")
        ax.set_ylim(0, 1.02)
    axes[0].set_ylabel("|cos|, mean over layer pairs, end of training")
    plotting.figure_legend(fig, axes[0])
    show_figure(fig, "dose-continuity", dose_caption(results))


def dose_reading(results: Results) -> Markdown:
    """Where the transition is and how sharp, whether a 1% break suffices, which slopes stay above random."""
    found = dose_finding(results.table, results.baseline)
    step, relu, linear, small = found.transition, found.at(0.0), found.at(1.0), found.smallest_break
    transition = PROSE.choose(
        "transition",
        step.case,
        total=step.total,
        share=step.share,
        low=step.low,
        high=step.high,
        rule_share=TRANSITION_SHARE,
        largest=step.largest_share,
        relu=relu.weight,
        linear=linear.weight,
    )
    small_break = PROSE.choose(
        "small-break",
        {"reproduced": "suffices", "partly reproduced": "weak", "not reproduced": "not-enough"}.get(
            found.small_break_verdict, "untested"
        ),
        slope=small.slope,
        weight=small.weight,
        linear=linear.weight,
    )
    above = [f"{p.slope:g}" for p in found.points if p.above_random == "reproduced"]
    below = [f"{p.slope:g}" for p in found.points if p.above_random != "reproduced"]
    random = PROSE.choose(
        "above-random",
        "all" if not below else "none" if not above else "some",
        baseline=found.baseline,
        above=listing(above),
        below=listing(below),
    )
    return Markdown(PROSE.render("dose-reading", transition=transition, small_break=small_break, random=random))


# Radial, done properly


def _status(status: str) -> str:
    return PROSE.choose("linear-status", status)


def radial_caption(results: Results) -> str:
    """The caption of the radial figure (the finding: :func:`.compute.radial_finding`)."""
    found = radial_finding(results.table, results.baseline)
    nets = "; ".join(
        PROSE.render(
            "radial-item",
            condition=n.condition,
            initial=n.initial,
            final=n.final,
            status=_status(n.status),
            weight=n.weight,
        )
        for n in found.nets.values()
    )
    return PROSE.render(
        "radial-caption", share=NEAR_LINEAR_SHARE, baseline=results.baseline, paper=paper.RADIAL_WEIGHT_V1, nets=nets
    )


def radial_figure(results: Results) -> None:
    """Near-linear share over training for the radial nets (left); weight v1 over training beside it (right)."""
    table, colours = results.table, plotting.condition_colours()
    radial = [c for c in RADIAL_CONDITIONS if c in set(table["condition"])]
    fig, axes = plt.subplots(1, 2, figsize=(14, 5))
    plotting.plot_over_training(
        near_linear_percent(table),
        "near_linear_share",
        "",
        0,
        ax=axes[0],
        colours=colours,
        hue_order=radial,
        legend=False,
    )
    axes[0].axhline(
        NEAR_LINEAR_SHARE, color="0.35", linestyle=":", linewidth=1.2, label=f"ends linear: {NEAR_LINEAR_SHARE:g}%"
    )
    axes[0].set_ylim(0, 102)
    axes[0].set_title("near-linear share: tanh(‖z‖/τ) ≥ 0.99", fontsize="medium")
    axes[0].set_ylabel("% of probe images, mean over layers")
    axes[0].legend(fontsize="small")
    order = [c for c in (RELU, LINEAR, *radial) if c in set(table["condition"])]
    plotting.plot_over_training(
        table, "weight_cos", "input", 1, ax=axes[1], baseline=results.baseline, colours=colours, hue_order=order
    )
    axes[1].axhline(
        paper.RADIAL_WEIGHT_V1,
        color="0.35",
        linestyle=":",
        linewidth=1.2,
        label=f"paper, Res+Radial: ~{paper.RADIAL_WEIGHT_V1}",
    )
    axes[1].set_ylim(0, 1.02)
    plotting.figure_legend(fig, axes[1])
    show_figure(fig, "dose-radial", radial_caption(results))


def radial_reading(results: Results) -> Markdown:
    """Do the radial nets end linear, and does the one that stays nonlinear lose continuity?"""
    found = radial_finding(results.table, results.baseline)
    nets = found.nets
    papers = PROSE.render(
        "radial-papers",
        radial=_status(nets["res-radial"].status),
        radial_share=nets["res-radial"].final,
        tau=_status(nets["res-radial-tau"].status),
        tau_share=nets["res-radial-tau"].final,
    )
    track = found.track
    return Markdown(
        PROSE.choose(
            "radial-reading",
            found.case,
            papers=papers,
            track_share=track.final,
            track=track.weight,
            relu=found.relu,
            linear=found.linear,
            paper=paper.RADIAL_WEIGHT_V1,
            condition=TRACK,
        )
    )

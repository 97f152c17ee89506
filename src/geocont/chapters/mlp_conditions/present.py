"""mlp_conditions: what the chapter shows (figures, tables, and its findings worded from ``prose.md``), from
:mod:`.compute`. Nothing here decides a finding: :mod:`.compute` does, and this module words it."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython.display import Markdown

from ... import instability, paper, plotting
from ...book.chapter import claim, undefined_sentence
from ...book.figures import show_figure
from ...book.prose import listing
from ...statistics import (
    Estimate,
    change_over_last,
    estimate,
    estimate_at_step,
    final_estimate,
    peak_and_final,
    per_run,
)
from .. import mlp_presentation, mlp_runs
from ..common import mlp_verdict
from ..mlp_presentation import final_summary
from ..mlp_runs import MLPChapterSettings
from .compute import (
    MEAN_PAIRS,
    NEAR_LINEAR_SHARE,
    NORES_CENTRED,
    PROSE,
    RADIAL_NEAR_IDENTITY_NORM,
    RES_CENTRED,
    Results,
    data_control,
    mean_direction,
    optimizer_finding,
    radial_linearity,
)

#: The closing list: one bullet per claim, under the run's scale, seeds and data.
verdict = mlp_verdict


def baseline_note(results: Results) -> Markdown:
    empirical = results.empirical
    return Markdown(
        PROSE.render(
            "baseline",
            width=results.settings.base.width,
            baseline=results.baseline,
            v_mean=empirical["v_cos"].mean,
            v_sd=empirical["v_cos"].sd,
            u_mean=empirical["u_cos"].mean,
            u_sd=empirical["u_cos"].sd,
            align_mean=empirical["align_input"].mean,
            align_sd=empirical["align_input"].sd,
            undefined=undefined_sentence(results.table),
        )
    )


def _final(table: pd.DataFrame, metric: str, space: str, condition: str, **equal: Any) -> Estimate:
    return final_estimate(table, metric, space, 1, condition=condition, **equal)


def continuity_figure(results: Results) -> None:
    """Weight and gradient v1/u1 continuity over training, every condition."""
    table, order, baseline = results.table, results.order, results.baseline
    colours = plotting.condition_colours()
    panels = [("weight_cos", "input"), ("weight_cos", "output"), ("grad_cos", "input"), ("grad_cos", "output")]
    fig, axes = plt.subplots(2, 2, figsize=(14, 9), sharey=True)
    for ax, (metric, space) in zip(axes.flat, panels):
        plotting.plot_over_training(
            table,
            metric,
            space,
            1,
            ax=ax,
            baseline=baseline,
            colours=colours,
            hue_order=order,
            legend=ax is axes.flat[-1],
        )
        ax.set_ylim(0, 1.02)
    plotting.figure_legend(fig, axes.flat[-1])

    def at_start(space: str, condition: str) -> Estimate:
        return estimate_at_step(table, 0, "grad_cos", space, 1, condition=condition)

    show_figure(
        fig,
        "mlp-continuity-over-training",
        PROSE.render(
            "continuity-caption",
            finals=", ".join(f"{c} {_final(table, 'weight_cos', 'input', c)}" for c in order),
            relu_in=at_start("input", "res-relu"),
            relu_out=at_start("output", "res-relu"),
            nores_in=at_start("input", "nores-relu"),
            nores_out=at_start("output", "nores-relu"),
            baseline=baseline,
        ),
    )


#: The paper's numbers marked in the horizon figure: (panel metric, space) -> [(value, label)].
PAPER_MARKS: dict[tuple[str, str], list[tuple[float, str]]] = {
    ("weight_cos", "input"): [(paper.LINEAR_WEIGHT_V1, f"paper: Res+None, Res+Radial {paper.LINEAR_WEIGHT_V1}")],
    ("grad_cos", "input"): [
        (paper.LINEAR_GRADIENT_V1, f"paper: Res+None {paper.LINEAR_GRADIENT_V1}"),
        (paper.NORES_GRADIENT, f"paper: NoRes ~{paper.NORES_GRADIENT}"),
    ],
}


def horizon_figure(results: Results) -> None:
    """Weight v1 / u1, gradient v1 and relative update against the step (linear axis) to the horizon."""
    table, order, baseline = results.table, results.order, results.baseline
    early, colours = results.settings.early_steps, plotting.condition_colours()
    panels = [("weight_cos", "input", 1), ("weight_cos", "output", 1), ("grad_cos", "input", 1), ("rel_update", "", 0)]
    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    for ax, (metric, space, direction) in zip(axes.flat, panels):
        plotting.plot_over_training(
            table,
            metric,
            space,
            direction,
            ax=ax,
            colours=colours,
            hue_order=order,
            baseline=baseline if metric.endswith("_cos") else None,
            xscale="linear",
            legend=ax is axes.flat[-1],
        )
        for value, label in PAPER_MARKS.get((metric, space), []):
            ax.axhline(value, color="black", linestyle=":", linewidth=1.2)
            ax.annotate(
                label, (1.0, value), xycoords=("axes fraction", "data"), ha="right", va="bottom", fontsize="x-small"
            )
        ax.axvline(early, color="grey", linestyle="--", linewidth=1)
        if metric.endswith("_cos"):
            ax.set_ylim(0, 1.02)
    plotting.figure_legend(fig, axes.flat[-1])
    end = mlp_runs.last_step(table)
    lines = [
        PROSE.render(
            "horizon-line",
            condition=c,
            early=estimate_at_step(table, early, "weight_cos", "input", 1, condition=c),
            final=_final(table, "weight_cos", "input", c),
            change=change_over_last(table, "weight_cos", "input", 1, condition=c),
        )
        for c in order
    ]
    show_figure(
        fig,
        "mlp-horizon",
        PROSE.render("horizon-caption", end=end, early=early, baseline=baseline, lines="; ".join(lines)),
    )


def horizon_summary(results: Results) -> pd.DataFrame:
    """Per condition: each quantity at ``early_steps``, at the end, and its change over the last third."""
    return mlp_presentation.horizon_table(results.table, results.settings.early_steps, order=results.order)


def _memorised_step(one: pd.DataFrame) -> Estimate:
    """Per seed, the first snapshot whose training-set loss is below the memorisation threshold
    (:func:`geocont.instability.memorised_steps`; runs that never get there count as missing, ``n`` says how many did)."""
    return estimate(instability.memorised_steps(one).astype(float))


def data_figure(results: Results) -> None:
    """Weight v1, training-set loss and gradient norm over training on each dataset of the data control."""
    conditions = list(results.settings.data_conditions)
    fig, axes = plt.subplots(len(conditions), 3, figsize=(16, 4.2 * len(conditions)), squeeze=False)
    panels = [("weight_cos", "input", 1), ("train_set_loss", "", 0), ("grad_norm", "", 0)]
    palette = plotting.palette(list(results.data))
    for row, condition in zip(axes, conditions):
        for ax, (metric, space, direction) in zip(row, panels):
            frame = pd.concat(
                [
                    per_run(t[t.condition == condition], metric, space, direction).assign(dataset=d)
                    for d, t in results.data.items()
                ]
            )
            sns.lineplot(
                data=frame,
                x="step",
                y="value",
                hue="dataset",
                palette=palette,
                errorbar="sd",
                ax=ax,
                legend=ax is row[0],
            )
            ax.axvline(results.settings.early_steps, color="grey", linestyle="--", linewidth=1)
            ax.set(
                title=f"{condition}: {plotting.quantity_label(metric, space, direction)}",
                xlabel="training step",
                ylabel="",
            )
            if metric == "weight_cos":
                plotting.draw_baseline(ax, results.baseline)
                ax.set_ylim(0, 1.02)
            else:
                ax.set_yscale("log")
    fig.tight_layout()
    show_figure(fig, "mlp-data-control", PROSE.render("data-caption", sentences=data_sentences(results)))


def data_table(results: Results) -> pd.DataFrame:
    """Per dataset and condition: weight v1 early / peak / final, gradient v1, the training-set loss
    and when it falls below :data:`geocont.instability.MEMORISED_LOSS`, and test accuracy (mean ± sd over seeds)."""
    early, rows = results.settings.early_steps, {}
    for dataset, table in results.data.items():
        for condition in results.settings.data_conditions:
            one = table[table.condition == condition]
            peak, last = peak_and_final(one, "weight_cos", "input", 1)
            memorised = _memorised_step(one)
            rows[(dataset, condition)] = {
                f"weight v1 at {early:,}": str(estimate_at_step(one, early, "weight_cos", "input", 1)),
                "weight v1 peak": str(peak),
                "weight v1 final": str(last),
                "gradient v1 final": str(final_estimate(one, "grad_cos", "input", 1)),
                f"train-set loss at {early:,}": str(estimate_at_step(one, early, "train_set_loss")),
                "train-set loss final": str(final_estimate(one, "train_set_loss")),
                f"first step with train-set loss < {instability.MEMORISED_LOSS:g}": f"{memorised} ({memorised.n} of {one.seed.nunique()} seeds)"
                if memorised.n
                else "never",
                "test accuracy final": str(final_estimate(one, "test_acc")),
            }
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.names = ["dataset", "condition"]
    return out


def data_sentences(results: Results) -> str:
    """Computed prose: on which datasets the linear net's weight continuity falls, and whether
    those are the ones whose training set is memorised, or whose training became unstable
    (:func:`.compute.data_control`)."""
    found = data_control(results)
    if found is None:
        return ""
    parts = [
        PROSE.render(
            "data-dataset",
            dataset=d.dataset,
            peak=d.fall.peak,
            final=d.fall.final,
            loss=d.loss.final,
            fell=PROSE.choose("data-fell", "yes" if d.fall.falls else "no"),
            rose=PROSE.render("data-rose", lowest=d.loss.lowest) if d.loss.rose else "",
        )
        for d in found.datasets
    ]
    text = "; ".join(parts) + ". "
    text = text[0].upper() + text[1:]
    memorised = [d.dataset for d in found.datasets if d.fall.falls and d.loss.memorised]
    unstable = [d.dataset for d in found.datasets if d.fall.falls and d.loss.rose]
    return text + PROSE.choose(
        "data",
        found.case,
        datasets=", ".join(found.clean_falls),
        memorised=", ".join(memorised) or "none",
        unstable=", ".join(unstable) or "none",
    )


def optimizer_over_training_figure(results: Results) -> None:
    """Weight v1 continuity over training of the robustness conditions, one line per optimizer."""
    conditions = list(results.settings.robustness_conditions)
    optimizers = list(results.robustness["optimizer"].unique())
    fig, axes = plt.subplots(1, len(conditions), figsize=(7 * len(conditions), 4.4), squeeze=False)
    for ax, condition in zip(axes[0], conditions):
        one = results.robustness[results.robustness.condition == condition]
        plotting.plot_over_training(
            one,
            "weight_cos",
            "input",
            1,
            hue="optimizer",
            hue_order=optimizers,
            ax=ax,
            baseline=results.baseline,
            xscale="linear",
        )
        ax.set_title(f"{condition}: weight v1 |cos|", fontsize="medium")
        ax.set_ylim(0, 1.02)
    fig.tight_layout()
    changes = "; ".join(
        f"{c} under {o}: last third {change_over_last(results.robustness, 'weight_cos', 'input', 1, condition=c, optimizer=o)}"
        for c in conditions
        for o in optimizers
    )
    show_figure(fig, "mlp-optimizers-over-training", PROSE.render("optimizers-over-training-caption", changes=changes))


def layer_heatmap(results: Results) -> None:
    """Final adjacent-pair |cos| per layer pair and condition."""
    fig, axes = plt.subplots(1, 3, figsize=(18, 3.8))
    for ax, (metric, space) in zip(axes, [("weight_cos", "input"), ("weight_cos", "output"), ("grad_cos", "input")]):
        plotting.plot_layer_heatmap(results.table, metric, space, 1, row_order=results.order, ax=ax)
        ax.tick_params(axis="x", labelrotation=90, labelsize=7)
    fig.tight_layout()
    show_figure(fig, "mlp-layer-heatmap", PROSE.render("heatmap-caption"))


def summary_table(results: Results) -> pd.DataFrame:
    """Final values per condition (mean ± sd over seeds)."""
    return final_summary(results.table).loc[results.order]


def rise_and_collapse_figure(results: Results) -> None:
    """Weight v1 continuity per seed of the drift conditions, and their relative update."""
    table, seeds, colours = results.table, results.settings.seeds, plotting.condition_colours()
    drift_conditions = [c for c in ("res-relu", "res-none", "res-radial") if c in results.order]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.4))
    runs = per_run(table, "weight_cos", "input", 1)
    for condition in drift_conditions:
        for seed, one in runs[runs.condition == condition].groupby("seed"):
            axes[0].plot(
                one.step,
                one.value,
                color=colours[condition],
                alpha=0.8,
                marker="o",
                markersize=3,
                label=condition if seed == seeds[0] else None,
            )
    plotting.draw_baseline(axes[0], results.baseline)
    axes[0].set(
        xscale="symlog",
        xlabel="training step (symlog)",
        ylabel=plotting.quantity_label("weight_cos", "input", 1),
        ylim=(0, 1.02),
    )
    axes[0].legend(fontsize="small")
    plotting.plot_over_training(
        table[table.condition.isin(drift_conditions)],
        "rel_update",
        "",
        0,
        ax=axes[1],
        colours=colours,
        hue_order=drift_conditions,
    )
    fig.tight_layout()
    lines = []
    for condition in drift_conditions:
        peak, last = peak_and_final(table, "weight_cos", "input", 1, condition=condition)
        lines.append(f"{condition}: peak {peak}, final {last}")
    show_figure(fig, "mlp-rise-and-collapse", PROSE.render("rise-and-collapse-caption", lines="; ".join(lines)))


def optimizer_figure(results: Results, claims: pd.DataFrame) -> None:
    """Final values of the robustness conditions under each optimizer."""
    colours = plotting.condition_colours()
    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    panels = [("weight_cos", "input", 1), ("grad_cos", "input", 1), ("rel_update", "", 0), ("test_acc", "", 0)]
    for ax, (metric, space, direction) in zip(axes.flat, panels):
        plotting.plot_final_by(
            results.robustness,
            metric,
            space,
            direction,
            x="optimizer",
            hue="condition",
            hue_order=list(results.settings.robustness_conditions),
            colours=colours,
            ax=ax,
            baseline=results.baseline if metric.endswith("_cos") else None,
        )
    plotting.figure_legend(fig, axes.flat[0])
    for ax in axes.flat:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    show_figure(
        fig,
        "mlp-optimizers",
        PROSE.render("optimizers-caption", details=claim(claims, "symmetry-breaking-every-optimizer")["note"]),
    )


def init_scale_figure(results: Results) -> None:
    """Final weight v1 continuity and relative update at each initialisation scale."""
    init_table, colours = results.init_table, plotting.condition_colours()
    robust_order = list(results.settings.robustness_conditions)
    init_order = sorted(init_table["init_scale"].unique())
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.6))
    for ax, (metric, space, direction) in zip(axes, [("weight_cos", "input", 1), ("rel_update", "", 0)]):
        plotting.plot_final_by(
            init_table,
            metric,
            space,
            direction,
            x="init_scale",
            hue="condition",
            order=init_order,
            hue_order=robust_order,
            colours=colours,
            ax=ax,
            baseline=results.baseline if metric.endswith("_cos") else None,
        )
    plotting.figure_legend(fig, axes[0])
    axes[1].get_legend().remove()
    lines = [
        f"{c} at init_scale {i:g}: weight v1 {_final(init_table, 'weight_cos', 'input', c, init_scale=i)}, "
        f"relative update {final_estimate(init_table, 'rel_update', '', 0, condition=c, init_scale=i)}"
        for c in robust_order
        for i in init_order
    ]
    show_figure(
        fig,
        "mlp-init-scale",
        PROSE.render("init-scale-caption", steps=results.settings.early_steps, lines="; ".join(lines)),
    )


def condition_two_note(results: Results) -> Markdown:
    """Where Condition 2 stands: is Adam the symmetry breaker? Final weight v1 per optimizer
    (:func:`.compute.optimizer_finding`)."""
    found = optimizer_finding(results)
    if found is None:
        return Markdown("")
    optimizers = list(found.gradient)
    lines = [
        PROSE.render(
            "optimizer-line",
            optimizer=o,
            relu=found.weight[("res-relu", o)],
            none=found.weight[("res-none", o)],
            gradient=found.gradient[o],
        )
        for o in optimizers
    ]
    return Markdown(
        PROSE.render(
            "optimizer-note",
            horizon=mlp_runs.horizon_text(results.settings),
            lines="\n".join(lines),
            relu=PROSE.choose("optimizer-relu", "everywhere" if found.relu_everywhere else "not-everywhere"),
            finding=PROSE.choose(
                "optimizer-pins",
                "yes" if found.adam_pins else "no",
                base=found.base_optimizer,
                pins=listing(f"`{o}`" for o in found.adam_pins),
            ),
            base=found.base_optimizer,
            steps=results.settings.early_steps,
            by_init=", ".join(f"init_scale {i:g}: {e}" for i, e in found.by_init.items()),
        )
    )


def radial_linearity_note(settings: MLPChapterSettings) -> Markdown:
    """How nonlinear the two radial activations are at initialisation, on training images
    (:func:`.compute.radial_linearity`)."""
    found = radial_linearity(settings)
    return Markdown(
        PROSE.render(
            "radial",
            probe=found.probe,
            median=found.median,
            low=found.low,
            threshold=RADIAL_NEAR_IDENTITY_NORM,
            near_identity=found.near_identity,
            tau_min=found.tau_min,
            tau_max=found.tau_max,
            tau_near_identity=found.tau_near_identity,
            verdict=PROSE.choose(
                "radial-verdict", "linear" if found.radial_is_linear else "nonlinear", share=NEAR_LINEAR_SHARE
            ),
        )
    )


def mean_direction_figure(results: Results) -> None:
    """The mean-direction hypothesis over training: |cos(v1(W_l), mean input of layer l)| (layer mean), the mean's
    share of the input, weight v1 continuity and the training-set loss, for NoRes and res-relu and their centred
    controls."""
    found = mean_direction(results)
    if found is None:
        return
    conditions = [*MEAN_PAIRS, *MEAN_PAIRS.values()]
    both = pd.concat(
        [results.table[results.table["condition"].isin(list(MEAN_PAIRS))], results.mean_control], ignore_index=True
    )
    fig, axes = plt.subplots(1, 4, figsize=(22, 4.6))
    panels = [
        ("mean_input_cos", "input", 1),
        ("mean_input_share", "", 0),
        ("weight_cos", "input", 1),
        ("train_set_loss", "", 0),
    ]
    for ax, (metric, space, direction) in zip(axes, panels):
        plotting.plot_over_training(
            both,
            metric,
            space,
            direction,
            ax=ax,
            hue_order=conditions,
            xscale="linear",
            baseline=results.baseline if metric in ("mean_input_cos", "weight_cos") else None,
            legend=ax is axes[-1],
        )
        if metric != "train_set_loss":
            ax.set_ylim(0, 1.02)
    fig.tight_layout()
    show_figure(fig, "mlp-mean-direction", PROSE.render("mean-direction-caption", baseline=results.baseline))


def mean_direction_note(results: Results) -> Markdown:
    """What the mean-direction measurement and its centred control show (:func:`.compute.mean_direction`)."""
    found = mean_direction(results)
    if found is None:
        return Markdown("")
    share = (
        PROSE.render("mean-relu-share", share=found.relu_share)
        if found.relu_share == found.relu_share
        else PROSE.render("mean-relu-share-undefined")
    )
    return Markdown(
        PROSE.render(
            "mean-direction",
            nores_follows=found.follows["nores-relu"],
            relu_follows=found.follows["res-relu"],
            nores_share=found.mean_share["nores-relu"],
            relu_mean_share=found.mean_share["res-relu"],
            nores=found.weight["nores-relu"],
            nores_centred=found.weight[NORES_CENTRED],
            relu=found.weight["res-relu"],
            relu_centred=found.weight[RES_CENTRED],
            baseline=results.baseline,
            nores_loss=found.loss["nores-relu"],
            nores_centred_loss=found.loss[NORES_CENTRED],
            relu_loss=found.loss["res-relu"],
            relu_centred_loss=found.loss[RES_CENTRED],
            finding=PROSE.choose("mean-finding", found.case),
            relu_share=share,
        )
    )

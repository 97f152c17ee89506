"""Chapter "Conditions 1 and 2": residual connections give gradient coherence; symmetry-breaking
activations keep weight continuity (``book/mlp_conditions.ipynb``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import torch
from IPython.display import Markdown

from .. import metrics, plotting
from ..book import claims as book_claims
from ..book.chapter import ClaimsBuilder, claim, configure_notebook, undefined_sentence
from ..book.figures import show_figure
from ..book.provenance import provenance_markdown
from ..data import load_image_data
from ..mlp import CONDITIONS, ResidualMLP, preactivation_norms
from ..statistics import (Estimate, estimate_at_step, final_estimate, peak_and_final, per_run, verdict_for_difference,
                          verdict_for_value, weakest)
from ..training import run_sweep
from . import mlp_runs
from .mlp_runs import MLPChapterSettings, configure_chapter, final_summary

NAME = "mlp_conditions"
NOTEBOOK = f"book/{NAME}.ipynb"

#: The notebook's parameters, in the order of its ``parameters`` cell.
PARAMETERS: dict[str, str] = mlp_runs.parameters(
    "scale", "seeds", "epochs", "conditions", "width", "depth", "dataset", "init_scale", "lr", "n_snapshots",
)


def configure(scale: str = "smoke", **params: Any) -> MLPChapterSettings:
    """The chapter's settings at ``scale`` with ``params`` overriding the preset (None keeps it)."""
    return configure_chapter(NAME, PARAMETERS, scale, params)


def from_notebook(namespace: dict[str, Any]) -> MLPChapterSettings:
    """:func:`configure` from the notebook's parameter variables (``globals()``); sets the figure theme."""
    return configure_notebook(namespace, PARAMETERS, configure)


def provenance(settings: MLPChapterSettings) -> Markdown:
    base = settings.base
    return Markdown(provenance_markdown(
        notebook=NOTEBOOK, scale=settings.scale, overrides=settings.overrides, seeds=settings.seeds,
        data=f"`{base.dataset}`" + (f", first {base.max_train} training examples" if base.max_train else ""),
        model=f"residual MLP, {base.depth} hidden layers of width {base.width}, init_scale {base.init_scale}",
        training=f"{base.epochs} epochs, batch {base.batch_size}, optimizer {base.optimizer.label} "
                 f"(lr {base.optimizer.lr:g}); {base.n_snapshots} log-spaced snapshots",
    ))


@dataclass
class Results:
    """The chapter's run tables: the conditions, the optimizer and the init-scale sweeps."""

    settings: MLPChapterSettings
    table: pd.DataFrame
    robustness: pd.DataFrame
    init_table: pd.DataFrame
    baseline: float
    empirical: dict[str, metrics.MeanSd]

    @property
    def order(self) -> list[str]:
        """The conditions in the book's fixed order."""
        return [c for c in CONDITIONS if c in self.settings.conditions]


def run(settings: MLPChapterSettings) -> Results:
    """Train (or load from the cache) every run of the chapter."""
    base = settings.base
    return Results(
        settings=settings,
        table=run_sweep(settings.condition_configs()),
        robustness=run_sweep(settings.robustness_configs()),
        init_table=run_sweep(settings.init_configs()),
        baseline=metrics.random_abs_cos(base.width),
        empirical=metrics.random_matrix_baseline((base.width, base.width), base.depth, n_draws=5),
    )


def baseline_note(results: Results) -> Markdown:
    width, empirical = results.settings.base.width, results.empirical
    return Markdown(
        f"Random baseline at d = {width}: analytic E|cos| = **{results.baseline:.3f}**; "
        f"measured on independent Gaussian {width}×{width} matrices: v1 {empirical['v_cos'].mean:.3f} ± "
        f"{empirical['v_cos'].sd:.3f}, u1 {empirical['u_cos'].mean:.3f} ± {empirical['u_cos'].sd:.3f} (sd over pairs), "
        f"σ²-alignment {empirical['align_input'].mean:+.3f} ± {empirical['align_input'].sd:.3f}. "
        + undefined_sentence(results.table)
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
        plotting.plot_over_training(table, metric, space, 1, ax=ax, baseline=baseline, colours=colours,
                                    hue_order=order, legend=ax is axes.flat[-1])
        ax.set_ylim(0, 1.02)
    plotting.figure_legend(fig, axes.flat[-1])

    def at_start(space: str, condition: str) -> Estimate:
        return estimate_at_step(table, 0, "grad_cos", space, 1, condition=condition)

    show_figure(fig, "mlp-continuity-over-training",
        "Adjacent-layer continuity during training (top: weights, bottom: gradients). "
        "At the end, weight v1 continuity is "
        + ", ".join(f"{c} {_final(table, 'weight_cos', 'input', c)}" for c in order)
        + f". Before any update (step 0), gradient v1 / u1 continuity is {at_start('input', 'res-relu')} / "
        f"{at_start('output', 'res-relu')} with residuals (res-relu) and {at_start('input', 'nores-relu')} / "
        f"{at_start('output', 'nores-relu')} without (nores-relu); the random baseline is {baseline:.3f}."
    )


def layer_heatmap(results: Results) -> None:
    """Final adjacent-pair |cos| per layer pair and condition."""
    fig, axes = plt.subplots(1, 3, figsize=(18, 3.8))
    for ax, (metric, space) in zip(axes, [("weight_cos", "input"), ("weight_cos", "output"), ("grad_cos", "input")]):
        plotting.plot_layer_heatmap(results.table, metric, space, 1, row_order=results.order, ax=ax)
        ax.tick_params(axis="x", labelrotation=90, labelsize=7)
    fig.tight_layout()
    show_figure(fig, "mlp-layer-heatmap", "Final adjacent-pair |cos| per layer pair and condition (seed mean).")


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
            axes[0].plot(one.step, one.value, color=colours[condition], alpha=0.8, marker="o", markersize=3,
                         label=condition if seed == seeds[0] else None)
    plotting.draw_baseline(axes[0], results.baseline)
    axes[0].set(xscale="symlog", xlabel="training step (symlog)",
                ylabel=plotting.quantity_label("weight_cos", "input", 1), ylim=(0, 1.02))
    axes[0].legend(fontsize="small")
    plotting.plot_over_training(table[table.condition.isin(drift_conditions)], "rel_update", "", 0, ax=axes[1],
                                colours=colours, hue_order=drift_conditions)
    fig.tight_layout()
    lines = []
    for condition in drift_conditions:
        peak, last = peak_and_final(table, "weight_cos", "input", 1, condition=condition)
        lines.append(f"{condition}: peak {peak}, final {last}")
    show_figure(fig, "mlp-rise-and-collapse",
                "Weight v1 continuity per seed, and relative update size. " + "; ".join(lines) + ".")


def optimizer_figure(results: Results, claims: pd.DataFrame) -> None:
    """Final values of the robustness conditions under each optimizer."""
    colours = plotting.condition_colours()
    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    panels = [("weight_cos", "input", 1), ("grad_cos", "input", 1), ("rel_update", "", 0), ("test_acc", "", 0)]
    for ax, (metric, space, direction) in zip(axes.flat, panels):
        plotting.plot_final_by(results.robustness, metric, space, direction, x="optimizer", hue="condition",
                               hue_order=list(results.settings.robustness_conditions), colours=colours, ax=ax,
                               baseline=results.baseline if metric.endswith("_cos") else None)
    plotting.figure_legend(fig, axes.flat[0])
    for ax in axes.flat:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    show_figure(fig, "mlp-optimizers", "Final values per optimizer (bars: seed mean; dots: seeds); ‖W(t) − W(0)‖/‖W(0)‖ "
                "is the layer-mean relative update. Weight v1 continuity: "
                + claim(claims, "symmetry-breaking-every-optimizer")["note"] + ".")


def init_scale_figure(results: Results) -> None:
    """Final weight v1 continuity and relative update at each initialisation scale."""
    init_table, colours = results.init_table, plotting.condition_colours()
    robust_order = list(results.settings.robustness_conditions)
    init_order = sorted(init_table["init_scale"].unique())
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.6))
    for ax, (metric, space, direction) in zip(axes, [("weight_cos", "input", 1), ("rel_update", "", 0)]):
        plotting.plot_final_by(init_table, metric, space, direction, x="init_scale", hue="condition",
                               order=init_order, hue_order=robust_order, colours=colours, ax=ax,
                               baseline=results.baseline if metric.endswith("_cos") else None)
    plotting.figure_legend(fig, axes[0])
    axes[1].get_legend().remove()
    lines = [f"{c} at init_scale {i:g}: weight v1 {_final(init_table, 'weight_cos', 'input', c, init_scale=i)}, "
             f"relative update {final_estimate(init_table, 'rel_update', '', 0, condition=c, init_scale=i)}"
             for c in robust_order for i in init_order]
    show_figure(fig, "mlp-init-scale", "Final weight v1 continuity and relative update at two initialisation "
                "scales. " + "; ".join(lines) + ".")


def verdict(results: Results, claims: pd.DataFrame) -> Markdown:
    """One bullet per claim (:func:`geocont.chapters.mlp_runs.verdict`)."""
    return mlp_runs.verdict(results.settings, claims)


def condition_two_note(results: Results) -> Markdown:
    """Where Condition 2 stands: res-none's final weight and gradient v1 per optimizer and init scale."""
    robustness, init_table = results.robustness, results.init_table

    def both(frame: pd.DataFrame, **equal: Any) -> str:
        return (f"weight {_final(frame, 'weight_cos', 'input', 'res-none', **equal)}, "
                f"gradient {_final(frame, 'grad_cos', 'input', 'res-none', **equal)}")

    by_optimizer = ", ".join(f"{o}: {both(robustness, optimizer=o)}" for o in robustness["optimizer"].unique())
    by_init = ", ".join(f"init_scale {i:g}: {both(init_table, init_scale=i)}"
                        for i in sorted(init_table["init_scale"].unique()))
    return Markdown(
        "**Where the paper's Condition 2 stands here.** Final v1 continuity of the linear residual net "
        f"(`res-none`), per optimizer ({by_optimizer}) and per initialisation scale under Adam ({by_init}), "
        f"against the paper's 0.22 for its weights and the baseline's (`res-relu`) "
        f"{_final(results.table, 'weight_cos', 'input', 'res-relu')} under Adam. Where the gradient continuity stays "
        "high and the weight continuity does not, the weights have not followed the coherent gradient signal."
    )


#: sigma_rad(z) = z tanh(||z||) is within 1% of the identity for ||z|| above this (tanh(2.65) = 0.99).
RADIAL_NEAR_IDENTITY_NORM = 2.65


def radial_linearity_note(settings: MLPChapterSettings, n_probe: int = 512) -> Markdown:
    """How nonlinear sigma_rad is at initialisation: the pre-activation norms of ``res-radial``."""
    base = settings.base
    data = load_image_data(base.dataset, max_train=base.max_train)
    probe = data.x_train[:n_probe]
    torch.manual_seed(settings.seeds[0])
    radial = ResidualMLP("res-radial", in_features=data.n_features, width=base.width, depth=base.depth,
                         n_classes=data.n_classes, init_scale=base.init_scale)
    norms = preactivation_norms(radial, probe)
    share = 100 * (norms > RADIAL_NEAR_IDENTITY_NORM).float().mean()
    return Markdown(
        f"**How nonlinear is σ_rad here?** At initialisation, on {len(probe)} training images, the pre-activation "
        f"norms ‖W h + b‖ of `res-radial` have median {norms.median():.2f} (5th percentile {norms.quantile(0.05):.2f}); "
        f"σ_rad(z) = z·tanh(‖z‖) is within 1% of the identity for ‖z‖ > {RADIAL_NEAR_IDENTITY_NORM}, which holds for "
        f"{share:.1f}% of them. Measured at initialisation only."
    )


def publish(settings: MLPChapterSettings, claims: pd.DataFrame) -> None:
    """Publish the claims table for the book's closing chapter."""
    book_claims.publish(claims, chapter=NAME, scale=settings.scale, overrides=settings.overrides)


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table."""
    return condition_claims(results.table, results.robustness, results.baseline)


def condition_claims(table: pd.DataFrame, robustness: pd.DataFrame, baseline: float) -> pd.DataFrame:
    """The claims of Conditions 1 and 2, from the condition sweep and the optimizer sweep."""
    base_optimizer = table["optimizer"].iloc[0]
    out = ClaimsBuilder(NAME)

    def final(metric: str, space: str, condition: str, frame: pd.DataFrame = table,
              optimizer: str | None = None) -> Estimate:
        return final_estimate(frame, metric, space, 1, condition=condition, optimizer=optimizer or base_optimizer)

    for space, vector in (("input", "v1"), ("output", "u1")):
        nores_grad = final("grad_cos", space, "nores-relu")
        out.add(f"nores-gradient-{vector}", "Without residuals, gradient continuity falls to random level",
                f"NoRes gradient {vector} |cos|", "~0.05", nores_grad, baseline, verdict_for_value(nores_grad, 0.05))
    nores_weight = final("weight_cos", "input", "nores-relu")
    out.add("nores-weight-v1", "Without residuals, weight continuity never forms", "NoRes weight v1 |cos|",
            "random level", nores_weight, baseline, verdict_for_value(nores_weight, baseline))
    none_grad = final("grad_cos", "input", "res-none")
    out.add("linear-gradient-v1", "A linear residual net has high gradient continuity", "Res+None gradient v1 |cos|",
            "0.93", none_grad, baseline, verdict_for_value(none_grad, 0.93))
    none_weight = final("weight_cos", "input", "res-none")
    out.add("linear-weight-v1", "... but low weight continuity (rotation drift)", "Res+None weight v1 |cos|",
            "0.22", none_weight, baseline, verdict_for_value(none_weight, 0.22))
    radial_weight = final("weight_cos", "input", "res-radial")
    out.add("radial-weight-v1", "A rotation-equivariant nonlinearity fails too", "Res+Radial weight v1 |cos|",
            "~0.22", radial_weight, baseline, verdict_for_value(radial_weight, 0.22))
    for condition in ("res-relu", "res-gelu", "res-silu"):
        if condition not in set(table["condition"]):
            continue
        ours = final("weight_cos", "input", condition)
        out.add(f"{condition}-above-linear", "Element-wise activations keep weight continuity",
                f"{condition} minus Res+None weight v1", "higher (no number)", ours.mean - none_weight.mean,
                baseline, verdict_for_difference(ours, none_weight), note=f"{condition} {ours}; res-none {none_weight}",
                std=ours.std, n=ours.n)
    for condition in ("res-none", "res-radial"):
        peak, last = peak_and_final(table, "weight_cos", "input", 1, condition=condition, optimizer=base_optimizer)
        out.add(f"{condition}-rise-then-collapse", "Weight continuity first forms, then is lost to rotation drift",
                f"{condition} weight v1: peak minus final", "rise, then collapse", peak.mean - last.mean, baseline,
                verdict_for_difference(peak, last), note=f"peak {peak}, final {last}", n=peak.n)
    optimizers = list(robustness["optimizer"].unique())
    random_level = Estimate(baseline, 0.0, 1)
    relu = {o: final("weight_cos", "input", "res-relu", robustness, o) for o in optimizers}
    none = {o: final("weight_cos", "input", "res-none", robustness, o) for o in optimizers}
    details = "; ".join(f"{o}: res-relu {relu[o]}, res-none {none[o]}" for o in optimizers)
    out.add("continuity-every-optimizer", "Continuity is not an optimizer artefact (Adam, Adam beta2=0, SGD)",
            "lowest res-relu weight v1 over optimizers", "present under every optimizer",
            min(e.mean for e in relu.values()), baseline,
            weakest(verdict_for_difference(relu[o], random_level) for o in optimizers), note=details, n=len(optimizers))
    out.add("symmetry-breaking-every-optimizer", "Symmetry breaking matters under every optimizer",
            "smallest (res-relu minus res-none) weight v1 over optimizers", "res-relu higher",
            min(relu[o].mean - none[o].mean for o in optimizers), baseline,
            weakest(verdict_for_difference(relu[o], none[o]) for o in optimizers), note=details, n=len(optimizers))
    return out.table()

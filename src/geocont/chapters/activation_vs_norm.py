"""Chapter "activation versus LayerNorm": the activation concentrates continuity in v1, LayerNorm
spreads it over several directions (``book/activation_vs_norm.ipynb``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython.display import Markdown

from .. import metrics, plotting
from ..book.chapter import Chapter, ClaimsBuilder, claim, undefined_sentence, with_early
from ..book.figures import show_figure
from ..plotting import draw_baseline, palette
from ..statistics import Estimate, closer_to, estimate, final_estimate, up_to_step, verdict_for_difference
from ..tables import RUN_KEYS, select
from ..training import run_sweep
from . import mlp_runs
from .mlp_runs import MLPChapterSettings

#: The conditions the chapter compares (the ``conditions`` parameter replaces them).
CONDITIONS_COMPARED = ("res-relu", "res-ln", "res-ln-relu", "res-none", "res-rms", "res-rms-relu")


def describe(settings: MLPChapterSettings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    base = settings.base
    return dict(
        seeds=settings.seeds,
        data=mlp_runs.data_description(settings),
        model=f"residual MLP, {base.depth} hidden layers of width {base.width}, init_scale {base.init_scale}; "
              f"conditions {', '.join(settings.conditions)}",
        training=mlp_runs.training_description(settings, init_sweep=False),
    )


CHAPTER = Chapter(
    name="activation_vs_norm",
    parameters=mlp_runs.parameters("scale", "seeds", "steps", "conditions", "width", "depth", "dataset",
                                   "init_scale", "lr", "n_snapshots", "n_directions"),
    presets=mlp_runs.mlp_presets(conditions=CONDITIONS_COMPARED),
    build=mlp_runs.build_settings,
    describe=describe,
    runs=MLPChapterSettings.condition_configs,
)


def final_direction_profile(table: pd.DataFrame, metric: str = "weight_cos", space: str = "input") -> pd.DataFrame:
    """Continuity of the i-th singular direction at each run's last step, layer-pair mean.

    One row per run x direction (column ``direction``, 1 = leading), column ``value``.
    """
    rows = select(table, metric, space)
    last = rows.groupby(RUN_KEYS, observed=True)["step"].transform("max")
    rows = rows[rows["step"] == last]
    return rows.groupby(RUN_KEYS + ["direction"], observed=True)["value"].mean().reset_index()


def concentration(profile: pd.DataFrame) -> pd.DataFrame:
    """Per run: ``lead`` (direction 1), ``rest`` (mean of directions 2..k) and ``lead - rest``."""
    lead = profile[profile["direction"] == 1].set_index(RUN_KEYS)["value"]
    rest = profile[profile["direction"] > 1].groupby(RUN_KEYS, observed=True)["value"].mean()
    frame = pd.DataFrame({"lead": lead, "rest": rest})
    frame["concentration"] = frame["lead"] - frame["rest"]
    return frame.reset_index()


@dataclass
class Results:
    """The condition sweep's run table and the final direction profiles derived from it."""

    settings: MLPChapterSettings
    table: pd.DataFrame
    baseline: float
    profile_in: pd.DataFrame
    profile_out: pd.DataFrame
    #: per run: lead (v1), rest (v2..vk) and their difference, input space
    shape: pd.DataFrame

    @property
    def order(self) -> list[str]:
        """The conditions in the order they were configured."""
        return list(self.settings.conditions)

    def of_shape(self, column: str, condition: str) -> Estimate:
        return estimate(self.shape.loc[self.shape["condition"] == condition, column])


def run(settings: MLPChapterSettings) -> Results:
    """Train (or load from the cache) every condition x seed."""
    table = run_sweep(settings.condition_configs())
    profile_in = final_direction_profile(table, "weight_cos", "input")
    return Results(settings=settings, table=table, baseline=metrics.random_abs_cos(settings.base.width),
                   profile_in=profile_in, profile_out=final_direction_profile(table, "weight_cos", "output"),
                   shape=concentration(profile_in))


def run_note(results: Results) -> Markdown:
    settings = results.settings
    return Markdown(f"{len(results.order)} conditions × {len(settings.seeds)} seeds; random baseline at "
                    f"d = {settings.base.width}: E|cos| = **{results.baseline:.3f}**. " + undefined_sentence(results.table))


def direction_profile_figure(results: Results) -> None:
    """Final continuity of the i-th singular direction per condition, input and output space."""
    order, colours = results.order, plotting.condition_colours()
    fig, axes = plt.subplots(1, 2, figsize=(14, 5), sharey=True)
    for ax, profile, title in ((axes[0], results.profile_in, "input space: v_i"),
                               (axes[1], results.profile_out, "output space: u_i")):
        plot_direction_profile(profile, ax=ax, baseline=results.baseline, colours=colours, hue_order=order,
                               title=title)
    plotting.figure_legend(fig, axes[0])
    axes[1].get_legend().remove()
    lines = [f"{c}: v1 {results.of_shape('lead', c)}, v2..v{results.settings.base.n_directions} "
             f"{results.of_shape('rest', c)}" for c in order]
    show_figure(fig, "norm-direction-profile", "Final adjacent-layer continuity of the i-th singular direction "
                "(seed mean ± 1 sd). " + "; ".join(lines) + ".")


def alignment_figure(results: Results) -> None:
    """Final v1 continuity and sigma^2-alignment per condition (top), and their course (bottom)."""
    table, order, baseline, colours = results.table, results.order, results.baseline, plotting.condition_colours()
    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    for column, (metric, direction, level) in enumerate((("weight_cos", 1, baseline), ("weight_align", 0, 0.0))):
        plotting.plot_final_by(table, metric, "input", direction, x="condition", hue="condition", order=order,
                               hue_order=order, colours=colours, ax=axes[0, column], baseline=level)
        plotting.plot_over_training(table, metric, "input", direction, ax=axes[1, column], baseline=level,
                                    colours=colours, hue_order=order, legend=False)
    for ax in axes[0]:
        ax.get_legend().remove()
        ax.tick_params(axis="x", labelrotation=20)
    fig.tight_layout()
    lines = [f"{c}: v1 {final_estimate(table, 'weight_cos', 'input', 1, condition=c)}, "
             f"σ²-alignment {final_estimate(table, 'weight_align', 'input', 0, condition=c)}" for c in order]
    show_figure(fig, "norm-v1-versus-alignment", "Final v1 continuity and σ²-weighted alignment (top; bars: seed "
                f"mean, dots: seeds; dashed: random level, {baseline:.3f} for |cos| and 0 for the alignment) and "
                "their course over training (bottom). " + "; ".join(lines) + ".")


def concentration_figure(results: Results) -> None:
    """Per condition, v1 continuity minus the mean of v2..vk (bars: seed mean, dots: seeds)."""
    order = results.order
    fig, ax = plt.subplots(figsize=(9, 4.5))
    plotting.grouped_bars(results.shape, x="condition", hue="condition", value="concentration", order=order,
                          hue_order=order, colours=plotting.condition_colours(), ax=ax)
    ax.get_legend().remove()
    ax.axhline(0, **plotting.BASELINE_STYLE)
    ax.set_ylabel(f"v1 |cos| minus mean of v2..v{results.settings.base.n_directions}")
    ax.tick_params(axis="x", labelrotation=20)
    fig.tight_layout()
    show_figure(fig, "norm-concentration", "Concentration of continuity in the leading direction (bars: seed mean; "
                "dots: seeds). " + "; ".join(f"{c} {results.of_shape('concentration', c)}" for c in order) + ".")


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table, judged at the end of training, with each claim's value after
    ``early_steps`` (the same runs read at that snapshot) in the ``early`` column."""
    early = results.settings.early_steps
    return with_early(norm_claims(results.table, results.baseline),
                      norm_claims(up_to_step(results.table, early), results.baseline), early)


def horizon_summary(results: Results) -> pd.DataFrame:
    """Per condition: each quantity at ``early_steps``, at the end, and its change over the last third."""
    return mlp_runs.horizon_table(results.table, results.settings.early_steps, order=results.order)


def norm_claims(table: pd.DataFrame, baseline: float) -> pd.DataFrame:
    """The claims of the chapter, from its run table (``res-rms`` adds our own centring claim)."""
    shape = concentration(final_direction_profile(table, "weight_cos", "input"))

    def per_condition(column: str, condition: str) -> Estimate:
        return estimate(shape.loc[shape["condition"] == condition, column])

    def align(condition: str) -> Estimate:
        return final_estimate(table, "weight_align", "input", 0, condition=condition)

    k = int(table.loc[table["metric"] == "weight_cos", "direction"].max())
    out = ClaimsBuilder(CHAPTER.name)
    relu, ln, both = (per_condition("concentration", c) for c in ("res-relu", "res-ln", "res-ln-relu"))
    out.add("activation-concentrates-v1", "The activation concentrates continuity in the leading direction",
            f"v1 minus mean of v2..v{k}: res-relu minus res-ln", "res-relu more concentrated", relu.mean - ln.mean,
            baseline, verdict_for_difference(relu, ln), note=f"res-relu {relu}, res-ln {ln}", n=relu.n)
    ln_rest, relu_rest = per_condition("rest", "res-ln"), per_condition("rest", "res-relu")
    out.add("layernorm-spreads", "LayerNorm spreads continuity over several directions",
            f"mean |cos| of v2..v{k}: res-ln minus res-relu", "res-ln higher", ln_rest.mean - relu_rest.mean,
            baseline, verdict_for_difference(ln_rest, relu_rest), note=f"res-ln {ln_rest}, res-relu {relu_rest}",
            n=ln_rest.n)
    ln_align, none_align = align("res-ln"), align("res-none")
    out.add("layernorm-breaks-symmetry",
            "LayerNorm breaks the symmetry: whole-spectrum alignment above the linear control",
            "sigma^2-alignment (input): res-ln minus res-none", "res-ln higher", ln_align.mean - none_align.mean,
            0.0, verdict_for_difference(ln_align, none_align), note=f"res-ln {ln_align}, res-none {none_align}",
            n=ln_align.n)
    out.add("activation-dominates", "With both, the activation's v1-concentrated mode dominates",
            "concentration of res-ln-relu: nearer res-relu than res-ln", "nearer res-relu", both, baseline,
            closer_to(both, relu, ln), note=f"res-ln-relu {both}, res-relu {relu}, res-ln {ln}")
    if "res-rms" in set(table["condition"]):
        rms_align = align("res-rms")
        out.add("centring-breaks-symmetry", "(ours) Centring, not rescaling, is what breaks the symmetry",
                "sigma^2-alignment (input): res-ln minus res-rms", "not in the paper", ln_align.mean - rms_align.mean,
                0.0, verdict_for_difference(ln_align, rms_align),
                note=f"res-ln {ln_align}, res-rms {rms_align}, res-none {none_align}", n=ln_align.n)
    return out.table()


def verdict(results: Results, claims: pd.DataFrame) -> Markdown:
    """One bullet per claim (:func:`geocont.chapters.mlp_runs.verdict`)."""
    return mlp_runs.verdict(results.settings, claims)


def rms_note(claims: pd.DataFrame) -> Markdown | None:
    """What it means that RMSNorm is not below LayerNorm (None when the centring claim holds or is absent)."""
    if "centring-breaks-symmetry" not in set(claims["key"]):
        return None
    rms = claim(claims, "centring-breaks-symmetry")
    if rms["verdict"] == "reproduced":
        return None
    return Markdown(
        "**RMSNorm behaves like LayerNorm here.** RMSNorm without a gain is rotation-equivariant, so by the "
        "paper's argument it should leave the SO(d) symmetry intact and look like the linear control; instead "
        f"its whole-spectrum alignment is {rms['note']}. Either the symmetry is broken somewhere else "
        "in the training set-up (Adam's coordinate-wise update is one candidate: the previous chapter found "
        "the linear control far more continuous under Adam than under Adam with β₂ = 0), or the symmetry is "
        "not what decides continuity here. This chapter does not separate the two."
    )



def plot_direction_profile(
    profile: pd.DataFrame, *, ax: plt.Axes | None = None, baseline: float | None = None,
    colours: dict | None = None, hue_order: Sequence[str] | None = None, title: str = "",
) -> plt.Axes:
    """Continuity of singular direction i = 1..k (x) per condition: seed mean and ±1 sd band."""
    ax = ax or plt.gca()
    hue_order = list(hue_order or profile["condition"].unique())
    colours = colours or palette(hue_order)
    sns.lineplot(data=profile, x="direction", y="value", hue="condition", hue_order=hue_order,
                 palette=colours, errorbar="sd", marker="o", ax=ax)
    if baseline is not None:
        draw_baseline(ax, baseline)
    ax.set_xticks(sorted(profile["direction"].unique()))
    ax.set_xlabel("singular direction i (1 = leading)")
    ax.set_ylabel("|cos| of i-th singular vectors, adjacent layers")
    ax.set_ylim(0, 1.02)
    if title:
        ax.set_title(title, fontsize="medium")
    return ax

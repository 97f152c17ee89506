"""pretrained_continuity: what the chapter shows (figures, tables, computed prose), from :mod:`.compute`."""

from __future__ import annotations

import math
from typing import Any, Sequence

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from ...analyzer import summary
from ...book.chapter import claim
from ...book.figures import show_figure
from ...layouts import PROJECTIONS
from ...metrics import vector_name
from ...plotting import plot_depth_continuity, projection_colours
from ...pretrained import OFFLINE_MODELS
from ...statistics import estimate
from ..lm_runs import PROJECTION_PREDICTIONS
from .compute import (LargeModelCost, PretrainedChapterSettings, Results, _checkpoint_claim_specs, _slug, claims,
                      gain_estimates, layer_pair_estimate, quantization_changes, quantization_shifts)


def continuity_overview(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (model, projection, space) of several analyzer tables: layer-pair mean and
    sd, number of pairs, and the random baseline. ``tables`` maps a label to a table."""
    rows = []
    for label, table in tables.items():
        for projection in table["projection"].cat.categories if hasattr(table["projection"], "cat") \
                else table["projection"].unique():
            for space in ("input", "output"):
                ours, baseline = layer_pair_estimate(table, projection, space)
                rows.append(dict(model=label, projection=projection, space=space, mean=ours.mean, sd=ours.std,
                                 pairs=ours.n, baseline=baseline))
    return pd.DataFrame(rows)


def _describe(name: str, table: pd.DataFrame) -> dict[str, Any]:
    first = table[table.layer == table.layer.min()].set_index("projection")
    return dict(model=name, architecture=table.attrs["architecture"], layout=table.attrs["layout"],
                layers=int(table.layer.max()) + 1, d_model=int(first.loc["q_proj", "in_dim"]),
                ffn=int(first.loc["up_proj", "out_dim"]), parameters=f"{table.attrs['parameters'] / 1e6:.1f}M",
                stored_as=", ".join(sorted(set(table["dtype"]))), source=table.attrs["source"])


def overview_table(results: Results):
    """One row per pretrained checkpoint: architecture, layout, size, storage type, source."""
    return pd.DataFrame([_describe(name, table) for name, table in results.tables.items()]).style.hide(axis="index")


def depth_figures(results: Results) -> None:
    """Per pretrained checkpoint: its per-projection summary table and its depth figure."""
    names = list(results.tables)
    display(Markdown("One table and one figure per model: "
                     + ", ".join(f"{{numref}}`pretrained-depth-{_slug(n)}` ({n})" for n in names) + "."))
    for name, table in results.tables.items():
        description = OFFLINE_MODELS[name].description if name in OFFLINE_MODELS else name
        display(Markdown(f"**{name}** ({description}; layout `{table.attrs['layout']}`). "
                         "Mean over adjacent layer pairs, sd over pairs:"))
        display(summary(table).reset_index().style.format(precision=3, na_rep="–").hide(axis="index"))
        fig = plot_depth_continuity(table, title=name)
        predicted = []
        for projection, space, _ in PROJECTION_PREDICTIONS:
            if projection in set(table.projection):
                ours, baseline = layer_pair_estimate(table, projection, space)
                predicted.append(f"{projection.replace('_proj', '')} {vector_name(space)} {ours} (random {baseline:.3f})")
        v_in, _ = layer_pair_estimate(table, "v_proj", "input")
        v_out, _ = layer_pair_estimate(table, "v_proj", "output")
        show_figure(fig, f"pretrained-depth-{_slug(name)}", (
            f"{name}: |cos| of each projection's leading singular vectors between adjacent layers (dotted: each "
            "projection's random baseline). Predicted-continuous: " + "; ".join(predicted)
            + f". V: v1 {v_in}, u1 {v_out}."))


#: The projections of the Gemma-3 / Llama comparison, with the space each is compared in.
_GEMMA_COMPARED = [("o_proj", "output"), ("down_proj", "output"), ("q_proj", "input"), ("k_proj", "input"),
                   ("gate_proj", "input"), ("up_proj", "input")]


def gemma_comparison(results: Results) -> list:
    """Gemma-3 (post-norms) next to a Llama-layout model: a table and a sentence, or why not."""
    llama, gemma_models, tables = results.llama_like, results.gemma, results.tables
    if not (llama and gemma_models):
        return [Markdown("This comparison needs a Llama-layout model and Gemma-3 (the `cpu` scale analyses both); "
                         f"analysed here: {', '.join(results.settings.models)}.")]
    rows = []
    for projection, space in _GEMMA_COMPARED:
        row = dict(projection=projection, space=space)
        for model in llama + gemma_models:
            ours, baseline = layer_pair_estimate(tables[model], projection, space)
            row[model] = str(ours)
            row[f"{model} baseline"] = round(baseline, 3)
        rows.append(row)
    lines = []
    for projection in ("o_proj", "down_proj"):
        g, _ = layer_pair_estimate(tables[gemma_models[0]], projection, "output")
        l, _ = layer_pair_estimate(tables[llama[0]], projection, "output")
        lines.append(f"{projection} u1: {gemma_models[0]} {g} vs {llama[0]} {l}")
    return [pd.DataFrame(rows).style.hide(axis="index"),
            Markdown("Output-space continuity of the writing projections: " + "; ".join(lines) + ".")]


def gain_tables(results: Results) -> list:
    """The gain-scaled output continuity of each post-norm checkpoint, with its controls."""
    rows = []
    for model, table in results.gains.items():
        for projection, group in table.groupby("projection", sort=False):
            pairs = group.dropna(subset=["u1_cos"])
            rows.append(dict(model=model, projection=projection, pairs=len(pairs),
                             u1_cos=str(estimate(pairs["u1_cos"])),
                             u1_cos_gain_scaled=str(estimate(pairs["u1_cos_gained"])),
                             gain_only_control=str(estimate(pairs["u1_cos_gain_only"])),
                             adjacent_gain_cos=str(estimate(pairs["gain_cos"])),
                             top_coordinate_share=str(estimate(pairs["gain_top1_share"])),
                             baseline=round(float(group["u1_baseline"].iloc[0]), 3)))
    if not rows:
        return [Markdown("No checkpoint with post-norms is analysed at this scale.")]
    return [pd.DataFrame(rows).style.hide(axis="index"),
            Markdown("Mean ± sd over adjacent layer pairs. `u1_cos`: the projection's own weights; "
                     "`u1_cos_gain_scaled`: diag(g_l) W_l, what it writes into the stream; `gain_only_control`: "
                     "diag(g_l) times a Gaussian matrix.")]


def trained_seed_means(results: Results) -> pd.DataFrame:
    """:func:`continuity_overview` of each trained transformer (column ``seed``)."""
    label = f"trained ({results.settings.trained_scale})"
    return pd.concat([continuity_overview({label: table}).assign(seed=seed)
                      for seed, table in results.trained_tables.items()])


def size_overview(results: Results) -> pd.DataFrame:
    """Mean continuity per (model, projection, space) with the model's parameter count: the trained
    transformers (mean ± sd over seeds of the per-seed layer-pair mean) first, then each checkpoint."""
    params = {name: table.attrs["parameters"] for name, table in results.tables.items()}
    overview = continuity_overview(results.tables).assign(parameters=lambda f: f["model"].map(params))
    trained = (trained_seed_means(results).groupby(["model", "projection", "space"], sort=False)
               .agg(mean=("mean", "mean"), sd=("mean", "std"), pairs=("pairs", "first"),
                    baseline=("baseline", "first"))
               .reset_index().assign(parameters=results.trained_parameters))
    return pd.concat([trained, overview], ignore_index=True)


def size_figure(results: Results) -> None:
    """Every model's mean continuity per projection against its size: a wide table, then the figure."""
    combined = size_overview(results)
    fig = plot_continuity_vs_size(combined)
    wide = combined.assign(vector=lambda f: f["space"].map({"input": "v1", "output": "u1"}))
    wide["value"] = [f"{m:.2f} ± {s:.2f}" if not math.isnan(s) else f"{m:.2f}" for m, s in zip(wide["mean"], wide["sd"])]
    wide = wide.pivot_table(index=["model", "parameters"], columns=["projection", "vector"], values="value",
                            aggfunc="first", sort=False)
    display(wide[[c for p in PROJECTIONS for c in wide.columns if c[0] == p]])
    show_figure(fig, "pretrained-vs-size", (
        f"Mean adjacent-layer continuity per projection against model size. The "
        f"trained transformers ({len(results.trained_tables)} seed(s), {results.trained_parameters / 1e6:.2f}M "
        "parameters) show mean ± sd over seeds of the per-seed layer-pair mean; each pretrained checkpoint shows its "
        "mean ± sd over layer pairs. Black ticks: random baselines (they differ by dimension). V is drawn faded: it is "
        "predicted low."))


def quantization_check(results: Results) -> list:
    """The quantization check: the shift table per type and projection, and how it compares."""
    formats = results.settings.quantize
    shifts = quantization_shifts(results.effects)
    table = (shifts.groupby(["format", "projection", "stored_as"], sort=False)
             .agg(v1_shift_max=("v1_shift_max", "max"), v1_shift_mean=("v1_shift_mean", "mean"),
                  u1_shift_max=("u1_shift_max", "max"), u1_shift_mean=("u1_shift_mean", "mean"),
                  sigma1_rel_change_max=("sigma1_rel_change_max", "max")).reset_index())
    changes = quantization_changes(shifts, formats)
    seed_means = trained_seed_means(results)
    predicted_space = {p: s for p, s, _ in PROJECTION_PREDICTIONS} | {"v_proj": "input"}
    spread = {p: seed_means[(seed_means.projection == p) & (seed_means.space == predicted_space[p])]["mean"].std()
              for p in PROJECTIONS}
    return [table.style.format(precision=4, na_rep="–").hide(axis="index"), Markdown(
        "Largest change of any v1/u1 |cos| over all quantized matrices, layer pairs and seeds: "
        + "; ".join(f"{fmt} {changes[fmt].worst:.4f} (mean change {changes[fmt].typical:.4f})" for fmt in formats)
        + ". For scale: the differences between projections that the paper's pattern is about are tenths of |cos|, "
        "and the seed-to-seed sd of the trained models' layer means (v1 for Q/K/V/Gate/Up, u1 for O/Down) is "
        + ", ".join(f"{p.replace('_proj', '')} {s:.3f}" for p, s in spread.items() if not math.isnan(s)) + ".")]


def large_model_status(results: Results) -> list:
    """Which large checkpoints were found here, and what to do where they were not."""
    settings, out = results.settings, []
    if results.large_status:
        out.append(pd.DataFrame(results.large_status).style.hide(axis="index"))
    missing = [s["model"] for s in results.large_status if s["status"] != "analysed"]
    if not settings.large_models:
        out.append(Markdown(f"The `{settings.scale}` scale looks for no large checkpoint; `cpu` and `paper` look for "
                            "meta-llama/Llama-3.1-8B and meta-llama/Llama-3.1-70B."))
    elif missing:
        out.append(Markdown(
            f"**Not available here:** {', '.join(missing)}. This machine has no network to Hugging Face and no local "
            "copy, so the paper's large-model check is not reproduced in this rendering. Where they exist, run "
            "`geocont analyze meta-llama/Llama-3.1-8B` or this chapter with `-p scale paper` (after "
            "`huggingface-cli download`)."))
    return out


def cost_display(settings: PretrainedChapterSettings, cost: LargeModelCost | None) -> list:
    """The cost table and how it was measured, or where it is measured instead."""
    if cost is None:
        return [Markdown(f"The cost of the large models is measured at the `cpu` scale and by "
                         f"`benchmarks/bench_analyzer.py` (not at `{settings.scale}`, to keep it short).")]
    return [cost.table.style.hide(axis="index"), Markdown(
        f"Measured in this run: two layers with Llama-3.1-8B's shapes (random weights with a planted leading "
        f"direction, bf16 safetensors) took {cost.seconds_per_layer:.1f} s per layer on this machine; the 70B figure "
        "scales that by parameters per layer. Memory stays bounded by two matrices of one projection (the analyzer "
        "streams); `benchmarks/bench_analyzer.py` measures the peak resident memory and compares with exact SVD.")]


def plot_continuity_vs_size(overview: pd.DataFrame, *, axes: Sequence[plt.Axes] | None = None) -> plt.Figure:
    """Mean adjacent-layer continuity per projection against parameter count, one point per
    model (``overview``: columns model, parameters, projection, space, mean, sd; error bars
    are ``sd``), the predicted-continuous projections of each space in full colour.

    Left: input space (v1) of Q, K, Gate, Up and V; right: output space (u1) of O, Down and V.
    Each point's random baseline is drawn as a short black tick at the same x."""
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharey=True)
    else:
        fig = axes[0].figure
    colours = projection_colours()
    panels = [("input", ["q_proj", "k_proj", "gate_proj", "up_proj", "v_proj"], "input space: v1 |cos|"),
              ("output", ["o_proj", "down_proj", "v_proj"], "output space: u1 |cos|")]
    models = list(dict.fromkeys(overview["model"]))
    offsets = {p: 1.0 + 0.06 * (i - 3) for i, p in enumerate(colours)}  # spread projections sideways (log x)
    for ax, (space, projections, title) in zip(axes, panels):
        frame = overview[(overview["space"] == space) & overview["projection"].isin(projections)]
        for projection in projections:
            rows = frame[frame["projection"] == projection]
            if rows.empty:
                continue
            x = rows["parameters"] * offsets[projection]
            ax.errorbar(x, rows["mean"], yerr=rows["sd"].fillna(0), fmt="o", color=colours[projection], capsize=2,
                        alpha=0.45 if projection == "v_proj" else 1.0, label=projection.replace("_proj", ""))
            ax.scatter(x, rows["baseline"], marker="_", color="black", s=60, zorder=3)
        ax.set_xscale("log")
        ax.set(xlabel="parameters (log scale)", ylabel="|cos| with the next layer, mean over pairs", ylim=(0, 1.02),
               title=title)
        for model in models:
            rows = overview[overview["model"] == model]
            ax.annotate(model, (rows["parameters"].iloc[0], 0.97), rotation=90, fontsize="x-small", ha="center",
                        va="top", color="0.3")
    axes[0].scatter([], [], marker="_", color="black", label="random baseline")
    handles = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=len(handles), frameon=False,
               bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def verdict_counts(settings: PretrainedChapterSettings, claims: pd.DataFrame) -> Markdown:
    """How many claims got each verdict."""
    counts = claims["verdict"].value_counts().to_dict()
    return Markdown(f"At the `{settings.scale}` scale: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + ".")


def verdict(results: Results, claims: pd.DataFrame) -> Markdown:
    """Per checkpoint, which of its claims were reproduced, partly, or not; and, per post-norm
    projection, its own, gain-scaled and gain-only output continuity."""
    lines = []
    for label, table in {**results.tables, **results.large_tables}.items():
        verdicts = [(claim(claims, key)["verdict"], short) for key, short, *_ in _checkpoint_claim_specs(label, table)]
        by_verdict = {v: [short for got, short in verdicts if got == v]
                      for v in ("reproduced", "partly reproduced", "not reproduced")}
        lines.append(f"- **{label}**: " + "; ".join(f"{v}: {', '.join(c) if c else 'none'}"
                                                   for v, c in by_verdict.items()))
    for (model, projection), (gained, control) in gain_estimates(results.gains).items():
        own, baseline = layer_pair_estimate(results.tables[model], projection, "output")
        lines.append(f"- **{model} {projection}**: u1 continuity of the weights themselves {own}, of what they write "
                     f"into the stream (diag(g) W) {gained}, of the gains alone (diag(g) G) {control}; "
                     f"random {baseline:.3f}.")
    return Markdown("What the checkpoints analysed here show:\n\n" + "\n".join(lines))

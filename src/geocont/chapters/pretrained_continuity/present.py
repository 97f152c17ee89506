"""pretrained_continuity: what the chapter shows (figures, tables, computed prose), from :mod:`.compute`.

Its sentences are templates in ``prose.md`` (:mod:`geocont.book.prose`), filled from the findings
that :mod:`.compute` computes; nothing here decides what they say."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from ...analyzer import summary
from ...book.figures import show_figure
from ...layouts import PROJECTIONS
from ...metrics import vector_name
from ...plotting import plot_depth_continuity, projection_colours
from ...statistics import estimate
from .compute import (
    PROSE,
    LargeModelCost,
    PretrainedChapterSettings,
    Results,
    checkpoint_findings,
    continuity_overview,
    gemma_finding,
    large_model_finding,
    layer_pair_estimate,
    quantization_finding,
    quantization_shifts,
    trained_seed_means,
    verdict_finding,
    verdict_tally,
)


def _describe(name: str, table: pd.DataFrame) -> dict[str, Any]:
    first = table[table.layer == table.layer.min()].set_index("projection")
    return dict(
        model=name,
        architecture=table.attrs["architecture"],
        layout=table.attrs["layout"],
        layers=int(table.layer.max()) + 1,
        d_model=int(first.loc["q_proj", "in_dim"]),
        ffn=int(first.loc["up_proj", "out_dim"]),
        parameters=f"{table.attrs['parameters'] / 1e6:.1f}M",
        stored_as=", ".join(sorted(set(table["dtype"]))),
        source=table.attrs["source"],
    )


def overview_table(results: Results):
    """One row per pretrained checkpoint: architecture, layout, size, storage type, source."""
    return pd.DataFrame([_describe(name, table) for name, table in results.tables.items()]).style.hide(axis="index")


def depth_figures(results: Results) -> None:
    """Per pretrained checkpoint: its per-projection summary table and its depth figure."""
    findings = checkpoint_findings(results)
    display(
        Markdown(
            PROSE.render(
                "depth-figures-intro",
                figures=", ".join(PROSE.render("depth-figures-item", slug=f.slug, name=f.name) for f in findings),
            )
        )
    )
    for finding in findings:
        table = results.tables[finding.name]
        display(
            Markdown(
                PROSE.render("depth-heading", name=finding.name, description=finding.description, layout=finding.layout)
            )
        )
        display(summary(table).reset_index().style.format(precision=3, na_rep="–").hide(axis="index"))
        fig = plot_depth_continuity(table, title=finding.name)
        predicted = "; ".join(
            PROSE.render(
                "depth-caption-item",
                projection=p.projection.replace("_proj", ""),
                vector=vector_name(p.space),
                estimate=p.estimate,
                baseline=p.baseline,
            )
            for p in finding.predicted
        )
        show_figure(
            fig,
            f"pretrained-depth-{finding.slug}",
            PROSE.render(
                "depth-caption",
                name=finding.name,
                predicted=predicted,
                v_input=finding.v_input,
                v_output=finding.v_output,
            ),
        )


#: The projections of the Gemma-3 / Llama comparison, with the space each is compared in.
_GEMMA_COMPARED = [
    ("o_proj", "output"),
    ("down_proj", "output"),
    ("q_proj", "input"),
    ("k_proj", "input"),
    ("gate_proj", "input"),
    ("up_proj", "input"),
]


def gemma_comparison(results: Results) -> list:
    """Gemma-3 (post-norms) next to a Llama-layout model: a table and a sentence, or why not
    (:func:`.compute.gemma_finding`)."""
    finding, tables = gemma_finding(results), results.tables
    if finding.case == "missing-layout":
        return [Markdown(PROSE.render("gemma.missing-layout", models=", ".join(finding.models)))]
    rows = []
    for projection, space in _GEMMA_COMPARED:
        row = dict(projection=projection, space=space)
        for model in finding.llama + finding.gemma:
            ours, baseline = layer_pair_estimate(tables[model], projection, space)
            row[model] = str(ours)
            row[f"{model} baseline"] = round(baseline, 3)
        rows.append(row)
    writing = "; ".join(
        PROSE.render(
            "gemma-item",
            projection=w.projection,
            gemma_model=finding.gemma[0],
            gemma=w.gemma,
            llama_model=finding.llama[0],
            llama=w.llama,
        )
        for w in finding.writing
    )
    return [pd.DataFrame(rows).style.hide(axis="index"), Markdown(PROSE.render("gemma.compared", writing=writing))]


def gain_tables(results: Results) -> list:
    """The gain-scaled output continuity of each post-norm checkpoint, with its controls."""
    rows = []
    for model, table in results.gains.items():
        for projection, group in table.groupby("projection", sort=False):
            pairs = group.dropna(subset=["u1_cos"])
            rows.append(
                dict(
                    model=model,
                    projection=projection,
                    pairs=len(pairs),
                    u1_cos=str(estimate(pairs["u1_cos"])),
                    u1_cos_gain_scaled=str(estimate(pairs["u1_cos_gained"])),
                    gain_only_control=str(estimate(pairs["u1_cos_gain_only"])),
                    adjacent_gain_cos=str(estimate(pairs["gain_cos"])),
                    top_coordinate_share=str(estimate(pairs["gain_top1_share"])),
                    baseline=round(float(group["u1_baseline"].iloc[0]), 3),
                )
            )
    if not rows:
        return [Markdown(PROSE.render("gains-none"))]
    return [pd.DataFrame(rows).style.hide(axis="index"), Markdown(PROSE.render("gains-note"))]


def size_overview(results: Results) -> pd.DataFrame:
    """Mean continuity per (model, projection, space) with the model's parameter count: the trained
    transformers (mean ± sd over seeds of the per-seed layer-pair mean) first, then each checkpoint."""
    params = {name: table.attrs["parameters"] for name, table in results.tables.items()}
    overview = continuity_overview(results.tables).assign(parameters=lambda f: f["model"].map(params))
    trained = (
        trained_seed_means(results)
        .groupby(["model", "projection", "space"], sort=False)
        .agg(mean=("mean", "mean"), sd=("mean", "std"), pairs=("pairs", "first"), baseline=("baseline", "first"))
        .reset_index()
        .assign(parameters=results.trained_parameters)
    )
    return pd.concat([trained, overview], ignore_index=True)


def size_figure(results: Results) -> None:
    """Every model's mean continuity per projection against its size: a wide table, then the figure."""
    combined = size_overview(results)
    fig = plot_continuity_vs_size(combined)
    wide = combined.assign(vector=lambda f: f["space"].map({"input": "v1", "output": "u1"}))
    wide["value"] = [
        f"{m:.2f} ± {s:.2f}" if not math.isnan(s) else f"{m:.2f}" for m, s in zip(wide["mean"], wide["sd"])
    ]
    wide = wide.pivot_table(
        index=["model", "parameters"], columns=["projection", "vector"], values="value", aggfunc="first", sort=False
    )
    display(wide[[c for p in PROJECTIONS for c in wide.columns if c[0] == p]])
    show_figure(
        fig,
        "pretrained-vs-size",
        PROSE.render("size-caption", seeds=len(results.trained_tables), parameters_m=results.trained_parameters / 1e6),
    )


def quantization_check(results: Results) -> list:
    """The quantization check: the shift table per type and projection, and how it compares
    (:func:`.compute.quantization_finding`)."""
    shifts = quantization_shifts(results.effects)
    table = (
        shifts.groupby(["format", "projection", "stored_as"], sort=False)
        .agg(
            v1_shift_max=("v1_shift_max", "max"),
            v1_shift_mean=("v1_shift_mean", "mean"),
            u1_shift_max=("u1_shift_max", "max"),
            u1_shift_mean=("u1_shift_mean", "mean"),
            sigma1_rel_change_max=("sigma1_rel_change_max", "max"),
        )
        .reset_index()
    )
    finding = quantization_finding(results)
    changes = "; ".join(
        PROSE.render("quantization-item", format=fmt, worst=change.worst, typical=change.typical)
        for fmt, change in finding.changes
    )
    spread = ", ".join(
        PROSE.render("quantization-spread-item", projection=p.replace("_proj", ""), sd=sd)
        for p, sd in finding.seed_spread
    )
    return [
        table.style.format(precision=4, na_rep="–").hide(axis="index"),
        Markdown(PROSE.render("quantization", changes=changes, spread=spread)),
    ]


def large_model_status(results: Results) -> list:
    """Which large checkpoints were found here, and what to do where they were not
    (:func:`.compute.large_model_finding`)."""
    finding, out = large_model_finding(results), []
    if results.large_status:
        out.append(pd.DataFrame(results.large_status).style.hide(axis="index"))
    text = PROSE.choose("large", finding.case, scale=finding.scale, missing=", ".join(finding.missing))
    return out + ([Markdown(text)] if text else [])


def cost_display(settings: PretrainedChapterSettings, cost: LargeModelCost | None) -> list:
    """The cost table and how it was measured, or where it is measured instead."""
    if cost is None:
        return [Markdown(PROSE.render("cost-not-measured", scale=settings.scale))]
    return [
        cost.table.style.hide(axis="index"),
        Markdown(PROSE.render("cost-measured", seconds=cost.seconds_per_layer)),
    ]


#: The figure's two panels: (space, projections, title).
_SIZE_PANELS = (
    ("input", ["q_proj", "k_proj", "gate_proj", "up_proj", "v_proj"], "input space: v1 |cos|"),
    ("output", ["o_proj", "down_proj", "v_proj"], "output space: u1 |cos|"),
)


def _size_points(ax: plt.Axes, *, frame: pd.DataFrame, projections: Sequence[str], colours, offsets) -> None:
    """Each projection's mean (sd error bars) per model against its parameters, its baseline as a black tick."""
    for projection in projections:
        rows = frame[frame["projection"] == projection]
        if rows.empty:
            continue
        x = rows["parameters"] * offsets[projection]
        ax.errorbar(
            x,
            rows["mean"],
            yerr=rows["sd"].fillna(0),
            fmt="o",
            color=colours[projection],
            capsize=2,
            alpha=0.45 if projection == "v_proj" else 1.0,
            label=projection.replace("_proj", ""),
        )
        ax.scatter(x, rows["baseline"], marker="_", color="black", s=60, zorder=3)


def _name_models(ax: plt.Axes, overview: pd.DataFrame) -> None:
    """Each model's name, written upwards at its parameter count near the top of the panel."""
    for model in dict.fromkeys(overview["model"]):
        rows = overview[overview["model"] == model]
        ax.annotate(
            model,
            (rows["parameters"].iloc[0], 0.97),
            rotation=90,
            fontsize="x-small",
            ha="center",
            va="top",
            color="0.3",
        )


def _size_legend(fig: plt.Figure, axes: Sequence[plt.Axes]) -> None:
    """One legend below both panels, each label once, the random baseline's tick among them."""
    axes[0].scatter([], [], marker="_", color="black", label="random baseline")
    handles = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(
        handles.values(),
        handles.keys(),
        loc="lower center",
        ncol=len(handles),
        frameon=False,
        bbox_to_anchor=(0.5, -0.02),
    )


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
    offsets = {p: 1.0 + 0.06 * (i - 3) for i, p in enumerate(colours)}  # spread projections sideways (log x)
    for ax, (space, projections, title) in zip(axes, _SIZE_PANELS):
        frame = overview[(overview["space"] == space) & overview["projection"].isin(projections)]
        _size_points(ax, frame=frame, projections=projections, colours=colours, offsets=offsets)
        ax.set_xscale("log")
        ax.set(
            xlabel="parameters (log scale)",
            ylabel="|cos| with the next layer, mean over pairs",
            ylim=(0, 1.02),
            title=title,
        )
        _name_models(ax, overview)
    _size_legend(fig, axes)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def verdict_counts(settings: PretrainedChapterSettings, claims: pd.DataFrame) -> Markdown:
    """How many claims got each verdict (:func:`.compute.verdict_tally`)."""
    counts = ", ".join(PROSE.render("verdict-count-item", count=n, verdict=v) for v, n in verdict_tally(claims))
    return Markdown(PROSE.render("verdict-counts", scale=settings.scale, counts=counts))


def verdict(results: Results, claims: pd.DataFrame) -> Markdown:
    """Per checkpoint, which of its claims were reproduced, partly, or not; and, per post-norm
    projection, its own, gain-scaled and gain-only output continuity (:func:`.compute.verdict_finding`)."""
    finding = verdict_finding(results, claims)
    lines = [
        PROSE.render(
            "verdict-checkpoint",
            label=c.label,
            groups="; ".join(
                PROSE.render("verdict-group", verdict=v, claims=", ".join(shorts) or PROSE.render("none"))
                for v, shorts in c.groups
            ),
        )
        for c in finding.checkpoints
    ]
    lines += [
        PROSE.render(
            "verdict-gain",
            model=g.model,
            projection=g.projection,
            own=g.own,
            gained=g.gained,
            control=g.control,
            baseline=g.baseline,
        )
        for g in finding.gains
    ]
    return Markdown(PROSE.render("verdict", lines="\n".join(lines)))

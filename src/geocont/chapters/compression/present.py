"""compression: what the chapter shows (figures, tables, computed prose), from :mod:`.compute`.

Its sentences are templates in ``prose.md`` (:mod:`geocont.book.prose`), filled from the findings
that :mod:`.compute` computes; nothing here decides what they say."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import pandas as pd
import seaborn as sns
from IPython.display import Markdown

from ... import plotting
from ...book.chapter import verdict_list
from ...book.figures import show_figure
from ...plotting import BASELINE_STYLE
from ...sharing import SHARINGS
from ..common import short_projection
from .compute import (
    GUIDELINE,
    PROSE,
    Results,
    advantage_findings,
    budget_equality,
    cheapest_finding,
    error_loss_finding,
    evaluation_counts,
    grouping_findings,
    grouping_penalty,
    guideline_findings,
    scheme_counts,
    spread_case,
)


def evaluated_note(results: Results) -> Markdown:
    counts = evaluation_counts(results)
    return Markdown(
        PROSE.render(
            "evaluated", models=", ".join(counts.models), configurations=counts.configurations, pruned=counts.pruned
        )
    )


def parameter_counts(results: Results) -> tuple[pd.DataFrame, Markdown]:
    """Table 1: rank and stored parameters of each scheme, and how often the two spaces' budgets are
    equal (:func:`.compute.budget_equality`)."""
    keys = ["model", "projection", "budget"]
    counts = scheme_counts(results.summary)
    counts["cell"] = counts["rank"].astype(str) + " / " + counts["parameters"].map("{:,}".format)
    grid = counts.pivot_table(index=keys, columns="sharing", values="cell", aggfunc="first")
    grid = grid[[s for s in SHARINGS if s in grid.columns]]
    grid["dense"] = counts.groupby(keys)["dense"].first().map("{:,}".format)
    equality = budget_equality(results)
    caption = PROSE.choose("table1-caption", equality.case, equal=equality.equal, cases=equality.cases)
    return grid.rename(columns=lambda c: f"{c}: rank / params" if c != "dense" else "dense params"), Markdown(caption)


def cheapest_schemes(results: Results) -> tuple[pd.DataFrame, Markdown]:
    """Table 2: the scheme with the smallest loss increase per projection and budget
    (:func:`.compute.cheapest_finding`)."""
    finding = cheapest_finding(results)
    wins = ", ".join(PROSE.render("table2-win", scheme=scheme, count=count) for scheme, count in finding.wins)
    return (
        finding.table.rename(columns=lambda b: f"budget {b:g}"),
        Markdown(PROSE.render("table2-caption", wins=wins)),
    )


def error_and_loss(results: Results) -> tuple[Any, Markdown]:
    """Table 3: reconstruction error and loss increase per scheme at the middle budget
    (:func:`.compute.error_loss_finding`)."""
    finding = error_loss_finding(results)
    caption = PROSE.render("table3-caption", budget=finding.budget, agree=finding.agree, rows=finding.rows)
    return finding.table.style.format(precision=3), Markdown(caption)


#: Legend label and line style of each sharing scheme (fixed across the chapter's figures).
SHARING_STYLE = {
    "input": dict(label="input-space basis shared (V)", marker="o"),
    "output": dict(label="output-space basis shared (U)", marker="s"),
    "none": dict(label="no sharing (per-layer rank k)", marker="^", linestyle=":"),
}


def sharing_colours() -> dict[str, tuple]:
    return dict(zip(SHARING_STYLE, sns.color_palette("colorblind", 3)))


def plot_sharing_tradeoff(
    summary: pd.DataFrame, projections: Sequence[str], *, title: str = "", ncols: int = 4
) -> plt.Figure:
    """Per projection: loss increase (nats/token) against the parameters kept (% of dense),
    one line per sharing scheme (mean over seeds; a band of ±1 sd where there are several);
    the paper's recommended space is named in each panel's title."""
    colours = sharing_colours()
    nrows = -(-len(projections) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 3.1 * nrows), squeeze=False)
    for ax, projection in zip(axes.flat, projections):
        frame = summary[summary["projection"] == projection]
        for sharing, style in SHARING_STYLE.items():
            rows = frame[frame["sharing"] == sharing]
            per_budget = (
                rows.groupby("budget")
                .agg(x=("budget_used", "mean"), y=("loss_increase", "mean"), sd=("loss_increase", "std"))
                .reset_index()
            )
            x = 100 * per_budget["x"]
            ax.plot(
                x,
                per_budget["y"],
                color=colours[sharing],
                label=style["label"],
                marker=style["marker"],
                linestyle=style.get("linestyle", "-"),
            )
            if rows["seed"].nunique() > 1:
                ax.fill_between(
                    x,
                    per_budget["y"] - per_budget["sd"],
                    per_budget["y"] + per_budget["sd"],
                    color=colours[sharing],
                    alpha=0.2,
                )
        ax.set_title(
            f"{short_projection(projection)} (paper: {GUIDELINE.get(projection) or 'neither'})", fontsize="medium"
        )
        ax.set_xlabel("parameters kept (% of dense)")
        ax.set_ylabel("loss increase (nats/token)")
        ax.axhline(0, **BASELINE_STYLE)
    for ax in list(axes.flat)[len(projections) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False, bbox_to_anchor=(0.5, -0.01))
    if title:
        fig.suptitle(title, fontweight="bold")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def tradeoff_figures(results: Results) -> None:
    """One figure per model: loss increase against parameters kept, per projection and scheme."""
    for number, model in enumerate(results.models, start=1):
        frame = results.summary[results.summary["model"] == model]
        fig = plot_sharing_tradeoff(frame, results.projections, title=model)
        show_figure(
            fig,
            f"compression-tradeoff-{number}",
            PROSE.render(
                "tradeoff-caption",
                model=model,
                group_size=results.settings.group_size,
                spread=PROSE.choose("tradeoff-spread", spread_case(frame)),
            ),
        )


def advice_figure(results: Results) -> None:
    """The input-space advantage per projection and model (bars: mean; dots: budgets x seeds)."""
    advantage, projections = results.advantage, results.projections
    fig, ax = plt.subplots(figsize=(12, 4.5))
    plotting.grouped_bars(
        advantage, x="projection", hue="model", value="advantage", ax=ax, order=projections, hue_order=results.models
    )
    ax.axhline(0, **BASELINE_STYLE)
    ax.set_xticks(
        range(len(projections)),
        [f"{short_projection(p)}\n(paper: {GUIDELINE.get(p) or 'neither'})" for p in projections],
    )
    ax.set(
        xlabel="",
        ylim=(-1.05, 1.05),
        ylabel="input-space advantage\n(+: share input, −: share output)",
        title="which space to share: input-space advantage at equal parameter budget",
    )
    fig.tight_layout()
    models = "; ".join(
        PROSE.render(
            "advice-model",
            model=m.model,
            advantages=", ".join(
                PROSE.render("advice-item", projection=short_projection(p), advantage=value)
                for p, value in m.advantages
            ),
        )
        for m in advantage_findings(results)
    )
    show_figure(fig, "compression-advice", PROSE.render("advice-caption", models=models))


def grouping_figure(results: Results) -> None:
    """Per model: how much larger the reconstruction error is with distant groups, per projection and space."""
    models, projections, colours = results.models, results.projections, sharing_colours()
    fig, axes = plt.subplots(1, len(models), figsize=(6.5 * len(models), 4.2), squeeze=False, sharey=True)
    for ax, model in zip(axes[0], models):
        frame = grouping_penalty(results.grouping[results.grouping["model"] == model])
        bars = frame.assign(
            penalty=100 * frame["penalty"],
            scheme=frame["sharing"].map({s: SHARING_STYLE[s]["label"] for s in ("input", "output")}),
            projection=frame["projection"].map(short_projection),
        )
        plotting.grouped_bars(
            bars,
            x="projection",
            hue="scheme",
            value="penalty",
            ax=ax,
            order=[short_projection(p) for p in projections],
            hue_order=[SHARING_STYLE[s]["label"] for s in ("input", "output")],
            colours={SHARING_STYLE[s]["label"]: colours[s] for s in ("input", "output")},
        )
        ax.axhline(0, **BASELINE_STYLE)
        ax.set(xlabel="", ylabel="reconstruction error, distant\nvs adjacent groups (% larger)")
        ax.set_title(model, fontsize="medium")
    fig.tight_layout()
    parts = "; ".join(
        PROSE.render(
            "grouping-model",
            model=g.model,
            worse=g.worse,
            cases=g.cases,
            mean_percent=g.mean_percent,
            max_percent=g.max_percent,
            n_agree=len(g.agree),
            guided=g.guided,
            agree=", ".join(short_projection(p) for p in g.agree) or PROSE.render("none"),
        )
        for g in grouping_findings(results)
    )
    show_figure(fig, "compression-grouping", PROSE.render("grouping-caption", models=parts))


def pruning_figure(results: Results) -> None:
    """Per model: the loss increase of dropping each block against the block's continuity."""
    models = list(dict.fromkeys(results.pruning["model"]))
    fig, axes = plt.subplots(1, len(models), figsize=(6.5 * len(models), 4.5), squeeze=False)
    for ax, (model, frame) in zip(axes[0], results.pruning.groupby("model", sort=False)):
        per_layer = frame.groupby(["seed", "layer"])[["loss_increase", "continuity"]].mean().reset_index()
        points = ax.scatter(
            per_layer["continuity"],
            per_layer["loss_increase"],
            c=per_layer["layer"],
            cmap="viridis",
            edgecolor="black",
            linewidth=0.4,
        )
        fig.colorbar(points, ax=ax, label="block index")
        values = per_layer["loss_increase"].abs()
        if values.max() > 30 * max(values.median(), 1e-3):  # one catastrophic block: show the rest too
            ax.set_yscale("symlog", linthresh=float(max(values.median(), 1e-3)))
            ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%g"))
        ax.set_xlabel("block continuity (mean |cos| of v1/u1 with its neighbours)")
        ax.set_ylabel("loss increase when dropped (nats/token)")
        ax.set_title(f"{model}: {results.correlations[model]}", fontsize="medium")
    fig.tight_layout()
    correlations = "; ".join(
        PROSE.render("pruning-item", model=m, correlation=c) for m, c in results.correlations.items()
    )
    show_figure(fig, "compression-pruning", PROSE.render("pruning-caption", correlations=correlations))


def verdict(results: Results, claims: pd.DataFrame) -> Markdown:
    return Markdown(verdict_list(claims, PROSE.render("verdict-intro", scale=results.settings.scale)))


def in_short(results: Results, claims: pd.DataFrame) -> Markdown:
    """Per model: where the paper's space was the cheaper one, and the cheapest scheme's counts
    (:func:`.compute.guideline_findings`)."""
    none = PROSE.render("no-projection")
    models = "\n".join(
        PROSE.render(
            "in-short-model",
            model=g.model,
            cheaper=", ".join(map(short_projection, g.cheaper)) or none,
            dearer=", ".join(map(short_projection, g.dearer)) or none,
            cheapest=", ".join(PROSE.render("in-short-cheapest", scheme=k, count=v) for k, v in g.cheapest),
        )
        for g in guideline_findings(results, claims)
    )
    return Markdown(PROSE.render("in-short", models=models))

"""compression: what the chapter shows (figures, tables, computed prose), from :mod:`.compute`."""

from __future__ import annotations

from typing import Any, Sequence

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import pandas as pd
import seaborn as sns
from IPython.display import Markdown

from ... import plotting
from ...book.chapter import claim, verdict_list
from ...book.figures import show_figure
from ...layouts import PROJECTIONS
from ...plotting import BASELINE_STYLE
from ...sharing import SHARINGS
from ...statistics import estimate
from .compute import GUIDELINE, Results, _short, claims, grouping_penalty, sharing_key


def evaluated_note(results: Results) -> Markdown:
    return Markdown(f"Evaluated: {', '.join(results.models)}; {len(results.summary)} compressed configurations, "
                    f"{results.pruning.groupby(['model', 'seed', 'layer']).ngroups} pruned models.")


def parameter_counts(results: Results) -> tuple[pd.DataFrame, Markdown]:
    """Table 1: rank and stored parameters of each scheme, and how often the two spaces' budgets are equal."""
    keys = ["model", "projection", "budget"]
    counts = (results.summary.groupby([*keys, "sharing"], observed=True)
              .agg(rank=("rank", "first"), parameters=("parameters", "first"), dense=("dense_parameters", "first"))
              .reset_index())
    counts["cell"] = counts["rank"].astype(str) + " / " + counts["parameters"].map("{:,}".format)
    grid = counts.pivot_table(index=keys, columns="sharing", values="cell", aggfunc="first")
    grid = grid[[s for s in SHARINGS if s in grid.columns]]
    grid["dense"] = counts.groupby(keys)["dense"].first().map("{:,}".format)
    equal = counts.pivot_table(index=keys, columns="sharing", values="parameters").eval("input == output")
    caption = (f"**Table 1.** Rank *k* (per group) and stored parameters of each scheme, summed over the replaced "
               f"layers. Input- and output-space sharing have exactly equal budgets in {int(equal.sum())} of "
               f"{len(equal)} cases" + ("." if equal.all() else "; in the others they differ by less than one "
                                        "rank's cost (see the counts)."))
    return grid.rename(columns=lambda c: f"{c}: rank / params" if c != "dense" else "dense params"), Markdown(caption)


def _mean_loss_by_scheme(results: Results) -> pd.DataFrame:
    """Mean loss increase (over seeds) per model, projection and budget (rows) and sharing (columns)."""
    means = results.summary.groupby(["model", "projection", "budget", "sharing"], observed=True)["loss_increase"].mean()
    return means.unstack("sharing")


def cheapest_schemes(results: Results) -> tuple[pd.DataFrame, Markdown]:
    """Table 2: the scheme with the smallest loss increase per projection and budget."""
    best = _mean_loss_by_scheme(results)
    choice = best.idxmin(axis=1).unstack("budget")
    choice = choice.loc[[(m, p) for m in results.models for p in results.projections if (m, p) in choice.index]]
    wins = best.idxmin(axis=1).value_counts()
    caption = ("**Table 2.** The cheapest scheme (smallest loss increase, mean over seeds) for each projection and "
               "budget: what a practitioner would pick. Counts over all rows: "
               + ", ".join(f"{k} {v}" for k, v in wins.items()) + ".")
    return choice.rename(columns=lambda b: f"budget {b:g}"), Markdown(caption)


def error_and_loss(results: Results) -> tuple[Any, Markdown]:
    """Table 3: reconstruction error and loss increase per scheme at the middle budget."""
    middle = results.settings.middle_budget
    table = results.summary[results.summary["budget"] == middle]
    errors = table.pivot_table(index=["model", "projection"], columns="sharing", values="relative_error", aggfunc="mean")
    losses = table.pivot_table(index=["model", "projection"], columns="sharing", values="loss_increase", aggfunc="mean")
    both = pd.concat({"relative reconstruction error": errors, "loss increase (nats/token)": losses}, axis=1)
    agree = (errors["input"] < errors["output"]) == (losses["input"] < losses["output"])
    caption = (f"**Table 3.** Reconstruction error ‖W − W̃‖/‖W‖ (over the replaced layers) and loss increase at "
               f"budget {middle:g} (mean over seeds for our models). The space with the smaller reconstruction "
               f"error is also the one with the smaller loss increase in {int(agree.sum())} of {len(agree)} rows.")
    return both.style.format(precision=3), Markdown(caption)


#: Legend label and line style of each sharing scheme (fixed across the chapter's figures).
SHARING_STYLE = {
    "input": dict(label="input-space basis shared (V)", marker="o"),
    "output": dict(label="output-space basis shared (U)", marker="s"),
    "none": dict(label="no sharing (per-layer rank k)", marker="^", linestyle=":"),
}


def sharing_colours() -> dict[str, tuple]:
    return dict(zip(SHARING_STYLE, sns.color_palette("colorblind", 3)))


def plot_sharing_tradeoff(summary: pd.DataFrame, projections: Sequence[str], *, title: str = "",
                          ncols: int = 4) -> plt.Figure:
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
            per_budget = rows.groupby("budget").agg(x=("budget_used", "mean"), y=("loss_increase", "mean"),
                                                    sd=("loss_increase", "std")).reset_index()
            x = 100 * per_budget["x"]
            ax.plot(x, per_budget["y"], color=colours[sharing], label=style["label"], marker=style["marker"],
                    linestyle=style.get("linestyle", "-"))
            if rows["seed"].nunique() > 1:
                ax.fill_between(x, per_budget["y"] - per_budget["sd"], per_budget["y"] + per_budget["sd"],
                                color=colours[sharing], alpha=0.2)
        ax.set_title(f"{_short(projection)} (paper: {GUIDELINE.get(projection) or 'neither'})", fontsize="medium")
        ax.set_xlabel("parameters kept (% of dense)")
        ax.set_ylabel("loss increase (nats/token)")
        ax.axhline(0, **BASELINE_STYLE)
    for ax in list(axes.flat)[len(projections):]:
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
        spread = "mean ± 1 sd over seeds" if frame["seed"].nunique() > 1 else "one model; the dots are budgets"
        show_figure(fig, f"compression-tradeoff-{number}",
                    f"{model}: loss increase on held-out text when one projection type is replaced in every group of "
                    f"{results.settings.group_size} adjacent layers, against the parameters kept ({spread}). Lower is "
                    "better; the panel title gives the paper's recommended space.")


def advice_figure(results: Results) -> None:
    """The input-space advantage per projection and model (bars: mean; dots: budgets x seeds)."""
    advantage, projections = results.advantage, results.projections
    fig, ax = plt.subplots(figsize=(12, 4.5))
    plotting.grouped_bars(advantage, x="projection", hue="model", value="advantage", ax=ax, order=projections,
                          hue_order=results.models)
    ax.axhline(0, **BASELINE_STYLE)
    ax.set_xticks(range(len(projections)),
                  [f"{_short(p)}\n(paper: {GUIDELINE.get(p) or 'neither'})" for p in projections])
    ax.set(xlabel="", ylim=(-1.05, 1.05), ylabel="input-space advantage\n(+: share input, −: share output)",
           title="which space to share: input-space advantage at equal parameter budget")
    fig.tight_layout()
    lines = []
    for model in results.models:
        adv = advantage[advantage["model"] == model]
        parts = [f"{_short(p)} {estimate(adv.loc[adv.projection == p, 'advantage'])}" for p in projections]
        lines.append(f"{model}: " + ", ".join(parts))
    show_figure(fig, "compression-advice",
                "The practitioner's summary: for each projection, which space's shared basis loses less loss at the "
                "same parameter budget (bar: mean; dots: each budget and seed; +1: only input-space sharing is cheap, "
                "−1: only output-space). Input-space advantage, mean ± sd over budgets and seeds: "
                + "; ".join(lines) + ".")


def grouping_figure(results: Results) -> None:
    """Per model: how much larger the reconstruction error is with distant groups, per projection and space."""
    models, projections, colours = results.models, results.projections, sharing_colours()
    fig, axes = plt.subplots(1, len(models), figsize=(6.5 * len(models), 4.2), squeeze=False, sharey=True)
    parts = []
    for ax, model in zip(axes[0], models):
        frame = grouping_penalty(results.grouping[results.grouping["model"] == model])
        bars = frame.assign(penalty=100 * frame["penalty"], scheme=frame["sharing"].map(
            {s: SHARING_STYLE[s]["label"] for s in ("input", "output")}), projection=frame["projection"].map(_short))
        plotting.grouped_bars(bars, x="projection", hue="scheme", value="penalty", ax=ax,
                              order=[_short(p) for p in projections],
                              hue_order=[SHARING_STYLE[s]["label"] for s in ("input", "output")],
                              colours={SHARING_STYLE[s]["label"]: colours[s] for s in ("input", "output")})
        ax.axhline(0, **BASELINE_STYLE)
        ax.set(xlabel="", ylabel="reconstruction error, distant\nvs adjacent groups (% larger)")
        ax.set_title(model, fontsize="medium")
        by_space = frame.groupby(["projection", "sharing"])["penalty"].mean()
        positive = int((by_space > 0).sum())
        by_space = by_space.unstack("sharing")
        guided = [p for p in by_space.index if GUIDELINE[p]]
        agree = [_short(p) for p in guided if by_space.loc[p, GUIDELINE[p]] > by_space.loc[p].drop(GUIDELINE[p]).max()]
        parts.append(f"{model}: distant groups reconstruct worse in {positive} of "
                     f"{frame.groupby(['projection', 'sharing']).ngroups} projection × space cases, by "
                     f"{100 * frame['penalty'].mean():+.1f}% of the error on average (largest "
                     f"{100 * frame['penalty'].max():+.1f}%); adjacency helps more in the paper's space than in the "
                     f"other for {len(agree)} of {len(guided)} projections ({', '.join(agree) or 'none'})")
    fig.tight_layout()
    show_figure(fig, "compression-grouping",
                "Increase in relative reconstruction error when each shared basis serves distant instead of adjacent "
                "layers (same parameters; bar: mean over seeds, dots: seeds). " + "; ".join(parts) + ".")


def pruning_figure(results: Results) -> None:
    """Per model: the loss increase of dropping each block against the block's continuity."""
    models = list(dict.fromkeys(results.pruning["model"]))
    fig, axes = plt.subplots(1, len(models), figsize=(6.5 * len(models), 4.5), squeeze=False)
    for ax, (model, frame) in zip(axes[0], results.pruning.groupby("model", sort=False)):
        per_layer = frame.groupby(["seed", "layer"])[["loss_increase", "continuity"]].mean().reset_index()
        points = ax.scatter(per_layer["continuity"], per_layer["loss_increase"], c=per_layer["layer"], cmap="viridis",
                            edgecolor="black", linewidth=0.4)
        fig.colorbar(points, ax=ax, label="block index")
        values = per_layer["loss_increase"].abs()
        if values.max() > 30 * max(values.median(), 1e-3):  # one catastrophic block: show the rest too
            ax.set_yscale("symlog", linthresh=float(max(values.median(), 1e-3)))
            ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%g"))
        ax.set_xlabel("block continuity (mean |cos| of v1/u1 with its neighbours)")
        ax.set_ylabel("loss increase when dropped (nats/token)")
        ax.set_title(f"{model}: {results.correlations[model]}", fontsize="medium")
    fig.tight_layout()
    show_figure(fig, "compression-pruning",
                "Loss increase when one block is dropped against that block's continuity with its neighbours "
                "(symmetric-log axis where one block dominates); colour: block index. "
                + "; ".join(f"{m}: {c}" for m, c in results.correlations.items()) + ". Block 0 (one neighbour, "
                "the largest cost) can drive a rank correlation on its own, so it is also reported without it.")


def verdict(results: Results, claims: pd.DataFrame) -> Markdown:
    return Markdown(verdict_list(claims, f"At the `{results.settings.scale}` scale:"))


def in_short(results: Results, claims: pd.DataFrame) -> Markdown:
    """Per model: where the paper's space was the cheaper one, and the cheapest scheme's counts."""
    best = _mean_loss_by_scheme(results)
    guided = [p for p in PROJECTIONS if GUIDELINE[p] and p in results.projections]
    lines = []
    for model in results.models:
        signed = {_short(p): claim(claims, sharing_key(model, p))["ours_mean"] for p in guided}
        right = [p for p, value in signed.items() if value > 0]
        wrong = [p for p, value in signed.items() if value < 0]
        cheapest = best.loc[model].idxmin(axis=1).value_counts()
        lines.append(f"- **{model}**: the paper's space was the cheaper one on average for "
                     f"{', '.join(right) or 'no projection'} and the more expensive one for "
                     f"{', '.join(wrong) or 'no projection'}; over projections × budgets the cheapest scheme was "
                     + ", ".join(f"{k} ({v}×)" for k, v in cheapest.items()) + ".")
    return Markdown("**In short.**\n\n" + "\n".join(lines) + "\n\nA positive advantage that is not *reproduced* "
                    "is a lean, not a result: it is smaller than the 0.10 margin or than two spreads. Sharing here is "
                    "applied without fine-tuning; with fine-tuning every loss increase would shrink, and the ordering "
                    "of the schemes might change.")

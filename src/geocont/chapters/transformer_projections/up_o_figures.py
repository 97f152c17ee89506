"""The Up/O gap: its figure and caption, and the statements on the gap, depth and the pretrained models."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython.display import Markdown
from matplotlib.lines import Line2D

from ... import plotting
from ...book.chapter import ours_text
from ...book.figures import show_figure
from ...metrics import vector_name
from ..common import short_projection
from .compute import (
    UP_O_QUANTITIES,
    Results,
    claims,
    depth_finding,
    explanation_verdicts,
    pretrained_finding,
    rising_finding,
    up_o_baseline,
    up_o_finding,
    up_o_values,
)
from .page_text import PROSE, mark_early, symlog_steps, verdicts_text

#: The Up/O figure's panels: title, the quantities drawn (:data:`.compute.UP_O_QUANTITIES`), and the one
#: whose random baseline the panel draws.
UP_O_PANELS = (
    ("Up, input space", ("up-v1", "up-align", "up-gate-v1"), "up-v1"),
    ("O, output space", ("o-u1", "o-align"), "o-u1"),
    ("Up against Gate (same layer), output space", ("up-gate-u1",), "up-gate-u1"),
)

#: What each curve measures: one colour each, the same in every panel.
UP_O_KINDS = {
    "up-v1": "leading |cos|, adjacent layers",
    "o-u1": "leading |cos|, adjacent layers",
    "up-align": "σ²-alignment, adjacent layers",
    "o-align": "σ²-alignment, adjacent layers",
    "up-gate-v1": "Up–Gate |cos|, same layer",
    "up-gate-u1": "Up–Gate |cos|, same layer",
}
assert set(UP_O_KINDS) == set(UP_O_QUANTITIES)


def _up_o_curves(ax: plt.Axes, frame: pd.DataFrame, *, kinds: list[str], colours: dict) -> None:
    """One panel's quantities over training (band: ±1 sd over seeds), or "not recorded"."""
    if len(frame):
        sns.lineplot(
            data=frame,
            x="step",
            y="value",
            hue="kind",
            hue_order=kinds,
            palette=colours,
            errorbar="sd",
            ax=ax,
            legend=False,
        )
    else:
        ax.text(0.5, 0.5, "not recorded", transform=ax.transAxes, ha="center", va="center", color="0.4")


def _up_o_long_run(ax: plt.Axes, long: pd.DataFrame, *, names: list[str], colours: dict, steps: int) -> None:
    """One panel's quantities in the longer run (dash-dotted), the base run's end marked."""
    for name in names:
        rows = long[long["quantity"] == name]
        ax.plot(rows["step"], rows["value"], linestyle="-.", linewidth=1.3, color=colours[UP_O_KINDS[name]])
    ax.axvline(steps, color="0.5", linewidth=1.0)


def _up_o_handles(results: Results, *, kinds: list[str], colours: dict, long: pd.DataFrame | None) -> list[Line2D]:
    """The figure legend's entries: each kind, the random baseline, and the longer run where it was run."""
    handles = [Line2D([], [], color=colours[kind], label=kind) for kind in kinds]
    handles.append(Line2D([], [], label="random baseline (|cos|)", **plotting.BASELINE_STYLE))
    if long is not None:
        handles.append(
            Line2D(
                [],
                [],
                color="0.2",
                linestyle="-.",
                label=f"{results.settings.long_label} (seed {results.settings.seeds[0]})",
            )
        )
    return handles


def up_o_figure(results: Results) -> None:
    """Up's and O's continuity over training (reference variant, band: ±1 sd over seeds): leading
    |cos| and σ²-alignment of adjacent layers, Up against Gate in the same layer, each panel with its
    space's random baseline; the longer run (one seed) dashed where it was run."""
    values = up_o_values(results.table)
    values = values[values["condition"] == results.reference].assign(kind=lambda f: f["quantity"].map(UP_O_KINDS))
    rising = rising_finding(results)
    long = up_o_values(results.long) if rising and rising.source == "longer-run" else None
    kinds = list(dict.fromkeys(UP_O_KINDS.values()))
    colours = plotting.palette(kinds)
    fig, axes = plt.subplots(1, len(UP_O_PANELS), figsize=(16, 4.8), sharey=True)
    for ax, (title, names, baseline) in zip(axes, UP_O_PANELS):
        _up_o_curves(ax, values[values["quantity"].isin(names)], kinds=kinds, colours=colours)
        if long is not None:
            _up_o_long_run(ax, long, names=names, colours=colours, steps=results.settings.base.steps)
        plotting.draw_baseline(ax, up_o_baseline(baseline, results.dims))
        symlog_steps(ax)
        mark_early(ax, results.settings.early_step)
        ax.set(
            ylim=(min(-0.05, ax.get_ylim()[0]), 1.02),
            xlabel="step (symlog)",
            ylabel="|cos| or alignment" if ax is axes[0] else "",
            title=title,
        )
    handles = _up_o_handles(results, kinds=kinds, colours=colours, long=long)
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False, bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    show_figure(fig, "lm-up-o-gap", up_o_caption(results))


def up_o_caption(results: Results) -> str:
    """The Up/O figure's caption: its key, Up against Gate (or that it was not recorded), and the
    σ²-alignment beside v1 / u1 (:func:`.compute.up_o_finding`)."""
    finding, rising = up_o_finding(results), rising_finding(results)
    long = rising if rising and rising.source == "longer-run" else None
    align = {q.name: q for q in finding.align}
    if finding.up_gate is None:
        up_gate = PROSE.choose("up-gate", "not-recorded")
    else:
        v1, u1 = finding.up_gate
        up_gate = PROSE.choose(
            "up-gate",
            "recorded",
            v1=v1.final,
            v1_early=v1.early,
            v1_base=v1.baseline,
            u1=u1.final,
            u1_early=u1.early,
            u1_base=u1.baseline,
            end=finding.end,
            early_step=finding.early_step,
        )
    key = PROSE.choose(
        "up-o-long-key",
        "not-run" if long is None else "run",
        **({} if long is None else dict(label=long.label, seed=long.seeds[0], horizon=long.horizon)),
    )
    return PROSE.render(
        "up-o-caption",
        reference=finding.reference,
        long_key=key,
        up_gate=up_gate,
        align=PROSE.render(
            "up-o-align",
            end=finding.end,
            up_align=align["up-align"].final,
            up_v1=align["up-v1"].final,
            up_base=align["up-v1"].baseline,
            o_align=align["o-align"].final,
            o_u1=align["o-u1"].final,
            o_base=align["o-u1"].baseline,
        ),
    )


def gap_statement(results: Results) -> Markdown:
    """Whether Up and O were still rising at a shorter horizon (:func:`.compute.rising_finding`), and each
    explanation of the Up/O gap kept or dropped by the claims it predicts as the chapter judges them
    (:func:`.compute.explanation_verdicts` of :func:`.compute.claims`: a claim still moving reads not settled)."""
    finding = rising_finding(results)
    if finding is None:
        rising = PROSE.choose("long-run", "not-run", reference=results.reference)
    else:
        items = "; ".join(
            PROSE.choose(
                "long-run-item",
                finding.source,
                projection=short_projection(UP_O_QUANTITIES[i.quantity][1]),
                vector=vector_name(UP_O_QUANTITIES[i.quantity][2]),
                at_horizon=i.at_horizon,
                at_end=i.at_end,
                verdict=i.verdict,
                reference_label=results.reference,
                horizon=finding.horizon,
                reference=i.reference,
            )
            for i in finding.items
        )
        rising = PROSE.choose(
            "long-run",
            finding.source,
            factor=finding.factor,
            label=finding.label,
            runs=finding.runs,
            horizon=finding.horizon,
            end=finding.end,
            items=items,
        )
    explanations = "\n".join(
        PROSE.render(
            "explanation-item",
            name=PROSE.choose("explanation-name", e.key),
            case=PROSE.choose("explanation-case", e.case),
            verdicts=verdicts_text(e.verdicts),
        )
        for e in explanation_verdicts(claims(results))
    )
    return Markdown(rising + "\n\n" + PROSE.render("gap-statement", items=explanations))


def depth_statement(results: Results) -> Markdown:
    """Whether the deeper model changes the pattern: its verdicts beside the reference's, claim by
    claim (:func:`.compute.depth_finding`)."""
    finding = depth_finding(results)
    same = ", ".join(
        PROSE.render("depth-same-item", key=c.key, shallow=ours_text(c.shallow), deep=ours_text(c.deep))
        for c in finding.same
    )
    changed = "; ".join(
        PROSE.render(
            "depth-changed-item",
            key=c.key,
            shallow=ours_text(c.shallow),
            deep=ours_text(c.deep),
            verdict=c.shallow.verdict,
            deep_verdict=c.deep.verdict,
        )
        for c in finding.changed
    )
    return Markdown(
        PROSE.choose(
            "depth",
            finding.case,
            depth_label=finding.depth_label,
            depth_layers=finding.depth_layers,
            reference=finding.reference,
            n_layers=finding.n_layers,
            steps=finding.steps,
            same=same or PROSE.render("none"),
            changed=changed or PROSE.render("none"),
        )
    )


def pretrained_statement(results: Results) -> Markdown:
    """Our settled values beside the pretrained checkpoint's, for the predicted projections and V
    (:func:`.compute.pretrained_finding`)."""
    finding = pretrained_finding(results)
    comparisons = "; ".join(
        PROSE.render(
            "pretrained-item",
            projection=short_projection(c.projection),
            vector=vector_name(c.space),
            final=c.final,
            early_step=finding.early_step,
            early=c.early,
            pretrained=c.pretrained,
        )
        for c in finding.comparisons
    )
    return Markdown(PROSE.choose("pretrained", finding.case, status=finding.status, comparisons=comparisons))

"""transformer_projections: what the chapter shows (figures, tables, computed prose), from :mod:`.compute`.

Its sentences are templates in ``prose.md`` (:mod:`geocont.book.prose`), filled from the findings
that :mod:`.compute` computes; nothing here decides what they say."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
import pandas as pd
import seaborn as sns
from IPython.display import HTML, Markdown

from ... import plotting
from ...book.chapter import changed_verdicts_sentence, ours_text, undefined_sentence, verdict_list
from ...book.figures import show_figure
from ...book.prose import Prose
from ...metrics import random_abs_cos, vector_name
from ...statistics import VALIDATION_RISE, at_final_step, at_step, estimate, per_run
from ...transformer import PROJECTIONS
from ..common import short_projection
from .compute import (UP_O_QUANTITIES, Results, RunCount, budget_finding, depth_finding,
                      depth_profile_finding, explanation_verdicts, final_estimates, gap_claims, gap_finding, gap_values,
                      holds_finding, late_changes, long_run_finding, loss_finding, lost_finding, pretrained_estimate,
                      pretrained_finding, projection_values, settled_finding, softmax_finding, up_o_baseline,
                      up_o_finding, up_o_values, variant_estimate)
from ..lm_runs import LMChapterSettings

PROSE = Prose.of(__package__)


def _runs_text(runs: tuple[RunCount, ...]) -> str:
    return "; ".join(PROSE.choose("run-count", run.number, label=run.label, seeds=run.seeds) for run in runs)


def _code(names) -> str:
    return ", ".join(f"`{name}`" for name in names)


def budget_note(settings: LMChapterSettings) -> Markdown:
    """What the chapter runs at this scale, what it costs cold on 2 workers against the book's budget,
    and (where an override left runs out) what the full design would add (:func:`.compute.budget_finding`)."""
    finding = budget_finding(settings)
    parts = [PROSE.choose("budget-runs", "long" if finding.long_steps else "plain", runs=_runs_text(finding.runs),
                          steps=finding.steps, long_label=finding.long_label, long_steps=finding.long_steps,
                          long_seed=finding.long_seed)]
    if finding.costed:
        parts.append(PROSE.render("budget-cost", minutes=finding.minutes, n_runs=finding.n_runs,
                                  step_seconds_4=finding.step_seconds_4, step_seconds_8=finding.step_seconds_8))
    if finding.over_budget:
        parts.append(PROSE.render("budget-over", budget_minutes=finding.budget_minutes,
                                  full_runs=_runs_text(finding.full_runs), steps=finding.steps,
                                  rerun_flags=finding.rerun_flags, cheap_runs=_runs_text(finding.cheap_runs),
                                  cheap_minutes=finding.cheap_minutes, cheap_seeds=finding.cheap_seeds))
    if finding.cut:
        parts.append(PROSE.render("budget-cut", cut=_code(finding.cut), full_runs=_runs_text(finding.full_runs),
                                  full_minutes=finding.full_minutes))
    return Markdown(" ".join(parts))


def trained_note(results: Results) -> Markdown:
    runs = results.settings.all_configs()
    return Markdown(PROSE.render("trained", n_runs=sum(len(c) for c in runs.values()), labels=", ".join(runs),
                                 undefined=undefined_sentence(results.table)))


def _space_title(space: str) -> str:
    return f"{space} space ({vector_name(space)})"


def _mark_early(ax: plt.Axes, step: int) -> None:
    ax.axvline(step, color="0.5", linestyle=":", linewidth=1.2)


def _symlog(ax: plt.Axes) -> None:
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(left=0)


def loss_figure(results: Results) -> None:
    """Training and validation loss of every run over training (symlog step axis, as the continuity curves)."""
    table, variants, early = results.table, results.variants, results.settings.early_step
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.5), sharey=True)
    for ax, metric in zip(axes, ["train_loss", "val_loss"]):
        sns.lineplot(data=table[table["metric"] == metric], x="step", y="value", hue="condition", hue_order=variants,
                     palette=plotting.palette(variants), errorbar="sd", marker="o", markersize=3.5, ax=ax,
                     legend=ax is axes[0])
        _symlog(ax)
        _mark_early(ax, early)
        ax.set(xlabel="training step (symlog; dotted: the early horizon)", ylabel="cross-entropy (nats/token)",
               title="training minibatch loss" if metric == "train_loss" else "validation loss")
    plotting.figure_legend(fig, axes[0])
    finding = loss_finding(results)
    losses = "; ".join(PROSE.render("loss-item", label=v.label, early=v.early, early_step=finding.early_step,
                                    final=v.final) for v in finding.variants)
    show_figure(fig, "lm-loss", PROSE.render("loss-caption", losses=losses, uniform=finding.uniform))


def over_training_figure(results: Results) -> None:
    """Every projection's layer-mean continuity over training: one row per projection, v1 (left) and
    u1 (right), each panel with its space's random baseline, one line per run label (band: ±1 sd over seeds)."""
    values, variants, dims = projection_values(results.table), results.variants, results.dims
    colours = plotting.palette(variants)
    fig, axes = plt.subplots(len(PROJECTIONS), 2, figsize=(12, 2.6 * len(PROJECTIONS) + 1), sharex=True, sharey=True)
    for row, projection in enumerate(PROJECTIONS):
        for col, space in enumerate(("input", "output")):
            ax = axes[row, col]
            frame = values[(values.group == projection) & (values.space == space)]
            sns.lineplot(data=frame, x="step", y="value", hue="condition", hue_order=variants, palette=colours,
                         errorbar="sd", ax=ax, legend=row == 0 and col == 0)
            plotting.draw_baseline(ax, random_abs_cos(dims[projection][space]))
            _symlog(ax)
            _mark_early(ax, results.settings.early_step)
            ax.set(ylim=(0, 1.02), xlabel="step (symlog)" if row == len(PROJECTIONS) - 1 else "",
                   ylabel="|cos|" if col == 0 else "",
                   title=f"{short_projection(projection)}: {_space_title(space)}")
    plotting.figure_legend(fig, axes[0, 0], ncol=3)
    show_figure(fig, "lm-over-training", PROSE.render("over-training-caption", early_step=results.settings.early_step,
                                                      settled=settled_sentence(results)))


def gap_figure(results: Results) -> None:
    """Each projection's relative spectral gap over training (layer mean; band: ±1 sd over seeds)."""
    values, variants = gap_values(results.table), results.variants
    columns = 4
    fig, axes = plt.subplots(2, columns, figsize=(15, 7), sharex=True, sharey=True)
    for index, (ax, projection) in enumerate(zip(axes.flat, PROJECTIONS)):
        sns.lineplot(data=values[values.group == projection], x="step", y="value", hue="condition",
                     hue_order=variants, palette=plotting.palette(variants), errorbar="sd", ax=ax, legend=index == 0)
        _symlog(ax)
        _mark_early(ax, results.settings.early_step)
        ax.set(yscale="log", xlabel="step (symlog)" if index >= len(PROJECTIONS) - columns else "",
               ylabel="(s1 - s2) / s1" if index % columns == 0 else "", title=short_projection(projection))
    for index, ax in enumerate(axes.flat):
        if index >= len(PROJECTIONS):
            ax.set_visible(False)
            axes.flat[index - columns].xaxis.set_tick_params(labelbottom=True)  # the panel above shows the axis
    plotting.figure_legend(fig, axes.flat[0], ncol=3)
    show_figure(fig, "lm-gaps", PROSE.render("gaps-caption", gaps=gap_sentence(results)))


def gap_sentence(results: Results) -> str:
    """For the reference variant: the predicted continuities that moved by more than
    :data:`geocont.statistics.DIFFERENCE_MARGIN` between the early horizon and the end, each beside its projection's
    spectral gap at both steps (:func:`.compute.gap_finding`)."""
    finding = gap_finding(results)
    moved = "; ".join(PROSE.render("gaps-item", projection=short_projection(m.projection), vector=vector_name(m.space),
                                   before=m.before, after=m.after, gap_before=m.gap_before, gap_after=m.gap_after)
                      for m in finding.moved)
    return PROSE.choose("gaps", finding.case, reference=finding.reference, threshold=finding.threshold,
                        early_step=finding.early_step, end=finding.end, moved=moved)


#: Legend label of each space in the per-projection bars.
SPACE_LABELS = {"input": "input space (v1)", "output": "output space (u1)"}


def projection_bars_figure(results: Results) -> None:
    """v1 (input) and u1 (output) continuity per projection of the reference variant at the end of
    training, with a black tick at each space's own random baseline E|cos| (its dimension differs)."""
    finals, dims, reference = results.finals, results.dims, results.reference
    frame = finals[finals["condition"] == reference]
    bars = frame.assign(space=frame["space"].map(SPACE_LABELS), group=frame["group"].map(short_projection))
    baselines = {(short_projection(p), SPACE_LABELS[s]): random_abs_cos(dims[p][s]) for p in dims for s in SPACE_LABELS}
    fig, ax = plt.subplots(figsize=(12, 4.8))
    plotting.grouped_bars(bars, x="group", hue="space", ax=ax, order=[short_projection(p) for p in dims],
                          hue_order=list(SPACE_LABELS.values()),
                          colours=dict(zip(SPACE_LABELS.values(), sns.color_palette("colorblind", 2))),
                          baselines=baselines, baseline_label="random baseline (per space)")
    ax.set(xlabel="", ylabel="|cos|, mean over adjacent layer pairs", ylim=(0, 1.02),
           title=f"variant `{reference}`, step {results.settings.base.steps}")
    fig.tight_layout()
    values = "; ".join(PROSE.render("bars-item", projection=e.projection, input=e.input, output=e.output)
                       for e in final_estimates(results))
    show_figure(fig, "lm-projection-bars", PROSE.render("bars-caption", values=values))


def depth_profile_figure(results: Results) -> None:
    """Each projection's final continuity per adjacent layer pair, in both spaces, for ``silu`` and the deeper model."""
    table, finding = results.table, depth_profile_finding(results)
    labels = list(finding.labels)
    rows = at_final_step(table[(table.metric == "weight_cos") & (table.direction == 1) & table.condition.isin(labels)])
    fig, axes = plt.subplots(len(labels), 2, figsize=(14, 4.2 * len(labels)), sharey=True, squeeze=False)
    for r, label in enumerate(labels):
        for ax, space in zip(axes[r], ["input", "output"]):
            frame = rows[(rows.space == space) & (rows.condition == label)]
            sns.lineplot(data=frame, x="layer", y="value", hue="group", hue_order=list(PROJECTIONS),
                         palette=plotting.projection_colours(), errorbar="sd", marker="o", ax=ax,
                         legend=r == 0 and space == "input")
            ax.set(xlabel="adjacent layer pair (l, l+1)", ylabel="|cos|", ylim=(0, 1.02),
                   title=f"`{label}`: {_space_title(space)}")
            ax.set_xticks(sorted(frame.layer.unique()))
    plotting.figure_legend(fig, axes[0, 0])
    show_figure(fig, "lm-depth-profile", PROSE.choose("depth-profile-caption", finding.case,
                                                      depth_label=finding.depth_label))


def ablations_figure(results: Results) -> None:
    """Final continuity per projection and run label, in both spaces (bars: seed mean; lines: ±1 sd)."""
    finals, variants = results.finals, results.variants
    fig, axes = plt.subplots(1, 2, figsize=(15, 4.8), sharey=True)
    for ax, space in zip(axes, ["input", "output"]):
        sns.barplot(data=finals[finals.space == space], x="group", y="value", hue="condition",
                    order=list(PROJECTIONS), hue_order=variants, palette=plotting.palette(variants), errorbar="sd",
                    ax=ax, alpha=0.85)
        ax.set(xlabel="", ylabel="|cos|, mean over layer pairs", ylim=(0, 1.02), title=_space_title(space))
        ax.set_xticks(range(len(PROJECTIONS)), [short_projection(p) for p in PROJECTIONS])
    plotting.figure_legend(fig, axes[0])
    if axes[1].get_legend() is not None:
        axes[1].get_legend().remove()
    show_figure(fig, "lm-ablations", PROSE.render("ablations-caption", steps=results.settings.base.steps))


def horizon_table(results: Results) -> pd.DataFrame:
    """One row per projection and space: the early and the settled value of every run label (mean ±
    sd over seeds, "(1 seed)" where there is one), ``silu``'s change over the last third of training,
    the pretrained checkpoint's layer-pair mean ± sd over pairs, and the random baseline; a last row
    gives each label's validation loss (against uniform guessing)."""
    settings, dims = results.settings, results.dims
    early, finals = results.early_finals, results.finals
    changes = late_changes(results.table)
    rows = []
    for projection in PROJECTIONS:
        for space in ("input", "output"):
            row = {"projection": short_projection(projection), "vector": vector_name(space)}
            for label in results.variants:
                if label != settings.depth_label:
                    row[f"{label}, step {settings.early_step}"] = str(variant_estimate(early, label, projection, space))
                row[f"{label}, step {settings.base.steps}"] = str(variant_estimate(finals, label, projection, space))
            row[f"{results.reference}: change over last third"] = str(variant_estimate(changes, results.reference, projection,
                                                                                space))
            if results.pretrained is not None:
                row[f"{settings.pretrained} (± over layer pairs)"] = str(pretrained_estimate(results, projection,
                                                                                             space))
            row["random baseline"] = f"{random_abs_cos(dims[projection][space]):.3f}"
            rows.append(row)
    val = per_run(results.table, "val_loss", "", 0)
    if val.empty:
        return pd.DataFrame(rows)
    row = {"projection": "val. loss", "vector": "(nats/token)"}
    for label in results.variants:
        if label != settings.depth_label:
            row[f"{label}, step {settings.early_step}"] = str(estimate(at_step(val, settings.early_step)
                                                                       .query("condition == @label")["value"]))
        row[f"{label}, step {settings.base.steps}"] = str(estimate(at_final_step(val).query("condition == @label")["value"]))
    row["random baseline"] = f"{math.log(settings.base.shape.vocab_size):.2f} (uniform)"
    rows.append(row)
    return pd.DataFrame(rows).fillna("")


#: Value columns per table in :func:`horizon_display` (more overflow the page).
DISPLAY_COLUMNS = 4


def horizon_display(results: Results) -> HTML:
    """:func:`horizon_table` as the chapter shows it, cut into tables narrow enough for the page:
    first ``silu`` with its settling and the random baseline, then the other run labels and the
    pretrained model, at most :data:`DISPLAY_COLUMNS` value columns each; values on one line."""
    table = horizon_table(results)
    table = table.assign(projection=table["projection"] + " " + table["vector"]).drop(columns="vector")
    labels = tuple(f"{label}, step" for label in results.variants)
    reference = [c for c in table.columns if c.startswith(f"{results.reference}, step")]
    others = [c for c in table.columns if c.startswith(labels) and c not in reference]
    rest = [c for c in table.columns if c != "projection" and not c.startswith(labels)]
    pretrained = [c for c in rest if results.settings.pretrained and c.startswith(results.settings.pretrained)]
    first = reference + [c for c in rest if c not in pretrained]
    others += pretrained
    parts = [first] + [others[i:i + DISPLAY_COLUMNS] for i in range(0, len(others), DISPLAY_COLUMNS)]
    nowrap = [{"selector": "td", "props": "white-space: nowrap; font-size: 0.85em; padding: 0.2em 0.5em"},
              {"selector": "th", "props": "font-size: 0.85em; padding: 0.2em 0.5em; vertical-align: bottom"}]
    return HTML("".join(table[["projection", *columns]].style.hide(axis="index").set_table_styles(nowrap).to_html()
                        for columns in parts))


def settled_sentence(results: Results) -> str:
    """Which projections' continuity was still moving over the last third of training
    (reference variant; :func:`.compute.settled_finding`)."""
    finding = settled_finding(results)
    moving = ", ".join(PROSE.render("settled-item", projection=short_projection(m.projection),
                                    vector=vector_name(m.space), per_seed=", ".join(f"{c:+.2f}" for c in m.per_seed))
                       for m in finding.moving)
    memorising = ("" if finding.memorising_after is None else
                  PROSE.render("settled-memorising", step=finding.memorising_after, rise=VALIDATION_RISE))
    return PROSE.choose("settled", finding.case, reference=finding.reference, tolerance=finding.tolerance,
                        start=finding.start, end=finding.end, budget=finding.budget, moving=moving,
                        memorising=memorising)


def holds_statement(results: Results, claims: pd.DataFrame) -> Markdown:
    """Which claims hold throughout, only early, only late, or at neither horizon (from their early and
    final verdicts; :func:`.compute.holds_finding`), whether the values settled, and what was lost."""
    finding = holds_finding(results, claims)
    groups = "\n".join(PROSE.render("holds-group", when=when, count=len(keys), keys=_code(keys))
                       for when, keys in finding.groups)
    closing = " ".join(part for part in (settled_sentence(results), lost_sentence(results, claims)) if part)
    return Markdown(PROSE.render("holds", early_step=finding.early_step, end=finding.end, groups=groups,
                                 closing=closing))


def lost_sentence(results: Results, claims: pd.DataFrame) -> str:
    """The predicted continuities that do not hold at the end of training (lost, or never reached),
    with their early and final values beside the pretrained checkpoint's; empty where all hold
    (:func:`.compute.lost_finding`)."""
    finding = lost_finding(results, claims)
    lost = "; ".join(PROSE.choose("lost-item", item.case, projection=short_projection(item.projection),
                                  vector=vector_name(item.space), early=item.early, early_step=finding.early_step,
                                  early_verdict=item.early_verdict, final=item.final, verdict=item.verdict,
                                  pretrained_name=finding.pretrained, pretrained=item.pretrained)
                     for item in finding.lost)
    length = next(e for e in explanation_verdicts(claims) if e.key == "not-settled")
    return PROSE.choose("lost", finding.case, reference=finding.reference, lost=lost,
                        length=PROSE.choose("lost-length", length.case, verdicts=_verdicts_text(length.verdicts)))


def _verdicts_text(verdicts: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(PROSE.render("explanation-verdict", key=key, verdict=verdict) for key, verdict in verdicts)


#: The Up/O figure's panels: title, the quantities drawn (:data:`.compute.UP_O_QUANTITIES`), and the one
#: whose random baseline the panel draws.
UP_O_PANELS = (
    ("Up, input space", ("up-v1", "up-align", "up-gate-v1"), "up-v1"),
    ("O, output space", ("o-u1", "o-align"), "o-u1"),
    ("Up against Gate (same layer), output space", ("up-gate-u1",), "up-gate-u1"),
)

#: What each curve measures: one colour each, the same in every panel.
UP_O_KINDS = {"up-v1": "leading |cos|, adjacent layers", "o-u1": "leading |cos|, adjacent layers",
              "up-align": "σ²-alignment, adjacent layers", "o-align": "σ²-alignment, adjacent layers",
              "up-gate-v1": "Up–Gate |cos|, same layer", "up-gate-u1": "Up–Gate |cos|, same layer"}
assert set(UP_O_KINDS) == set(UP_O_QUANTITIES)


def up_o_figure(results: Results) -> None:
    """Up's and O's continuity over training (reference variant, band: ±1 sd over seeds): leading
    |cos| and σ²-alignment of adjacent layers, Up against Gate in the same layer, each panel with its
    space's random baseline; the longer run (one seed) dashed where it was run."""
    values = up_o_values(results.table)
    values = values[values["condition"] == results.reference].assign(kind=lambda f: f["quantity"].map(UP_O_KINDS))
    long = None if results.long is None else up_o_values(results.long)
    kinds = list(dict.fromkeys(UP_O_KINDS.values()))
    colours = plotting.palette(kinds)
    fig, axes = plt.subplots(1, len(UP_O_PANELS), figsize=(16, 4.8), sharey=True)
    for ax, (title, names, baseline) in zip(axes, UP_O_PANELS):
        frame = values[values["quantity"].isin(names)]
        if len(frame):
            sns.lineplot(data=frame, x="step", y="value", hue="kind", hue_order=kinds, palette=colours,
                         errorbar="sd", ax=ax, legend=False)
        else:
            ax.text(0.5, 0.5, "not recorded", transform=ax.transAxes, ha="center", va="center", color="0.4")
        if long is not None:
            for name in names:
                rows = long[long["quantity"] == name]
                ax.plot(rows["step"], rows["value"], linestyle="-.", linewidth=1.3, color=colours[UP_O_KINDS[name]])
            ax.axvline(results.settings.base.steps, color="0.5", linewidth=1.0)
        plotting.draw_baseline(ax, up_o_baseline(baseline, results.dims))
        _symlog(ax)
        _mark_early(ax, results.settings.early_step)
        ax.set(ylim=(min(-0.05, ax.get_ylim()[0]), 1.02), xlabel="step (symlog)",
               ylabel="|cos| or alignment" if ax is axes[0] else "", title=title)
    handles = [Line2D([], [], color=colours[kind], label=kind) for kind in kinds]
    handles.append(Line2D([], [], label="random baseline (|cos|)", **plotting.BASELINE_STYLE))
    if long is not None:
        handles.append(Line2D([], [], color="0.2", linestyle="-.",
                              label=f"{results.settings.long_label} (seed {results.settings.seeds[0]})"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False, bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    show_figure(fig, "lm-up-o-gap", up_o_caption(results))


def up_o_caption(results: Results) -> str:
    """The Up/O figure's caption: its key, Up against Gate (or that it was not recorded), and the
    σ²-alignment beside v1 / u1 (:func:`.compute.up_o_finding`)."""
    finding, long = up_o_finding(results), long_run_finding(results)
    align = {q.name: q for q in finding.align}
    if finding.up_gate is None:
        up_gate = PROSE.choose("up-gate", "not-recorded")
    else:
        v1, u1 = finding.up_gate
        up_gate = PROSE.choose("up-gate", "recorded", v1=v1.final, v1_early=v1.early, v1_base=v1.baseline,
                               u1=u1.final, u1_early=u1.early, u1_base=u1.baseline, end=finding.end,
                               early_step=finding.early_step)
    key = PROSE.choose("up-o-long-key", "not-run" if long is None else "run", **(
        {} if long is None else dict(label=long.label, seed=long.seed, horizon=long.horizon)))
    return PROSE.render("up-o-caption", reference=finding.reference, long_key=key, up_gate=up_gate,
                        align=PROSE.render("up-o-align", end=finding.end, up_align=align["up-align"].final,
                                           up_v1=align["up-v1"].final, up_base=align["up-v1"].baseline,
                                           o_align=align["o-align"].final, o_u1=align["o-u1"].final,
                                           o_base=align["o-u1"].baseline))


def gap_statement(results: Results) -> Markdown:
    """Whether Up and O were still rising (the longer run), and each explanation of the Up/O gap kept or
    dropped by the claims it predicts (:func:`.compute.explanation_verdicts` of :func:`.compute.gap_claims`)."""
    settings, long = results.settings, long_run_finding(results)
    if long is None:
        rising = PROSE.choose("long-run", "not-run", factor=settings.long_factor, horizon=settings.base.steps)
    else:
        items = "; ".join(PROSE.render(
            "long-run-item", projection=short_projection(UP_O_QUANTITIES[i.quantity][1]),
            vector=vector_name(UP_O_QUANTITIES[i.quantity][2]), at_horizon=i.at_horizon, at_end=i.at_end,
            verdict=i.verdict, reference_label=results.reference, horizon=long.horizon, reference=i.reference)
            for i in long.items)
        rising = PROSE.choose("long-run", "run", factor=long.factor, label=long.label, seed=long.seed,
                              horizon=long.horizon, end=long.end, items=items)
    explanations = "\n".join(PROSE.render("explanation-item", name=PROSE.choose("explanation-name", e.key),
                                          case=PROSE.choose("explanation-case", e.case),
                                          verdicts=_verdicts_text(e.verdicts))
                             for e in explanation_verdicts(gap_claims(results)))
    return Markdown(rising + "\n\n" + PROSE.render("gap-statement", items=explanations))


def depth_statement(results: Results) -> Markdown:
    """Whether the deeper model changes the pattern: its verdicts beside the reference's, claim by
    claim (:func:`.compute.depth_finding`)."""
    finding = depth_finding(results)
    same = ", ".join(PROSE.render("depth-same-item", key=c.key, shallow=ours_text(c.shallow), deep=ours_text(c.deep))
                     for c in finding.same)
    changed = "; ".join(PROSE.render("depth-changed-item", key=c.key, shallow=ours_text(c.shallow),
                                     deep=ours_text(c.deep), verdict=c.shallow.verdict, deep_verdict=c.deep.verdict)
                        for c in finding.changed)
    return Markdown(PROSE.choose("depth", finding.case, depth_label=finding.depth_label,
                                 depth_layers=finding.depth_layers, reference=finding.reference,
                                 n_layers=finding.n_layers, steps=finding.steps, same=same or PROSE.render("none"),
                                 changed=changed or PROSE.render("none")))


def pretrained_statement(results: Results) -> Markdown:
    """Our settled values beside the pretrained checkpoint's, for the predicted projections and V
    (:func:`.compute.pretrained_finding`)."""
    finding = pretrained_finding(results)
    comparisons = "; ".join(PROSE.render("pretrained-item", projection=short_projection(c.projection),
                                         vector=vector_name(c.space), final=c.final, early_step=finding.early_step,
                                         early=c.early, pretrained=c.pretrained) for c in finding.comparisons)
    return Markdown(PROSE.choose("pretrained", finding.case, status=finding.status, comparisons=comparisons))


def verdict(results: Results, claims: pd.DataFrame) -> Markdown:
    settings = results.settings
    intro = PROSE.render("verdict-intro", scale=settings.scale, seeds=len(settings.seeds), reference=results.reference,
                         steps=settings.base.steps, corpus=settings.base.corpus, early_step=settings.early_step)
    return Markdown(PROSE.render("verdict", verdicts=verdict_list(claims, intro),
                                 changed=changed_verdicts_sentence(claims, settings.early_step)))


def softmax_note(claims: pd.DataFrame) -> Markdown | None:
    """What the linear-attention ablation says when it does not support the softmax claim, else
    nothing (:func:`.compute.softmax_finding`)."""
    finding = softmax_finding(claims)
    if finding.case != "not-supported":
        return None
    return Markdown(PROSE.render("softmax-not-supported", evidence="; ".join(finding.evidence)))

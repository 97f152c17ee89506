"""transformer_projections: what the chapter shows (figures, tables, computed prose), from :mod:`.compute`."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython.display import HTML, Markdown

from ... import plotting
from ...book.chapter import changed_verdicts_sentence, claim, ours_text, undefined_sentence, verdict_list
from ...book.figures import show_figure
from ...metrics import random_abs_cos, vector_name
from ...statistics import Estimate, at_final_step, at_step, estimate, holds_when, per_run, settled
from ...tables import RUN_KEYS
from ...transformer import PROJECTIONS
from ..lm_runs import PROJECTION_PREDICTIONS, LMChapterSettings
from .compute import (BUDGET_CPU_DESIGN, CHAPTER, CPU_BUDGET_MINUTES, CPU_SECONDS_PER_STEP, FULL_CPU_DESIGN, Results,
                      SOFTMAX_KEYS, _CLAIM_QUANTITY, _estimate, _short, claims, late_changes, predicted_minutes,
                      projection_values, transformer_claims)


def _runs_text(settings: LMChapterSettings) -> str:
    return "; ".join(f"`{label}` {len(c)} seed{'s' if len(c) > 1 else ''}" for label, c in settings.configs().items())


def budget_note(settings: LMChapterSettings) -> Markdown:
    """What the chapter runs at this scale, what it costs cold on 2 workers against the book's budget,
    and (where an override left runs out) what the full design would add."""
    text = f"**What runs here.** {_runs_text(settings)}, each {settings.base.steps:,} steps."
    if settings.scale != "cpu":
        return Markdown(text)
    full = CHAPTER.configure(settings.scale, **{**settings.overrides, **FULL_CPU_DESIGN})
    cheap = CHAPTER.configure(settings.scale, **{**settings.overrides, **BUDGET_CPU_DESIGN})
    ours, runs = predicted_minutes(settings), sum(len(c) for c in settings.configs().values())
    text += (f" Predicted cold time on 2 one-thread workers: **{ours:.0f} min** for {runs} runs, from the measured "
             f"{CPU_SECONDS_PER_STEP[4]:.3f} s per step of the 4-layer model and {CPU_SECONDS_PER_STEP[8]:.2f} s of "
             "the 8-layer one (recording adds about 1%).")
    if ours > CPU_BUDGET_MINUTES:
        budget_flags = " ".join(f'-p {name} "{list(value)!r}"' if name == "variants" else f"-p {name} {len(value)}"
                                for name, value in BUDGET_CPU_DESIGN.items())  # seed lists as counts
        text += (f" That is over the {CPU_BUDGET_MINUTES}-minute budget of this chapter: {_runs_text(full)}, each "
                 f"{settings.base.steps:,} steps, cost this much on two cores, and the verdicts need all of them. A re-run "
                 f"within the budget (`{budget_flags}`, {_runs_text(cheap)}) takes about "
                 f"{predicted_minutes(cheap):.0f} min; with {len(cheap.seeds)} seeds its ± is the sd of "
                 f"{len(cheap.seeds)} values.")
    cut = [label for label, c in full.configs().items()
           if {x.seed for x in c} - {x.seed for x in settings.configs().get(label, [])}]
    if cut:
        text += (f" This build leaves out runs of {', '.join(f'`{label}`' for label in cut)} that the `cpu` preset "
                 f"has ({_runs_text(full)}, about {predicted_minutes(full):.0f} min); every figure and table below "
                 "handles them when they are run.")
    return Markdown(text)


def trained_note(results: Results) -> Markdown:
    runs = results.settings.configs()
    return Markdown(f"{sum(len(c) for c in runs.values())} runs trained ({', '.join(runs)}). "
                    + undefined_sentence(results.table))


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
    val = per_run(table, "val_loss", "", 0)
    parts = [f"{v} {estimate(at_step(val, early).query('condition == @v')['value'])} at step {early}, "
             f"{estimate(at_final_step(val).query('condition == @v')['value'])} at the end" for v in variants]
    show_figure(fig, "lm-loss", "Loss during training (seed mean ± 1 sd; one seed: no band). Validation loss: "
                + "; ".join(parts) + f" nats/token (uniform guessing: {math.log(results.settings.base.shape.vocab_size):.2f}).")


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
                   title=f"{_short(projection)}: {_space_title(space)}")
    plotting.figure_legend(fig, axes[0, 0], ncol=3)
    show_figure(fig, "lm-over-training", "Continuity of every projection over training, in both spaces (mean over "
                "adjacent layer pairs; line: seed mean, band: ±1 sd over seeds; dashed: the space's random baseline "
                f"E|cos|; dotted: the early horizon, step {results.settings.early_step}). "
                + settled_sentence(results))


def gap_values(table: pd.DataFrame) -> pd.DataFrame:
    """Per run, projection (``group``) and step: the relative gap (s1 - s2) / s1 of the weight
    matrix, mean over layers (``weight_gap``, direction 1). v1 and u1 are only as well defined as
    this gap: where it is small, a small change of the weights can swap the leading direction."""
    rows = table[(table["metric"] == "weight_gap") & (table["direction"] == 1)]
    return rows.groupby(RUN_KEYS + ["group", "step"], observed=True)["value"].mean().reset_index()


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
               ylabel="(s1 - s2) / s1" if index % columns == 0 else "", title=_short(projection))
    for index, ax in enumerate(axes.flat):
        if index >= len(PROJECTIONS):
            ax.set_visible(False)
            axes.flat[index - columns].xaxis.set_tick_params(labelbottom=True)  # the panel above shows the axis
    plotting.figure_legend(fig, axes.flat[0], ncol=3)
    show_figure(fig, "lm-gaps", "Relative gap between each projection's two largest singular values over training "
                "(mean over layers; line: seed mean, band: ±1 sd over seeds; dotted: the early horizon). "
                + gap_sentence(results))


#: A continuity "moved" between the early horizon and the end when its seed mean changed by more than this.
MOVED = 0.10


def gap_sentence(results: Results) -> str:
    """For ``silu``: the predicted continuities that moved by more than :data:`MOVED` between the early
    horizon and the end, each beside its projection's spectral gap at both steps (an association
    across projections, not a test of cause)."""
    early_step, end = results.settings.early_step, results.settings.base.steps
    continuity, gaps = projection_values(results.table), gap_values(results.table)
    reference = results.reference
    continuity, gaps = continuity[continuity.condition == reference], gaps[gaps.condition == reference]
    parts = []
    for projection, space, _ in PROJECTION_PREDICTIONS:
        frame = continuity[(continuity.group == projection) & (continuity.space == space)]
        before, after = estimate(at_step(frame, early_step)["value"]), estimate(at_final_step(frame)["value"])
        if math.isnan(before.mean) or abs(after.mean - before.mean) <= MOVED:
            continue
        gap = gaps[gaps.group == projection]
        gap_before, gap_after = estimate(at_step(gap, early_step)["value"]), estimate(at_final_step(gap)["value"])
        parts.append(f"{_short(projection)} {vector_name(space)} {before.mean:.2f} → {after.mean:.2f} "
                     f"(gap {gap_before.mean:.3f} → {gap_after.mean:.3f})")
    if not parts:
        return (f"In `{reference}` no predicted continuity moved by more than {MOVED} between step {early_step} and step "
                f"{end}.")
    return (f"In `{reference}`, the predicted continuities that moved by more than {MOVED} between step {early_step} and step "
            f"{end}, with their projection's gap at the same two steps (seed means): " + "; ".join(parts) + ".")


#: Legend label of each space in the per-projection bars.
SPACE_LABELS = {"input": "input space (v1)", "output": "output space (u1)"}


def projection_bars_figure(results: Results) -> None:
    """v1 (input) and u1 (output) continuity per projection of the reference variant at the end of
    training, with a black tick at each space's own random baseline E|cos| (its dimension differs)."""
    finals, dims, reference = results.finals, results.dims, results.reference
    frame = finals[finals["condition"] == reference]
    bars = frame.assign(space=frame["space"].map(SPACE_LABELS), group=frame["group"].map(_short))
    baselines = {(_short(p), SPACE_LABELS[s]): random_abs_cos(dims[p][s]) for p in dims for s in SPACE_LABELS}
    fig, ax = plt.subplots(figsize=(12, 4.8))
    plotting.grouped_bars(bars, x="group", hue="space", ax=ax, order=[_short(p) for p in dims],
                          hue_order=list(SPACE_LABELS.values()),
                          colours=dict(zip(SPACE_LABELS.values(), sns.color_palette("colorblind", 2))),
                          baselines=baselines, baseline_label="random baseline (per space)")
    ax.set(xlabel="", ylabel="|cos|, mean over adjacent layer pairs", ylim=(0, 1.02),
           title=f"variant `{reference}`, step {results.settings.base.steps}")
    fig.tight_layout()
    lines = []
    for projection in PROJECTIONS:
        parts = [f"{vector} {estimate(frame[(frame.group == projection) & (frame.space == space)]['value'])}"
                 for space, vector in (("input", "v1"), ("output", "u1"))]
        lines.append(f"{projection}: " + ", ".join(parts))
    show_figure(fig, "lm-projection-bars", "Adjacent-layer continuity per projection at the end of training (bars: "
                "seed mean; dots: seeds; black ticks: each space's random baseline). " + "; ".join(lines) + ".")


def depth_profile_figure(results: Results) -> None:
    """Each projection's final continuity per adjacent layer pair, in both spaces, for ``silu`` and the deeper model."""
    table = results.table
    labels = [v for v in results.variants if v in (results.reference, results.settings.depth_label)]
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
    show_figure(fig, "lm-depth-profile", "Continuity of each projection through depth, per adjacent layer pair, at "
                "the end of training (seed mean ± 1 sd" + (f"; `{results.settings.depth_label}`: one seed per run "
                "label as listed above" if len(labels) > 1 else "") + ").")


def ablations_figure(results: Results) -> None:
    """Final continuity per projection and run label, in both spaces (bars: seed mean; lines: ±1 sd)."""
    finals, variants = results.finals, results.variants
    fig, axes = plt.subplots(1, 2, figsize=(15, 4.8), sharey=True)
    for ax, space in zip(axes, ["input", "output"]):
        sns.barplot(data=finals[finals.space == space], x="group", y="value", hue="condition",
                    order=list(PROJECTIONS), hue_order=variants, palette=plotting.palette(variants), errorbar="sd",
                    ax=ax, alpha=0.85)
        ax.set(xlabel="", ylabel="|cos|, mean over layer pairs", ylim=(0, 1.02), title=_space_title(space))
        ax.set_xticks(range(len(PROJECTIONS)), [_short(p) for p in PROJECTIONS])
    plotting.figure_legend(fig, axes[0])
    if axes[1].get_legend() is not None:
        axes[1].get_legend().remove()
    show_figure(fig, "lm-ablations", f"Continuity per projection and run label at step {results.settings.base.steps} "
                "(bars: seed mean; lines: ±1 sd over seeds, none for one seed).")


#: A quantity "has settled" when its mean changed by at most this over the last third of training.
SETTLED_TOLERANCE = 0.05


def _pretrained_estimate(results: Results, projection: str, space: str) -> Estimate:
    """Mean ± sd over the pretrained checkpoint's adjacent layer pairs (not over seeds)."""
    if results.pretrained is None:
        return Estimate(math.nan, math.nan, 0)
    rows = results.pretrained[results.pretrained["projection"] == projection]
    return estimate(rows["v1_cos" if space == "input" else "u1_cos"])


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
            row = {"projection": _short(projection), "vector": vector_name(space)}
            for label in results.variants:
                if label != settings.depth_label:
                    row[f"{label}, step {settings.early_step}"] = str(_estimate(early, label, projection, space))
                row[f"{label}, step {settings.base.steps}"] = str(_estimate(finals, label, projection, space))
            row[f"{results.reference}: change over last third"] = str(_estimate(changes, results.reference, projection,
                                                                                space))
            if results.pretrained is not None:
                row[f"{settings.pretrained} (± over layer pairs)"] = str(_pretrained_estimate(results, projection, space))
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
    """Which projections' continuity was still moving over the last third of training (``silu``)."""
    changes = late_changes(results.table)
    moving = []
    for projection in PROJECTIONS:
        for space in ("input", "output"):
            change = _estimate(changes, results.reference, projection, space)
            if not settled(change, SETTLED_TOLERANCE):
                moving.append(f"{_short(projection)} {vector_name(space)} ({change.mean:+.2f})")
    start = int(changes["start"].min()) if len(changes) else 0
    if not moving:
        return (f"In `{results.reference}` every projection's continuity changed by at most {SETTLED_TOLERANCE} between step {start} "
                f"and step {results.settings.base.steps}: the values have settled.")
    return (f"In `{results.reference}`, between step {start} and step {results.settings.base.steps}, these still changed by more "
            f"than {SETTLED_TOLERANCE} (seed mean): " + ", ".join(moving) + "; the others had settled.")


_CLAIM_QUANTITY.update({"v-low-input": ("v_proj", "input"), "v-low-output": ("v_proj", "output")})


def holds_statement(results: Results, claims: pd.DataFrame) -> Markdown:
    """Which claims hold throughout, only early, only late, or at neither horizon (from their early and final verdicts)."""
    groups: dict[str, list[str]] = {}
    for row in claims.itertuples():
        when = holds_when(row.early_verdict, row.verdict)
        groups.setdefault(when, []).append(f"`{row.key}`")
    settings = results.settings
    lines = [f"- **{when}** ({len(keys)}): {', '.join(keys)}" for when, keys in groups.items()]
    return Markdown(f"Judged at step {settings.early_step} and at step {settings.base.steps} by the same rule "
                    "(a claim holds where it is reproduced):\n\n" + "\n".join(lines) + "\n\n" + settled_sentence(results)
                    + lost_sentence(results, claims))


def lost_sentence(results: Results, claims: pd.DataFrame) -> str:
    """The predicted continuities that do not hold at the end of training (lost, or never reached),
    with their early and final values beside the pretrained checkpoint's; empty where all hold."""
    finals, early = results.finals, results.early_finals
    parts = []
    for row in claims.itertuples():
        if row.key not in _CLAIM_QUANTITY or row.key.startswith("v-low") or row.verdict == "reproduced":
            continue
        projection, space = _CLAIM_QUANTITY[row.key]
        text = (f"{_short(projection)} {vector_name(space)} {_estimate(early, results.reference, projection, space)} "
                f"at step {results.settings.early_step} ({row.early_verdict}), "
                f"{_estimate(finals, results.reference, projection, space)} "
                f"at the end ({row.verdict})")
        if results.pretrained is not None:
            text += f" ({results.settings.pretrained}: {_pretrained_estimate(results, projection, space)} over layer pairs)"
        parts.append(text)
    if not parts:
        return ""
    return (f" **Predicted continuities this small model does not keep to the end of training** (`{results.reference}`, random "
            "baselines in the table): " + "; ".join(parts) + ". The pretrained model beside them is both deeper and "
            "trained far longer; the 8-layer model above separates depth from training length only in part.")


def depth_statement(results: Results) -> Markdown:
    """Whether the deeper model changes the pattern: its verdicts beside ``silu``'s, claim by claim."""
    settings = results.settings
    if settings.depth_label not in results.variants:
        return Markdown(f"The {settings.depth_layers}-layer model was not run at this scale (see the cost note above), "
                        "so this chapter cannot say whether depth changes the pattern.")
    shallow = transformer_claims(results.table, results.dims, reference=results.reference, no_activation=None,
                                 linear_attention=None)
    deep = transformer_claims(results.table, results.dims, reference=settings.depth_label, no_activation=None,
                              linear_attention=None).set_index("key")
    seeds = len(settings.depth_seeds)
    same, changed = [], []
    for row in shallow.itertuples():
        other = deep.loc[row.key]
        text = f"`{row.key}` ({ours_text(row)} → {ours_text(other)})"
        (same if other.verdict == row.verdict else changed).append(
            text if other.verdict == row.verdict else f"{text}: {row.verdict} → {other.verdict}")
    flag = " (1 seed: its sd is undefined)" if seeds == 1 else ""
    return Markdown(f"**Depth.** `{settings.depth_label}`{flag} against `{results.reference}` ({settings.base.shape.n_layers} layers), "
                    f"both at step {settings.base.steps}. Same verdict: " + (", ".join(same) or "none") + ". Changed: "
                    + ("; ".join(changed) or "none") + ".")


def pretrained_statement(results: Results) -> Markdown:
    """Our settled values beside the pretrained checkpoint's, for the predicted projections and V."""
    if results.pretrained is None:
        return Markdown(f"No pretrained comparison: {results.pretrained_status}.")
    finals, early, step = results.finals, results.early_finals, results.settings.early_step
    parts = []
    for projection, space in list(dict.fromkeys(_CLAIM_QUANTITY.values())):
        vector = vector_name(space)
        parts.append(f"{_short(projection)} {vector}: ours {_estimate(finals, results.reference, projection, space)} "
                     f"(step {step}: {_estimate(early, results.reference, projection, space)}), pretrained "
                     f"{_pretrained_estimate(results, projection, space)}")
    return Markdown(f"**Against a pretrained model.** {results.pretrained_status}, same projections and metric; its ± "
                    "is the spread over its adjacent layer pairs, ours over seeds (random baselines differ with the "
                    "widths: see the table). " + "; ".join(parts) + ". The next chapter analyses more checkpoints, "
                    "and these trained models beside them.")


def verdict(results: Results, claims: pd.DataFrame) -> Markdown:
    settings = results.settings
    text = verdict_list(claims, f"At the `{settings.scale}` scale ({len(settings.seeds)} seeds of `{results.reference}`, judged at "
                                f"step {settings.base.steps:,} on `{settings.base.corpus}`, each claim's value after "
                                f"{settings.early_step:,} steps beside it):")
    return Markdown(text + "\n\n" + changed_verdicts_sentence(claims, settings.early_step))


def softmax_note(claims: pd.DataFrame) -> Markdown | None:
    """What the linear-attention ablation says when it does not support the softmax claim (else nothing)."""
    rows = [claim(claims, key) for key in SOFTMAX_KEYS if key in set(claims["key"])]
    if not rows or any(row["verdict"] == "reproduced" for row in rows):
        return None
    return Markdown(
        "**Q and K keep their input-space continuity without the softmax** (" + "; ".join(r["note"].split("; ")[0]
                                                                                           for r in rows)
        + "). In this model, then, the softmax is not what anchors them. Two candidates this chapter does not test: "
        "Llama's RMSNorm has a learnable element-wise gain that fixes a coordinate frame of the residual stream that "
        "Q and K read from, and RoPE rotates fixed coordinate pairs of each head. The paper's own caveat applies: its "
        "Q/K evidence is indirect."
    )

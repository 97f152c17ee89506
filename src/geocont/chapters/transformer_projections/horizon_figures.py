"""Where the transformer chapter's claims are judged: the horizon table, what settled, what holds and what was lost."""

from __future__ import annotations

import math

import pandas as pd
from IPython.display import HTML, Markdown

from ...metrics import random_abs_cos, vector_name
from ...statistics import VALIDATION_RISE, at_final_step, at_step, estimate, per_run
from ...transformer import PROJECTIONS
from ..common import short_projection
from .compute import (
    Results,
    explanation_verdicts,
    holds_finding,
    late_changes,
    lost_finding,
    pretrained_estimate,
    settled_finding,
    variant_estimate,
)
from .page_text import PROSE, code_list, verdicts_text


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
            row[f"{results.reference}: change over last third"] = str(
                variant_estimate(changes, results.reference, projection, space)
            )
            if results.pretrained is not None:
                row[f"{settings.pretrained} (± over layer pairs)"] = str(
                    pretrained_estimate(results, projection, space)
                )
            row["random baseline"] = f"{random_abs_cos(dims[projection][space]):.3f}"
            rows.append(row)
    val = per_run(results.table, "val_loss", "", 0)
    if val.empty:
        return pd.DataFrame(rows)
    row = {"projection": "val. loss", "vector": "(nats/token)"}
    for label in results.variants:
        if label != settings.depth_label:
            row[f"{label}, step {settings.early_step}"] = str(
                estimate(at_step(val, settings.early_step).query("condition == @label")["value"])
            )
        row[f"{label}, step {settings.base.steps}"] = str(
            estimate(at_final_step(val).query("condition == @label")["value"])
        )
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
    parts = [first] + [others[i : i + DISPLAY_COLUMNS] for i in range(0, len(others), DISPLAY_COLUMNS)]
    nowrap = [
        {"selector": "td", "props": "white-space: nowrap; font-size: 0.85em; padding: 0.2em 0.5em"},
        {"selector": "th", "props": "font-size: 0.85em; padding: 0.2em 0.5em; vertical-align: bottom"},
    ]
    return HTML(
        "".join(
            table[["projection", *columns]].style.hide(axis="index").set_table_styles(nowrap).to_html()
            for columns in parts
        )
    )


def settled_sentence(results: Results) -> str:
    """Which projections' continuity was still moving over the last third of training
    (reference variant; :func:`.compute.settled_finding`)."""
    finding = settled_finding(results)
    moving = ", ".join(
        PROSE.render(
            "settled-item",
            projection=short_projection(m.projection),
            vector=vector_name(m.space),
            per_seed=", ".join(f"{c:+.2f}" for c in m.per_seed),
        )
        for m in finding.moving
    )
    memorising = (
        ""
        if finding.memorising_after is None
        else PROSE.render("settled-memorising", step=finding.memorising_after, rise=VALIDATION_RISE)
    )
    return PROSE.choose(
        "settled",
        finding.case,
        reference=finding.reference,
        tolerance=finding.tolerance,
        start=finding.start,
        end=finding.end,
        budget=finding.budget,
        moving=moving,
        memorising=memorising,
    )


def holds_statement(results: Results, claims: pd.DataFrame) -> Markdown:
    """Which claims hold throughout, only early, only late, or at neither horizon (from their early and
    final verdicts; :func:`.compute.holds_finding`), whether the values settled, and what was lost."""
    finding = holds_finding(results, claims)
    groups = "\n".join(
        PROSE.render("holds-group", when=when, count=len(keys), keys=code_list(keys)) for when, keys in finding.groups
    )
    closing = " ".join(part for part in (settled_sentence(results), lost_sentence(results, claims)) if part)
    return Markdown(
        PROSE.render("holds", early_step=finding.early_step, end=finding.end, groups=groups, closing=closing)
    )


def lost_sentence(results: Results, claims: pd.DataFrame) -> str:
    """The predicted continuities that do not hold at the end of training (lost, or never reached),
    with their early and final values beside the pretrained checkpoint's; empty where all hold
    (:func:`.compute.lost_finding`)."""
    finding = lost_finding(results, claims)
    lost = "; ".join(
        PROSE.choose(
            "lost-item",
            item.case,
            projection=short_projection(item.projection),
            vector=vector_name(item.space),
            early=item.early,
            early_step=finding.early_step,
            early_verdict=item.early_verdict,
            final=item.final,
            verdict=item.verdict,
            pretrained_name=finding.pretrained,
            pretrained=item.pretrained,
        )
        for item in finding.lost
    )
    length = next(e for e in explanation_verdicts(claims) if e.key == "not-settled")
    return PROSE.choose(
        "lost",
        finding.case,
        reference=finding.reference,
        lost=lost,
        length=PROSE.choose("lost-length", length.case, verdicts=verdicts_text(length.verdicts)),
    )

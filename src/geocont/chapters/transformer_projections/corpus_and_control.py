"""What the transformer reads and whether it memorises it: each offline corpus's sources and the epochs every run
makes of it, and the memorisation control (the reference variant on a corpus it sees many times) drawn beside the
chapter's runs."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython.display import HTML, Markdown

from ... import plotting
from ...book.figures import show_figure
from ...corpus_census import TOTAL, epochs, train_tokens
from ...metrics import random_abs_cos
from ...statistics import SETTLED_TOLERANCE, VALIDATION_RISE
from ..common import short_projection
from .compute import Results, projection_values
from .control_run import CONTROLLED, control_readings
from .page_text import PROSE, mark_early, symlog_steps

#: The census table's style: small type, so that its eight columns fit the page.
_SMALL = [
    {"selector": "td", "props": "font-size: 0.85em; padding: 0.2em 0.5em"},
    {"selector": "th", "props": "font-size: 0.85em; padding: 0.2em 0.5em; vertical-align: bottom"},
]


def census_rows(census: pd.DataFrame) -> pd.DataFrame:
    """A census as the page shows it: one row per source, its share of the training tokens, and the total."""
    sources = census[census["source"] != TOTAL]
    share = sources["train_tokens"] / sources["train_tokens"].sum()
    shown = census.assign(
        documents=[f"{d:,} ({v:,} held out)" for d, v in zip(census["documents"], census["validation_documents"])],
        words=census["words"].map("{:,}".format),
        train_tokens=census["train_tokens"].map("{:,}".format),
        validation_tokens=census["validation_tokens"].map("{:,}".format),
        share=[f"{s:.1%}" for s in share] + [""],
    )
    columns = {
        "source": "source",
        "package": "Debian package",
        "licence": "licence",
        "documents": "documents",
        "words": "words",
        "train_tokens": "training tokens",
        "share": "share",
        "validation_tokens": "validation tokens",
    }
    return shown[list(columns)].rename(columns=columns)


def epochs_items(results: Results, corpus: str) -> str:
    """``label: E epochs`` for every run label that reads ``corpus`` (its runs share steps and batch)."""
    census = results.census[corpus]
    items = []
    for label, configs in results.settings.all_configs().items():
        config = configs[0]
        if config.corpus == corpus:
            seen = config.steps * config.batch_size * config.shape.max_seq_len
            items.append(PROSE.render("epochs-item", label=label, tokens=seen, epochs=epochs(census, seen)))
    return "; ".join(items)


def corpus_display(results: Results) -> list[Markdown | HTML]:
    """Each offline corpus the runs read: a sentence with its training tokens and the epochs each run label makes
    of them, then its sources (package, licence, documents, words, tokens and share); one sentence where no corpus
    has a census. The notebook displays the parts in order."""
    if not results.census:
        return [Markdown(PROSE.render("census-none", corpus=results.settings.base.corpus))]
    parts: list[Markdown | HTML] = []
    for corpus, census in results.census.items():
        sentence = PROSE.render(
            "census",
            corpus=corpus,
            vocab_size=results.settings.base.shape.vocab_size,
            tokens=train_tokens(census),
            epochs=epochs_items(results, corpus),
        )
        table = census_rows(census).style.hide(axis="index").set_table_styles(_SMALL)
        parts += [Markdown(sentence), HTML(table.to_html())]
    return parts


def control_figure(results: Results) -> None:
    """The reference variant on the chapter's corpus and on the control corpus: validation loss, and O's and Down's
    output-space continuity over training (band: ±1 sd over seeds); nothing where no control was run."""
    if not control_readings(results):
        return
    settings = results.settings
    mine = results.table[results.table["condition"] == results.reference]
    both = pd.concat([mine, results.control], ignore_index=True)
    labels = [results.reference, settings.control_label]
    colours = plotting.palette(labels)
    values = projection_values(both)
    fig, axes = plt.subplots(1, 1 + len(CONTROLLED), figsize=(15, 4.2))
    _line(both[both["metric"] == "val_loss"], axes[0], labels, colours)
    axes[0].set(ylabel="validation loss (nats/token)", title="validation loss")
    for ax, (projection, space) in zip(axes[1:], CONTROLLED):
        frame = values[(values["group"] == projection) & (values["space"] == space)]
        _line(frame, ax, labels, colours)
        ax.axhline(random_abs_cos(results.dims[projection][space]), color="grey", linestyle="--", linewidth=1)
        ax.set(ylabel="|cos| of adjacent layers' u1", title=f"{short_projection(projection).capitalize()} u1")
    for ax in axes:
        symlog_steps(ax)
        mark_early(ax, settings.early_step)
        ax.set_xlabel("training step (symlog; dotted: the early horizon)")
    plotting.figure_legend(fig, axes[0])
    show_figure(
        fig,
        "lm-control",
        PROSE.render(
            "control-caption", reference=results.reference, corpus=settings.base.corpus, control=settings.control_corpus
        ),
    )


def _line(frame: pd.DataFrame, ax, labels: list[str], colours) -> None:
    sns.lineplot(
        data=frame,
        x="step",
        y="value",
        hue="condition",
        hue_order=labels,
        palette=colours,
        errorbar="sd",
        marker="o",
        markersize=3.5,
        ax=ax,
        legend=ax is ax.figure.axes[0],
    )


def control_statement(results: Results) -> Markdown:
    """What the memorisation control says of O's and Down's rise, projection by projection (the rule of
    :mod:`.control_run`), or that no control was run."""
    readings = control_readings(results)
    if not readings:
        return Markdown(PROSE.render("control-not-run"))
    settings = results.settings

    def seeds(values: tuple[float, ...]) -> str:
        return ", ".join(f"{v:+.2f}" for v in values)

    items = [
        PROSE.choose(
            "control-reading",
            reading.case,
            projection=short_projection(reading.projection).capitalize(),
            corpus=reading.main.corpus,
            control=reading.control.corpus,
            main_rises=seeds(reading.main.rises),
            main_movement=reading.main.movement,
            main_loss=seeds(reading.main.loss_rises),
            main_memorised=reading.main.memorised,
            control_rises=seeds(reading.control.rises),
            control_movement=reading.control.movement,
            control_loss=seeds(reading.control.loss_rises),
            control_memorised=reading.control.memorised,
            counted=PROSE.choose("control-counted", "yes" if reading.counted else "no"),
        )
        for reading in readings
    ]
    return Markdown(
        PROSE.render(
            "control-statement",
            early_step=settings.early_step,
            end=settings.base.steps,
            tolerance=SETTLED_TOLERANCE,
            rise=VALIDATION_RISE,
            items="\n".join(items),
        )
    )

"""The book's first page: a reproducibility summary in the form of the ML Reproducibility Challenge's (scope,
methodology, results, what was easy, what was difficult), computed at build time from the claims tables the
chapters published, with one headline figure (the verdicts per chapter). Its words are templates in
``geocont/book/prose.md`` (``summary.*``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..tables import VERDICTS
from .claims import _cell, _ours_cell, chapter_titles, primary_rows, short_title
from .findings import MAIN_CLAIMS
from .prose import Prose

_PROSE = Prose.of(__package__)
#: The page's marker (:func:`geocont.book.build.fill_generated`).
MARKER = "<!-- generated: geocont.book.summary.reproducibility_summary() -->"
#: The headline figure, beside the pages that show it.
FIGURE = Path("_generated") / "verdicts-per-chapter.png"
#: The verdicts that count as a claim held, in part, or not.
HELD, PARTLY, NOT_HELD = ("reproduced",), ("partly reproduced",), ("not reproduced",)


def published_claims(claims_dir: Path, chapters: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """Every chapter's published claims table in ``claims_dir`` (``<chapter>.json``), and the chapters that have
    none there."""
    from .claims import read

    frames, missing = [], []
    for chapter in chapters:
        path = claims_dir / f"{chapter}.json"
        if path.exists():
            payload = read(path)
            frames.append(payload["claims"].assign(scale=payload["scale"]))
        else:
            missing.append(chapter)
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), missing


def reproducibility_summary(
    claims_dir: Path, pages: Path, chapters: list[str], titles: dict[str, str] | None = None
) -> str:
    """The summary's Markdown; the headline figure is written to ``pages / FIGURE``."""
    claims, missing = published_claims(claims_dir, chapters)
    if claims.empty:
        return _PROSE.render("summary-no-claims")
    titles = titles if titles is not None else chapter_titles()
    rows = primary_rows(claims)
    draw_verdicts(rows, pages / FIGURE, titles)
    parts = [
        _PROSE.render("summary-scope"),
        _PROSE.render(
            "summary-methodology",
            chapters=rows["chapter"].nunique(),
            claims=len(rows),
            scales=", ".join(f"`{s}`" for s in dict.fromkeys(claims["scale"])),
        ),
        results_markdown(rows, titles),
        easy_and_difficult(rows),
    ]
    if missing:
        parts.append(_PROSE.render("summary-missing", chapters=", ".join(f"`{c}`" for c in missing)))
    return "\n\n".join(parts)


def verdict_counts(rows: pd.DataFrame) -> dict[str, int]:
    """Claims per verdict, in the book's order of verdicts (only those that occur)."""
    counts = rows["verdict"].value_counts()
    return {verdict: int(counts[verdict]) for verdict in VERDICTS if counts.get(verdict, 0)}


def results_markdown(rows: pd.DataFrame, titles: dict[str, str]) -> str:
    """The counts over every claim, the headline figure, and the paper's main claims with our numbers."""
    counts = verdict_counts(rows)
    counted = ", ".join(f"**{n}** {verdict}" for verdict, n in counts.items())
    main = main_claim_rows(rows)
    table = ["| claim | paper | ours (mean ± sd, n) | verdict |", "|---|---|---|---|"]
    table += [
        f"| {_cell(row.claim)} ({{doc}}`{_cell(short_title(titles.get(row.chapter, row.chapter)))} "
        f"<{row.chapter}>`) | {_cell(row.paper)} | {_ours_cell(row)} | **{row.verdict}** |"
        for row in main.itertuples()
    ]
    return _PROSE.render(
        "summary-results",
        claims=len(rows),
        counted=counted,
        figure=FIGURE.as_posix(),
        main=len(main),
        table="\n".join(table),
    )


def main_claim_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of the paper's main claims (:data:`geocont.book.findings.MAIN_CLAIMS`) that this build published."""
    names = rows["key"].str.split("@").str[0]
    found = [rows[(rows["chapter"] == chapter) & (names == name)] for chapter, name in MAIN_CLAIMS]
    return (
        pd.concat([f.iloc[:1] for f in found if len(f)], ignore_index=True)
        if any(len(f) for f in found)
        else rows.iloc[:0]
    )


def easy_and_difficult(rows: pd.DataFrame) -> str:
    """What was easy (the main claims that held) and what was difficult (those that did not, or did not settle)."""
    main = main_claim_rows(rows)
    held = main[main["verdict"].isin(HELD)]
    short = main[~main["verdict"].isin(HELD)]
    return _PROSE.render(
        "summary-easy-difficult",
        held="; ".join(_cell(claim) for claim in held["claim"]) or _PROSE.render("summary-none"),
        short="; ".join(
            f"{_cell(row.claim)} (*{row.verdict}*: ours {_ours_cell(row)}, paper {_cell(row.paper)})"
            for row in short.itertuples()
        )
        or _PROSE.render("summary-none"),
    )


#: A colour per verdict, from held to not held and untested.
VERDICT_COLOURS = {
    "reproduced": "#1b9e77",
    "partly reproduced": "#a6d96a",
    "inconclusive": "#969696",
    "not settled": "#fdae61",
    "not reproduced": "#d7301f",
    "not tested": "#d9d9d9",
}


def draw_verdicts(rows: pd.DataFrame, path: Path, titles: dict[str, str]) -> None:
    """The headline figure: per chapter, its claims stacked by verdict."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = rows.groupby(["chapter", "verdict"], sort=False).size().unstack(fill_value=0)
    counts = counts[[v for v in VERDICTS if v in counts.columns]].iloc[::-1]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(counts) + 1.2))
    left = pd.Series(0, index=counts.index)
    for verdict in counts.columns:
        ax.barh(
            [short_title(titles.get(c, c)) for c in counts.index],
            counts[verdict],
            left=left,
            color=VERDICT_COLOURS.get(verdict, "#999999"),
            edgecolor="white",
            label=verdict,
        )
        left = left + counts[verdict]
    ax.set_xlabel("claims (each chapter's verdicts of record)")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False, fontsize="small")
    ax.spines[["top", "right"]].set_visible(False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)

"""Publish each chapter's claims table; collect them all for the book's closing chapter.

A chapter ends with ``publish(claims, chapter="<name>", scale=scale, overrides=overrides)``, which writes
``<claims directory>/<chapter>.json`` (the rows in :data:`geocont.tables.CLAIM_COLUMNS` format, with the scale
and parameter overrides that produced them). The closing chapter calls :func:`collect`, which reads every
chapter's table in table-of-contents order and raises :class:`MissingClaims` where one is missing.
docs/design.md ("Claims tables") says which row is a claim's verdict of record and where the tables live.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..tables import CLAIM_COLUMNS, VERDICTS, split_claim_key
from .notebook import notebook_parameters, one_line_parameter_errors
from .paths import CLAIMS_ENV, chapters, repository_root
from .prose import Prose, listing

#: The closing chapter's words (``src/geocont/book/prose.md``).
_PROSE = Prose.of(__package__)
#: The closing chapter: it reads the others' tables and publishes none itself.
CLOSING_CHAPTER = "claims"


def claims_dir(scale: str) -> Path:
    """Where chapters publish (and the closing chapter reads) claims tables at ``scale``."""
    if os.environ.get(CLAIMS_ENV):
        return Path(os.environ[CLAIMS_ENV])
    return repository_root() / "_build" / "claims" / scale


def claim_chapters(root: Path | None = None) -> list[str]:
    """Chapters (notebook stems, in table-of-contents order) that must publish claims."""
    root = root or repository_root()
    return [path.stem for path in chapters(root) if path.stem != CLOSING_CHAPTER]


def _check(claims: pd.DataFrame, chapter: str) -> None:
    if list(claims.columns) != CLAIM_COLUMNS:
        raise ValueError(f"claims table columns must be {CLAIM_COLUMNS} (tables.claim_row), got {list(claims.columns)}")
    if claims.empty:
        raise ValueError(f"chapter {chapter!r} published an empty claims table")
    others = sorted(set(claims["chapter"]) - {chapter})
    if others:
        raise ValueError(f"claims of chapter {chapter!r} carry other chapter names: {others}")
    bad = sorted(set(claims["verdict"]) - set(VERDICTS)) + sorted(set(claims["early_verdict"]) - {*VERDICTS, ""})
    if bad:
        raise ValueError(f"unknown verdict(s) {bad}; valid choices: {', '.join(VERDICTS)}")
    wrong = [key for key, dataset in zip(claims["key"], claims["dataset"]) if split_claim_key(key)[1] != dataset]
    if wrong:
        raise ValueError(f"claim key(s) {wrong} do not name their row's dataset (tables.claim_key)")
    twice = sorted(claims.loc[claims["key"].duplicated(), "key"])
    primary_names = claims.loc[claims["primary"].astype(bool), "key"].map(lambda k: split_claim_key(k)[0])
    twice += sorted(primary_names[primary_names.duplicated()])
    if twice:
        raise ValueError(f"chapter {chapter!r} has claim(s) {twice} twice (a key, or a primary row per claim)")


def _json_value(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return _json_value(value.item())
    return value


def publish(claims: pd.DataFrame, *, chapter: str, scale: str, overrides: dict | None = None) -> Path:
    """Write a chapter's claims table (atomically) for the closing chapter; returns the file."""
    _check(claims, chapter)
    directory = claims_dir(scale)
    directory.mkdir(parents=True, exist_ok=True)
    records = [{k: _json_value(v) for k, v in row.items()} for row in claims.to_dict(orient="records")]
    payload = {
        "chapter": chapter,
        "scale": scale,
        "overrides": {k: _json_value(v) for k, v in (overrides or {}).items()},
        "claims": records,
    }
    target = directory / f"{chapter}.json"
    partial = target.with_suffix(".json.partial")
    partial.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    partial.replace(target)
    return target


class MissingClaims(RuntimeError):
    """One or more chapters have not published their claims table."""


def read(path: Path) -> dict:
    """One published file; a corrupt one is reported, never half-read."""
    try:
        payload = json.loads(path.read_text())
        frame = pd.DataFrame(payload["claims"], columns=CLAIM_COLUMNS).astype(
            {"ours_mean": float, "ours_std": float, "baseline": float}
        )
        frame = frame.astype({"early_mean": float, "early_sd": float, "early_n": int, "early_step": "Int64"})
        frame["early_verdict"] = frame["early_verdict"].fillna("")
        frame["headline"] = frame["headline"].fillna(False).astype(bool)
        # a table from before the dataset and primary columns: its datasets are unknown, every row primary
        frame["dataset"] = [("" if _missing(d) else str(d)) for d in frame["dataset"]]
        frame["primary"] = [(True if _missing(p) else bool(p)) for p in frame["primary"]]
        frame["n_unit"] = [("seeds" if _missing(u) else str(u)) for u in frame["n_unit"]]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise MissingClaims(f"cannot read the claims table {path}: {error}; re-run its chapter") from error
    _check(frame, payload["chapter"])
    payload["claims"] = frame
    return payload


def collect(scale: str, chapters: list[str] | None = None) -> pd.DataFrame:
    """Every chapter's claims in table-of-contents order, with ``scale`` and ``overrides`` columns.

    Raises :class:`MissingClaims` naming each chapter without a published table and the command
    that produces it, rather than returning a partial table.
    """
    chapters = claim_chapters() if chapters is None else chapters
    directory = claims_dir(scale)
    missing = [c for c in chapters if not (directory / f"{c}.json").exists()]
    if missing:
        commands = "\n".join(f"  python -m geocont.book run book/{c}.ipynb -p scale {scale}" for c in missing)
        raise MissingClaims(
            f"no published claims table in {directory} for chapter(s): {', '.join(missing)}.\n"
            f"Each chapter publishes its table when executed (geocont.book.claims.publish); run:\n{commands}\n"
            f"or build the whole book: python -m geocont.book build --scale {scale}"
        )
    frames = []
    for chapter in chapters:
        payload = read(directory / f"{chapter}.json")
        frame = payload["claims"]
        frame["scale"] = payload["scale"]
        frame["overrides"] = ", ".join(f"{k}={v}" for k, v in payload["overrides"].items())
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def estimate_text(mean: float, sd: float, n: int) -> str:
    """``0.42 ± 0.03, n = 3`` (``n/a`` for an undefined mean, no ± where the spread is undefined)."""
    text = "n/a" if _missing(mean) else f"{mean:.2f}"
    if not _missing(sd):
        text += f" ± {sd:.2f}"
    return f"{text}, n = {n}"


def early_text(row) -> str:
    """A claims row's early value for display, ``at 930 steps: 0.78 ± 0.02, n = 3 (reproduced)``;
    empty where the claim has none."""
    if _missing(row.early_step) or not row.early_verdict:
        return ""
    return f"at {int(row.early_step):,} steps: {estimate_text(row.early_mean, row.early_sd, row.early_n)} ({row.early_verdict})"


def _cell(text) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _number(value: float, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def chapter_titles(root: Path | None = None) -> dict[str, str]:
    """Each chapter's title (its first ``# `` heading), by notebook stem."""
    import nbformat

    root = root or repository_root()
    titles = {}
    for path in (root / "book").glob("*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            heading = next((line[2:].strip() for line in cell.source.splitlines() if line.startswith("# ")), None)
            if cell.cell_type == "markdown" and heading:
                titles[path.stem] = heading
                break
    return titles


def _ours_cell(row) -> str:
    """``0.90 ± 0.02 (n = 3)``: a claims row's estimate in a table cell."""
    ours = _number(row.ours_mean)
    if not _missing(row.ours_std):
        ours += f" ± {row.ours_std:.2f}"
    unit = getattr(row, "n_unit", "seeds")
    unit = "seeds" if _missing(unit) else unit
    return ours + f" (n = {row.n_seeds} {unit})"


def primary_rows(claims: pd.DataFrame) -> pd.DataFrame:
    """The claims' verdicts of record: one row per claim, on its chapter's headline dataset (``primary``)."""
    return claims[claims["primary"].astype(bool)]


def headline_dataset(rows: pd.DataFrame) -> str:
    """The dataset one chapter's primary rows were judged on ("" where it names none)."""
    datasets = list(dict.fromkeys(primary_rows(rows)["dataset"]))
    return datasets[0] if len(datasets) == 1 else ""


def markdown_table(claims: pd.DataFrame, titles: dict[str, str] | None = None) -> str:
    """The claim-by-claim table as MyST Markdown: one block per chapter, headed by a link to it; one row
    per claim with its verdict of record (on the chapter's headline dataset), and the claim's verdict
    and estimate on each other dataset the chapter judged it on in a column of that dataset's."""
    titles = titles if titles is not None else chapter_titles()
    blocks = []
    for chapter, rows in claims.groupby("chapter", sort=False):
        first = rows.iloc[0]
        produced = f"`{first['scale']}` scale" + (f", overrides {first['overrides']}" if first.get("overrides") else "")
        if headline_dataset(rows):
            produced += "; " + _PROSE.render("table-dataset", dataset=headline_dataset(rows))
        names = rows["key"].map(lambda k: split_claim_key(k)[0])
        # a row on the headline dataset that is not primary is shown but not counted (another chapter owns it)
        primary = rows["primary"].astype(bool) | (rows["dataset"] == headline_dataset(rows))
        others = list(dict.fromkeys(rows.loc[~primary, "dataset"]))
        by_name = {name: rows[(names == name) & primary] for name in dict.fromkeys(names)}
        early = {name: early_text(row.iloc[0]) if len(row) else "" for name, row in by_name.items()}
        with_early = any(early.values())
        lines = [
            f"**{{doc}}`{_cell(titles.get(chapter, chapter))} <{chapter}>`** ({produced})",
            "",
            "| claim | quantity | paper | ours (mean ± sd, n) | random baseline | verdict |"
            + (" earlier in training |" if with_early else "")
            + "".join(" " + _cell(_PROSE.render("dataset-column", dataset=d)) + " |" for d in others),
            "|---|---|---|---|---|---|" + ("---|" if with_early else "") + "---|" * len(others),
        ]
        for name, mine in by_name.items():
            elsewhere = rows[(names == name) & ~primary]
            if len(mine):
                row = mine.iloc[0]
                cells = [
                    row.claim,
                    row.quantity,
                    row.paper,
                    _ours_cell(row),
                    _number(row.baseline),
                    f"**{row.verdict}**" if row.primary else _PROSE.render("not-counted", verdict=row.verdict),
                ]
            else:  # judged on other datasets only: no verdict of record
                row = elsewhere.iloc[0]
                cells = [row.claim, row.quantity, row.paper, "–", _number(row.baseline), "–"]
            cells += [early[name]] if with_early else []
            for dataset in others:
                there = elsewhere[elsewhere["dataset"] == dataset]
                cells.append(f"**{there.iloc[0].verdict}**: {_ours_cell(there.iloc[0])}" if len(there) else "–")
            lines.append("| " + " | ".join(_cell(x) for x in cells) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def verdict_counts(claims: pd.DataFrame) -> pd.DataFrame:
    """Number of claims per chapter and verdict (columns in :data:`VERDICTS` order): each claim counted
    once, by its verdict of record (:func:`primary_rows`)."""
    claims = primary_rows(claims)
    counts = claims.groupby(["chapter", "verdict"], sort=False).size().unstack(fill_value=0)
    counts = counts.reindex(columns=[v for v in VERDICTS if v in counts.columns])
    return counts.reindex(list(dict.fromkeys(claims["chapter"])))


def short_title(title: str) -> str:
    """A chapter title up to its colon, for summaries ("Conditions 1 and 2: residual ..." -> "Conditions 1 and 2")."""
    return title.split(": ", 1)[0]


def _link(chapter: str, titles: dict[str, str]) -> str:
    return f"{{doc}}`{_cell(short_title(titles.get(chapter, chapter)))} <{chapter}>`"


def counts_markdown(claims: pd.DataFrame, titles: dict[str, str] | None = None) -> str:
    """The verdict counts as a small MyST table: one row per chapter (linked), and the book's total;
    each row lists only the verdicts that occur, so that it reads at a glance, even on a phone."""
    titles = titles if titles is not None else chapter_titles()
    counts = verdict_counts(claims)

    def verdicts(row: pd.Series) -> str:
        return ", ".join(f"**{row[v]}** {v}" for v in counts.columns if row[v])

    lines = ["| chapter | claims | verdicts |", "|---|---:|---|"]
    lines += [f"| {_link(chapter, titles)} | {row.sum()} | {verdicts(row)} |" for chapter, row in counts.iterrows()]
    total = counts.sum()
    lines.append(f"| **all chapters** | **{total.sum()}** | {verdicts(total)} |")
    return "\n".join(lines)


def headline_claims(claims: pd.DataFrame) -> pd.DataFrame:
    """The book's headline claims: the rows a chapter marked ``headline`` (``ClaimsBuilder.add(headline=True)``),
    each claim's verdict of record only (``primary``: on the chapter's headline dataset)."""
    return claims[claims["headline"].astype(bool) & claims["primary"].astype(bool)]


def _counted(counts: pd.Series) -> str:
    return listing(f"{counts[v]} {v}" for v in VERDICTS if counts.get(v, 0))


def _ours_against_paper(row) -> str:
    return f"{row.quantity} ({row.verdict}: ours {_number(row.ours_mean)}, paper {row.paper})"


def headline_summary(claims: pd.DataFrame, titles: dict[str, str] | None = None) -> str:
    """The headline claims in two sentences: their verdict counts, then the ones short of reproduced."""
    titles = titles if titles is not None else chapter_titles()
    rows = headline_claims(claims)
    if rows.empty:
        return _PROSE.render("headline-none")
    first = _PROSE.render(
        "headline-counts",
        n=len(rows),
        chapters=listing(_link(c, titles) for c in dict.fromkeys(rows["chapter"])),
        counts=_counted(rows["verdict"].value_counts()),
    )
    short = rows[rows["verdict"] != "reproduced"]
    if short.empty:
        return first + " " + _PROSE.render("headline-all-reproduced")
    order = {verdict: rank for rank, verdict in enumerate(VERDICTS)}
    short = short.sort_values("verdict", key=lambda v: v.map(order), kind="stable")
    return (
        first
        + " "
        + _PROSE.render("headline-short", short="; ".join(_ours_against_paper(r) for r in short.itertuples()))
    )


# ---------------------------------------------------------------------------------------------
# The closing chapter (book/claims.ipynb): one call per result, as in every chapter
# ---------------------------------------------------------------------------------------------

#: The closing chapter's parameters, in the order of its ``parameters`` cell.
PARAMETERS = {"scale": "smoke | cpu | paper: the scale whose published claims are collected"}


@dataclass(frozen=True)
class ClaimsPage:
    """What the closing chapter shows: every chapter's published claims at ``scale``, and the chapters' titles."""

    scale: str
    table: pd.DataFrame
    titles: dict[str, str]

    @property
    def other_scales(self) -> list[str]:
        """The scales, besides the page's own, at which some chapter's published table was produced."""
        return sorted(set(self.table.groupby("chapter", sort=False)["scale"].first()) - {self.scale})


def from_notebook(namespace) -> ClaimsPage:
    """The closing chapter's one configure call: its parameters checked by name, the tables collected
    (:func:`collect`, which names any chapter whose table is missing)."""
    from ..scales import check_scale, parameter_errors

    one_line_parameter_errors()
    with parameter_errors():
        scale = notebook_parameters(namespace, PARAMETERS)["scale"]
        check_scale(scale)
    return ClaimsPage(scale, collect(scale), chapter_titles())


def at_a_glance(page: ClaimsPage):
    """The summary: a warning where chapters ran at other scales, the headline claims, the verdict counts."""
    from IPython.display import Markdown

    parts = (
        [_PROSE.render("mixed-scales", scale=page.scale, others=", ".join(page.other_scales))]
        if page.other_scales
        else []
    )
    parts += [headline_summary(page.table, page.titles), counts_markdown(page.table, page.titles)]
    return Markdown("\n\n".join(parts))


def tables(page: ClaimsPage):
    """Every claim, one block per chapter, under a sentence that says how many."""
    from IPython.display import Markdown

    chapters = page.table["chapter"].nunique()
    intro = _PROSE.render("tables-intro", claims=len(primary_rows(page.table)), chapters=chapters)
    others = page.table[~page.table["primary"].astype(bool)]
    if len(others):
        intro += " " + _PROSE.render(
            "tables-other-datasets",
            rows=len(others),
            datasets=listing(f"`{d}`" for d in dict.fromkeys(others["dataset"])),
        )
    return Markdown(intro + "\n\n" + markdown_table(page.table, page.titles))


def details(page: ClaimsPage):
    """Both sides of each comparison (the claims' notes), in a dropdown."""
    from IPython.display import Markdown

    lines = [
        _PROSE.render(
            "details-item",
            claim=r.claim,
            quantity=r.quantity,
            note=r.note,
            dataset="" if r.primary else f", `{r.dataset}`",
        )
        for r in page.table.itertuples()
        if r.note
    ]
    return Markdown("````{dropdown} " + _PROSE.render("details-title") + "\n" + "\n".join(lines) + "\n````")


def rerun(page: ClaimsPage):
    """The box with the command that re-runs this page."""
    from IPython.display import Markdown

    from .provenance import rerun_box

    return Markdown(rerun_box(f"book/{CLOSING_CHAPTER}.ipynb", page.scale))

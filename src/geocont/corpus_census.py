"""How many tokens each source of an offline corpus gives a run's tokenizer, and how many epochs a run makes.

A census is an analysis like any other (kind ``census``, keyed by corpus and vocabulary size): computed once,
cached, and stored beside the runs it describes. Its table has one row per source: the Debian package and its
licence, the documents kept (and how many are held out for validation), the words, and the tokens of each split
under the corpus's tokenizer (:func:`geocont.text.train_tokenizer`), each document encoded on its own. The
``total`` row holds each split's tokens as a run reads them (:func:`geocont.lm.token_splits`, the split encoded
whole): its documents' tokens plus two newline tokens between each two.
"""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd

from . import corpora, sweeps
from .corpora import OFFLINE_ENGLISH, Document, is_validation, offline_english_documents, source_documents
from .kjv import VALIDATION_EVERY

#: The corpora whose documents, and so whose sources' shares, are known here.
CENSUS_CORPORA = (OFFLINE_ENGLISH, "kjv")
#: The store's and the cache's kind of a census.
CENSUS_KIND = "census"
#: The columns of a census table.
COLUMNS = (
    "source",
    "package",
    "licence",
    "documents",
    "validation_documents",
    "words",
    "train_tokens",
    "validation_tokens",
)
#: The row of a census table that holds each split's tokens as a run reads them.
TOTAL = "total"


def _check_census_corpus(corpus: str) -> None:
    if corpus not in CENSUS_CORPORA:
        raise ValueError(f"no census of corpus {corpus!r}: its sources are known for {', '.join(CENSUS_CORPORA)}")


def documents_with_split(corpus: str) -> Iterator[tuple[Document, bool]]:
    """Each document of ``corpus`` and whether it is held out for validation, in the corpus's order."""
    if corpus == OFFLINE_ENGLISH:
        for document in offline_english_documents():
            yield document, is_validation(document.id)
    elif corpus == "kjv":
        bible = next(source for source in corpora.SOURCES if source.format == "bible")
        for index, document in enumerate(source_documents(bible)):
            yield document, index % VALIDATION_EVERY == VALIDATION_EVERY - 1
    else:
        _check_census_corpus(corpus)


def census_table(corpus: str, vocab_size: int) -> pd.DataFrame:
    """The census of ``corpus`` under its tokenizer of ``vocab_size`` tokens (see the module docstring)."""
    from .text import encode, load_corpus, train_tokenizer

    text = load_corpus(corpus)
    tokenizer = train_tokenizer(text, vocab_size)
    sources = {source.name: source for source in corpora.SOURCES}
    rows: dict[str, dict] = {}
    for document, held_out in documents_with_split(corpus):
        source = sources[document.source]
        row = rows.setdefault(
            source.name,
            dict.fromkeys(COLUMNS[3:], 0)
            | {"source": source.name, "package": source.package, "licence": source.licence},
        )
        row["documents"] += 1
        row["validation_documents"] += held_out
        row["words"] += len(document.text.split())
        row["validation_tokens" if held_out else "train_tokens"] += len(encode(tokenizer, document.text))
    total = {column: sum(row[column] for row in rows.values()) for column in COLUMNS[3:6]}
    total |= {"source": TOTAL, "package": "", "licence": ""}
    total |= {
        "train_tokens": len(encode(tokenizer, text.train)),
        "validation_tokens": len(encode(tokenizer, text.validation)),
    }
    return pd.DataFrame([*rows.values(), total], columns=list(COLUMNS))


def compute_census(argument: tuple[str, int]) -> pd.DataFrame:
    """The computation of :func:`census_job`."""
    corpus, vocab_size = argument
    return census_table(corpus, vocab_size)


def census_job(corpus: str, vocab_size: int) -> sweeps.Job:
    """The cached analysis of ``corpus``'s census at ``vocab_size`` tokens."""
    _check_census_corpus(corpus)
    return sweeps.Job(
        CENSUS_KIND,
        {"corpus": corpus, "vocab_size": vocab_size},
        compute_census,
        (corpus, vocab_size),
        label=f"census of {corpus} at {vocab_size} tokens",
    )


def train_tokens(census: pd.DataFrame) -> int:
    """The training tokens a run reads (the census's ``total`` row)."""
    return int(census.loc[census["source"] == TOTAL, "train_tokens"].iloc[0])


def epochs(census: pd.DataFrame, tokens_seen: int) -> float:
    """How many times a run that read ``tokens_seen`` training tokens saw each, on average."""
    return tokens_seen / train_tokens(census)

"""The offline corpus ``offline-english``: reST and POD rendered as prose, deduplication, the split by document, the
Austen novels' R data, and what a machine without the Debian packages is told. Every source is a small fixture in a
temporary folder (the ``bible`` program a script on ``PATH``)."""

import os
import stat
import struct
import textwrap
import zlib
from dataclasses import replace

import numpy as np
import pytest

from geocont import corpora, pod_text, preflight, rst_text, text
from geocont.corpora import Document, Source

REST = textwrap.dedent("""\
    .. SPDX-License-Identifier: GPL-2.0

    .. _os-intro:

    :mod:`os` --- Operating system interfaces
    =========================================

    .. module:: os
       :synopsis: Miscellaneous operating system interfaces.

    .. index:: single: environment

    This module wraps :func:`open` and :meth:`~os.PathLike.__fspath__`; see
    :pep:`519` and the `Python site <https://www.python.org>`_.  It
    is *really* **portable** [#]_, even |version|.

    * first item with ``code`` and
      a wrapped line
    * second item

    .. note::
       Functions raise :exc:`OSError`.

    .. versionchanged:: 3.6
       Accepts a :term:`path-like object <path-like object>`.

    .. function:: getenv(key, default=None)
       :noindex:

       Return the value of the environment variable *key*.

    For example::

       >>> os.getenv("HOME")
       '/root'

    .. code-block:: c

       int main(void);

    +-----+-----+
    | a   | b   |
    +-----+-----+

    =====  =====
    col    col2
    =====  =====
    x      y
    =====  =====

    term
       Its definition, wrapped
       over two lines.

    >>> 1 + 1
    2

    .. [#] A footnote.
    .. |version| replace:: 3.11
    """)
REST_PROSE = (
    "os --- Operating system interfaces\n\n"
    "This module wraps open() and __fspath__(); see PEP 519 and the Python site. It is really portable, "
    "even .\n\n"
    "- first item with code and a wrapped line\n- second item\n\n"
    "Functions raise OSError.\n\n"
    "Changed in version 3.6: Accepts a path-like object.\n\n"
    "getenv(key, default=None)\n\n"
    "Return the value of the environment variable key.\n\n"
    "For example:\n\n"
    "term\nIts definition, wrapped over two lines."
)

POD = textwrap.dedent("""\
    =head1 NAME
    X<syntax>

    perlsyn - Perl syntax

    =head2 Declarations

    A scalar holds C<undef> until it is assigned; see L<the manual|perlfunc>,
    L<perlop/"Terms"> and B<< C<< $a->b >> >> E<gt> 1.

        my $x = 1;   # code: dropped

    =over 4

    =item *

    A bullet whose text is the next paragraph.

    =item * An inline bullet

    =back

    =for comment dropped

    =begin html

    <p>dropped</p>

    =end html

    =cut

    sub dropped { 1 }
    """)
POD_PROSE = (
    "NAME\n\nperlsyn - Perl syntax\n\nDeclarations\n\n"
    "A scalar holds undef until it is assigned; see the manual, Terms in perlop and $a->b > 1.\n\n"
    "- A bullet whose text is the next paragraph.\n\n- An inline bullet"
)

SENTENCE = "and the words of this chapter are plain enough for a reader of any age to follow without any trouble"


def test_rest_becomes_the_prose_a_reader_sees_without_code_tables_or_markup():
    assert rst_text.plain_text(REST) == REST_PROSE


def test_rest_literal_marker_forms():
    assert rst_text.plain_text("Expanded::\n\n  code\n\nQuoted ::\n\n  code\n\n::\n\n  code\n\nEnd.") == (
        "Expanded:\n\nQuoted\n\nEnd."
    )


def test_pod_becomes_the_prose_perldoc_shows_without_code():
    assert pod_text.plain_text(POD) == POD_PROSE


def test_deduplication_keeps_first_copies_and_drops_what_is_left_too_short():
    notice = "This file is free software; you may copy, modify and distribute it under the terms of the licence. " * 2
    long_text = f"Intro of the first page, {SENTENCE}.\n\n{notice}"
    documents = [
        Document("a", "a/one", long_text, "x"),
        Document("a", "a/copy", long_text, "x"),  # the same document: dropped
        Document("b", "b/two", f"Intro of the second page, {SENTENCE}.\n\n{notice}\n\nExample:", "x"),
        Document("b", "b/short", "Example:\n\nJust a few words here.", "x"),  # under MIN_WORDS: dropped
    ]
    kept = corpora.deduplicated(documents)
    assert [d.id for d in kept] == ["a/one", "b/two"]
    assert kept[0].text == long_text
    assert kept[1].text == f"Intro of the second page, {SENTENCE}.\n\nExample:"  # the long notice only once


def test_the_split_is_by_document_id_deterministic_and_about_five_percent():
    ids = [f"kernel-docs/page-{i}" for i in range(20_000)]
    held_out = [corpora.is_validation(i) for i in ids]
    assert held_out == [corpora.is_validation(i) for i in reversed(ids)][::-1]  # order and company do not matter
    assert 0.045 < sum(held_out) / len(ids) < 0.055
    # pinned values: the split of a document never changes between runs, machines or releases
    assert [i for i in range(40) if corpora.is_validation(f"kernel-docs/page-{i}")] == [17, 37]
    assert corpora.is_validation("kjv/Genesis 1") is True


def _write_austen(folder, novels: dict) -> None:
    """An R lazy-load database (``Rdata.rdb`` + ``Rdata.rdx``) of character vectors, as R installs package data."""
    import rdata
    from rdata.conversion import convert_python_to_r_data
    from rdata.unparser import unparse_data

    folder.mkdir(parents=True)
    database, variables = b"", {}
    for name, lines in novels.items():
        data = unparse_data(convert_python_to_r_data(np.array(lines)))
        entry = struct.pack(">I", len(data)) + zlib.compress(data)
        variables[name] = np.array([len(database), len(entry)], dtype=np.int32)
        database += entry
    (folder / "Rdata.rdb").write_bytes(database)
    rdata.write_rds(folder / "Rdata.rdx", {"variables": variables, "references": {}, "compressed": np.array([True])})


@pytest.fixture
def sources(tmp_path, monkeypatch):
    """One small installation of every source, and ``corpora.SOURCES`` pointing at it."""
    program = tmp_path / "bin" / "bible"
    program.parent.mkdir()
    program.write_text(
        "#!/bin/sh\nfor i in $(seq 1 1000); do printf 'Genesis %d\\n\\n  1 In chapter %d %s.\\n  2 "
        f"Amen.\\n\\n' $i $i '{SENTENCE}'; done\n"
    )
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{program.parent}:{os.environ['PATH']}")
    rest = tmp_path / "rst"
    for i in range(60):
        page = rest / "library" / f"page{i:02d}.rst.txt"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(
            f"Page {i}\n=======\n\nThe page number {i}, {SENTENCE}.\n\n.. code-block:: python\n\n   x = 1\n"
        )
    (rest / "translations").mkdir()
    (rest / "translations" / "page.rst.txt").write_text(f"Übersetzt, {SENTENCE}.\n")
    (rest / "library" / "gfdl.rst.txt").write_text(
        f".. SPDX-License-Identifier: GFDL-1.1-no-invariants-or-later\n\nA page under another licence, {SENTENCE}.\n"
    )
    pod = tmp_path / "pod"
    pod.mkdir()
    (pod / "perlsyn.pod").write_text(POD.replace("A scalar", f"A scalar, {SENTENCE}, "))
    (pod / "perltoc.pod").write_text(f"=head1 NAME\n\nperltoc - the generated contents, {SENTENCE}\n")
    austen = tmp_path / "austen"
    _write_austen(
        austen,
        {
            "emma": [
                "EMMA",
                "",
                "VOLUME I",
                "",
                "CHAPTER I",
                "",
                f"Emma Woodhouse, {SENTENCE},",
                "was _handsome_.",
                "",
                "CHAPTER II",
                "",
                f"Mr. Weston, {SENTENCE}.",
                "",
                "FINIS",
            ]
        },
    )
    fixture = (
        Source("kjv", "bible-kjv-text", "public domain", "bible", "bible"),
        Source("python-docs", "python3.11-doc", "PSF-2.0", str(rest), "rst", excluded=("translations",)),
        Source("perl-docs", "perl-doc", "Artistic", str(pod), "pod", excluded=("perltoc",)),
        Source("austen", "r-cran-janeaustenr", "public domain", str(austen), "rdata"),
    )
    monkeypatch.setattr(corpora, "SOURCES", fixture)
    monkeypatch.delenv("GEOCONT_CORPUS_DIR", raising=False)
    return fixture


def test_each_source_reads_its_documents(sources):
    kjv, rest, pod, austen = (corpora.source_documents(s) for s in sources)
    assert len(kjv) == 1000 and kjv[0] == Document(
        "kjv", "kjv/Genesis 1", f"In chapter 1 {SENTENCE}.\nAmen.", "public domain"
    )
    assert len(rest) == 61 and not any("translations" in d.id or "Übersetzt" in d.text for d in rest)
    assert rest[0].id == "python-docs/library/gfdl" and rest[0].licence == "GFDL-1.1-no-invariants-or-later"
    assert rest[1].text == f"Page 0\n\nThe page number 0, {SENTENCE}." and rest[1].licence == "PSF-2.0"
    assert [d.id for d in pod] == ["perl-docs/perlsyn"]
    assert austen == [
        Document("austen", "austen/emma/001", f"Emma Woodhouse, {SENTENCE}, was handsome.", "public domain"),
        Document("austen", "austen/emma/002", f"Mr. Weston, {SENTENCE}.", "public domain"),
    ]


def test_offline_english_splits_by_document_and_saves(sources, tmp_path, monkeypatch):
    corpus = text.load_corpus("offline-english")
    documents = corpora.offline_english_documents()
    assert corpus.name == "offline-english" and "python3.11-doc" in corpus.source
    train, validation = corpus.train.split("\n\n"), corpus.validation.split("\n\n")
    held_out = [d for d in documents if corpora.is_validation(d.id)]
    assert 0 < len(held_out) < len(documents) / 5
    for document in documents:  # each document wholly in its own split, never in the other
        paragraphs = document.text.split("\n\n")
        ours, other = (validation, train) if document in held_out else (train, validation)
        assert all(p in ours for p in paragraphs) and not any(p in other for p in paragraphs), document.id
    assert corpora.load_offline_english() == corpus  # deterministic
    summaries = {s.name: s for s in corpora.corpus_sources("offline-english")}
    assert summaries["kjv"].documents == 1000 and summaries["austen"].documents == 2
    assert summaries["python-docs"].licences == (("PSF-2.0", 60), ("GFDL-1.1-no-invariants-or-later", 1))
    assert sum(s.words for s in summaries.values()) == len(corpus.train.split()) + len(corpus.validation.split())
    assert sum(s.validation_documents for s in summaries.values()) == len(held_out)
    saved = text.save_corpus(corpus, tmp_path / "corpora")
    monkeypatch.setenv("GEOCONT_CORPUS_DIR", str(tmp_path / "corpora"))
    monkeypatch.setattr(corpora, "SOURCES", ())  # read from the saved copy, not the sources
    assert text.read_saved_corpus(saved, "offline-english") == corpus == text.load_corpus("offline-english")


def test_a_missing_package_names_the_apt_get_command(sources, tmp_path, monkeypatch):
    monkeypatch.setattr(
        corpora,
        "SOURCES",
        (
            sources[0],
            replace(sources[1], location=str(tmp_path / "none")),
            replace(sources[2], location=str(tmp_path / "gone")),
        ),
    )
    expected = "`apt-get install python3.11-doc perl-doc`"
    with pytest.raises(text.CorpusNotAvailable, match=expected):
        text.load_corpus("offline-english")
    assert expected in preflight.corpus_problem("offline-english")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(text.CorpusNotAvailable, match="`apt-get install bible-kjv bible-kjv-text python3.11-doc"):
        corpora.load_offline_english()


def test_offline_english_is_a_corpus_name():
    text.check_corpus_name("offline-english")
    assert "offline-english" in text.CORPORA
    with pytest.raises(ValueError, match="not assembled from Debian packages"):
        corpora.corpus_sources("wikitext-103")


def test_the_census_shares_each_splits_tokens_out_by_source_and_counts_epochs(sources, tmp_path, monkeypatch):
    from geocont import corpus_census, sweeps
    from geocont.lm import token_splits

    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path / "cache"))
    census = corpus_census.census_table("offline-english", 300).set_index("source")
    documents = corpora.offline_english_documents()
    per_source = census.drop(index=corpus_census.TOTAL)
    assert list(per_source.index) == ["kjv", "python-docs", "perl-docs", "austen"]
    assert per_source.loc["python-docs", ["package", "licence", "documents"]].tolist() == [
        "python3.11-doc",
        "PSF-2.0",
        61,
    ]
    assert per_source["documents"].sum() == len(documents) == census.loc["total", "documents"]
    assert per_source["validation_documents"].sum() == sum(corpora.is_validation(d.id) for d in documents)
    token_splits.cache_clear()
    splits = token_splits("offline-english", 300)
    assert census.loc["total", ["train_tokens", "validation_tokens"]].tolist() == [
        len(splits.train),
        len(splits.validation),
    ]
    # a split is its documents' tokens and two newline tokens between each two
    train_documents = len(documents) - census.loc["total", "validation_documents"]
    assert len(splits.train) == per_source["train_tokens"].sum() + 2 * (train_documents - 1)
    table = census.reset_index()
    assert corpus_census.epochs(table, 3 * len(splits.train)) == 3.0
    assert sweeps.run_job(corpus_census.census_job("offline-english", 300)).equals(table)  # the cached analysis
    with pytest.raises(ValueError, match="no census of corpus 'wikitext-103'"):
        corpus_census.census_job("wikitext-103", 300)
    token_splits.cache_clear()

"""The offline English corpus ``offline-english``: six Debian packages' text as documents, rendered as plain prose,
deduplicated and split into training and validation by document.

The sources are :data:`SOURCES` (the King James Bible; the Python, Linux, LLVM and Perl documentation; Jane
Austen's novels). reST and POD become prose with :func:`geocont.rst_text.plain_text` and
:func:`geocont.pod_text.plain_text`; repeated documents and paragraphs are dropped; a document is in the
validation split where the hash of its id says so (:func:`is_validation`). docs/design.md ("Text corpora")
gives each source's unit and licence and the deduplication rules.
"""

from __future__ import annotations

import bz2
import hashlib
import importlib.util
import lzma
import re
import shutil
import struct
import subprocess
import warnings
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from . import pod_text, rst_text
from .kjv import VALIDATION_EVERY, Corpus, CorpusNotAvailable, kjv_chapters

OFFLINE_ENGLISH = "offline-english"
#: Documents in the validation split, per mille of document ids.
VALIDATION_PER_MILLE = 50
#: A document with fewer words after cleaning and deduplication is dropped.
MIN_WORDS = 20
#: A paragraph this long or longer is kept only the first time it appears.
MIN_DUPLICATE_CHARS = 100
#: The Python package that reads the Austen novels' R data.
RDATA = "rdata"


@dataclass(frozen=True)
class Source:
    """Where and how a source's text is installed. ``format``: ``bible`` (``location`` is the program that prints
    it), ``rst`` or ``pod`` (the ``*.rst.txt`` or ``*.pod`` files under the folder ``location``, but those under the
    relative paths ``excluded``, suffix left out), ``rdata`` (R's data folder of the package)."""

    name: str
    package: str
    licence: str
    location: str
    format: str
    excluded: tuple[str, ...] = ()


@dataclass(frozen=True)
class Document:
    """One document: ``id`` is ``<source>/<name within the source>``, ``licence`` its own where it names one."""

    source: str
    id: str
    text: str
    licence: str


@dataclass(frozen=True)
class SourceSummary:
    """A source's share of a corpus: its documents (and how many are held out), words (whitespace-separated),
    characters, and the documents under each licence."""

    name: str
    package: str
    licence: str
    documents: int
    validation_documents: int
    words: int
    characters: int
    licences: tuple[tuple[str, int], ...]


SOURCES: tuple[Source, ...] = (
    Source("kjv", "bible-kjv-text", "public domain", "bible", "bible"),
    Source("python-docs", "python3.11-doc", "PSF-2.0", "/usr/share/doc/python3.11/html/_sources", "rst"),
    Source(
        "kernel-docs",
        "linux-doc-6.1",
        "GPL-2.0",
        "/usr/share/doc/linux-doc-6.1/html/_sources",
        "rst",
        excluded=("translations",),
    ),
    Source(
        "llvm-docs", "llvm-15-doc", "Apache-2.0 WITH LLVM-exception", "/usr/share/doc/llvm-15-doc/html/_sources", "rst"
    ),
    Source(
        "perl-docs",
        "perl-doc",
        "GPL-1.0-or-later OR Artistic-1.0-Perl",
        "/usr/share/perl/5.36.0/pod",
        "pod",
        excluded=("perltoc", "perluniprops"),
    ),
    Source("austen", "r-cran-janeaustenr", "public domain", "/usr/lib/R/site-library/janeaustenr/data", "rdata"),
)
#: Packages the ``bible`` program needs besides the text.
BIBLE_PACKAGES = ("bible-kjv", "bible-kjv-text")
_SUFFIXES = {"rst": ".rst.txt", "pod": ".pod"}
_SPDX = re.compile(r"SPDX-License-Identifier:\s*(.+?)\s*(?:\*/)?$", re.MULTILINE)
_AUSTEN_CHAPTER = re.compile(r"^\s*chapter\s+(?:[ivxlc]+|\d+)\.?\s*$", re.IGNORECASE)
_AUSTEN_DROPPED = re.compile(r"^\s*(?:volume\s+[ivx]+|finis|the end)\.?\s*$", re.IGNORECASE)
_AUSTEN_ENDS = "A NOTE ON THE TEXT"  # Northanger Abbey's editorial note, after the last chapter


def _installed(source: Source) -> bool:
    if source.format == "bible":
        return shutil.which(source.location) is not None
    return Path(source.location).is_dir()


def availability_problem(sources: Sequence[Source] | None = None) -> str | None:
    """Why ``offline-english`` cannot be assembled here (one line naming the install command), or None."""
    sources = SOURCES if sources is None else sources
    missing = [s for s in sources if not _installed(s)]
    if missing:
        packages = [p for s in missing for p in (BIBLE_PACKAGES if s.format == "bible" else (s.package,))]
        where = ", ".join(s.location for s in missing)
        return (
            f"corpus {OFFLINE_ENGLISH} needs the Debian package(s) {' '.join(packages)} (missing: {where}): "
            f"`apt-get install {' '.join(packages)}` (the project's `make setup` installs them)"
        )
    if any(s.format == "rdata" for s in sources) and not _has_rdata():
        return (
            f"corpus {OFFLINE_ENGLISH} reads the Austen novels with the Python package {RDATA}, which is not "
            "installed: pip install geocont[lm]"
        )
    return None


def _has_rdata() -> bool:
    return importlib.util.find_spec(RDATA) is not None


def source_documents(source: Source) -> list[Document]:
    """The documents of one source, cleaned, in their natural order (book order, then path order)."""
    if source.format == "bible":
        return [
            Document(source.name, f"{source.name}/{heading}", verses, source.licence)
            for heading, verses in kjv_chapters()
        ]
    if source.format == "rdata":
        return _austen_documents(source)
    return _markup_documents(source)


def _markup_documents(source: Source) -> list[Document]:
    root, suffix = Path(source.location), _SUFFIXES[source.format]
    render = rst_text.plain_text if source.format == "rst" else pod_text.plain_text
    documents = []
    for path in sorted(root.rglob(f"*{suffix}")):
        name = path.relative_to(root).as_posix().removesuffix(suffix)
        if any(name == e or name.startswith(f"{e}/") for e in source.excluded):
            continue
        raw = path.read_text(encoding="utf-8", errors="replace")
        spdx = _SPDX.search(raw)
        licence = spdx.group(1).strip("() ") if spdx else source.licence
        documents.append(Document(source.name, f"{source.name}/{name}", render(raw), licence))
    return documents


def austen_novels(folder: Path) -> dict[str, list[str]]:
    """Each novel's lines, by the package's name for it (``emma``, ``prideprejudice``, ...), from the R lazy-load
    database ``Rdata.rdx``/``Rdata.rdb`` that R installs a package's data as."""
    import rdata

    index = rdata.read_rds(folder / "Rdata.rdx")
    database = (folder / "Rdata.rdb").read_bytes()
    novels = {}
    for name, (offset, length) in index["variables"].items():
        blob = database[int(offset) : int(offset) + int(length)]
        with warnings.catch_warnings():  # the serialized object has no file header; rdata says it assumes one
            warnings.simplefilter("ignore", UserWarning)
            parsed = rdata.parser.parse_data(_lazy_load_bytes(blob))
        novels[str(name)] = [str(line) for line in rdata.conversion.convert(parsed)]
    return novels


def _lazy_load_bytes(blob: bytes) -> bytes:
    """The serialized object in one entry of an R lazy-load database: a 4-byte length, then zlib data, or a type
    byte (``Z`` zlib, ``2`` bzip2, ``X`` xz, ``0`` none) and its data."""
    (length,) = struct.unpack(">I", blob[:4])
    kind, data = blob[4:5], blob[5:]
    if kind == b"Z":
        return zlib.decompress(data)
    if kind == b"2":
        return bz2.decompress(data)
    if kind == b"X":
        return lzma.decompress(data)
    if kind == b"0":
        return data[:length]
    return zlib.decompress(blob[4:])


def _austen_documents(source: Source) -> list[Document]:
    documents = []
    for novel, lines in austen_novels(Path(source.location)).items():
        chapters: list[list[str]] = []
        for line in lines:
            if line.strip() == _AUSTEN_ENDS:
                break
            if _AUSTEN_CHAPTER.match(line):
                chapters.append([])
            elif chapters and not _AUSTEN_DROPPED.match(line):
                chapters[-1].append(line)
        documents += [
            Document(source.name, f"{source.name}/{novel}/{number:03d}", _novel_prose(chapter), source.licence)
            for number, chapter in enumerate(chapters, start=1)
        ]
    return documents


def _novel_prose(lines: list[str]) -> str:
    """Paragraphs (blank-line separated) with wrapped lines joined and ``_italics_`` marks dropped."""
    paragraphs = re.split(r"\n\s*\n", "\n".join(lines))
    joined = (re.sub(r"\s+", " ", re.sub(r"(?<!\w)_([^_]+)_(?!\w)", r"\1", p)).strip() for p in paragraphs)
    return "\n\n".join(p for p in joined if p)


def cleaned_documents(sources: Sequence[Source] | None = None) -> list[Document]:
    """Every source's documents, cleaned, before deduplication; :class:`CorpusNotAvailable` where a package is
    missing."""
    sources = SOURCES if sources is None else sources
    problem = availability_problem(sources)
    if problem:
        raise CorpusNotAvailable(problem)
    return [document for source in sources for document in source_documents(source)]


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def deduplicated(documents: Iterable[Document]) -> list[Document]:
    """``documents`` in order without repeated documents and long paragraphs (the first copy stays), and without
    documents left with fewer than :data:`MIN_WORDS` words."""
    seen_documents: set[bytes] = set()
    seen_paragraphs: set[bytes] = set()
    kept = []
    for document in documents:
        digest = _digest(document.text)
        if digest in seen_documents:
            continue
        seen_documents.add(digest)
        paragraphs = []
        for paragraph in document.text.split("\n\n"):
            if len(paragraph) >= MIN_DUPLICATE_CHARS:
                digest = _digest(paragraph)
                if digest in seen_paragraphs:
                    continue
                seen_paragraphs.add(digest)
            paragraphs.append(paragraph)
        text = "\n\n".join(paragraphs)
        if len(text.split()) >= MIN_WORDS:
            kept.append(replace(document, text=text))
    return kept


def is_validation(document_id: str) -> bool:
    """Whether a document belongs to the validation split: the first 8 bytes of the sha256 of its id, modulo 1000,
    below :data:`VALIDATION_PER_MILLE`."""
    return int.from_bytes(_digest(document_id)[:8], "big") % 1000 < VALIDATION_PER_MILLE


def offline_english_documents(sources: Sequence[Source] | None = None) -> list[Document]:
    """The corpus's documents: cleaned and deduplicated, in source order."""
    return deduplicated(cleaned_documents(sources))


def _package_versions(packages: Iterable[str]) -> str:
    """``package version`` for each installed Debian package (names alone where dpkg cannot say)."""
    program = shutil.which("dpkg-query")
    described = []
    for package in packages:
        version = ""
        if program:
            done = subprocess.run(
                [program, "-W", "-f=${Version}", package], capture_output=True, text=True, check=False
            )
            version = done.stdout.strip() if done.returncode == 0 else ""
        described.append(f"{package} {version}".strip())
    return ", ".join(described)


def load_offline_english(sources: Sequence[Source] | None = None) -> Corpus:
    """Corpus ``offline-english`` read from the installed packages."""
    sources = SOURCES if sources is None else sources
    return offline_english(offline_english_documents(sources), sources)


def offline_english(documents: Sequence[Document], sources: Sequence[Source]) -> Corpus:
    """Corpus ``offline-english`` of ``documents`` (read from ``sources``): each split's documents joined by blank
    lines."""
    train = "\n\n".join(d.text for d in documents if not is_validation(d.id))
    validation = "\n\n".join(d.text for d in documents if is_validation(d.id))
    return Corpus(
        OFFLINE_ENGLISH,
        train,
        validation,
        f"Debian packages {_package_versions(s.package for s in sources)}, cleaned and deduplicated "
        f"(geocont.corpora); validation: {VALIDATION_PER_MILLE} per mille of documents by id hash",
    )


def summarise(documents: Sequence[Document], sources: Sequence[Source] | None = None) -> tuple[SourceSummary, ...]:
    """Each source's share of ``documents``."""
    sources = SOURCES if sources is None else sources
    summaries = []
    for source in sources:
        own = [d for d in documents if d.source == source.name]
        summaries.append(
            SourceSummary(
                name=source.name,
                package=source.package,
                licence=source.licence,
                documents=len(own),
                validation_documents=sum(is_validation(d.id) for d in own),
                words=sum(len(d.text.split()) for d in own),
                characters=sum(len(d.text) for d in own),
                licences=tuple(Counter(d.licence for d in own).most_common()),
            )
        )
    return tuple(summaries)


def corpus_sources(name: str) -> tuple[SourceSummary, ...]:
    """The sources of an offline corpus (``offline-english`` or ``kjv``) with their shares, read from the installed
    packages."""
    if name == OFFLINE_ENGLISH:
        return summarise(offline_english_documents())
    if name == "kjv":
        chapters = [verses for _, verses in kjv_chapters()]
        kjv = next(s for s in SOURCES if s.format == "bible")
        return (
            SourceSummary(
                name="kjv",
                package=kjv.package,
                licence=kjv.licence,
                documents=len(chapters),
                validation_documents=sum(i % VALIDATION_EVERY == VALIDATION_EVERY - 1 for i in range(len(chapters))),
                words=sum(len(c.split()) for c in chapters),
                characters=sum(len(c) for c in chapters),
                licences=((kjv.licence, len(chapters)),),
            ),
        )
    raise ValueError(f"corpus {name!r} is not assembled from Debian packages; offline corpora: {OFFLINE_ENGLISH}, kjv")

"""Is a corpus the one the book's runs were trained on? The files each offline corpus source is read from, and their
fingerprint.

A source's **fingerprint** is its file count, byte count and a sha256 over its files (relative path and content,
in path order): :func:`source_fingerprint`. :data:`CANONICAL` records each offline source's fingerprint as the
committed ``cpu`` runs read it (Debian 12's packages). :func:`corpus_problem` says in one line which source of a
corpus is missing, unreadable, empty or different, and how to restore it: the check that runs before any language
model is trained (:func:`geocont.sweeps.run_jobs`), so that a run keyed by a corpus's name is never trained on other
text (a source folder left empty would otherwise give a smaller corpus, a new tokenizer and a run stored under the
full corpus's key). Reading the files takes a fraction of a second (about 70 MB).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from .corpora import _SUFFIXES, BIBLE_PACKAGES, SOURCES, Source

#: The data file the ``bible`` program reads the King James text from (package bible-kjv-text).
BIBLE_DATA = ("/usr/lib/bible.data", "/usr/lib/bible.data.conc")

#: Each corpus's sources (by name, :data:`geocont.corpora.SOURCES`).
CORPUS_SOURCES = {"kjv": ("kjv",), "offline-english": tuple(source.name for source in SOURCES)}


@dataclass(frozen=True)
class Fingerprint:
    """A source's files as read: how many, their bytes, and a sha256 over their paths and contents (16 hex)."""

    files: int
    bytes: int
    digest: str


#: The fingerprint of every offline source as the committed ``cpu`` runs read it: measured on the Debian 12 packages
#: bible-kjv-text 4.38, python3.11-doc 3.11.2-6+deb12u9, linux-doc-6.1 6.1.192-3, llvm-15-doc 1:15.0.6-4, perl-doc
#: 5.36.0-7+deb12u4 and r-cran-janeaustenr 1.0.0-1, whose text gives every source's documents and words exactly as
#: the stored corpus census (results/cpu/census) counted them.
CANONICAL: dict[str, Fingerprint] = {
    "kjv": Fingerprint(2, 2619152, "f0ff172e703280bb"),
    "python-docs": Fingerprint(497, 11048275, "1490a211a9bef4e7"),
    "kernel-docs": Fingerprint(2841, 21372070, "2f4ecb2680e372ee"),
    "llvm-docs": Fingerprint(1033, 9659133, "c2b391dbde6dd533"),
    "perl-docs": Fingerprint(205, 7882327, "11444ff28a3038f1"),
    "austen": Fingerprint(3, 1601765, "62a2d61ff1cb105f"),
}


def source_files(source: Source) -> list[Path]:
    """The files a source's text is read from, in path order (``FileNotFoundError`` where its location is missing)."""
    if source.format == "bible":
        return [Path(path) for path in BIBLE_DATA]
    root = Path(source.location)
    if not root.is_dir():
        raise FileNotFoundError(root)
    if source.format == "rdata":
        return sorted(path for path in root.iterdir() if path.is_file())
    suffix = _SUFFIXES[source.format]
    return sorted(
        path
        for path in root.rglob(f"*{suffix}")
        if path.is_file() and not any(path.relative_to(root).as_posix().startswith(skip) for skip in source.excluded)
    )


def source_fingerprint(source: Source) -> Fingerprint:
    """The :class:`Fingerprint` of a source's files (``OSError`` where one cannot be read)."""
    digest, total = hashlib.sha256(), 0
    files = source_files(source)
    root = Path(source.location) if source.format != "bible" else Path("/")
    for path in files:
        content = path.read_bytes()
        total += len(content)
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + content + b"\0")
    return Fingerprint(len(files), total, digest.hexdigest()[:16])


def _fix(source: Source) -> str:
    packages = " ".join(BIBLE_PACKAGES if source.format == "bible" else (source.package,))
    return f"`apt-get install --reinstall {packages}` (the project's `make setup` installs them)"


def corpus_problem(name: str) -> str | None:
    """Why corpus ``name`` is not the text the book's runs were trained on, in one line naming the source and the
    fix, or None (also for a corpus without offline sources, e.g. WikiText-103, which has no fingerprint here)."""
    by_name = {source.name: source for source in SOURCES}
    for source_name in CORPUS_SOURCES.get(name, ()):
        source = by_name[source_name]
        expected = CANONICAL.get(source_name)
        try:
            found = source_fingerprint(source)
        except OSError as error:
            return (
                f"corpus {name}: source {source_name} ({source.package}) cannot be read "
                f"({type(error).__name__}: {error}); reinstall it: {_fix(source)}"
            )
        if found.files == 0 or found.bytes == 0:
            return (
                f"corpus {name}: source {source_name} ({source.package}) is empty at {source.location}; "
                f"reinstall it: {_fix(source)}"
            )
        if expected is not None and found != expected:
            return (
                f"corpus {name}: source {source_name} ({source.package}) differs from the text the book's runs were "
                f"trained on ({found.files:,} files, {found.bytes:,} bytes, digest {found.digest}; expected "
                f"{expected.files:,} files, {expected.bytes:,} bytes, digest {expected.digest}): a run trained on it "
                f"would be stored under the same key; restore the package: {_fix(source)}"
            )
    return None

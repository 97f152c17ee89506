"""What a corpus is (its training and validation text, :class:`Corpus`; :class:`CorpusNotAvailable` where it is
missing), and the King James Bible read from the Debian packages ``bible-kjv`` and ``bible-kjv-text``: every
chapter, its heading and its verses (:func:`kjv_chapters`). The corpora built on them are in :mod:`geocont.text`
(``kjv``) and :mod:`geocont.corpora` (``offline-english``)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

KJV_RANGE = "gen1:1-rev22:21"
#: The ``kjv`` corpus holds out every this-many-th chapter for validation.
VALIDATION_EVERY = 10


class CorpusNotAvailable(FileNotFoundError):
    """A corpus is missing; the message says how to install it."""


@dataclass(frozen=True)
class Corpus:
    name: str
    train: str
    validation: str
    source: str


def bible_program() -> str:
    program = shutil.which("bible")
    if program is None:
        raise CorpusNotAvailable(
            "the King James Bible corpus needs the Debian packages bible-kjv and bible-kjv-text: "
            "`apt-get install bible-kjv bible-kjv-text` (the project's `make setup` installs them)"
        )
    return program


def kjv_chapters() -> list[tuple[str, str]]:
    """Every chapter of the King James Bible in order: its heading ("Genesis 1") and its verses, one per line."""
    text = subprocess.run([bible_program(), KJV_RANGE], capture_output=True, text=True, check=True).stdout
    chapters = re.split(r"\n(?=[1-3]?\s?[A-Z][a-z]+(?: of [A-Z][a-z]+)? \d+\n)", text)
    chapters = [c for c in chapters if c.strip()]
    if len(chapters) < 1000:
        raise CorpusNotAvailable(
            f"`bible {KJV_RANGE}` returned only {len(chapters)} chapters; is bible-kjv-text installed?"
        )
    return [(c.strip().splitlines()[0].strip(), _clean_kjv_chapter(c)) for c in chapters]


def _clean_kjv_chapter(chapter: str) -> str:
    """Drop the chapter heading and verse numbers; re-join wrapped lines into verses."""
    lines = chapter.strip().splitlines()[1:]
    verses, current = [], []
    for line in lines:
        match = re.match(r"^\s+\d+ (.*)$", line)
        if match:
            if current:
                verses.append(" ".join(current))
            current = [match.group(1).strip()]
        elif line.strip():
            current.append(line.strip())
    if current:
        verses.append(" ".join(current))
    return "\n".join(verses)

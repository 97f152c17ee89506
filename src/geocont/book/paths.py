"""Where the book's files live and the environment variables its parts share (one place for both).

The build (:mod:`geocont.book.build`), the claims tables (:mod:`geocont.book.claims`) and the
figures (:mod:`geocont.book.figures`) all read these names; nothing here imports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

#: Set (to "1") while a chapter executes under ``python -m geocont.book``: figures become numbered book figures.
BOOK_ENV = "GEOCONT_BOOK"
#: Where chapters publish their claims tables while executed by the book build.
CLAIMS_ENV = "GEOCONT_CLAIMS_DIR"


DEFAULT_SCALE = "cpu"


BUILD = Path("_build")


EXECUTED = BUILD / "executed"


SOURCE = BUILD / "source"


#: The closing chapter, executed after every other chapter (see :mod:`geocont.book.claims`).
CLOSING = Path("book/claims.ipynb")


@dataclass(frozen=True)
class Layout:
    """Where one build puts its files: everything under ``<output>/_build``."""

    output: Path

    @property
    def build(self) -> Path:
        return self.output / BUILD

    @property
    def executed(self) -> Path:
        return self.output / EXECUTED

    @property
    def source(self) -> Path:
        return self.output / SOURCE

    @property
    def claims(self) -> Path:
        return self.build / "claims" / "book"

    @property
    def html(self) -> Path:
        return self.build / "html"


def toc_files(root: Path) -> list[str]:
    """Every file named in ``_toc.yml`` (without extension), in order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    names = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                names.append(entry["file"])
            walk(entry.get("sections"))
            for part in entry.get("parts", []) or []:
                walk(part.get("chapters"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", []) or []:
        walk(part.get("chapters"))
    return names


def chapters(root: Path) -> list[Path]:
    """The notebooks named in the table of contents."""
    return [
        Path(name).with_suffix(".ipynb") for name in toc_files(root) if (root / name).with_suffix(".ipynb").exists()
    ]


def repository_root(start: Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the working directory) with ``_toc.yml``
    and ``_config.yml``."""
    start = (start or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / "_toc.yml").exists() and (folder / "_config.yml").exists():
            return folder
    raise FileNotFoundError(f"no _toc.yml/_config.yml at or above {start}: run from inside the geocont repository")

"""Can a folder hold the project's files? One write probe and one name check, shared by the run cache, the results
store, the data folder and the book's build folder."""

from __future__ import annotations

import os
from pathlib import Path


def write_probe(folder: Path) -> tuple[Path, str | None]:
    """Whether a file can be created in ``folder`` (or, where it does not exist yet, in the nearest folder above it):
    that nearest existing path, and why not (``"not a folder"`` where it is a file, else the OS error of a real probe
    file, which a read-only mount fails too) or None."""
    import tempfile

    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return existing, "not a folder"
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".geocont-probe-"):
            pass
    except OSError as error:
        return existing, str(error.strerror or error)
    return existing, None


def path_encoding_problem(path: Path, what: str, variable: str) -> str | None:
    """Why ``path`` cannot hold files the run tables are written into (a name that is not valid UTF-8: pyarrow and
    JSON cannot write there), in one line, or None."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return (
            f"{what} {os.fsencode(path)!r} has a name that is not valid UTF-8, where the run tables cannot be "
            f"written; point {variable} at a folder with a UTF-8 name"
        )
    return None

"""Test-session order and marks: nbval runs the book's closing chapter after every other chapter;
the notebooks (nbval) and the browser test are marked ``slow`` (``pytest -m "not slow"`` leaves them
out, with the other tests marked so: process pools, Ray).

``book/claims.ipynb`` collects the claims tables that the chapters publish when executed
(:mod:`geocont.claims`); under ``pytest --nbval-lax tests book`` it must therefore run last,
whatever the alphabetical order of the notebooks. Run alone, it fails with a message naming
the chapters whose tables are missing.
"""

from pathlib import Path

import pytest

CLOSING_CHAPTER = Path("book/claims.ipynb")
#: Test files that are slow as a whole (besides every notebook).
SLOW_FILES = {"test_browser.py"}


def pytest_collection_modifyitems(session, config, items):
    def is_closing(item) -> bool:
        return Path(str(item.fspath)).resolve() == (Path(__file__).parent / CLOSING_CHAPTER).resolve()

    items[:] = [item for item in items if not is_closing(item)] + [item for item in items if is_closing(item)]
    for item in items:
        path = Path(str(item.fspath))
        if path.suffix == ".ipynb" or path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)

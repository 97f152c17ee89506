"""Test-session order: nbval runs the book's closing chapter after every other chapter.

``book/claims.ipynb`` collects the claims tables that the chapters publish when executed
(:mod:`geocont.claims`); under ``pytest --nbval-lax tests book`` it must therefore run last,
whatever the alphabetical order of the notebooks. Run alone, it fails with a message naming
the chapters whose tables are missing.
"""

from pathlib import Path

CLOSING_CHAPTER = Path("book/claims.ipynb")


def pytest_collection_modifyitems(session, config, items):
    def is_closing(item) -> bool:
        return Path(str(item.fspath)).resolve() == (Path(__file__).parent / CLOSING_CHAPTER).resolve()

    items[:] = [item for item in items if not is_closing(item)] + [item for item in items if is_closing(item)]

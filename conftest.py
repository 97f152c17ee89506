"""Test-session order and marks: nbval runs the book's closing chapter after every other chapter;
the notebooks (nbval) and the browser test are marked ``slow`` (``pytest -m "not slow"`` leaves them
out, with the other tests marked so: process pools, Ray).

Under pytest-xdist (``make test`` runs ``-n 2 --dist loadfile``) every file is one work unit (its
module and session fixtures are built once, on one worker), the longest units start first (the
notebooks, then :data:`LONG_FILES`), and each worker trains with one torch thread (two workers on two
cores). The closing chapter cannot run beside the chapters it collects: ``make test`` runs it after
them, in a second pytest call.

``book/claims.ipynb`` collects the claims tables that the chapters publish when executed
(:mod:`geocont.claims`); under ``pytest --nbval-lax tests book`` it must therefore run last,
whatever the alphabetical order of the notebooks. Run alone, it fails with a message naming
the chapters whose tables are missing.
"""

import os
from pathlib import Path

import pytest

CLOSING_CHAPTER = Path("book/claims.ipynb")
#: Test files that are slow as a whole (besides every notebook).
SLOW_FILES = {"test_browser.py"}
#: The longest work units, started first so that two workers finish together: the notebooks, then these files.
LONG_FILES = ("test_browser.py", "test_paper_scale.py", "test_packaging.py")


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # one thread per worker, in this process and in what it starts (notebook kernels, the book build)
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ.setdefault("MKL_NUM_THREADS", "1")
        import torch

        torch.set_num_threads(1)


def pytest_collection_modifyitems(session, config, items):
    def is_closing(item) -> bool:
        return Path(str(item.fspath)).resolve() == (Path(__file__).parent / CLOSING_CHAPTER).resolve()

    def rank(item) -> int:
        path = Path(str(item.fspath))
        if path.suffix == ".ipynb":
            return 1 if is_closing(item) else 0
        return 2 + LONG_FILES.index(path.name) if path.name in LONG_FILES else 2 + len(LONG_FILES)

    items.sort(key=rank)  # stable: the collection order within each rank
    for item in items:
        path = Path(str(item.fspath))
        if path.suffix == ".ipynb" or path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)

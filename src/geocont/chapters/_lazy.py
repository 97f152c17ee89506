"""The module ``__getattr__`` of a chapter package: its names are read from its ``compute`` module,
else from its ``present`` module, each imported on first use, so that importing what a chapter
computes (its settings, runs and claims) needs no figure library."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def chapter_attribute(package: str) -> Callable[[str], Any]:
    """``__getattr__`` for the chapter package ``package``."""

    def __getattr__(name: str) -> Any:
        if not name.startswith("__"):
            for part in ("compute", "present"):
                module = importlib.import_module(f"{package}.{part}")
                if name in vars(module):
                    return vars(module)[name]
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__

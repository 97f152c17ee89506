"""The optional parts of the package and the extras that install them (pyproject.toml).

``pip install geocont`` is the analyzer's core; a module that needs more says so on import, in
one line that names the extra (:func:`require_extra`), instead of failing deep inside a run.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence


class MissingExtra(ImportError):
    """A module needs packages of an extra that is not installed; the message is one line naming it."""


def require_extra(extra: str, packages: Sequence[str], what: str) -> None:
    """Raise :class:`MissingExtra` if any of ``packages`` is not installed (looked up, not imported)."""
    missing = [package for package in packages if importlib.util.find_spec(package) is None]
    if missing:
        raise MissingExtra(
            f"{what} needs {' and '.join(missing)}, which the core install leaves out: pip install geocont[{extra}]",
            name=missing[0],
        )

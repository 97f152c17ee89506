"""What a book notebook's namespace holds: its parameters (checked by name), and parameter errors shown as
one line. Shared by the chapters (:mod:`geocont.book.chapter`) and the closing chapter (:mod:`geocont.book.claims`)."""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

from ..scales import ParameterError

#: Names IPython and papermill put into a notebook's namespace besides the parameters.
_KERNEL_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open", "display"}


def notebook_parameters(namespace: Mapping[str, Any], parameters: Mapping[str, str]) -> dict[str, Any]:
    """The values of ``parameters`` in a notebook's namespace (``globals()``).

    papermill injects ``-p name value`` as a plain assignment after the parameters cell, so a
    misspelt name would otherwise be ignored silently: any other variable defined at this point
    (not a module, function, class, or one of IPython's names) is rejected with the valid names.
    """
    unknown = sorted(
        name
        for name, value in namespace.items()
        if name not in parameters
        and not name.startswith("_")
        and name not in _KERNEL_NAMES
        and not isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type))
    )
    if unknown:
        raise ParameterError(f"unknown parameter(s) {', '.join(unknown)}; valid choices: {', '.join(parameters)}")
    missing = [name for name in parameters if name not in namespace]
    if missing:
        raise ParameterError(f"the notebook's parameters cell lacks {', '.join(missing)}")
    return {name: namespace[name] for name in parameters}


def one_line_parameter_errors() -> None:
    """In a Jupyter kernel (papermill, nbval), show a :class:`ParameterError` as its one line instead of a
    traceback; the cell still fails, so papermill stops there."""
    try:
        from IPython import get_ipython
    except ImportError:
        return

    def show(shell, kind, value, tb, tb_offset=None) -> list[str]:
        lines = [f"{kind.__name__}: {value}"]
        shell._showtraceback(kind, value, lines)  # the cell's error output (ename, evalue, these lines)
        return lines

    shell = get_ipython()
    if shell is not None and hasattr(shell, "_showtraceback"):
        shell.set_custom_exc((ParameterError,), show)

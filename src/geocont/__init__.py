"""geocont: measure geometric continuity across the layers of neural networks.

Reproduction of "Why Geometric Continuity Emerges in Deep Neural Networks: Residual
Connections and Rotational Symmetry Breaking" (arXiv 2605.04971).

What a user calls, importable from here (each loaded on first use):

* :func:`analyze`, :func:`summary`: continuity of any checkpoint (:mod:`geocont.analyzer`);
* :func:`run_mlp`, :func:`run_sweep`: train residual MLPs with continuity recorded (:mod:`geocont.training`);
* :func:`run_lm`: train a Llama-style language model likewise (:mod:`geocont.lm`);
* the configurations :class:`MLPRunConfig`, :class:`LMRunConfig`, :class:`OptimizerConfig`,
  :class:`TransformerShape` (:mod:`geocont.config`).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_EXPORTS = {
    "analyze": "geocont.analyzer",
    "summary": "geocont.analyzer",
    "run_mlp": "geocont.training",
    "run_sweep": "geocont.training",
    "run_lm": "geocont.lm",
    "MLPRunConfig": "geocont.config",
    "LMRunConfig": "geocont.config",
    "OptimizerConfig": "geocont.config",
    "TransformerShape": "geocont.config",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'geocont' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])

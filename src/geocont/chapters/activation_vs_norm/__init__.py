"""Chapter "activation versus LayerNorm": the activation concentrates continuity in v1, LayerNorm
spreads it over several directions (``book/activation_vs_norm.ipynb``).

:mod:`.compute` holds what the chapter computes (its ``CHAPTER``, settings, runs and claims, without
matplotlib); :mod:`.present` what it shows. Both are read through this package, which loads
each on first use."""

from .._lazy import chapter_attribute

__getattr__ = chapter_attribute(__name__)

"""Chapter "Conditions 1 and 2": residual connections give gradient coherence; symmetry-breaking
activations keep weight continuity (``book/mlp_conditions.ipynb``).

:mod:`.compute` holds what the chapter computes (its ``CHAPTER``, settings, runs and claims, without
matplotlib); :mod:`.present` what it shows. Both are read through this package, which loads
each on first use."""

from .._lazy import chapter_attribute

__getattr__ = chapter_attribute(__name__)

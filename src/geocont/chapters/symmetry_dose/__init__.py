"""Chapter "How much symmetry breaking?": weight continuity along a dose of nonlinearity (Leaky-ReLU residual
nets from ReLU to the linear net), and a radial net that stays nonlinear (``book/symmetry_dose.ipynb``).

:mod:`.compute` holds what the chapter computes (its ``CHAPTER``, settings, runs, findings and claims, without
matplotlib); :mod:`.present` what it shows. Both are read through this package, which loads each on first use."""

from .._lazy import chapter_attribute

__getattr__ = chapter_attribute(__name__)

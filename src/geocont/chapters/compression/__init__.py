"""Chapter "From continuity to compression": does the paper's guideline (share Q, K, Gate, Up in
the input space, O and Down in the output space) hold at equal parameter budgets, and is pruning
cheaper where continuity is higher? (``book/compression.ipynb``; the method is :mod:`geocont.sharing`.)

:mod:`.compute` holds what the chapter computes (its ``CHAPTER``, settings, runs and claims, without
matplotlib); :mod:`.present` what it shows. Both are read through this package, which loads
each on first use."""

from .._lazy import chapter_attribute

__getattr__ = chapter_attribute(__name__)

"""Chapter "the gradient-to-weight transfer timeline": coherence at step 0, the crossing of
||Delta W|| over ||W(0)||, the rise of weight continuity, rotation drift (``book/timeline.ipynb``).

:mod:`.compute` holds what the chapter computes (its ``CHAPTER``, settings, runs and claims, without
matplotlib); :mod:`.present` what it shows. Both are read through this package, which loads
each on first use."""

from .._lazy import chapter_attribute

__getattr__ = chapter_attribute(__name__)

"""Chapter "What makes the linear net lose its continuity?": Condition 2 on data of the paper's size,
instability against rotation drift, interventions, and every seed (``book/condition2.ipynb``).

:mod:`.compute` holds what the chapter computes (its ``CHAPTER``, settings, runs, instability
events, explanations and claims, without matplotlib); :mod:`.present` what it shows. Both are read
through this package, which loads each on first use."""

from .._lazy import chapter_attribute

__getattr__ = chapter_attribute(__name__)

"""Chapter "pretrained checkpoints": the projection pattern in SmolLM2, Gemma-3 and MiniLM next to
our trained transformers; what quantization does to the metric; the cost of Llama-3.1-8B/70B
(``book/pretrained_continuity.ipynb``).

:mod:`.compute` holds what the chapter computes (its ``CHAPTER``, settings, runs and claims, without
matplotlib); :mod:`.present` what it shows. Both are read through this package, which loads
each on first use."""

from .._lazy import chapter_attribute

__getattr__ = chapter_attribute(__name__)

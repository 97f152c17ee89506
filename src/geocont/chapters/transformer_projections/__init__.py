"""Chapter "Projection-specific continuity in transformers": a Llama-style model trained on the
offline corpus, with MLP-activation and linear-attention ablations (``book/transformer_projections.ipynb``).

Its runs, presets and variants are :mod:`geocont.chapters.lm_runs`, which the compression and
pretrained-continuity chapters share.

:mod:`.compute` holds what the chapter computes (its ``CHAPTER``, settings, runs and claims, without
matplotlib); :mod:`.present` what it shows. Both are read through this package, which loads
each on first use."""

from .._lazy import chapter_attribute

__getattr__ = chapter_attribute(__name__)

"""Book plumbing: building the book (:mod:`.build`, also ``python -m geocont.book``), its paths and
environment names (:mod:`.paths`), chapters' claims tables (:mod:`.claims`), provenance
(:mod:`.provenance`), numbered figures (:mod:`.figures`), what every chapter module provides
(:mod:`.chapter`) and a Sphinx extension that keeps pages offline (:mod:`.sphinx_offline`)."""

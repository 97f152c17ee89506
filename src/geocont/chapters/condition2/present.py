"""condition2: what the chapter shows (figures, tables, sentences), read by the notebook through the package:
:mod:`.comparison_figures` (the budget, comparison, traces and interventions), :mod:`.seeds_and_answer` (every seed
and the answer), :mod:`.drift_figures` (the direct tests of drift) and :mod:`.formatting` (the chapter's prose and
number formats).
"""

from __future__ import annotations

from .comparison_figures import (  # noqa: F401
    budget_note,
    comparison_figure,
    comparison_table,
    events_table,
    intervention_figure,
    intervention_table,
    trace_figure,
)
from .drift_figures import (  # noqa: F401
    cosine_figure,
    drift_tests_figure,
    drift_tests_sentences,
    forks_figure,
    forks_sentence,
    motion_figure,
    motion_sentence,
    spectrum_figure,
    spectrum_sentence,
    spike_sentence,
    spike_table,
)
from .formatting import (  # noqa: F401
    PROSE,
    band,
    condition_colours,
    count_text,
    fmt,
    show_note,
    sig,
)
from .seeds_and_answer import (  # noqa: F401
    answer,
    drift_groupings_table,
    evidence,
    formation_sentence,
    seeds_figure,
    seeds_sentences,
    sgd_sentence,
)

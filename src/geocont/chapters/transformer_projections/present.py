"""transformer_projections: what the chapter shows, read by the notebook through the package:
:mod:`.page_text` (the cost, the runs, the closing verdicts), :mod:`.training_figures` (loss, continuity over
training, depth, ablations), :mod:`.horizon_figures` (where claims are judged), :mod:`.corpus_and_control` (the corpus's
sources and epochs, the memorisation control) and :mod:`.up_o_figures` (the Up/O
gap and its explanations).
"""

from __future__ import annotations

from .channel_figures import channel_figure  # noqa: F401
from .corpus_and_control import (  # noqa: F401
    census_rows,
    control_figure,
    control_statement,
    corpus_display,
    epochs_items,
)
from .horizon_figures import (  # noqa: F401
    DISPLAY_COLUMNS,
    holds_statement,
    horizon_display,
    horizon_table,
    lost_sentence,
    settled_sentence,
)
from .page_text import (  # noqa: F401
    PROSE,
    budget_note,
    code_list,
    mark_early,
    runs_text,
    softmax_note,
    space_title,
    symlog_steps,
    trained_note,
    verdict,
    verdicts_text,
)
from .training_figures import (  # noqa: F401
    SPACE_LABELS,
    ablations_figure,
    depth_profile_figure,
    gap_figure,
    gap_sentence,
    loss_figure,
    over_training_figure,
    projection_bars_figure,
)
from .up_o_figures import (  # noqa: F401
    UP_O_KINDS,
    UP_O_PANELS,
    depth_statement,
    gap_statement,
    pretrained_statement,
    up_o_caption,
    up_o_figure,
)

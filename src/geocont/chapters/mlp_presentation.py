"""What the MLP chapters show of their runs: the horizon and summary tables and the closing list of verdicts.

The runs themselves, their settings and their cost are :mod:`.mlp_runs`.
"""

from __future__ import annotations

import pandas as pd
from IPython.display import Markdown

from ..book.chapter import changed_verdicts_sentence, verdict_list
from ..book.prose import Prose
from ..statistics import change_over_last, estimate, estimate_at_step, final_estimate, final_per_run
from ..tables import diverged_runs
from .mlp_runs import MLPChapterSettings, horizon_text

#: The words the run families share (``src/geocont/chapters/prose.md``).
_PROSE = Prose.of(__package__)


#: The quantities of the horizon tables: label -> (metric, space, direction).
HORIZON_QUANTITIES: dict[str, tuple[str, str, int]] = {
    "weight v1": ("weight_cos", "input", 1),
    "weight u1": ("weight_cos", "output", 1),
    "gradient v1": ("grad_cos", "input", 1),
    "relative update": ("rel_update", "", 0),
    "σ²-align (in)": ("weight_align", "input", 0),
}


def horizon_table(
    table: pd.DataFrame, early_steps: int, by: str = "condition", order: list[str] | None = None
) -> pd.DataFrame:
    """Per group (``by``), each of :data:`HORIZON_QUANTITIES` at ``early_steps``, at the end, and its
    change over the last third of training (mean ± sd over seeds); the training-set loss and test
    accuracy at the end."""
    groups = order or list(table[by].unique())
    rows = {}
    for group in groups:
        one = table[table[by] == group]
        row: dict[tuple[str, str], str] = {}
        for label, (metric, space, direction) in HORIZON_QUANTITIES.items():
            at = dict(metric=metric, space=space, direction=direction)
            row[(label, f"at {early_steps:,}")] = str(estimate_at_step(one, early_steps, **at))
            row[(label, "final")] = str(final_estimate(one, **at))
            row[(label, "change, last third")] = str(change_over_last(one, **at))
        for label, metric in (("train-set loss", "train_set_loss"), ("test accuracy", "test_acc")):
            row[(label, "final")] = str(final_estimate(one, metric))
        rows[group] = row
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    out.index.name = by
    return out


def final_summary(table: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """The chapter's summary table: final values (mean ± sd over seeds) per group."""
    by = by or ["condition"]
    quantities = {
        "weight v1": ("weight_cos", "input", 1),
        "weight u1": ("weight_cos", "output", 1),
        "gradient v1": ("grad_cos", "input", 1),
        "gradient u1": ("grad_cos", "output", 1),
        "sigma²-align (in)": ("weight_align", "input", 0),
        "test accuracy": ("test_acc", "", 0),
    }
    out = {}
    for label, (metric, space, direction) in quantities.items():
        frame = final_per_run(table, metric, space=space, direction=direction)
        out[label] = frame.groupby(by, observed=True)["value"].apply(lambda v: str(estimate(v)))
    diverged = diverged_runs(table)
    if len(diverged):  # diverged runs are left out of the final values above
        out["diverged runs (left out)"] = diverged.groupby(by, observed=True).size()
        return pd.DataFrame(out).fillna({"diverged runs (left out)": 0}).astype({"diverged runs (left out)": int})
    return pd.DataFrame(out)


def verdict(settings: MLPChapterSettings, claims: pd.DataFrame) -> Markdown:
    """An MLP chapter's closing list: one bullet per claim (judged at the horizon, its early value
    beside it), under the scale, seeds and data, and the claims whose verdict the horizon changed."""
    text = verdict_list(
        claims,
        _PROSE.render(
            "mlp-verdict-intro",
            scale=settings.scale,
            seeds=len(settings.seeds),
            horizon=horizon_text(settings),
            batch=settings.base.batch_size,
            dataset=settings.base.dataset,
            early=settings.early_steps,
        ),
    )
    text += "\n\n" + changed_verdicts_sentence(claims, settings.early_steps)
    return Markdown(text)

"""The memorisation control: does the output projections' late rise in continuity need the model to memorise its
text? The reference variant on the chapter's corpus is read beside the same variant trained alike on the control
corpus, one the model sees many times.

The rule, fixed before the runs on the new corpus were read: for O and Down (output space, u1, layer-pair mean)
a run's **rise** is its value at the end minus its value at the early horizon. A corpus's runs **rise** where every
seed rose by more than the book's settledness tolerance (``SETTLED_TOLERANCE``), **hold** where every seed moved by
at most that, **fall** where every seed fell by more than it, and are **mixed** otherwise. A run has **memorised**
where its validation loss ends more than ``VALIDATION_RISE`` above its minimum. The rise **needs memorisation**
where the control rises and memorised while the chapter's runs neither rise nor memorised; it **comes without
memorisation** where the chapter's runs rise and none memorised; otherwise the two runs cannot decide it.

The control **counts** only where its own reading can change that conclusion (:func:`control_counts`): where the
chapter's runs alone decide it (they rise and none memorised), the control is shown beside them, not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ...statistics import SETTLED_TOLERANCE, VALIDATION_RISE, per_run
from .runs import Results, projection_values

#: The projections whose rise the control reads: the two that write to the residual stream (output space).
CONTROLLED = (("o_proj", "output"), ("down_proj", "output"))


@dataclass(frozen=True)
class CorpusReading:
    """One corpus's reference runs: each seed's rise of one projection (end minus early horizon), their verdict
    (``rises``, ``holds``, ``falls``, ``mixed``), and each seed's validation-loss rise above its minimum at the
    end, with whether every seed, no seed or some memorised (``memorised``, ``not-memorised``, ``mixed``)."""

    corpus: str
    rises: tuple[float, ...]
    movement: str
    loss_rises: tuple[float, ...]
    memorised: str


@dataclass(frozen=True)
class ControlReading:
    """What the control says of one projection's rise: ``case`` ``needs-memorisation``,
    ``without-memorisation`` or ``undecided``."""

    projection: str
    space: str
    main: CorpusReading
    control: CorpusReading
    case: str
    #: whether the control's own reading decided the case (:func:`control_counts`)
    counted: bool = True


def movement(rises: tuple[float, ...], tolerance: float = SETTLED_TOLERANCE) -> str:
    """``rises`` where every seed rose by more than ``tolerance``, ``falls`` where every seed fell by more,
    ``holds`` where every seed moved by at most it, else ``mixed`` (``mixed`` for no seeds)."""
    if not rises:
        return "mixed"
    if all(r > tolerance for r in rises):
        return "rises"
    if all(r < -tolerance for r in rises):
        return "falls"
    return "holds" if all(abs(r) <= tolerance for r in rises) else "mixed"


def loss_rises(table: pd.DataFrame) -> tuple[float, ...]:
    """Per seed, how far the validation loss ends above its minimum over the snapshots."""
    val_loss = per_run(table, "val_loss")
    by_seed = val_loss.sort_values("step").groupby("seed", observed=True)["value"]
    return tuple(float(last - lowest) for last, lowest in zip(by_seed.last(), by_seed.min()))


def memorised(rises: tuple[float, ...], rise: float = VALIDATION_RISE) -> str:
    """``memorised`` where every seed's validation loss ends more than ``rise`` above its minimum, ``not-memorised``
    where none does, else ``mixed``."""
    above = [r > rise for r in rises]
    return "memorised" if above and all(above) else "not-memorised" if not any(above) else "mixed"


def corpus_reading(table: pd.DataFrame, projection: str, space: str, early_step: int, corpus: str) -> CorpusReading:
    """:class:`CorpusReading` of one corpus's runs (``table``: one variant, its seeds)."""
    values = projection_values(table)
    values = values[(values["group"] == projection) & (values["space"] == space)]
    rises = []
    for _, run in values.sort_values("step").groupby("seed", observed=True):
        early = run.loc[run["step"] == early_step, "value"]
        rises.append(float(run["value"].iloc[-1] - early.iloc[0]) if len(early) else float("nan"))
    rises = tuple(rises)
    losses = loss_rises(table)
    return CorpusReading(corpus, rises, movement(rises), losses, memorised(losses))


def decide(main: CorpusReading, control: CorpusReading) -> str:
    """The rule of the module docstring: ``needs-memorisation``, ``without-memorisation`` or ``undecided``."""
    if main.movement == "rises" and main.memorised == "not-memorised":
        return "without-memorisation"
    if (
        control.movement == "rises"
        and control.memorised == "memorised"
        and main.movement in ("holds", "falls")
        and main.memorised == "not-memorised"
    ):
        return "needs-memorisation"
    return "undecided"


#: Every reading a corpus can give: (movement, memorised).
POSSIBLE_READINGS = tuple(
    (movement_, memorised_)
    for movement_ in ("rises", "holds", "falls", "mixed")
    for memorised_ in ("memorised", "not-memorised", "mixed")
)


def control_counts(main: CorpusReading) -> bool:
    """Whether some reading of the control would change :func:`decide` for these main runs (else the control is
    shown, not counted)."""
    cases = {
        decide(main, CorpusReading("control", (), movement_, (), memorised_))
        for movement_, memorised_ in POSSIBLE_READINGS
    }
    return len(cases) > 1


def control_readings(results: Results) -> tuple[ControlReading, ...]:
    """What the memorisation control says of each of :data:`CONTROLLED` (empty where no control was run)."""
    if results.control is None or results.control.empty:
        return ()
    settings = results.settings
    mine = results.table[results.table["condition"] == results.reference]
    readings = []
    for projection, space in CONTROLLED:
        main = corpus_reading(mine, projection, space, settings.early_step, settings.base.corpus)
        control = corpus_reading(results.control, projection, space, settings.early_step, settings.control_corpus)
        readings.append(ControlReading(projection, space, main, control, decide(main, control), control_counts(main)))
    return tuple(readings)

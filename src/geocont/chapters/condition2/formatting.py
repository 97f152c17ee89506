"""The Condition-2 chapter's prose and the formats of its numbers, shared by its figures and sentences; its claims
(:mod:`.claim_table`, :mod:`.comparison`, :mod:`.forks`) take their words from the same prose. No figure library is
imported here, so the modules that compute may import it."""

from __future__ import annotations

import math

import pandas as pd

from ...book.prose import Prose

#: The chapter's words (``prose.md``): its claims and its computed sentences.
PROSE = Prose.of(__package__)


def fmt(value: float, sd: float = math.nan) -> str:
    """``0.42 ± 0.03`` (``n/a`` for an undefined value, no ± where the spread is undefined)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.2f}" + (f" ± {sd:.2f}" if isinstance(sd, float) and not math.isnan(sd) else "")


def sig(value) -> str:
    """An :class:`~geocont.statistics.Estimate` to three significant figures (small quantities: motion, rates, gaps)."""
    if math.isnan(value.mean):
        return "n/a"
    decimals = max(0, 2 - math.floor(math.log10(abs(value.mean)))) if value.mean else 3
    spread = (
        f" ± {value.std:.{decimals}f}"
        if value.n > 1 and not math.isnan(value.std)
        else " (1 seed)"
        if value.n == 1
        else ""
    )
    return f"{value.mean:.{decimals}f}{spread}"


def count_text(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def condition_colours():
    from ... import plotting

    return plotting.condition_colours()


def show_note(text: str) -> None:
    """A section's sentence in place of a figure whose runs or metrics are missing."""
    from IPython.display import Markdown, display

    display(Markdown(text))


def band(ax, frame: pd.DataFrame, colour, label: str, x: str = "step", linestyle: str = "-") -> None:
    """Seed mean of ``value`` against ``x`` as a line, ±1 sd as a band."""
    grouped = frame.groupby(x)["value"]
    mean, sd = grouped.mean(), grouped.std().fillna(0.0)
    ax.plot(mean.index, mean.to_numpy(), color=colour, label=label, linestyle=linestyle, linewidth=1.6)
    ax.fill_between(mean.index, (mean - sd).to_numpy(), (mean + sd).to_numpy(), color=colour, alpha=0.2, linewidth=0)

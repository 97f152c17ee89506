"""The three named scales every chapter runs at, and the checking of per-parameter overrides.

* ``smoke``: what nbval and CI run; about a minute per chapter on 2 CPU cores.
* ``cpu``: what the rendered book shows, built on a 2-core machine, with at least three seeds.
* ``paper``: the paper's settings (full MNIST, WikiText-103, Llama-3.1); meant for GPUs and a network.

A chapter's ``CHAPTER.configure(scale, **parameters)`` (:class:`geocont.book.chapter.Chapter`)
starts from its preset for the scale and replaces the values of the parameters that are set:
``None`` keeps the preset's value (papermill's defaults), and an unknown name or a bad value
raises :class:`ParameterError` before any work.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Iterator
from typing import Any

SCALES: tuple[str, ...] = ("smoke", "cpu", "paper")


class ParameterError(ValueError):
    """A chapter parameter has an unknown name or a bad value; the message is one line."""


def check_scale(scale: str) -> None:
    if scale not in SCALES:
        raise ParameterError(f"unknown scale {scale!r}; valid choices: {', '.join(SCALES)}")


#: The most seeds one parameter may name: far more than any chapter's design (three to a few dozen), and few
#: enough that the runs are listed at once (``-p seeds 100000000`` would first build a hundred million of them).
MAX_SEEDS = 1000


def parse_seeds(seeds: Any, name: str = "seeds") -> tuple[int, ...]:
    """A count n (seeds 0..n-1) or a list of distinct non-negative integer seeds, as a tuple.

    A seed is always a whole number: ``[1.5, 2.5]`` or ``['1']`` is a :class:`ParameterError`, never seeds 1
    and 2. At most :data:`MAX_SEEDS` seeds. (Text given on the command line or to papermill is read by
    :func:`geocont.book.chapter.preset_values` first: ``"3"`` is the count 3, like ``3``.)
    """
    usage = f"{name} must be a positive count n (seeds 0..n-1) or a list of distinct non-negative integer seeds"
    if isinstance(seeds, bool):
        raise ParameterError(f"{usage}, got {seeds!r}")
    if isinstance(seeds, numbers.Integral):
        if seeds > MAX_SEEDS:
            raise ParameterError(f"{name}: at most {MAX_SEEDS} seeds, got a count of {seeds}")
        parsed = tuple(range(int(seeds)))
    elif not isinstance(seeds, (str, bytes)) and hasattr(seeds, "__iter__"):  # a list, a tuple, a range, an array
        seeds = seeds if hasattr(seeds, "__len__") else list(seeds)
        if len(seeds) > MAX_SEEDS:
            raise ParameterError(f"{name}: at most {MAX_SEEDS} seeds, got a list of {len(seeds)}")
        wrong = [s for s in seeds if isinstance(s, bool) or not isinstance(s, numbers.Integral)]
        if wrong:
            raise ParameterError(f"{usage}, got {seeds!r} ({wrong[0]!r} is not an integer)")
        parsed = tuple(int(s) for s in seeds)
    else:
        raise ParameterError(f"{usage}, got {seeds!r}")
    if not parsed or len(set(parsed)) != len(parsed) or min(parsed) < 0:
        raise ParameterError(f"{usage}, got {seeds!r}")
    return parsed


@contextlib.contextmanager
def parameter_errors() -> Iterator[None]:
    """Report a config's ``ValueError``/``TypeError`` raised while configuring as a :class:`ParameterError`."""
    try:
        yield
    except ParameterError:
        raise
    except (ValueError, TypeError) as error:
        raise ParameterError(str(error)) from None

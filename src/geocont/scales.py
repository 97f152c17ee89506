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
from typing import Any, Iterator

SCALES: tuple[str, ...] = ("smoke", "cpu", "paper")


class ParameterError(ValueError):
    """A chapter parameter has an unknown name or a bad value; the message is one line."""


def check_scale(scale: str) -> None:
    if scale not in SCALES:
        raise ParameterError(f"unknown scale {scale!r}; valid choices: {', '.join(SCALES)}")


def parse_seeds(seeds: Any) -> tuple[int, ...]:
    """A count n (seeds 0..n-1) or a list of distinct non-negative seeds, as a tuple."""
    if isinstance(seeds, bool):
        raise ParameterError(f"seeds must be a positive count or a list of distinct seeds, got {seeds!r}")
    if isinstance(seeds, int):
        parsed = tuple(range(seeds))
    else:
        try:
            parsed = tuple(int(s) for s in seeds)
        except (TypeError, ValueError):
            raise ParameterError(f"seeds must be a positive count or a list of distinct seeds, got {seeds!r}") from None
    if not parsed or len(set(parsed)) != len(parsed) or min(parsed) < 0:
        raise ParameterError(f"seeds must be a positive count or a list of distinct seeds, got {seeds!r}")
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

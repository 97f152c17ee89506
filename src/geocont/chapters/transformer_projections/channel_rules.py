"""The rules that read the residual-frame runs (:mod:`.frame_runs`), written down before any of them was read.

What carries O's and Down's output-space continuity? Three readings, each a rule on per-seed estimates:

* **carried by one coordinate** (:func:`carried_by_one_coordinate`): the layer mean of the top coordinate's share of
  the projection's u1 (:mod:`geocont.channel`) lies above its random level (:func:`geocont.channel.random_top_share`,
  not 1/d) by the book's difference rule;
* **the rotated frame removes it** (:func:`frame_removes`): with Adam's moments for the residual stream in a random
  frame, the projection's u1 continuity is at its random level by the equivalence rule
  (:func:`geocont.statistics.verdict_at_random_level`); "not reproduced" says the continuity survives the rotation,
  so Adam's standard basis is not what carries it;
* **the rotated frame keeps what reads the stream** (:func:`frame_keeps`): Q's, K's and Gate's v1 continuity stays
  above its random level by the difference rule and does not fall below the standard frame's by it.

The runs' validation losses are shown beside them (:func:`loss_gap`), not judged: a rotated frame that trains to a
clearly worse loss is a different model, and the chapter says so with the numbers.
"""

from __future__ import annotations

from ...channel import random_top_share
from ...metrics import random_abs_cos
from ...statistics import (
    Estimate,
    difference,
    known,
    random_level_margin,
    verdict_at_random_level,
    verdict_for_difference,
)


def carried_by_one_coordinate(share: Estimate, d: int) -> str:
    """Whether a projection's residual-space vector sits on one coordinate: its top-coordinate share (per seed, the
    layer mean) above the random level at ``d`` by the difference rule."""
    return verdict_for_difference(share, known(random_top_share(d)))


def frame_removes(rotated: Estimate, d: int) -> str:
    """Whether the rotated frame leaves a projection's continuity at the random level (the equivalence rule)."""
    return verdict_at_random_level(rotated, random_abs_cos(d), random_level_margin(d))


def frame_keeps(rotated: Estimate, standard: Estimate, d: int) -> str:
    """Whether a projection keeps its continuity in the rotated frame: "reproduced" where it is above its random
    level and not below the standard frame's (both by the difference rule); "not reproduced" where it fell to or
    below the random level, or clearly below the standard frame's; "partly reproduced" otherwise."""
    above = verdict_for_difference(rotated, known(random_abs_cos(d)))
    below_standard = verdict_for_difference(standard, rotated)
    if above == "not tested" or below_standard == "not tested":
        return "not tested"
    if above == "reproduced" and below_standard != "reproduced":
        return "reproduced"
    if above == "not reproduced" or below_standard == "reproduced":
        return "not reproduced"
    return "partly reproduced"


def loss_gap(rotated: Estimate, standard: Estimate) -> Estimate:
    """The rotated frame's validation loss minus the standard frame's (nats), shown beside the verdicts."""
    return difference(rotated, standard)

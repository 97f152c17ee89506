"""The learning-rate and batch tests of drift on the linear net, and the readings by which the tests of drift
vote (the forks' in :mod:`.forks`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...statistics import (
    DIFFERENCE_MARGIN,
    Estimate,
    at_final_step,
    at_step,
    estimate,
    per_run,
    verdict_for_difference,
    verdict_for_value,
)
from ...training import cosine_factor
from .comparison import weight_v1
from .forks import DRIFT_OF_VERDICT, ForkFindings, balance_readings, fork_findings, fork_readings
from .motion_and_spectrum import function_preserving_motion
from .runs import Results, finite_runs
from .settings import DRIFT_TESTS, switch_step

# The learning-rate and batch tests (results.drift_tests; the readings are those of DRIFT_TESTS, written down before
# any was run). Each gives "for" (what accumulated drift predicts), "against" (what it does not), or "neither".


def _v1_runs(table: pd.DataFrame) -> pd.DataFrame:
    """Per finite run and snapshot, weight v1 (the layer-pair mean)."""
    return finite_runs(per_run(table, "weight_cos", "input", 1), table)


def fall_rates(table: pd.DataFrame, step: int) -> pd.DataFrame:
    """Per finite run (``seed``), weight v1 lost per 1,000 steps ``before`` ``step`` (from the run's peak over the
    snapshots up to ``step``, to its snapshot at or before ``step``; 0 where the peak is that snapshot) and ``after``
    it (from there to the run's end), and weight v1 at that snapshot (``at_step``)."""
    rows = []
    for seed, run in _v1_runs(table).groupby("seed"):
        upto = run[run["step"] <= step]
        at, end = upto.iloc[-1], run.iloc[-1]
        peak = upto.loc[upto["value"].idxmax()]
        before = (
            1000 * (peak["value"] - at["value"]) / (at["step"] - peak["step"]) if at["step"] > peak["step"] else 0.0
        )
        after = (
            1000 * (at["value"] - end["value"]) / (end["step"] - at["step"]) if end["step"] > at["step"] else math.nan
        )
        rows.append(dict(seed=seed, at_step=float(at["value"]), before=before, after=after))
    return pd.DataFrame(rows, columns=["seed", "at_step", "before", "after"])


def rate_margin(total_steps: int, step: int) -> float:
    """The margin of a difference of fall rates (per 1,000 steps): the book's margin lost over the steps after ``step``."""
    return 1000 * DIFFERENCE_MARGIN / max(1, total_steps - step)


@dataclass(frozen=True)
class StepTest:
    """An lr step test: weight v1 at the switch and at the end, the fall per 1,000 steps before and after the switch,
    the rate margin, ``reading`` and what it says of drift (``drift``: "for", "against", "neither").

    ``lr step-down``: "recovers" (end above switch by the difference rule: an equilibrium set by the noise level,
    against), "partly-recovers" (neither), "keeps-falling" (switch above end by the rule) or "stays" (both for:
    accumulated drift). ``lr step-up``: "falls-faster" (the fall after the switch faster than before by the rule with
    :func:`rate_margin`: for), "partly-faster" (neither), "not-faster" (against)."""

    name: str
    switch: int
    at_switch: Estimate
    at_end: Estimate
    #: per run, v1 at the end minus at the switch; the fall per 1,000 steps after minus before it
    change: Estimate
    rate_change: Estimate
    fall_before: Estimate
    fall_after: Estimate
    margin: float
    reading: str
    drift: str


def step_test(results: Results, name: str) -> StepTest | None:
    """The :class:`StepTest` of drift test ``name`` (None where it was not run)."""
    table = results.drift_tests.get(name)
    if table is None or table.empty:
        return None
    total = results.settings.base.steps
    switch = switch_step(total)
    rates = fall_rates(table, switch)
    at_switch, at_end = estimate(rates["at_step"]), weight_v1(table, "res-none")
    change = estimate(at_final_step(_v1_runs(table)).set_index("seed")["value"] - rates.set_index("seed")["at_step"])
    before, after = estimate(rates["before"]), estimate(rates["after"])
    rate_change = estimate(rates["after"] - rates["before"])
    margin = rate_margin(total, switch)
    if DRIFT_TESTS[name]["lr_step_factor"] < 1:
        recovery = verdict_for_difference(at_end, at_switch)
        if recovery == "reproduced":
            reading, drift = "recovers", "against"
        elif recovery == "partly reproduced":
            reading, drift = "partly-recovers", "neither"
        else:
            reading, drift = (
                ("keeps-falling" if verdict_for_difference(at_switch, at_end) == "reproduced" else "stays"),
                "for",
            )
    else:
        faster = verdict_for_difference(after, before, margin=margin)
        reading, drift = {"reproduced": ("falls-faster", "for"), "partly reproduced": ("partly-faster", "neither")}.get(
            faster, ("not-faster", "against")
        )
    return StepTest(name, switch, at_switch, at_end, change, rate_change, before, after, margin, reading, drift)


#: A run is still rising at its end when its peak of weight v1 lies in the last this share of its steps.
STILL_RISING_SHARE = 0.1


@dataclass(frozen=True)
class EqualDistance:
    """``lr 3e-4 long`` against the base run (res-none, lr 1e-3) at equal summed learning rate (the long run's end,
    ``long_final``, against the base run's, ``base_final``) and at equal steps (``at_base_steps``); runs of the long test
    still rising at their end (:data:`STILL_RISING_SHARE`). ``verdict``: :func:`verdict_for_value` of ``long_final``
    against ``base_final``'s mean (the curves coincide on the summed-lr axis). ``drift``: "for" where they coincide,
    else "neither": a long run that ends higher is what both an equilibrium set by the noise and a diffusive drift
    (a net turn growing as lr x sqrt(steps)) predict."""

    lr: float
    base_lr: float
    steps: int
    base_steps: int
    long_final: Estimate
    base_final: Estimate
    at_base_steps: Estimate
    still_rising: int
    runs: int
    verdict: str
    drift: str


def equal_distance(results: Results) -> EqualDistance | None:
    """The :class:`EqualDistance` reading of ``lr 3e-4 long`` (None where it was not run)."""
    table = results.drift_tests.get("lr 3e-4 long")
    if table is None or table.empty:
        return None
    base = results.settings.base
    runs = _v1_runs(table)
    steps = int(runs["step"].max())
    peaks = runs.loc[runs.groupby("seed")["value"].idxmax()]
    last = runs.groupby("seed")["step"].max()
    rising = int((peaks.set_index("seed")["step"] >= (1 - STILL_RISING_SHARE) * last).sum())
    long_final, base_final = weight_v1(table, "res-none"), weight_v1(results.interventions["adam"], "res-none")
    verdict = verdict_for_value(long_final, base_final.mean)
    return EqualDistance(
        DRIFT_TESTS["lr 3e-4 long"]["optimizer"].lr,
        base.optimizer.lr,
        steps,
        base.steps,
        long_final,
        base_final,
        estimate(at_step(runs, base.steps)["value"]),
        rising,
        runs["seed"].nunique(),
        verdict,
        "for" if verdict == "reproduced" else "neither",
    )


#: What a verdict of drift's prediction says of drift; and the verdict of a claim that states drift's prediction, from what its test says.
VERDICT_OF_DRIFT = {"for": "reproduced", "neither": "inconclusive", "against": "not reproduced"}


#: The batch tests and their batch sizes (the base run, :attr:`Condition2Settings.base`, is the middle dose).
BATCH_TESTS = ("batch 64", "batch 256")


@dataclass(frozen=True)
class BatchDose:
    """res-none's final weight v1 per batch size (the base run's included); ``verdict``: the largest batch above the
    smallest by the difference rule (gradient noise sets the pace of drift); ``drift`` "for" / "against" / "neither"
    for reproduced / not / partly."""

    finals: dict[int, Estimate]
    verdict: str
    drift: str


def batch_dose(results: Results) -> BatchDose | None:
    """The :class:`BatchDose` (None unless both batch tests ran)."""
    tables = {DRIFT_TESTS[name]["batch_size"]: results.drift_tests.get(name) for name in BATCH_TESTS}
    if any(t is None or t.empty for t in tables.values()):
        return None
    tables[results.settings.base.batch_size] = results.interventions["adam"]
    finals = {size: weight_v1(tables[size], "res-none") for size in sorted(tables)}
    verdict = verdict_for_difference(finals[max(finals)], finals[min(finals)])
    return BatchDose(finals, verdict, DRIFT_OF_VERDICT[verdict])


@dataclass(frozen=True)
class CosineCourse:
    """The cosine intervention: per condition, weight v1 lost per 1,000 steps before and after half the horizon
    (:func:`fall_rates`), where the learning rate has fallen to half."""

    fall_before: dict[str, Estimate]
    fall_after: dict[str, Estimate]


def cosine_course(results: Results) -> CosineCourse | None:
    """The :class:`CosineCourse` (None where the cosine intervention was not run)."""
    table = results.interventions.get("cosine")
    if table is None:
        return None
    half = results.settings.base.steps // 2
    rates = {c: fall_rates(table[table["condition"] == c], half) for c in ("res-none", "res-relu")}
    return CosineCourse(
        {c: estimate(r["before"]) for c, r in rates.items()}, {c: estimate(r["after"]) for c, r in rates.items()}
    )


def cosine_lr(results: Results, steps) -> np.ndarray:
    """The cosine intervention's learning rate at ``steps`` (:func:`geocont.training.cosine_factor`)."""
    factor = cosine_factor(results.settings.base.steps)
    return np.array([results.settings.base.optimizer.lr * factor(int(s)) for s in steps])


@dataclass(frozen=True)
class DriftTests:
    """The learning-rate and batch tests that ran (None where one did not)."""

    step_down: StepTest | None
    step_up: StepTest | None
    equal_distance: EqualDistance | None
    batch: BatchDose | None

    def readings(self) -> dict[str, str]:
        """``{test: "for" | "against" | "neither"}`` of the tests that ran."""
        found = {
            "lr step-down": self.step_down,
            "lr step-up": self.step_up,
            "lr 3e-4 long": self.equal_distance,
            "batch dose": self.batch,
        }
        return {name: test.drift for name, test in found.items() if test is not None}


def forks_found(results: Results) -> ForkFindings | None:
    """The forks from the formed state (:func:`.forks.fork_findings`; None where none ran)."""
    return fork_findings(results.forks, results.settings.base.steps)


def motion_readings(results: Results) -> dict[str, str]:
    """The tests of motion along the symmetry that ran, with what they say: the function-preserving motion of the
    logits (:func:`function_preserving_motion`, the seeds whose loss rose left out) and the conserved balance
    (:func:`.forks.balance_readings`)."""
    moving = function_preserving_motion(results)
    readings = {} if moving is None else {"function-preserving motion": DRIFT_OF_VERDICT[moving.verdict]}
    return {**readings, **balance_readings(forks_found(results))}


def tally(readings: dict[str, str]) -> str:
    """A group of readings' vote: "for" where more say "for" than "against", "against" for the reverse, else
    "neither"."""
    votes = list(readings.values())
    return (
        "for"
        if votes.count("for") > votes.count("against")
        else "against"
        if votes.count("against") > votes.count("for")
        else "neither"
    )


#: Tests shown beside the tally but not counted in it, with why: a tallied test must be able to read both "for" and
#: "against" drift.
NOT_TALLIED = {
    "lr 3e-4 long": "a long run at a lower rate that ends higher is what both drift (a net turn growing as lr x "
    "sqrt(steps)) and an equilibrium set by the gradient noise predict, so it can read for drift or neither, never "
    "against",
}


def drift_readings(results: Results) -> dict[str, str]:
    """Every learning-rate and batch test of drift that ran, applies and can read both ways, with what it says: the
    step tests, the batch test, and the forks (:data:`NOT_TALLIED` are left out). Where the forks ran, the lr step-up
    does not count: at lr 3e-4 the linear net is still forming its frame at the switch, so there is no formed frame to
    lose faster (the forks test that from a formed state)."""
    readings = drift_tests_found(results).readings()
    forks = fork_readings(forks_found(results))
    if forks:
        readings.pop("lr step-up", None)
    return {name: reading for name, reading in {**readings, **forks}.items() if name not in NOT_TALLIED}


#: The groupings of drift's tests into its two votes that the book has used: each names the tests of the motion
#: vote (motion along the symmetry); every other test votes with the learning-rate and batch tests. The first is the
#: verdict of record: the grouping the code had before the forks' numbers were read; the second is the one adopted
#: after they were read. A verdict that changes with the grouping is "inconclusive".
DRIFT_GROUPINGS = {
    "before the forks were read (of record)": ("function-preserving motion",),
    "balance with motion (adopted after the forks were read)": (
        "function-preserving motion",
        "balance moves with the rate",
        "balance moves where continuity falls",
    ),
}


def grouped_readings(results: Results, grouping: str) -> tuple[dict[str, str], dict[str, str]]:
    """(motion readings, learning-rate and batch readings) under one of :data:`DRIFT_GROUPINGS`."""
    every = {**motion_readings(results), **drift_readings(results)}
    motion = DRIFT_GROUPINGS[grouping]
    return (
        {name: reading for name, reading in every.items() if name in motion},
        {name: reading for name, reading in every.items() if name not in motion},
    )


def counts(readings: dict[str, str]) -> dict[str, int]:
    """How many readings say "for", "against" and "neither"."""
    votes = list(readings.values())
    return {side: votes.count(side) for side in ("for", "against", "neither")}


def drift_tests_found(results: Results) -> DriftTests:
    return DriftTests(
        step_test(results, "lr step-down"),
        step_test(results, "lr step-up"),
        equal_distance(results),
        batch_dose(results),
    )

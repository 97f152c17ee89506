"""From run tables to reported numbers: per-run reductions, estimates, verdict rules, rank correlation.

Aggregation is always two-stage: first the mean over a run's layer pairs (one number per run and step), then
the mean and standard deviation over seeds, so the spread reported everywhere is the seed-to-seed spread. A
diverged run is left out of the estimates at a run's end, and counted (``Estimate.n_diverged``). Nothing here
knows a chapter. docs/design.md ("Verdict rules") gives the three rules that keep a verdict from passing for
the wrong reason: the random level judged against its own spread, windowed peaks, and a single seed's spread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from .tables import RUN_KEYS, diverged_runs, select


def per_run(table: pd.DataFrame, metric: str, space: str = "", direction: int | None = None) -> pd.DataFrame:
    """Mean over layers (pairs) of one metric: one row per run x step, column ``value``."""
    rows = select(table, metric, space, direction)
    return rows.groupby(RUN_KEYS + ["step"], observed=True)["value"].mean().reset_index()


def at_final_step(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``frame`` at each run's last step."""
    last = frame.groupby(RUN_KEYS, observed=True)["step"].transform("max")
    return frame[frame["step"] == last]


@dataclass(frozen=True)
class Estimate:
    """Mean and seed-to-seed standard deviation of one quantity over ``n`` seeds that trained, and how many seeds
    did not (``n_diverged``: diverged, or exploded and cut at their event, :mod:`geocont.validity`; left out of the
    mean); ``left_out`` names them where the estimate knows which (``res-none seed 0 exploded at step 8,740``)."""

    mean: float
    std: float
    n: int
    n_diverged: int = 0
    left_out: str = ""

    def __str__(self) -> str:
        if math.isnan(self.mean):
            text = "n/a"
        else:
            text = f"{self.mean:.2f} ± {self.std:.2f}" if self.n > 1 else f"{self.mean:.2f} (1 seed)"
        return text + (f" ({self.diverged_text})" if self.n_diverged else "")

    @property
    def diverged_text(self) -> str:
        """``2 of 8 seeds left out: seed 0 exploded at step 8,740; ...`` (empty where none was)."""
        if not self.n_diverged:
            return ""
        total = self.n + self.n_diverged
        which = f": {self.left_out}" if self.left_out else " (did not train)"
        return f"{self.n_diverged} of {total} seed{'s' if total > 1 else ''} left out{which}"


def estimate(values: pd.Series, n_diverged: int = 0, left_out: str = "") -> Estimate:
    values = values.dropna()
    n = len(values)
    if n == 0:
        return Estimate(math.nan, math.nan, 0, n_diverged, left_out)
    return Estimate(float(values.mean()), float(values.std()) if n > 1 else math.nan, n, n_diverged, left_out)


def left_out_text(runs: pd.DataFrame) -> str:
    """Which runs of :func:`geocont.tables.diverged_runs` rows did not train, and how: ``res-none seed 0 exploded at
    step 8,740; res-none seed 2 diverged at step 910``."""
    parts = []
    for run in runs.itertuples(index=False):
        condition = getattr(run, "condition", None)
        name = (
            f"{condition} seed {run.seed}"
            if condition is not None and "seed" in runs
            else (f"seed {run.seed}" if "seed" in runs else "the run")
        )
        parts.append(f"{name} {getattr(run, 'status', 'diverged')} at step {int(run.step):,}")
    return "; ".join(parts)


def left_out_of(runs: pd.DataFrame) -> dict:
    """``n_diverged`` and ``left_out`` of :func:`estimate` for the runs that did not train."""
    return dict(n_diverged=len(runs), left_out=left_out_text(runs))


def _diverged_of(table: pd.DataFrame, equal: dict, by_step: int | None = None) -> pd.DataFrame:
    """The diverged runs of ``table`` matching the ``equal`` filters (that diverged at or before ``by_step``)."""
    runs = diverged_runs(table)
    for column, value in equal.items():
        if column in runs.columns:
            runs = runs[runs[column] == value]
    return runs if by_step is None else runs[runs["step"] <= by_step]


def without_runs(frame: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``frame`` not belonging to one of ``runs`` (matched on their common run-key columns)."""
    keys = [key for key in RUN_KEYS if key in frame.columns and key in runs.columns]
    if runs.empty:
        return frame
    if not keys:  # a single run's table: it is the diverged run
        return frame.iloc[:0]
    listed = set(runs[keys].astype(object).itertuples(index=False, name=None))
    mask = pd.Series(
        [row not in listed for row in frame[keys].astype(object).itertuples(index=False, name=None)],
        index=frame.index,
        dtype=bool,
    )
    return frame[mask]


def final_per_run(table: pd.DataFrame, metric: str, space: str = "", direction: int | None = None) -> pd.DataFrame:
    """:func:`per_run` at each run's last step, diverged runs left out (their last step is not the end)."""
    return without_runs(at_final_step(per_run(table, metric, space, direction)), diverged_runs(table))


def final_estimate(
    table: pd.DataFrame, metric: str, space: str = "", direction: int | None = None, **equal
) -> Estimate:
    """Mean ± sd over seeds of a metric's layer-mean at the last step, for one condition; diverged
    runs are left out and counted."""
    frame = at_final_step(per_run(table, metric, space, direction))
    for column, value in equal.items():
        frame = frame[frame[column] == value]
    diverged = _diverged_of(table, equal)
    return estimate(without_runs(frame, diverged)["value"], **left_out_of(diverged))


def estimate_at_step(
    table: pd.DataFrame, step: int, metric: str, space: str = "", direction: int | None = None, **equal
) -> Estimate:
    """Mean ± sd over seeds of a metric's layer-mean at one step (e.g. 0, before any update); runs
    that diverged at or before it are counted as diverged."""
    frame = per_run(table, metric, space, direction)
    frame = frame[frame["step"] == step]
    for column, value in equal.items():
        frame = frame[frame[column] == value]
    diverged = _diverged_of(table, equal, by_step=step)
    return estimate(without_runs(frame, diverged)["value"], **left_out_of(diverged))


def up_to_step(table: pd.DataFrame, step: int) -> pd.DataFrame:
    """The rows of a run table (or sweep table) at steps ``<= step``: the runs as if they had
    stopped there (the snapshot at ``step`` becomes their final one). Exact for our runs,
    whose learning rate does not depend on the total length."""
    return table[table["step"] <= step]


def change_over_last(
    table: pd.DataFrame, metric: str, space: str = "", direction: int | None = None, fraction: float = 1 / 3, **equal
) -> Estimate:
    """How much a layer-mean metric still moved over the last ``fraction`` of training (mean ± sd
    over seeds of :func:`change_over_last_per_run`). Near zero (against its sd) where the quantity
    has settled."""
    frame = per_run(table, metric, space, direction)
    for column, value in equal.items():
        frame = frame[frame[column] == value]
    diverged = _diverged_of(table, equal)
    return estimate(change_over_last_per_run(without_runs(frame, diverged), fraction)["value"], **left_out_of(diverged))


def _with_previous_step(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a column ``previous``: the run's snapshot step before each row's step."""
    steps = frame[["step"] + RUN_KEYS].drop_duplicates().sort_values("step")
    steps["previous"] = steps.groupby(RUN_KEYS, observed=True)["step"].shift()
    return frame.merge(steps, on=RUN_KEYS + ["step"], how="left")


def turn_rates(table: pd.DataFrame, space: str = "input") -> pd.DataFrame:
    """Rotation drift as a rate: each ``turn`` row (degrees since the previous snapshot)
    divided by its snapshot interval, in degrees per 1,000 steps (columns as :func:`per_run`'s
    input, metric ``turn``). Snapshots are unevenly spaced, so turns per snapshot of
    different intervals are not comparable; rates are. The interval is the one since the run's previous
    *snapshot* (the steps with ``weight_cos`` rows), not since its previous dense-trace point."""
    snapshots = select(table, "weight_cos", space, 1)
    steps = _with_previous_step(snapshots[["step"] + RUN_KEYS].drop_duplicates())
    rows = select(table, "turn", space, 1).merge(steps, on=RUN_KEYS + ["step"], how="left")
    return rows.assign(value=1000 * rows["value"] / (rows["step"] - rows["previous"]))


def drift_window_mean(frame: pd.DataFrame, start_fraction: float = 0.1) -> pd.DataFrame:
    """Per run, the layer-and-snapshot mean of ``frame`` (rows as :func:`turn_rates` or
    :func:`geocont.tables.select` give) over steps after ``start_fraction`` of its last step,
    each snapshot weighted by its interval (a time average), one row per run."""
    if "previous" not in frame:
        frame = _with_previous_step(frame)
    last = frame.groupby(RUN_KEYS, observed=True)["step"].transform("max")
    window = frame[(frame["step"] > start_fraction * last) & frame["value"].notna() & frame["previous"].notna()]
    weight = window["step"] - window["previous"]
    keys = [window[k] for k in RUN_KEYS]
    weighted = (window["value"] * weight).groupby(keys, observed=True).sum()
    return (weighted / weight.groupby(keys, observed=True).sum()).rename("value").reset_index()


class PeakAndFinal(NamedTuple):
    """A metric's (windowed) peak over training and its final value, each as mean ± sd over seeds."""

    peak: Estimate
    final: Estimate


#: The windowed peak's width: a peak is the largest mean of this many consecutive snapshots of a
#: run's layer-mean series (:func:`windowed_peaks`). The maximum of 40-90 single snapshots is biased
#: up for a noisy series (for a flat one with iid noise by about 2.3 noise sds at 60 snapshots); the
#: mean of 5 cuts the noise of each candidate by sqrt(5) and so that bias by more than half, while a
#: real peak (our runs' rise and fall span tens of snapshots) is still resolved. Chosen before any
#: verdict was read with it.
PEAK_WINDOW = 5


def _layer_means(table: pd.DataFrame, metric: str, space: str, direction: int, equal: dict) -> pd.DataFrame:
    """:func:`per_run` rows of the ``equal`` runs, diverged runs left out."""
    frame = per_run(table, metric, space, direction)
    for column, value in equal.items():
        frame = frame[frame[column] == value]
    return without_runs(frame, _diverged_of(table, equal))


def window_peak(steps: Sequence[int], values: Sequence[float], window: int = PEAK_WINDOW) -> tuple[float, int]:
    """The windowed peak of one series: ``(peak, step)``, the largest mean of ``window`` consecutive
    values (in step order; step 0 and NaN values left out) and the step at the centre of that window
    (for an even window, the earlier of its two middle snapshots). A series with fewer values than
    ``window``: the mean of all, at its middle snapshot. ``(nan, -1)`` for a series with no value after
    step 0. The first best window wins a tie."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    order = np.argsort(np.asarray(steps), kind="stable")
    steps_, values_ = np.asarray(steps)[order], np.asarray(values, dtype=float)[order]
    keep = (steps_ != 0) & np.isfinite(values_)
    steps_, values_ = steps_[keep], values_[keep]
    if not len(values_):
        return math.nan, -1
    width = min(window, len(values_))
    means = np.convolve(values_, np.ones(width) / width, mode="valid")
    start = int(np.argmax(means))
    return float(means[start]), int(steps_[start + (width - 1) // 2])


def windowed_peaks(
    table: pd.DataFrame, metric: str, space: str, direction: int, window: int = PEAK_WINDOW, **equal
) -> pd.DataFrame:
    """Per seed, the windowed peak of a layer-mean metric (:func:`window_peak` of its series over
    snapshots): columns ``seed``, ``peak`` and ``step`` (the centre of the best window); diverged runs
    and runs with no snapshot after step 0 left out. Where several runs share a seed (``equal`` does not
    narrow the table to one condition), the seed's highest peak."""
    rows = []
    for run, group in _layer_means(table, metric, space, direction, equal).groupby(RUN_KEYS, observed=True):
        peak, step = window_peak(group["step"].to_numpy(), group["value"].to_numpy(), window)
        if not math.isnan(peak):
            rows.append(dict(seed=run[RUN_KEYS.index("seed")], peak=peak, step=step))
    peaks = pd.DataFrame(rows, columns=["seed", "peak", "step"])
    if peaks.empty:
        return peaks
    best = peaks.sort_values(["seed", "peak"], ascending=[True, False], kind="stable").drop_duplicates("seed")
    return best.reset_index(drop=True)


def peaks_per_seed(table: pd.DataFrame, metric: str, space: str, direction: int, **equal) -> pd.Series:
    """Per seed (the index), the windowed peak (:data:`PEAK_WINDOW`, :func:`windowed_peaks`) over
    training of a layer-mean metric; diverged runs left out. The peak every rule reads."""
    peaks = windowed_peaks(table, metric, space, direction, **equal)
    return pd.Series(peaks["peak"].to_numpy(dtype=float), index=pd.Index(peaks["seed"], name="seed"), name="value")


def max_per_seed(table: pd.DataFrame, metric: str, space: str, direction: int, **equal) -> pd.Series:
    """Per seed (the index), the exact maximum over every snapshot (step 0 included) of a layer-mean
    metric; diverged runs left out. Biased up for a noisy series: no verdict reads it (they read
    :func:`peaks_per_seed`)."""
    return _layer_means(table, metric, space, direction, equal).groupby("seed")["value"].max()


def peak_and_final(table: pd.DataFrame, metric: str, space: str, direction: int, **equal) -> PeakAndFinal:
    """Per seed, the windowed peak (:func:`peaks_per_seed`) and the final value of a layer-mean metric
    (diverged runs left out of both and counted)."""
    return PeakAndFinal(
        estimate(peaks_per_seed(table, metric, space, direction, **equal), **left_out_of(_diverged_of(table, equal))),
        final_estimate(table, metric, space, direction, **equal),
    )


#: The book's margin for any difference (a fall, a gap between conditions, a rise above the random
#: level): the smallest change of a |cos| that a verdict calls real, besides the seed-to-seed spread.
DIFFERENCE_MARGIN = 0.10

#: How close our mean must be to the paper's number for "reproduced" ("partly": 2.5 times as far).
VALUE_TOLERANCE = 0.10


def verdict_for_value(ours: Estimate, paper: float, tolerance: float = VALUE_TOLERANCE) -> str:
    """ "reproduced" within ``tolerance`` of the paper's number, "partly" within 2.5x that.

    Not for "at the random level": 0.10 around a random level of 0.05 passes three times that level;
    use :func:`verdict_at_random_level`."""
    if math.isnan(ours.mean):
        return "not tested"
    gap = abs(ours.mean - paper)
    if gap <= tolerance:
        return "reproduced"
    return "partly reproduced" if gap <= 2.5 * tolerance else "not reproduced"


#: The seed sd a single-seed estimate counts as (:func:`seed_spread`): one seed shows no spread, and
#: counting it as 0 lets a one-seed difference pass on the margin alone. Half the book's margin
#: (:data:`DIFFERENCE_MARGIN`), about the largest seed sd of the |cos| estimates in the book's 3-seed
#: runs; chosen before any single-seed verdict was read.
SINGLE_SEED_SD = 0.05


def seed_spread(e: Estimate) -> float:
    """The seed-to-seed sd an estimate counts as in a verdict: its seed sd for ``n >= 2`` (the floor
    :data:`SINGLE_SEED_SD` where that sd is undefined), :data:`SINGLE_SEED_SD` for one seed, NaN for none.

    One exception: a one-"seed" estimate whose sd is exactly 0 (not NaN, which :func:`estimate` gives a
    single seed) is a known number, not a measurement (a random level, zero: :func:`known`); it counts as 0.
    """
    if e.n == 0:
        return math.nan
    if e.n == 1:
        return 0.0 if e.std == 0.0 else SINGLE_SEED_SD
    return SINGLE_SEED_SD if math.isnan(e.std) else e.std


def known(value: float) -> Estimate:
    """A known number (a random level, zero) as an :class:`Estimate` to compare against: sd 0, one "seed";
    :func:`seed_spread` counts it as exact."""
    return Estimate(float(value), 0.0, 1)


def is_known(e: Estimate) -> bool:
    """Whether ``e`` is a known number (:func:`known`), not a measurement over seeds."""
    return e.n == 1 and e.std == 0.0


def difference(high: Estimate, low: Estimate) -> Estimate:
    """``high`` minus ``low`` as a reported number: the difference of the means, with the seed sd of the
    difference of two independent runs, sqrt(s_high^2 + s_low^2) (each :func:`seed_spread`: a single seed
    counts as :data:`SINGLE_SEED_SD`, a known number as 0), over the fewer seeds of the measured ones (a
    known number has no seeds: a measurement minus the random level keeps the measurement's seeds)."""
    spread = math.sqrt(seed_spread(high) ** 2 + seed_spread(low) ** 2)
    measured = [e.n for e in (high, low) if not is_known(e)] or [1]
    return Estimate(high.mean - low.mean, spread, min(measured))


def pooled_sd(*estimates: Estimate) -> float:
    """Root-mean-square seed spread (:func:`seed_spread`) of several estimates: a single-seed one
    counts as :data:`SINGLE_SEED_SD`, a known number (:func:`known`) as 0; NaN if one has no seed."""
    return math.sqrt(sum(seed_spread(e) ** 2 for e in estimates) / len(estimates))


def random_level_sd(d: int, n_pairs: int) -> float:
    """The sd of the layer-pair mean of |cos| of random unit vectors in ``d`` dimensions over ``n_pairs``
    pairs: per pair sqrt(1/d - E|cos|^2) (E cos^2 = 1/d exactly; E|cos| is
    :func:`geocont.metrics.random_abs_cos`; about sqrt((1 - 2/pi)/d) for large d), over sqrt(n_pairs)
    (adjacent pairs of independent random vectors are independent: |cos(a, b)| and |cos(b, c)| are,
    by rotation invariance)."""
    from .metrics import random_abs_cos

    if n_pairs < 1:
        raise ValueError(f"n_pairs must be >= 1, got {n_pairs}")
    mean = random_abs_cos(d)
    return math.sqrt(max(1.0 / d - mean**2, 0.0) / n_pairs)


def random_level_margin(d: int) -> float:
    """The equivalence margin of "at the random level" in ``d`` dimensions: the sd of one pair of random unit
    vectors' |cos| (:func:`random_level_sd` of one pair; 0.038 at d = 256, 0.053 at d = 128).

    Why one pair's sd: a layer mean that lies within it of the random level is as near random as a single random
    pair typically is, so no layer pair need be aligned for it; a margin from the book's difference margin (0.10)
    would pass three times the random level at d = 256. Fixed from the random level alone, before any verdict was
    read with it."""
    return random_level_sd(d, 1)


#: The confidence level of the interval "at the random level" reads (:func:`mean_interval`).
RANDOM_LEVEL_CONFIDENCE = 0.95


def mean_interval(ours: Estimate, level: float = RANDOM_LEVEL_CONFIDENCE) -> tuple[float, float]:
    """The two-sided ``level`` confidence interval of the seed mean: Student-t on ``n - 1`` degrees of freedom with
    the seed sd (:func:`seed_spread`); for one seed, the normal interval of its assumed spread
    (:data:`SINGLE_SEED_SD`); a known number (:func:`known`) is its own interval. NaN where there is no seed."""
    from scipy.stats import norm, t

    if ours.n == 0 or math.isnan(ours.mean):
        return math.nan, math.nan
    if is_known(ours):
        return ours.mean, ours.mean
    tail = (1 + level) / 2
    if ours.n == 1:
        half = float(norm.ppf(tail)) * SINGLE_SEED_SD
    else:
        half = float(t.ppf(tail, ours.n - 1)) * seed_spread(ours) / math.sqrt(ours.n)
    return ours.mean - half, ours.mean + half


def verdict_at_random_level(ours: Estimate, baseline: float, margin: float) -> str:
    """Is ``ours`` at the random level ``baseline``? An equivalence test.

    "reproduced" where the whole confidence interval of the mean (:func:`mean_interval`) lies within ``margin``
    (:func:`random_level_margin`) of the random level; "not reproduced" where it lies wholly outside that band;
    "inconclusive" where it straddles an edge; "not tested" where ``ours`` has no value. More seed noise widens
    the interval, so it can only make "reproduced" harder (a noisier estimate is never nearer random)."""
    if math.isnan(margin) or margin < 0:
        raise ValueError(f"margin must be a number >= 0, got {margin}")
    low, high = mean_interval(ours)
    if math.isnan(low):
        return "not tested"
    if baseline - margin <= low and high <= baseline + margin:
        return "reproduced"
    if low > baseline + margin or high < baseline - margin:
        return "not reproduced"
    return "inconclusive"


def verdict_for_difference(high: Estimate, low: Estimate, margin: float = DIFFERENCE_MARGIN) -> str:
    """Does ``high`` exceed ``low``?

    "reproduced" if the difference exceeds both ``margin`` and two pooled seed sds;
    "partly reproduced" if it exceeds half the margin and one pooled sd (right sign, small
    or noisy); otherwise "not reproduced".
    """
    if math.isnan(high.mean) or math.isnan(low.mean):
        return "not tested"
    pooled = pooled_sd(high, low)
    difference = high.mean - low.mean
    if difference > max(margin, 2 * pooled):
        return "reproduced"
    return "partly reproduced" if difference > max(margin / 2, pooled) else "not reproduced"


@dataclass(frozen=True)
class Fall:
    """How far a quantity fell from its peak to its end (the fall rule, the one every chapter uses); the
    peak is the windowed peak (:func:`peaks_per_seed`, :data:`PEAK_WINDOW`).

    ``verdict`` is :func:`verdict_for_difference` (peak above final); ``falls``: a clear fall, the
    verdict "reproduced" (more than :data:`DIFFERENCE_MARGIN` and two pooled seed sds); ``holds``:
    the seed-mean fall is below the margin (it kept what it formed).
    """

    peak: Estimate
    final: Estimate

    @property
    def amount(self) -> float:
        return self.peak.mean - self.final.mean

    @property
    def drop(self) -> Estimate:
        """Peak minus final, with its spread (:func:`difference`)."""
        return difference(self.peak, self.final)

    @property
    def verdict(self) -> str:
        return verdict_for_difference(self.peak, self.final)

    @property
    def falls(self) -> bool:
        return self.verdict == "reproduced"

    @property
    def holds(self) -> bool:
        return not math.isnan(self.amount) and self.amount < DIFFERENCE_MARGIN


def fall_from_peak(
    table: pd.DataFrame, metric: str = "weight_cos", space: str = "input", direction: int = 1, **equal
) -> Fall:
    """The :class:`Fall` of a layer-mean metric from its windowed peak over training to its final value."""
    return Fall(*peak_and_final(table, metric, space, direction, **equal))


def formed(peak: Estimate, baseline: float) -> bool:
    """The formation rule: continuity formed when its mean peak over the seeds rises at least
    :data:`DIFFERENCE_MARGIN` above the random level ``baseline``."""
    return not math.isnan(peak.mean) and peak.mean >= baseline + DIFFERENCE_MARGIN


def verdict_for_interval(low: float, high: float, expected_sign: int) -> str:
    """Does a 95% interval ``[low, high]`` show the expected sign (+1 or -1)?

    "reproduced" if it excludes 0 on the expected side, "not reproduced" if it excludes 0
    on the other side, "inconclusive" if it contains 0.
    """
    if expected_sign not in (1, -1):
        raise ValueError(f"expected_sign must be +1 or -1, got {expected_sign}")
    if math.isnan(low) or math.isnan(high):
        return "not tested"
    low, high = sorted((expected_sign * low, expected_sign * high))
    if low > 0:
        return "reproduced"
    return "not reproduced" if high < 0 else "inconclusive"


def closer_to(value: Estimate, target: Estimate, other: Estimate, margin: float = DIFFERENCE_MARGIN) -> str:
    """Is ``value`` nearer ``target`` than ``other``?

    "reproduced" if it is nearer ``target`` by more than the pooled seed sd of the three
    and ``target`` and ``other`` differ by at least ``margin``; "not reproduced" if it is
    nearer ``other`` by more than that sd; "inconclusive" in between.
    """
    if any(math.isnan(e.mean) for e in (value, target, other)):
        return "not tested"
    advantage = abs(value.mean - other.mean) - abs(value.mean - target.mean)
    pooled = pooled_sd(value, target, other)
    if advantage > pooled and abs(target.mean - other.mean) > margin:
        return "reproduced"
    return "not reproduced" if advantage < -pooled else "inconclusive"


def at_step(frame: pd.DataFrame, step: int) -> pd.DataFrame:
    """Rows of ``frame`` at ``step``, or, for a run without that snapshot, at its last snapshot before it."""
    earlier = frame[frame["step"] <= step]
    return at_final_step(earlier)


def _third_start(last, fraction: float):
    """The earliest step of the last ``fraction`` of a run ending at ``last`` (2,000 of 3,000 for a third, free
    of the float rounding of ``(1 - 1/3) * 3000``)."""
    return (1 - fraction) * last * (1 - 1e-12)


def change_over_last_per_run(frame: pd.DataFrame, fraction: float = 1 / 3, keys: Sequence[str] = ()) -> pd.DataFrame:
    """Per run (and ``keys``), how much ``value`` moved over the last ``fraction`` of training: its
    value at the last step minus its value at the first snapshot at or after ``(1 - fraction)`` of
    it (column ``value``; ``start`` names that snapshot: the last third never reaches back before two thirds of
    the run; NaN where the last third holds no snapshot but the last, so that no movement can be measured). ``frame`` has one value per run, key and step (e.g. :func:`per_run`). How settled a quantity is: a
    change near 0 means it has stopped moving."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    by = [key for key in RUN_KEYS if key in frame.columns] + list(keys)
    last = frame.groupby(by, observed=True)["step"].transform("max")
    final = frame[frame["step"] == last].set_index(by)["value"]
    after = frame[frame["step"] >= _third_start(last, fraction)]
    start_step = after.groupby(by, observed=True)["step"].transform("min")
    start = after[after["step"] == start_step].set_index(by)
    out = (final - start["value"]).rename("value").to_frame()
    out["start"] = start["step"]
    out.loc[out["start"] == frame[frame["step"] == last].set_index(by)["step"], "value"] = math.nan
    return out.reset_index()


def settled(change: Estimate, tolerance: float = 0.05) -> bool:
    """A quantity has settled when its mean change over the late window is within ``tolerance``."""
    return not math.isnan(change.mean) and abs(change.mean) <= tolerance


#: A quantity has settled in a run when it moved by at most this over the last third of the run (up to the
#: snapshot it is judged at); the book's difference margin is twice this.
SETTLED_TOLERANCE = 0.05


@dataclass(frozen=True)
class Settledness:
    """How much a quantity still moved over the last third up to ``step``, seed by seed (``changes``), their
    mean ± sd (``trend``), and whether it moved by at most ``tolerance`` in **every** seed (``settled``; never
    the seed mean of changes, which opposite moves cancel)."""

    step: int
    changes: pd.Series
    trend: Estimate
    tolerance: float

    @property
    def settled(self) -> bool:
        values = self.changes.to_numpy(dtype=float)
        return len(values) > 0 and bool(np.all(np.isfinite(values))) and bool(np.all(np.abs(values) <= self.tolerance))


def settledness(
    frame: pd.DataFrame, step: int | None = None, fraction: float = 1 / 3, tolerance: float = SETTLED_TOLERANCE
) -> Settledness:
    """:class:`Settledness` of a layer-mean quantity (``frame``: one row per run and step, :func:`per_run`, diverged
    runs left out) judged at ``step`` (default: each run's last), over the last ``fraction`` of ``[0, step]``."""
    upto = frame if step is None else frame[frame["step"] <= step]
    changes = change_over_last_per_run(upto, fraction)
    values = changes.set_index("seed")["value"] if "seed" in changes else changes["value"]
    judged = int(upto["step"].max()) if len(upto) else -1
    return Settledness(judged if step is None else step, values, estimate(values), tolerance)


def continued(table: pd.DataFrame, fraction: float = 1 / 3) -> pd.DataFrame:
    """A run table whose every value at each run's last step is moved on by its own change over the last
    ``fraction`` (:func:`change_over_last_per_run`, per row): where each quantity would stand after another
    ``fraction`` of training at its last-third rate. A verdict that reads the same on this table as on ``table``
    cannot be changed by the movement still under way at that rate (:func:`movement_could_change`)."""
    by = [key for key in RUN_KEYS if key in table.columns]
    rows = ["group", "layer", "metric", "space", "direction"]
    last = table.groupby(by, observed=True)["step"].transform("max") if by else table["step"].max()
    finals = table[table["step"] == last]
    after = table[table["step"] >= _third_start(last, fraction)]
    start_step = after.groupby(by, observed=True)["step"].transform("min") if by else after["step"].min()
    starts = after[after["step"] == start_step][by + rows + ["value"]].rename(columns={"value": "start"})
    moved = finals.merge(starts, on=by + rows, how="left")
    moved["value"] = moved["value"] + (moved["value"] - moved["start"]).fillna(0.0)
    moved = moved.drop(columns="start")
    out = pd.concat([table[table["step"] != last], moved[table.columns]], ignore_index=True)
    for column in ("group", "metric", "space"):
        if isinstance(table[column].dtype, pd.CategoricalDtype):
            out[column] = out[column].astype("category")
    return out


def movement_could_change(now: str, continued_verdict: str) -> bool:
    """Whether a verdict is blocked by the movement of what it reads: its rule read on the :func:`continued` table
    gives another verdict (a quantity still moving that could not change its verdict does not block it)."""
    return now != continued_verdict and "not tested" not in (now, continued_verdict)


def near_random_tolerance(d: int, n_pairs: int) -> float:
    """The settledness tolerance of a quantity within noise of its random level in ``d`` dimensions over ``n_pairs``
    layer pairs: at least twice the sd of the difference of two snapshot means of random vectors,
    2 x sqrt(2) x :func:`random_level_sd` (0.087 at d = 128 and 3 pairs), else :data:`SETTLED_TOLERANCE`. Below
    it, a near-random quantity's "movement" is its own noise, and calling it unsettled would be a coin toss."""
    return max(SETTLED_TOLERANCE, 2 * math.sqrt(2) * random_level_sd(d, n_pairs))


#: The validation loss may stand this far (nats) above its lowest value so far before a run is said to have
#: begun memorising its training text.
VALIDATION_RISE = 0.02


def memorising(val_loss: pd.DataFrame, step: int, rise: float = VALIDATION_RISE) -> bool:
    """Whether any run's validation loss at ``step`` (``val_loss``: one row per run and step) stands more than
    ``rise`` above its minimum over the snapshots up to ``step``."""
    upto = val_loss[val_loss["step"] <= step]
    if upto.empty:
        return False
    lowest = upto.groupby(RUN_KEYS, observed=True)["value"].min()
    now = at_step(upto, step).set_index(RUN_KEYS)["value"]
    return bool(((now - lowest.reindex(now.index)) > rise).any())


def _tolerance_of(tolerance: float | dict[str, float], name: str) -> float:
    return tolerance.get(name, SETTLED_TOLERANCE) if isinstance(tolerance, dict) else tolerance


@dataclass(frozen=True)
class Horizon:
    """Where a run set's claims are judged (:func:`judging_horizon`): ``step``, whether every quantity had
    settled in every seed there (``settled``), each quantity's :class:`Settledness` there, and the last snapshot
    before the validation loss rose (``memorising_after``; None where it never rose)."""

    step: int
    settled: bool
    quantities: dict[str, Settledness]
    memorising_after: int | None

    def moving(self) -> list[str]:
        """The quantities still moving at the horizon."""
        return [name for name, found in self.quantities.items() if not found.settled]


def judging_horizon(
    quantities: dict[str, pd.DataFrame],
    val_loss: pd.DataFrame | None,
    steps: Sequence[int],
    not_before: int = 1,
    fraction: float = 1 / 3,
    tolerance: float | dict[str, float] = SETTLED_TOLERANCE,
    rise: float = VALIDATION_RISE,
) -> Horizon:
    """The first of ``steps`` (snapshots at or after ``not_before``) at which every quantity (``{name: per_run
    frame}``) has settled in every seed and no run has begun memorising (:func:`memorising`); where there is none,
    the last snapshot before memorising began (the budget where it never began), with the quantities still moving
    named there. ``not_before``: early snapshots "settle" trivially, since a quantity has had no time to move over
    the last third of a few steps; a chapter sets it to its early horizon. ``tolerance``: one for every quantity, or
    ``{name: tolerance}`` (:data:`SETTLED_TOLERANCE` for a name it lacks; :func:`near_random_tolerance`)."""
    steps = sorted(int(step) for step in steps if step >= max(1, not_before))
    allowed = [step for step in steps if val_loss is None or not memorising(val_loss, step, rise)]
    memorising_after = None
    if val_loss is not None and len(allowed) < len(steps):
        first_bad = next(step for step in steps if step not in allowed)
        earlier = [step for step in steps if step < first_bad]
        memorising_after = earlier[-1] if earlier else None
        allowed = earlier
    candidates = allowed or steps[:1]
    for step in candidates:
        found = {
            name: settledness(frame, step, fraction, _tolerance_of(tolerance, name))
            for name, frame in quantities.items()
        }
        if all(one.settled for one in found.values()):
            return Horizon(step, True, found, memorising_after)
    last = candidates[-1]
    return Horizon(
        last,
        False,
        {
            name: settledness(frame, last, fraction, _tolerance_of(tolerance, name))
            for name, frame in quantities.items()
        },
        memorising_after,
    )


#: How far above its random level V's continuity may lie and still count as "low" (the book's difference margin).
V_LOW_MARGIN = DIFFERENCE_MARGIN


def verdict_v_low(
    v: Estimate, random_level: float, reproduced_others: Sequence[Estimate], margin: float = V_LOW_MARGIN
) -> str:
    """ "V has low continuity", judged on V alone: V within ``margin`` of its random level, and below the mean of
    the projections of its space whose own "high" claim is reproduced (the difference rule). Both: "reproduced";
    one: "partly reproduced"; neither: "not reproduced"; "not tested" where no other projection of the space is
    reproduced (a failure of another projection is never counted again as V's) or V has no value."""
    if math.isnan(v.mean) or not reproduced_others:
        return "not tested"
    # their mean, with the root-mean-square of their own spreads (each projection's seeds, or layer pairs)
    others = Estimate(
        float(np.mean([other.mean for other in reproduced_others])),
        float(np.sqrt(np.mean([seed_spread(other) ** 2 for other in reproduced_others]))),
        min(other.n for other in reproduced_others),
    )
    near_random = v.mean - random_level <= margin
    below = verdict_for_difference(others, v) == "reproduced"
    return "reproduced" if near_random and below else "partly reproduced" if near_random or below else "not reproduced"


#: How a claim's verdicts at an early and a late horizon combine (a claim "holds" when reproduced).
HOLDS = ("throughout", "only early", "only late", "at neither")


def holds_when(early_verdict: str, late_verdict: str) -> str:
    """ "throughout" if reproduced at both horizons, "only early" / "only late" if at one, else "at
    neither" (partly reproduced counts as not holding); "not tested" where either is untested; "still moving"
    where the late one is "not settled"."""
    if "not tested" in (early_verdict, late_verdict):
        return "not tested"
    if late_verdict == "not settled":
        return "still moving"
    early, late = early_verdict == "reproduced", late_verdict == "reproduced"
    return HOLDS[0] if early and late else HOLDS[1] if early else HOLDS[2] if late else HOLDS[3]


@dataclass(frozen=True)
class RankCorrelation:
    """Spearman's rho with a percentile bootstrap interval (resampling the pairs)."""

    rho: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        return f"ρ = {self.rho:.2f} [{self.low:.2f}, {self.high:.2f}] (n = {self.n})"


def rank_correlation(
    x: pd.Series, y: pd.Series, n_boot: int = 2000, level: float = 0.95, seed: int = 0
) -> RankCorrelation:
    """Spearman correlation of paired values (NaN pairs dropped) with a bootstrap interval."""
    import numpy as np
    from scipy.stats import spearmanr

    pairs = pd.DataFrame({"x": pd.Series(x).to_numpy(), "y": pd.Series(y).to_numpy()}).dropna()
    n = len(pairs)
    if n < 3 or pairs["x"].nunique() < 2 or pairs["y"].nunique() < 2:  # undefined for constant input
        return RankCorrelation(math.nan, math.nan, math.nan, n)
    rho = float(spearmanr(pairs["x"], pairs["y"]).statistic)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        sample = pairs.iloc[rng.integers(0, n, n)]
        if sample["x"].nunique() > 1 and sample["y"].nunique() > 1:
            draws.append(spearmanr(sample["x"], sample["y"]).statistic)
    tail = (1 - level) / 2
    low, high = (float(np.nanquantile(draws, q)) for q in (tail, 1 - tail))
    return RankCorrelation(rho, low, high, n)


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if len(x) < 3 or len(np.unique(x)) < 2 or len(np.unique(y)) < 2:
        return math.nan
    return float(spearmanr(x, y).statistic)


def partial_rank_correlation(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> float:
    """Spearman's rho of ``x`` and ``y`` with ``z`` partialled out: ``(r_xy - r_xz r_yz) / sqrt((1 - r_xz^2)(1 -
    r_yz^2))`` of the three rank correlations; NaN where one is undefined or ``z`` fixes either."""
    r_xy, r_xz, r_yz = _spearman(x, y), _spearman(x, z), _spearman(y, z)
    denominator = (1 - r_xz**2) * (1 - r_yz**2)
    if any(math.isnan(r) for r in (r_xy, r_xz, r_yz)) or denominator <= 1e-12:
        return math.nan
    return (r_xy - r_xz * r_yz) / math.sqrt(denominator)


def block_length(n: int) -> int:
    """The block length of the circular block bootstrap over ``n`` depth positions: round(sqrt(n)), at least 2
    (5 for 30 blocks). Longer than the n^(1/3) of weakly dependent series, for neighbouring blocks whose values
    correlate strongly (0.7 to 0.85 in the book's models); fixed before any interval was read with it."""
    return max(2, round(math.sqrt(n)))


def circular_block_indices(n: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """One circular-block-bootstrap resample of ``0..n-1``: blocks of ``length`` consecutive positions (wrapping
    round the end) from random starts, concatenated and cut to ``n``."""
    starts = rng.integers(0, n, math.ceil(n / length))
    return ((starts[:, None] + np.arange(length)[None, :]) % n).ravel()[:n]


#: How many depth positions at each end the edge-free correlation leaves out (:func:`depth_correlation`).
EDGE_BLOCKS = 2


@dataclass(frozen=True)
class DepthCorrelation:
    """A rank correlation across the depth positions of one model, read with their dependence (:func:`depth_correlation`):
    ``raw`` (Spearman's rho over positions), ``partial`` (depth partialled out: the verdict's number) and
    ``without_edges`` (rho without :data:`EDGE_BLOCKS` positions at each end), each with a circular-block-bootstrap
    interval of ``block`` positions; ``n`` the number of depth positions (the independent-ish units; seeds averaged)."""

    raw: RankCorrelation
    partial: RankCorrelation
    without_edges: RankCorrelation
    n: int
    block: int

    def __str__(self) -> str:
        return (
            f"partial on depth {_interval_text(self.partial)}; raw {_interval_text(self.raw)}; without "
            f"{EDGE_BLOCKS} edge blocks at each end {_interval_text(self.without_edges)} ({self.n} depth positions, "
            f"circular blocks of {self.block})"
        )


def _interval_text(found: RankCorrelation) -> str:
    if math.isnan(found.rho):
        return "n/a"
    return f"ρ = {found.rho:.2f} [{found.low:.2f}, {found.high:.2f}]"


def depth_correlation(
    x: pd.Series, y: pd.Series, depth: pd.Series, n_boot: int = 2000, level: float = 0.95, seed: int = 0
) -> DepthCorrelation:
    """The rank correlation of ``x`` and ``y`` across depth positions ``depth`` (several values at one position,
    e.g. seeds, are averaged first: they are not independent blocks), with intervals from a circular block bootstrap
    over positions (:func:`block_length`) that keeps neighbouring blocks' dependence; ``partial`` controls for depth
    (:func:`partial_rank_correlation`), ``without_edges`` leaves the :data:`EDGE_BLOCKS` positions at each end out."""
    frame = pd.DataFrame({"x": np.asarray(x, float), "y": np.asarray(y, float), "depth": np.asarray(depth, float)})
    means = frame.dropna().groupby("depth", sort=True)[["x", "y"]].mean().reset_index()
    n = len(means)
    length = block_length(n)
    arrays = means["x"].to_numpy(), means["y"].to_numpy(), means["depth"].to_numpy()
    draws = range(n_boot if n >= 3 else 0)

    def interval(statistic, keep: np.ndarray) -> RankCorrelation:
        chosen = [a[keep] for a in arrays]
        value = statistic(*chosen)
        if math.isnan(value):
            return RankCorrelation(math.nan, math.nan, math.nan, int(keep.sum()))
        m, inner = int(keep.sum()), block_length(int(keep.sum()))
        inner_rng = np.random.default_rng(seed)
        samples = []
        for _ in draws:
            index = circular_block_indices(m, inner, inner_rng)
            samples.append(statistic(*[a[index] for a in chosen]))
        tail = (1 - level) / 2
        low, high = (float(np.nanquantile(samples, q)) for q in (tail, 1 - tail))
        return RankCorrelation(value, low, high, m)

    every = np.ones(n, bool)
    edges = np.zeros(n, bool)
    edges[EDGE_BLOCKS : n - EDGE_BLOCKS] = True
    return DepthCorrelation(
        raw=interval(lambda a, b, _: _spearman(a, b), every),
        partial=interval(partial_rank_correlation, every),
        without_edges=interval(lambda a, b, _: _spearman(a, b), edges),
        n=n,
        block=length,
    )


def verdict_for_correlation(correlation: RankCorrelation, expected_sign: int) -> str:
    """ "reproduced" if the whole interval has the expected sign, "partly" if only rho has it."""
    if math.isnan(correlation.rho):
        return "not tested"
    rho, low, high = (expected_sign * v for v in (correlation.rho, correlation.low, correlation.high))
    if min(low, high) > 0:
        return "reproduced"
    return "partly reproduced" if rho > 0 else "not reproduced"


#: Verdicts from weakest to strongest, for combining several checks of one claim.
VERDICT_STRENGTH = ("not tested", "not reproduced", "inconclusive", "partly reproduced", "reproduced")


def weakest(verdicts) -> str:
    """The weakest of several verdicts (a claim that must hold in every case is only as strong)."""
    return min(verdicts, key=VERDICT_STRENGTH.index)


#: The metrics whose values compare singular directions, and so are NaN where a direction is undefined.
DIRECTION_METRICS = ("weight_cos", "grad_cos", "cumgrad_cos")


def undefined_pairs(table: pd.DataFrame) -> pd.DataFrame:
    """How many compared pairs had an undefined singular direction (NaN: a zero matrix or a gap
    below :data:`geocont.metrics.DEGENERACY_TOL`), per metric and space, over all runs and snapshots.

    Means over layer pairs skip these values; the columns ``undefined`` and ``pairs`` say how many.
    """
    rows = table[table["metric"].isin(DIRECTION_METRICS)]
    grouped = rows.groupby(["metric", "space"], observed=True)["value"]
    return pd.DataFrame(
        {"undefined": grouped.apply(lambda v: int(v.isna().sum())), "pairs": grouped.size()}
    ).reset_index()

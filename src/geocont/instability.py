"""Loss spikes, memorisation and continuity across them, read from a run's dense trace.

From a run's ``trace_loss`` and ``trace_weight_cos`` (:class:`geocont.recorder.DenseTrace`): the **instability
events** (maximal stretches of trace points whose loss exceeds ``max(INSTABILITY_FACTOR x`` the running minimum
of the earlier trace points``, MEMORISED_LOSS)``, or a recent median with ``window``), the **memorised step**
(the first trace point whose loss is below :data:`MEMORISED_LOSS`), and weight v1 continuity **across** the
events and **between** them (the two add up to the change over the whole run). Nothing here knows a chapter:
every function takes a (sweep) run table and returns one row per run or per event. docs/design.md
("Instability events") gives the rules and why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .statistics import Estimate, estimate, final_estimate, per_run
from .tables import RUN_KEYS, select

#: A trace point is unstable when its loss exceeds this factor times the running minimum of the
#: earlier trace points (and the memorisation threshold): docs/design.md ("Instability events") says why 10.
INSTABILITY_FACTOR = 10.0

#: The training loss (cross-entropy, nats) below which the training set counts as memorised: the
#: trace's mean minibatch loss here, the snapshots' training-set loss in :func:`memorised_steps`.
MEMORISED_LOSS = 0.01

#: A run's training-set loss "rose again" (training became unstable) when its final value exceeds its
#: minimum over training by this factor (and the set is not memorised at the end).
LOSS_RISE_FACTOR = 2.0


def memorised_steps(table: pd.DataFrame, metric: str = "train_set_loss") -> pd.Series:
    """Per seed (the index), the first snapshot whose ``metric`` (a loss) is below :data:`MEMORISED_LOSS`;
    seeds that never get there are absent."""
    loss = per_run(table, metric)
    return loss[loss["value"] < MEMORISED_LOSS].groupby("seed")["step"].min()


def loss_rose(final, lowest):
    """Whether a training-set loss rose again: it ends above :data:`LOSS_RISE_FACTOR` x its lowest value and is not
    memorised at the end (numbers, or pandas Series elementwise)."""
    return (final > LOSS_RISE_FACTOR * lowest) & (final >= MEMORISED_LOSS)


@dataclass(frozen=True)
class LossCourse:
    """A group of runs' training-set loss: its final value and its lowest value over training (means
    over seeds), whether the set ends memorised, and whether the loss rose again (:data:`LOSS_RISE_FACTOR`)."""

    final: Estimate
    lowest: Estimate

    @property
    def memorised(self) -> bool:
        return self.final.mean < MEMORISED_LOSS

    @property
    def rose(self) -> bool:
        return bool(loss_rose(self.final.mean, self.lowest.mean))


def loss_course(table: pd.DataFrame, metric: str = "train_set_loss") -> LossCourse:
    """The :class:`LossCourse` of the runs in ``table`` (diverged runs left out of the final value)."""
    return LossCourse(final_estimate(table, metric), estimate(per_run(table, metric).groupby("seed")["value"].min()))


EVENT_COLUMNS = ["event", "start", "end", "peak_loss", "running_min", "v1_before", "v1_after"]


def _keys(table: pd.DataFrame, extra: Sequence[str] = ()) -> list[str]:
    return [k for k in (*RUN_KEYS, *extra) if k in table.columns]


def trace_series(table: pd.DataFrame, extra_keys: Sequence[str] = ()) -> pd.DataFrame:
    """Per run and trace step: ``loss`` (``trace_loss``) and ``v1`` / ``u1`` (the layer-pair mean of
    ``trace_weight_cos`` in the input / output space; NaN pairs left out of the mean)."""
    keys = _keys(table, extra_keys)
    loss = select(table, "trace_loss").groupby(keys + ["step"], observed=True)["value"].mean().rename("loss")
    parts = [loss]
    for space, name in (("input", "v1"), ("output", "u1")):
        rows = select(table, "trace_weight_cos", space, 1)
        parts.append(rows.groupby(keys + ["step"], observed=True)["value"].mean().rename(name))
    return pd.concat(parts, axis=1).reset_index().sort_values(keys + ["step"], ignore_index=True)


def _rows_of_run(frame: pd.DataFrame, keys: list[str], key: tuple) -> pd.DataFrame:
    """The rows of ``frame`` (say, the events) that belong to the run whose ``keys`` have the values ``key``."""
    for column, value in zip(keys, key):
        frame = frame[frame[column] == value]
    return frame


def _last_finite(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite[-1]) if len(finite) else math.nan


def _first_finite(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite[0]) if len(finite) else math.nan


def reference_levels(loss: np.ndarray, window: int | None = None) -> np.ndarray:
    """Per trace point, the level its loss is read against: the minimum of the earlier points, or (``window``)
    the median of the previous ``window`` points; inf at the first point, which has none."""
    if window is None:
        return np.minimum.accumulate(np.concatenate([[np.inf], loss[:-1]]))
    recent = pd.Series(loss).shift(1).rolling(window, min_periods=1).median()
    return recent.fillna(np.inf).to_numpy()


def _events_of_run(run: pd.DataFrame, factor: float, floor: float, window: int | None = None) -> list[dict]:
    loss = run["loss"].to_numpy()
    v1 = run["v1"].to_numpy()
    steps = run["step"].to_numpy()
    running_min = reference_levels(loss, window)
    threshold = np.maximum(factor * running_min, floor)
    unstable = loss > threshold
    events, index = [], 0
    while index < len(loss):
        if not unstable[index]:
            index += 1
            continue
        end = index
        while end + 1 < len(loss) and unstable[end + 1]:
            end += 1
        events.append(
            dict(
                event=len(events) + 1,
                start=int(steps[index]),
                end=int(steps[end]),
                peak_loss=float(loss[index : end + 1].max()),
                running_min=float(running_min[index]),
                v1_before=_last_finite(v1[:index]),
                # an event still under way at the end of the run: "after" is the run's last traced value
                v1_after=_first_finite(v1[end + 1 :]) if np.isfinite(v1[end + 1 :]).any() else _last_finite(v1[index:]),
            )
        )
        index = end + 1
    return events


def instability_events(
    table: pd.DataFrame,
    factor: float = INSTABILITY_FACTOR,
    floor: float = MEMORISED_LOSS,
    extra_keys: Sequence[str] = (),
    window: int | None = None,
) -> pd.DataFrame:
    """One row per instability event of every run (see the module docstring): its number within the
    run, first and last unstable trace step, peak loss, the level it rose from (``running_min``: the
    running minimum, or with ``window`` the median of the previous ``window`` trace points), and
    weight v1 at the trace points just before and just after it (NaN at the run's ends)."""
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"window must be a positive number of trace points, got {window!r}")
    series = trace_series(table, extra_keys)
    keys = _keys(series, extra_keys)
    rows = []
    for key, run in series.groupby(keys, observed=True, sort=False):
        for event in _events_of_run(run, factor, floor, window):
            rows.append({**dict(zip(keys, key if isinstance(key, tuple) else (key,))), **event})
    return pd.DataFrame(rows, columns=keys + EVENT_COLUMNS)


def run_summary(
    table: pd.DataFrame,
    factor: float = INSTABILITY_FACTOR,
    floor: float = MEMORISED_LOSS,
    extra_keys: Sequence[str] = (),
) -> pd.DataFrame:
    """One row per run: its instability events (count, first step), its memorised step, and weight v1
    read off the trace: at the start, at its peak (value and step), at the end; the change over
    the run split into the part across events and the part between them; the fall from the peak
    to the end split likewise (``fall_from_peak`` = ``fall_across_events`` of the events that start
    after the peak + ``fall_between_events``; positive numbers are losses); the change before and
    after the memorised step; and ``diverged_step`` where the run diverged (NaN otherwise)."""
    series = trace_series(table, extra_keys)
    keys = _keys(series, extra_keys)
    events = instability_events(table, factor, floor, extra_keys)
    diverged = select(table, "diverged").set_index(keys)["step"] if "diverged" in set(table["metric"]) else None
    rows = []
    for key, run in series.groupby(keys, observed=True, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(keys, key))
        row.update(_run_measures(run, events=_rows_of_run(events, keys, key), floor=floor))
        row["diverged_step"] = (
            float(diverged.get(key if len(key) > 1 else key[0], math.nan)) if diverged is not None else math.nan
        )
        rows.append(row)
    return pd.DataFrame(rows)


def _run_measures(run: pd.DataFrame, *, events: pd.DataFrame, floor: float) -> dict[str, Any]:
    """The columns of :func:`run_summary` for one run's trace ``run`` and its instability ``events``, from
    ``events`` to ``last_step``."""
    v1 = run["v1"].to_numpy()
    steps = run["step"].to_numpy()
    valid = np.isfinite(v1)
    peak_index = int(np.nanargmax(v1)) if valid.any() else 0
    across, fall_across = _changes_across_events(events, peak_step=steps[peak_index])
    fall = float(v1[peak_index] - v1[valid][-1]) if valid.any() else math.nan
    total = float(v1[valid][-1] - v1[valid][0]) if valid.any() else math.nan
    memorised_step, v1_at_memorised = _memorised(run, v1=v1, steps=steps, floor=floor)
    return dict(
        events=len(events),
        first_event=int(events["start"].min()) if len(events) else math.nan,
        memorised_step=memorised_step,
        v1_start=_first_finite(v1),
        v1_peak=float(v1[peak_index]),
        peak_step=int(steps[peak_index]),
        v1_final=float(v1[valid][-1]) if valid.any() else math.nan,
        change_total=total,
        change_across_events=across,
        change_between_events=total - across,
        fall_from_peak=fall,
        fall_across_events=fall_across,
        fall_between_events=fall - fall_across,
        change_before_memorised=v1_at_memorised - float(v1[valid][0]) if valid.any() else math.nan,
        change_after_memorised=float(v1[valid][-1]) - v1_at_memorised if valid.any() else math.nan,
        final_loss=float(run["loss"].iloc[-1]),
        min_loss=float(run["loss"].min()),
        last_step=int(steps[-1]),
    )


def _changes_across_events(events: pd.DataFrame, *, peak_step: int) -> tuple[float, float]:
    """The change of v1 across one run's ``events`` (0 without any), and its fall across those that start
    after ``peak_step`` (positive for a loss; 0 without any)."""
    across = float((events["v1_after"] - events["v1_before"]).sum(min_count=1)) if len(events) else 0.0
    after_peak = events[events["start"] > peak_step]
    fall_across = float((after_peak["v1_before"] - after_peak["v1_after"]).sum(min_count=1)) if len(after_peak) else 0.0
    return across, fall_across


def _memorised(run: pd.DataFrame, *, v1: np.ndarray, steps: np.ndarray, floor: float) -> tuple[float, float]:
    """A run's memorised step (its first with a loss below ``floor``) and the first finite v1 from that step
    on; NaN for both where the loss never falls below ``floor``."""
    memorised = steps[run["loss"].to_numpy() < floor]
    memorised_step = int(memorised[0]) if len(memorised) else math.nan
    v1_at_memorised = _first_finite(v1[steps >= memorised_step]) if len(memorised) else math.nan
    return memorised_step, v1_at_memorised


def stable_windows_turn_rate(
    table: pd.DataFrame, events: pd.DataFrame, start_fraction: float = 0.1, extra_keys: Sequence[str] = ()
) -> pd.DataFrame:
    """Per run, rotation drift in degrees per 1,000 steps (the layer mean of the input-space
    ``turn`` between consecutive snapshots, divided by their interval, time-averaged), over the
    snapshot intervals after ``start_fraction`` of training that contain no instability event
    (``events``, from :func:`instability_events`): drift in stable training only. ``windows`` says
    how many intervals were used; a run with none gets NaN."""
    keys = _keys(table, extra_keys)
    turns = select(table, "turn", "input", 1).groupby(keys + ["step"], observed=True)["value"].mean().reset_index()
    rows = []
    for key, run in turns.groupby(keys, observed=True, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        mine = _rows_of_run(events, keys, key)
        run = run.sort_values("step")
        steps = run["step"].to_numpy()
        previous = np.concatenate([[np.nan], steps[:-1]])
        keep = (steps > start_fraction * steps.max()) & np.isfinite(previous) & run["value"].notna().to_numpy()
        for start, end in zip(mine["start"], mine["end"]):
            keep &= ~((previous <= end) & (steps >= start))
        interval = (steps - previous)[keep]
        degrees = run["value"].to_numpy()[keep]
        rate = 1000 * degrees.sum() / interval.sum() if keep.any() else math.nan
        rows.append({**dict(zip(keys, key)), "turn_rate": float(rate), "windows": int(keep.sum())})
    return pd.DataFrame(rows)


def fall_rate_after_peak(summary: pd.DataFrame) -> pd.Series:
    """Weight v1 lost per 1,000 steps after each run's peak (``run_summary`` rows): a comparison at
    equal progress for runs that rise at different speeds (NaN where the peak is the last step)."""
    span = summary["last_step"] - summary["peak_step"]
    return (1000 * (summary["v1_peak"] - summary["v1_final"]) / span).where(span > 0)

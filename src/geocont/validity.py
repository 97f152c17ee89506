"""Did a run train? The run-validity rule every claim of the book reads its runs through.

A run is one of three things:

* **diverged**: its loss became non-finite; training stopped there (the ``diverged`` row the training loop writes);
* **exploded at step k**: its training loss ends in an instability event and never came back: from the start
  ``k`` of some event of the event rule (:data:`geocont.instability.INSTABILITY_FACTOR` times the running minimum of
  the earlier points, and above :data:`geocont.instability.MEMORISED_LOSS`) to its last point, the loss stays above
  that event's threshold. ``k`` is the first such start. A spike the run recovers from is no explosion;
* **trained**: neither.

The loss read is the dense trace's (``trace_loss``) where a run has one, else the snapshots' training-set loss
(``train_set_loss``), else their minibatch loss (``train_loss``).

:func:`cut_exploded` applies the rule to a run table: an exploded run keeps its rows before ``k`` (the snapshots
before its event) and gains one ``exploded`` row at ``k`` (value: its last loss). Every reader of a run then treats
it as a diverged run whose end is ``k`` (:func:`geocont.tables.diverged_runs` lists both): claims at a step before
``k`` read it, claims on a run's end or course (final values, peaks, falls, settledness) leave it out and count it.
No claim reads a run past its explosion.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .instability import INSTABILITY_FACTOR, MEMORISED_LOSS, reference_levels
from .tables import DIVERGED, EXPLODED, RUN_KEYS, make_row

#: The loss series the rule reads, first present first.
LOSS_SERIES = ("trace_loss", "train_set_loss", "train_loss")


def loss_series(table: pd.DataFrame) -> pd.DataFrame:
    """One run's loss over steps (columns ``step``, ``loss``), from the first of :data:`LOSS_SERIES` it has."""
    for metric in LOSS_SERIES:
        rows = table[table["metric"] == metric]
        if len(rows):
            series = rows.groupby("step", observed=True)["value"].mean()
            return pd.DataFrame({"step": series.index.to_numpy(dtype=int), "loss": series.to_numpy(dtype=float)})
    return pd.DataFrame({"step": pd.Series(dtype=int), "loss": pd.Series(dtype=float)})


def explosion_step(
    steps: np.ndarray, loss: np.ndarray, factor: float = INSTABILITY_FACTOR, floor: float = MEMORISED_LOSS
) -> int | None:
    """The step ``k`` at which a loss series exploded (see the module docstring), or None where it did not.
    Non-finite points are left out (a non-finite loss is divergence, its own outcome)."""
    keep = np.isfinite(loss)
    steps, loss = np.asarray(steps)[keep], np.asarray(loss, dtype=float)[keep]
    if len(loss) < 2:
        return None
    running_min = reference_levels(loss)  # the event rule's own running minimum of the earlier points
    threshold = np.maximum(factor * running_min, floor)
    unstable = loss > threshold
    starts = np.flatnonzero(unstable & ~np.concatenate([[False], unstable[:-1]]))
    for start in starts:
        if np.all(loss[start:] > threshold[start]):
            return int(steps[start])
    return None


def run_status(table: pd.DataFrame) -> tuple[str, int | None]:
    """``("diverged", step)``, ``("exploded", k)`` or ``("trained", None)`` for one run's table (as trained, or as
    :func:`cut_exploded` cut it)."""
    for status in (DIVERGED, EXPLODED):
        marker = table[table["metric"] == status]
        if len(marker):
            return status, int(marker["step"].iloc[0])
    series = loss_series(table)
    step = explosion_step(series["step"].to_numpy(), series["loss"].to_numpy())
    return ("exploded", step) if step is not None else ("trained", None)


def cut_exploded(table: pd.DataFrame) -> pd.DataFrame:
    """One run's table as every claim reads it: where the run exploded at ``k``, its rows before ``k`` and one
    ``exploded`` row at ``k`` whose value is the run's last finite loss; otherwise the table unchanged. Idempotent."""
    if table is None or "metric" not in table.columns or (table["metric"] == EXPLODED).any():
        return table
    status, step = run_status(table)
    if status != "exploded":
        return table
    series = loss_series(table)
    finite = series["loss"][np.isfinite(series["loss"])]
    last = float(finite.iloc[-1]) if len(finite) else math.nan
    marker = pd.DataFrame([make_row(step, "model", -1, EXPLODED, "", 0, last)], columns=table.columns[:7])
    for column in table.columns[7:]:  # run-key columns of a sweep table's single run
        marker[column] = table[column].iloc[0]
    kept = table[table["step"] < step]
    out = pd.concat(
        [kept, marker.astype({c: kept[c].dtype for c in ("step", "layer", "direction")})], ignore_index=True
    )
    for column in ("group", "metric", "space"):
        if isinstance(table[column].dtype, pd.CategoricalDtype):
            out[column] = out[column].astype("category")
    return out


def cut_sweep(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`cut_exploded` applied to every run of a sweep table (its :data:`geocont.tables.RUN_KEYS` columns)."""
    keys = [key for key in RUN_KEYS if key in table.columns]
    if not keys:
        return cut_exploded(table)
    parts = [cut_exploded(run) for _, run in table.groupby(keys, observed=True, sort=False)]
    return pd.concat(parts, ignore_index=True) if parts else table


def store_statuses(root) -> pd.DataFrame:
    """Every run entry of a results store folder (``results/cpu``) that did not train: kind, entry, label, status,
    step, last and lowest loss. Reads each entry's ``entry.json`` and ``table.parquet`` directly."""
    import json
    from pathlib import Path

    rows = []
    for entry in sorted(Path(root).glob("*/*/entry.json")):
        table_path = entry.with_name("table.parquet")
        if not table_path.exists():
            continue
        table = pd.read_parquet(table_path)
        if "metric" not in table.columns:  # not a run table (an analysis, a census)
            continue
        status, step = run_status(table)
        if status == "trained":
            continue
        series = loss_series(table)["loss"]
        rows.append(
            dict(
                kind=entry.parent.parent.name,
                entry=entry.parent.name,
                label=json.loads(entry.read_text()).get("label", ""),
                status=status,
                step=step,
                last_loss=float(series.iloc[-1]) if len(series) else math.nan,
                lowest_loss=float(series.min()) if len(series) else math.nan,
            )
        )
    return pd.DataFrame(rows, columns=["kind", "entry", "label", "status", "step", "last_loss", "lowest_loss"])


def main(argv: list[str] | None = None) -> int:
    """``python -m geocont.validity STORE``: the runs of a results store folder that exploded or diverged."""
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("store", help="a results store folder, e.g. results/cpu")
    args = parser.parse_args(argv)
    if not Path(args.store).is_dir():
        parser.exit(2, f"error: no results store folder {args.store}\n")
    found = store_statuses(args.store)
    with pd.option_context("display.width", 200, "display.max_rows", None, "display.max_colwidth", 60):
        print(found.to_string(index=False) if len(found) else "every run trained")
    counts = found["status"].value_counts().to_dict()
    print(", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "0 exploded, 0 diverged")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

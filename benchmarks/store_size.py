"""How large the results store of a scale's book is: measured per run at ``smoke``, extrapolated by row counts.

Method (nothing at the target scale trains):

1. bytes per row: the first MLP run and the first language-model run of the ``smoke`` book (from the run cache,
   else trained, a few seconds each) are thinned and written as the store writes them
   (``geocont.store.thin_table``: float32 values, zstd); their bytes over their rows.
2. rows per run of the target scale: a run's table has one block of rows per snapshot (its count from the run's
   schedule, as its training computes it) and one per trace point (``steps // trace_every + 1`` loss rows, and 2 x
   (depth - 1) continuity rows at every ``TRACE_CONTINUITY_STRIDE``-th point). The rows of one snapshot, which
   depend on the depth, the number of directions and the groups but not on the width or the data, are
   counted on a probe: the run itself at width 8 (d_model 32 for a transformer), a few steps, three snapshots.
3. weights: where the store keeps them (``BookRun.keep_weights``), the model's parameters x 4 bytes.

Usage: python benchmarks/store_size.py [--scale cpu]
"""

from __future__ import annotations

import argparse
import dataclasses
from collections import defaultdict

from geocont import store
from geocont.book.runs import book_run_set
from geocont.config import MLPRunConfig
from geocont.recorder import TRACE_CONTINUITY_STRIDE, snapshot_schedule
from geocont.sweeps import run_jobs
from geocont.tables import current_metric_names


def stored_bytes(table) -> int:
    thinned, _ = store.thin_table(table)
    return len(store._table_bytes(thinned))


def bytes_per_row(kind: str) -> tuple[float, int, int, int]:
    """(bytes per row, rows, bytes, rows predicted by :func:`predicted_rows`) of the first ``kind`` run of the
    smoke book, as the store writes it."""
    run = next(run for run in book_run_set("smoke").runs if run.kind == kind)
    table = run_jobs([run.job], executor="serial", progress=False)[0]
    size = stored_bytes(table)
    return size / len(table), len(table), size, predicted_rows(run.job.argument)


def _probe(config):
    if isinstance(config, MLPRunConfig):
        from geocont.training import train_mlp

        small = config.replace(
            width=8, steps=4, n_snapshots=3, n_late_snapshots=0, snapshot_steps=(), trace_every=0, max_train=256
        )
        return current_metric_names(train_mlp(small, progress=False))
    from geocont.lm import train_lm

    shape = dataclasses.replace(config.shape, d_model=32, n_heads=2, n_kv_heads=2, ffn_dim=64)
    small = config.replace(shape=shape, steps=4, n_snapshots=3, n_late_snapshots=0, snapshot_steps=(), eval_windows=2)
    return train_lm(small, progress=False).table


_SNAPSHOT_ROWS: dict[tuple, tuple[int, int]] = {}


def snapshot_rows(shape: tuple, config) -> tuple[int, int]:
    """(rows of the first snapshot, rows of each later one) of runs of this ``shape`` (kind, depth, directions),
    counted on a probe of ``config``."""
    if shape not in _SNAPSHOT_ROWS:
        table = _probe(config)
        table = table[~table["metric"].astype(str).str.startswith("trace_")]
        per_step = table.groupby("step").size()
        _SNAPSHOT_ROWS[shape] = int(per_step.iloc[0]), int(per_step.iloc[-1])
    return _SNAPSHOT_ROWS[shape]


def schedule(config) -> list[int]:
    """A run's snapshot steps, as its training computes them."""
    if isinstance(config, MLPRunConfig):
        return snapshot_schedule(config.steps, config.n_snapshots, config.n_late_snapshots, config.snapshot_steps)
    return config.schedule()


def predicted_rows(config) -> int:
    shape = (
        ("mlp", config.depth, config.n_directions)
        if isinstance(config, MLPRunConfig)
        else ("lm", config.shape.n_layers, config.n_directions)
    )
    first, later = snapshot_rows(shape, config)
    rows = first + later * (len(schedule(config)) - 1)
    every = getattr(config, "trace_every", 0)
    if every:
        points = config.steps // every + 1
        rows += points + 2 * (config.depth - 1) * len(range(0, config.steps + 1, every * TRACE_CONTINUITY_STRIDE))
    return rows


def weight_bytes(config) -> int:
    from geocont.transformer import build_llama

    return 4 * sum(p.numel() for p in build_llama(config.shape, seed=0).parameters())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="cpu")
    args = parser.parse_args()
    per_row = {}
    for kind in ("mlp", "lm"):
        per_row[kind], rows, size, predicted = bytes_per_row(kind)
        print(
            f"smoke {kind} run as stored: {rows:,} rows, {size / 1e3:.1f} KB ({per_row[kind]:.2f} bytes per row); "
            f"rows predicted by the method: {predicted:,}"
        )
    run_set = book_run_set(args.scale)
    longest = max((run for run in run_set.runs if run.kind == "mlp"), key=lambda run: run.job.argument.steps)
    typical = next(run for run in run_set.runs if run.kind == "mlp")
    for run in [typical] + ([longest] if longest is not typical else []):
        rows = predicted_rows(run.job.argument)
        print(
            f"{args.scale} {run.label} ({run.job.argument.steps:,} steps): {rows:,} rows predicted, "
            f"{rows * per_row['mlp'] / 1e3:.0f} KB"
        )
    runs = run_set.runs + run_set.pending
    tables, weights = defaultdict(float), defaultdict(float)
    counts = defaultdict(int)
    for run in runs:
        config = run.job.argument
        tables[run.chapters[0]] += predicted_rows(config) * per_row[run.kind]
        counts[run.chapters[0]] += 1
        if run.keep_weights:
            weights[run.chapters[0]] += weight_bytes(config)
    print(f"\n{args.scale} store, predicted ({len(runs)} runs, {len(run_set.pending)} of them pending):")
    print(f"{'chapter (first reader)':28s}{'runs':>6s}{'tables MB':>11s}{'weights MB':>12s}")
    for chapter in sorted(counts, key=lambda c: -(tables[c] + weights[c])):
        print(f"{chapter:28s}{counts[chapter]:6d}{tables[chapter] / 1e6:11.1f}{weights[chapter] / 1e6:12.1f}")
    total_tables, total_weights = sum(tables.values()), sum(weights.values())
    print(
        f"{'total':28s}{len(runs):6d}{total_tables / 1e6:11.1f}{total_weights / 1e6:12.1f}"
        f"   = {(total_tables + total_weights) / 1e6:.1f} MB"
    )


if __name__ == "__main__":
    main()

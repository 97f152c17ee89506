"""How far a rebuild may move a chapter's numbers: the same runs trained again, at 1 and at 2 torch threads.

A rebuild on the same machine with the same code should give the same tables bit for bit (every run
computes at a fixed thread count, seeds fix the data order and the initialisation); the first part
checks that, by training each run again into an empty cache. Two torch threads split reductions
differently from one, so their first steps differ by about 1e-5 relative; a run whose dynamics
amplify such differences ends elsewhere. That is the perturbation a rebuild on another machine, or
with other kernels, makes; the second part measures it. The script trains the Condition-2
chapter's headline runs (``--conditions``, the chapter's seeds), reads the 1-thread runs from the
run cache (training them if missing), and prints each run's final weight v1 in all three, the
differences, the largest difference anywhere in the repeated run's table, and the seed sd of each
condition: a rebuild elsewhere moves a number by about its 1-vs-2-thread difference.

Usage: python benchmarks/rebuild_sensitivity.py [--scale cpu] [--conditions res-none res-relu] [--no-repeat]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from unittest import mock

import numpy as np
import pandas as pd

from geocont.chapters import condition2
from geocont.statistics import estimate
from geocont.training import run_sweep


def sweep(configs, threads: int, cache_dir: str | None = None) -> pd.DataFrame:
    """The sweep table of ``configs`` at ``threads`` torch threads per run (and in ``cache_dir``, if given)."""
    environment = {"GEOCONT_RUN_THREADS": str(threads), **({"GEOCONT_CACHE_DIR": cache_dir} if cache_dir else {})}
    with mock.patch.dict(os.environ, environment):
        return run_sweep(configs, executor=f"local:{max(1, (os.cpu_count() or 1) // threads)}")


def finals(table: pd.DataFrame, label: str) -> pd.Series:
    return condition2.per_seed_final(table).set_index(["condition", "seed"])["value"].rename(label)


def largest_difference(first: pd.DataFrame, second: pd.DataFrame) -> float:
    """The largest |difference| of any recorded value between two tables of the same runs (NaN pairs agree)."""
    keys = [c for c in first.columns if c != "value"]
    joined = first.merge(second, on=keys, suffixes=("_a", "_b"), how="outer", indicator=True)
    if (joined["_merge"] != "both").any():
        return float("inf")
    a, b = joined["value_a"].to_numpy(float), joined["value_b"].to_numpy(float)
    both_nan = np.isnan(a) & np.isnan(b)
    return float(np.nanmax(np.where(both_nan, 0.0, np.abs(a - b)))) if len(a) else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--conditions", nargs="+", default=["res-none", "res-relu"])
    parser.add_argument("--no-repeat", action="store_true", help="skip the same-thread repeat into an empty cache")
    args = parser.parse_args()
    settings = condition2.CHAPTER.configure(args.scale)
    configs = [c for c in settings.comparison_configs(settings.headline) if c.condition in args.conditions]
    one = sweep(configs, 1)
    columns = [finals(one, "1 thread (cache)")]
    if not args.no_repeat:
        with tempfile.TemporaryDirectory(prefix="geocont-rebuild-") as empty:
            again = sweep(configs, 1, empty)
        columns.append(finals(again, "1 thread (again)"))
        print(
            f"same code, same thread count, empty cache: largest difference anywhere in the tables "
            f"{largest_difference(one, again):.3g}"
        )
    columns.append(finals(sweep(configs, 2), "2 threads"))
    wide = pd.concat(columns, axis=1)
    wide["2 minus 1 thread"] = wide["2 threads"] - wide["1 thread (cache)"]
    print(f"final weight v1 on {settings.headline}, {settings.base.steps:,} steps")
    print(wide.round(4).to_string())
    for condition, group in wide.groupby(level="condition"):
        difference = group["2 minus 1 thread"].abs()
        print(
            f"{condition}: |2 minus 1 thread| mean {difference.mean():.4f}, max {difference.max():.4f}; "
            f"seed sd at 1 thread {estimate(group['1 thread (cache)']).std:.4f}"
        )


if __name__ == "__main__":
    main()

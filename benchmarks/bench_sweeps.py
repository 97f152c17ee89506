"""Sweep throughput under each executor, and Ray's start-up cost and per-run overhead.

1. A fixed subset of the ``mlp_conditions`` ``cpu`` sweep (the first ``--runs`` condition x
   seed configurations, ``--epochs`` epochs each instead of 30), one executor after another
   in this one invocation, each into a fresh cache (nothing is loaded from a cache):
   - ``in-process``: no executor, runs one after another in this process at torch's
     default thread count, one per core (set explicitly, whatever ``OMP_NUM_THREADS`` says);
   - ``serial``, ``local`` (all cores, 1 thread per run) and ``ray`` (a local Ray on all
     cores), each twice: ``cold``, the first sweep of the process including the executor's
     start-up (the forkserver; ``ray.init`` and Ray's workers importing torch), and
     ``warm``, a second sweep into another fresh cache.
   Printed as runs per hour and relative to ``in-process``. The dataset is loaded in this
   process before timing; the workers of ``local`` and ``ray`` load it inside the timing.
2. Ray start-up (``ray.init``) and per-run overhead: a sweep of ``--trivial`` jobs that
   compute a one-row table, wall time per run under serial, local and ray; then the
   ``smoke`` conditions sweep (all conditions x seeds) under serial, local and ray.

Usage: python benchmarks/bench_sweeps.py [--runs 4] [--epochs 3] [--trivial 40]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import pandas as pd
import torch

from geocont import sweeps
from geocont.chapters import chapter
from geocont.training import _dataset, mlp_job, train_mlp


def one_row(value: float) -> pd.DataFrame:
    """The computation of a trivial job: all the time a sweep spends on it is overhead."""
    return pd.DataFrame({"metric": ["m"], "value": [value]})


def fresh_cache() -> None:
    os.environ["GEOCONT_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-sweeps-")


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--trivial", type=int, default=40)
    args = parser.parse_args()
    import ray

    cores = os.cpu_count()
    settings = chapter("mlp_conditions").configure("cpu")
    configs = [c.replace(epochs=args.epochs) for c in settings.condition_configs()[: args.runs]]
    base = configs[0]
    print(
        f"machine: {cores} cores; "
        f"load average {os.getloadavg()[0]:.2f} (shared with other work: figures are upper bounds on time)"
    )
    print(
        f"subset: {len(configs)} runs of mlp_conditions/cpu (width {base.width}, depth {base.depth}, "
        f"{base.dataset}, {args.epochs} epochs instead of {settings.base.epochs}); "
        f"conditions {sorted({c.condition for c in configs})}, seeds {sorted({c.seed for c in configs})}"
    )
    _dataset(base.dataset, base.max_train)

    def sweep(executor: str) -> float:
        fresh_cache()
        return timed(lambda: sweeps.run_jobs([mlp_job(c) for c in configs], executor=executor, progress=False))

    seconds: dict[str, float] = {}
    torch.set_num_threads(cores)  # torch's default where OMP_NUM_THREADS is unset: what a chapter did so far
    fresh_cache()
    seconds["in-process"] = timed(lambda: [train_mlp(c, progress=False) for c in configs])
    seconds["serial"] = sweep("serial")
    seconds["local, cold"] = sweep("local")  # starts the forkserver (imports torch and geocont once)
    seconds["local, warm"] = sweep("local")
    start = time.perf_counter()
    ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - start
    seconds["ray, cold"] = sweep("ray") + ray_start  # ray.init, and workers importing torch and geocont
    seconds["ray, warm"] = sweep("ray")

    print(f"\n{'executor':<14}{'seconds':>9}{'runs/hour':>11}{'vs in-process':>16}")
    for name, value in seconds.items():
        print(f"{name:<14}{value:>9.1f}{len(configs) * 3600 / value:>11.0f}{seconds['in-process'] / value:>15.2f}x")
    print("cold: the first sweep of the process, with the executor's start-up; warm: a second sweep (fresh cache)")
    print(f"local warm vs serial (both 1 thread per run): {seconds['serial'] / seconds['local, warm']:.2f}x")
    print(
        f"ray vs local throughput: {seconds['local, warm'] / seconds['ray, warm']:.2f}x warm, "
        f"{seconds['local, cold'] / seconds['ray, cold']:.2f}x cold"
    )

    print(f"\nray.init(num_cpus={cores}) start-up: {ray_start:.1f} s")
    trivial = [
        sweeps.Job("bench-trivial", {"value": float(i)}, one_row, float(i), label=f"trivial {i}")
        for i in range(args.trivial)
    ]
    smoke = chapter("mlp_conditions").configure("smoke").condition_configs()
    print(f"{'executor':<10}{f'{args.trivial} trivial jobs, ms/run':>30}{f'smoke sweep ({len(smoke)} runs), s':>30}")
    for name in ("serial", "local", "ray"):
        fresh_cache()
        per_run = timed(lambda: sweeps.run_jobs(trivial, executor=name, progress=False)) / args.trivial  # noqa: B023
        fresh_cache()
        smoke_seconds = timed(lambda: sweeps.run_jobs([mlp_job(c) for c in smoke], executor=name, progress=False))  # noqa: B023
        print(f"{name:<10}{per_run * 1000:>30.1f}{smoke_seconds:>30.1f}")
    sweeps.shutdown()


if __name__ == "__main__":
    sys.exit(main())

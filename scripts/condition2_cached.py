"""What the Condition-2 chapter's runs show so far, read from the run cache alone (nothing trains).

The chapter's `cpu` scale is hours of training; its runs are cached one by one as they finish
(`python -m geocont.book run book/condition2.ipynb -p scale cpu`, or a sweep of its
`CHAPTER.run_configs`). This prints how many of the headline dataset's runs are cached and, per
cached run, its final weight and gradient v1, its peak, and its instability summary
(`geocont.instability.run_summary`).

Usage: python scripts/condition2_cached.py [--scale cpu]
"""

from __future__ import annotations

import argparse

import pandas as pd

from geocont import instability
from geocont.chapters import condition2
from geocont.sweeps import tidy_sweep_table
from geocont.training import mlp_job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="cpu")
    args = parser.parse_args()
    settings = condition2.CHAPTER.configure(args.scale)
    groups = {"adam": settings.comparison_configs(settings.headline)}
    groups.update({name: settings.intervention_configs(name) for name in settings.interventions})
    rows, total = [], 0
    for name, configs in groups.items():
        total += len(configs)
        cached = [(c, mlp_job(c).load(warn=False)) for c in configs]
        cached = [(c, t) for c, t in cached if t is not None]
        if not cached:
            continue
        table = tidy_sweep_table(
            [t for _, t in cached],
            [
                dict(condition=c.condition, optimizer=c.optimizer.label, init_scale=c.init_scale, seed=c.seed)
                for c, _ in cached
            ],
        )
        summary = instability.run_summary(table)
        finals = condition2.per_seed_final(table).rename(columns={"value": "v1_final_snapshot"})
        gradient = condition2.per_seed_final(table, "grad_cos").rename(columns={"value": "gradient_v1"})
        rows.append(
            summary.merge(finals, on=["condition", "seed"]).merge(gradient, on=["condition", "seed"]).assign(run=name)
        )
    print(f"{sum(len(r) for r in rows)} of {total} runs on `{settings.headline}` cached")
    if rows:
        columns = [
            "run",
            "condition",
            "seed",
            "v1_peak",
            "peak_step",
            "v1_final_snapshot",
            "gradient_v1",
            "events",
            "first_event",
            "fall_from_peak",
            "fall_across_events",
            "memorised_step",
            "min_loss",
            "final_loss",
            "diverged_step",
        ]
        with pd.option_context("display.width", 250, "display.max_columns", 30):
            print(pd.concat(rows, ignore_index=True)[columns].round(3).to_string(index=False))


if __name__ == "__main__":
    main()

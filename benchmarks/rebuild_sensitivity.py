"""How far a rebuild may move a chapter's numbers: the same runs at 1 and at 2 torch threads.

Two torch threads split reductions differently from one, so the first steps differ by about
1e-5 relative (the README's figure); a run whose dynamics amplify such differences (the linear
residual net after its loss spikes) ends elsewhere. This is the perturbation a rebuild on
another machine, or with other kernels, makes. The script trains the Condition-2 chapter's
headline runs (res-none and res-relu, its seeds) at both thread counts (cached under separate
keys), and prints each run's final weight v1 at both, their difference, and the seed sd of each
condition, so the book can say how far a rebuild may move each number.

Usage: python benchmarks/rebuild_sensitivity.py [--scale cpu] [--conditions res-none res-relu]
"""

from __future__ import annotations

import argparse
import os

import pandas as pd

from geocont.chapters import condition2
from geocont.statistics import estimate
from geocont.training import run_sweep


def finals(configs, threads: int) -> pd.DataFrame:
    os.environ["GEOCONT_RUN_THREADS"] = str(threads)
    table = run_sweep(configs)
    return condition2.per_seed_final(table).assign(threads=threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--conditions", nargs="+", default=["res-none", "res-relu"])
    args = parser.parse_args()
    settings = condition2.configure(args.scale)
    configs = [c for c in settings.comparison_configs(settings.headline) if c.condition in args.conditions]
    both = pd.concat([finals(configs, 1), finals(configs, 2)], ignore_index=True)
    wide = both.pivot_table(index=["condition", "seed"], columns="threads", values="value")
    wide["difference"] = wide[2] - wide[1]
    print(f"final weight v1 on {settings.headline}, {settings.base.steps:,} steps, 1 vs 2 torch threads")
    print(wide.round(4).to_string())
    for condition, group in wide.groupby(level="condition"):
        print(f"{condition}: |difference| mean {group['difference'].abs().mean():.4f}, max "
              f"{group['difference'].abs().max():.4f}; seed sd at 1 thread {estimate(group[1]).std:.4f}")


if __name__ == "__main__":
    main()

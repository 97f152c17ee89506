"""The paper-size runs on one GPU, most valuable first, within a number of minutes.

``prepare DIR`` (on a machine with the data: the Debian packages, or a network) writes what the
runs read into DIR: the corpus as ``DIR/corpora/<corpus>.json`` and Fashion-MNIST's files under
``DIR/data``. ``run`` (on the GPU machine, no network needed) points ``$GEOCONT_CORPUS_DIR`` and
``$GEOCONT_DATA_DIR`` there and trains, in this order, each run of the chapters' ``paper`` presets
(bf16 autocast, fused Adam, ``device="auto"``):

1. the transformer chapter's ``silu`` and ``none`` models (8 layers, d = 512, 20,000 steps of
   32 x 512 tokens), seed by seed;
2. the MLP Condition-2 core (res-relu, res-none, res-radial, res-radial-tau, nores-relu; 16 x 256,
   9,360 steps of 128) on the 60,000 Fashion-MNIST digits, seed by seed;
3. the rest of the two chapters' paper runs: the MLP chapter's other conditions, the transformer's
   other variants.

Every run goes through the run cache (``$GEOCONT_CACHE_DIR``, default ``~/.cache/geocont/runs``)
under the key the chapter computes, so the book reads it there: build the chapters with
``-p scale paper -p dataset fashion-mnist`` (MLP) and ``-p scale paper -p corpus kjv`` (the
transformer, where WikiText-103 was not carried). A run whose predicted time no longer fits the
minutes left is skipped (a cached one costs nothing); the prediction is the run's FLOPs
(:mod:`geocont.flops`) at ``--tflops``, or at least ``--floor-ms`` per step, until a run of its kind
has been timed, then that run's time. Prints one line per run and a summary.
Usage: python scripts/paper_gpu.py prepare DIR [--corpus kjv]
       python scripts/paper_gpu.py run DIR --minutes 60 [--corpus kjv] [--dataset fashion-mnist] [--plan]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import time
from pathlib import Path

from geocont import sweeps
from geocont.chapters import mlp_conditions, transformer_projections
from geocont.chapters.lm_runs import MAIN_VARIANTS
from geocont.flops import run_flops
from geocont.lm import lm_job
from geocont.training import mlp_job

#: The MLP conditions the paper's Condition 2 turns on, first after the transformers.
CONDITION_2_CORE = ("res-relu", "res-none", "res-radial", "res-radial-tau", "nores-relu")
#: Assumed sustained bf16 throughput of one H200 on these small models (TFLOP/s): a fifth of its
#: dense bf16 peak (989), until a run has been timed.
ASSUMED_TFLOPS = 200.0
#: Assumed least time of one step (ms): kernel launches bound the small MLP's step, not FLOPs.
ASSUMED_FLOOR_MS = 3.0


@dataclasses.dataclass
class PlannedRun:
    label: str
    kind: str
    job: sweeps.Job
    steps: int
    flops: float

    def predicted_minutes(self, tflops: float, floor_ms: float) -> float:
        return max(self.flops / (tflops * 1e12), self.steps * floor_ms / 1e3) / 60


def plan(corpus: str, dataset: str) -> list[PlannedRun]:
    """Every paper run of the transformer and MLP chapters, most valuable first."""
    lm = transformer_projections.CHAPTER.configure("paper", corpus=corpus)
    mlp = mlp_conditions.CHAPTER.configure("paper", dataset=dataset)
    lm_configs = lm.configs()

    def lm_runs(labels) -> list[PlannedRun]:
        seeds = sorted({c.seed for label in labels for c in lm_configs.get(label, [])})
        return [
            PlannedRun(f"transformer {label} seed={c.seed}", "transformer", lm_job(c, label), c.steps, run_flops(c))
            for seed in seeds
            for label in labels
            for c in lm_configs.get(label, [])
            if c.seed == seed
        ]

    def mlp_runs(conditions) -> list[PlannedRun]:
        configs = [mlp.base.replace(condition=condition, seed=seed) for seed in mlp.seeds for condition in conditions]
        return [
            PlannedRun(f"MLP {c.condition} {c.dataset} seed={c.seed}", "mlp", mlp_job(c), c.steps, run_flops(c))
            for c in configs
        ]

    others = [label for label in lm_configs if label not in MAIN_VARIANTS]
    return (
        lm_runs(MAIN_VARIANTS)
        + mlp_runs(CONDITION_2_CORE)
        + mlp_runs([c for c in mlp.conditions if c not in CONDITION_2_CORE])
        + lm_runs(others)
    )


def prepare(directory: Path, corpus: str) -> None:
    """Write the corpus and Fashion-MNIST into ``directory`` for a machine without them."""
    from geocont.data import data_root, load_image_data
    from geocont.text import load_corpus, save_corpus

    print(f"corpus: {save_corpus(load_corpus(corpus), directory / 'corpora')}")
    load_image_data("fashion-mnist")  # unpacks the Debian package's files (or downloads) under data_root()
    source, target = data_root() / "FashionMNIST", directory / "data" / "FashionMNIST"
    shutil.copytree(source, target, dirs_exist_ok=True)
    print(f"Fashion-MNIST: {target}")


def run(
    directory: Path, minutes: float, corpus: str, dataset: str, tflops: float, floor_ms: float, plan_only: bool
) -> None:
    os.environ.setdefault("GEOCONT_CORPUS_DIR", str(directory / "corpora"))
    os.environ.setdefault("GEOCONT_DATA_DIR", str(directory / "data"))
    runs = plan(corpus, dataset)
    start, measured, done, skipped = time.monotonic(), {}, [], []
    for planned in runs:
        left = minutes - (time.monotonic() - start) / 60
        predicted = measured.get(planned.kind, planned.predicted_minutes(tflops, floor_ms))
        cached = planned.job.load(warn=False) is not None
        line = f"{planned.label}: {planned.flops / 1e12:,.0f} TFLOP, predicted {predicted:.1f} min"
        if plan_only:
            print(line + (" (cached)" if cached else ""))
            continue
        if not cached and predicted > left:
            skipped.append(planned.label)
            print(f"{line}: skipped, {left:.1f} min left", flush=True)
            continue
        began = time.monotonic()
        try:
            sweeps.run_jobs([planned.job], executor="serial", progress=False)
        except sweeps.SweepFailed as error:
            print(f"{line}: FAILED ({error})", flush=True)
            continue
        took = (time.monotonic() - began) / 60
        if not cached:
            measured[planned.kind] = took
        done.append(planned.label)
        print(f"{line}: {'cached' if cached else f'trained in {took:.1f} min'}", flush=True)
    if not plan_only:
        print(
            f"{len(done)} runs in the cache ({os.environ.get('GEOCONT_CACHE_DIR', '~/.cache/geocont/runs')}), "
            f"{len(skipped)} skipped for time, {(time.monotonic() - start) / 60:.1f} min"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("prepare", "run"))
    parser.add_argument("directory", type=Path, help="where the carried data is (prepare: written)")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--corpus", default="kjv", help="kjv (carried) or wikitext-103 (carried HF cache)")
    parser.add_argument("--dataset", default="fashion-mnist")
    parser.add_argument("--tflops", type=float, default=ASSUMED_TFLOPS)
    parser.add_argument("--floor-ms", type=float, default=ASSUMED_FLOOR_MS)
    parser.add_argument("--plan", action="store_true", help="print the runs and their predicted minutes only")
    args = parser.parse_args()
    if args.action == "prepare":
        prepare(args.directory, args.corpus)
    else:
        run(args.directory, args.minutes, args.corpus, args.dataset, args.tflops, args.floor_ms, args.plan)


if __name__ == "__main__":
    main()

"""What a cold build of the book trains at one scale: per chapter, its runs, their optimizer steps, how
many it shares with an earlier chapter (trained once), and how many are already in the run cache or the
results store.

Nothing trains. The run set is the library's (``geocont.book.runs.book_run_set``, the one the ``store``
command trains): each chapter's listed runs, and the Condition-2 chapter's SGD runs at the rate its probes
choose (pending, and counted at one rate, until the probes are in the cache or the store). It also predicts
each chapter's share of a cold build on ``--workers`` one-thread workers (longest run first), from one
worker's wall milliseconds per MLP step and per 4-layer transformer step, recording and evaluation
included; the defaults are the measured ``geocont.chapters.mlp_runs.CPU_SECONDS_PER_MLP_STEP``
(``adam-rotated`` runs cost ``ROTATED_STEP_FACTOR`` times more) and the transformer chapter's
``CPU_SECONDS_PER_STEP``.

Usage: python benchmarks/book_inventory.py [--scale cpu] [--mlp-step-ms M --lm-step-ms L --workers 2]
"""

from __future__ import annotations

import argparse

from geocont import cache, store
from geocont.book.runs import book_run_set, predicted_seconds
from geocont.chapters import CHAPTER_MODULES
from geocont.chapters.mlp_runs import CPU_SECONDS_PER_MLP_STEP
from geocont.chapters.transformer_projections.compute import CPU_SECONDS_PER_STEP as LM_SECONDS_PER_STEP
from geocont.config import MLPRunConfig
from geocont.sweeps import predicted_wall_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="cpu")
    parser.add_argument(
        "--mlp-step-ms",
        type=float,
        default=1000 * CPU_SECONDS_PER_MLP_STEP,
        help="one worker's milliseconds per MLP step (default: the measured %(default).1f)",
    )
    parser.add_argument(
        "--lm-step-ms",
        type=float,
        default=1000 * LM_SECONDS_PER_STEP[4],
        help="one worker's milliseconds per 4-layer transformer step (default: the measured %(default).0f)",
    )
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    run_set = book_run_set(args.scale)
    total_minutes = 0.0
    print(
        f"{'chapter':26s}{'runs':>6s}{'shared':>8s}{'pending':>9s}{'new MLP steps':>15s}{'new LM steps':>14s}"
        f"{'cached':>8s}{'stored':>8s}  predicted cold minutes"
    )
    for name in CHAPTER_MODULES:  # a run shared with an earlier chapter is counted there
        runs = run_set.of_chapter(name)
        pending = [run for run in run_set.pending if name in run.chapters]
        new = [run for run in runs if run.chapters[0] == name]
        mlp_steps = lm_steps = cached = stored = 0
        durations = []
        for run in new + pending:
            config = run.job.argument
            if isinstance(config, MLPRunConfig):
                mlp_steps += config.steps
            else:
                lm_steps += config.steps * config.shape.n_layers / 4  # in 4-layer-step equivalents
            cached += cache.has_entry(run.kind, run.job.key_config(), include_store=False)
            stored += store.has(run.kind, run.job.key_config())
            durations.append(predicted_seconds(config, args.mlp_step_ms / 1000, args.lm_step_ms / 1000))
        minutes = predicted_wall_seconds(durations, args.workers) / 60
        total_minutes += minutes
        print(
            f"{name:26s}{len(runs):6d}{len(runs) - len(new):8d}{len(pending):9d}{mlp_steps:15,d}{lm_steps:14,.0f}"
            f"{cached:8d}{stored:8d}  {minutes:8.0f}"
        )
    print(
        f"predicted training minutes of a cold build on {args.workers} workers at {args.mlp_step_ms:.1f} ms per MLP "
        f"step and {args.lm_step_ms:.0f} ms per 4-layer transformer step: {total_minutes:.0f} (set-up, analysis and "
        "rendering come on top)"
    )


if __name__ == "__main__":
    main()

"""What a cold build of the book trains at one scale: per chapter, its runs, their optimizer steps, how
many it shares with an earlier chapter (trained once), and how many are already in the run cache.

Nothing trains. It also predicts each chapter's share of a cold build on ``--workers`` one-thread
workers (longest run first), from one worker's wall milliseconds per MLP step and per 4-layer
transformer step, recording and evaluation included; the defaults are the measured
``geocont.chapters.mlp_runs.CPU_SECONDS_PER_MLP_STEP`` (``adam-rotated`` runs cost
``ROTATED_STEP_FACTOR`` times more) and the transformer chapter's ``CPU_SECONDS_PER_STEP``.

Usage: python benchmarks/book_inventory.py [--scale cpu] [--mlp-step-ms M --lm-step-ms L --workers 2]
"""

from __future__ import annotations

import argparse

from geocont.cache import cache_key
from geocont.chapters import CHAPTER_MODULES, chapter as chapter_named
from geocont.chapters.mlp_runs import CPU_SECONDS_PER_MLP_STEP, predicted_run_seconds
from geocont.chapters.transformer_projections.compute import CPU_SECONDS_PER_STEP as LM_SECONDS_PER_STEP
from geocont.config import MLPRunConfig
from geocont.sweeps import predicted_wall_seconds
from geocont.training import mlp_job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--mlp-step-ms", type=float, default=1000 * CPU_SECONDS_PER_MLP_STEP,
                        help="one worker's milliseconds per MLP step (default: the measured %(default).1f)")
    parser.add_argument("--lm-step-ms", type=float, default=1000 * LM_SECONDS_PER_STEP[4],
                        help="one worker's milliseconds per 4-layer transformer step (default: the measured %(default).0f)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    seen: set[str] = set()
    mlp_scale = args.mlp_step_ms / 1000 / CPU_SECONDS_PER_MLP_STEP
    total_minutes = 0.0
    print(f"{'chapter':26s}{'runs':>6s}{'shared':>8s}{'new MLP steps':>15s}{'new LM steps':>14s}{'cached':>8s}"
          "  predicted cold minutes")
    for name in CHAPTER_MODULES:  # in the book's order: a run shared with an earlier chapter is counted there
        chapter = chapter_named(name)
        settings = chapter.configure(args.scale)
        configs = chapter.run_configs(settings)
        if hasattr(settings, "sgd_configs"):  # the Condition-2 chapter's SGD runs, at the rate its probes choose
            configs += settings.sgd_configs(1.0)
        mlp_steps = lm_steps = shared = cached = 0
        durations = []
        for config in configs:
            is_mlp = isinstance(config, MLPRunConfig)
            key = cache_key("mlp" if is_mlp else "lm", config.to_dict())
            if key in seen:
                shared += 1
                continue
            seen.add(key)
            if is_mlp:
                mlp_steps += config.steps
                cached += mlp_job(config).load(warn=False) is not None
                durations.append(predicted_run_seconds(config) * mlp_scale)
            else:
                equivalent = config.steps * config.shape.n_layers / 4  # in 4-layer-step equivalents
                lm_steps += equivalent
                durations.append(equivalent * args.lm_step_ms / 1000)
        minutes = predicted_wall_seconds(durations, args.workers) / 60
        total_minutes += minutes
        print(f"{name:26s}{len(configs):6d}{shared:8d}{mlp_steps:15,d}{lm_steps:14,.0f}{cached:8d}  {minutes:8.0f}")
    print(f"predicted training minutes of a cold build on {args.workers} workers at {args.mlp_step_ms:.1f} ms per MLP "
          f"step and {args.lm_step_ms:.0f} ms per 4-layer transformer step: {total_minutes:.0f} (set-up, analysis and "
          "rendering come on top)")

if __name__ == "__main__":
    main()

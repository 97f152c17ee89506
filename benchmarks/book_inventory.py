"""What a cold build of the book trains at one scale: per chapter, its runs, their optimizer steps, how
many it shares with an earlier chapter (trained once), and how many are already in the run cache.

Nothing trains. With ``--mlp-step-ms`` and ``--lm-step-ms`` (one worker's wall milliseconds per MLP step and
per 4-layer transformer step, recording and evaluation included: a sweep's run time over its steps), it
also predicts each chapter's share of a cold build on ``--workers`` workers.

Usage: python benchmarks/book_inventory.py [--scale cpu] [--mlp-step-ms M --lm-step-ms L --workers 2]
"""

from __future__ import annotations

import argparse

from geocont.chapters import CHAPTER_MODULES, chapter as chapter_named
from geocont.cache import cache_key
from geocont.config import MLPRunConfig
from geocont.training import mlp_job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--mlp-step-ms", type=float, help="one worker's milliseconds per MLP step")
    parser.add_argument("--lm-step-ms", type=float, help="one worker's milliseconds per 4-layer transformer step")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    seen: set[str] = set()
    total_minutes = 0.0
    print(f"{'chapter':26s}{'runs':>6s}{'shared':>8s}{'new MLP steps':>15s}{'new LM steps':>14s}{'cached':>8s}"
          + ("  predicted cold minutes" if args.mlp_step_ms and args.lm_step_ms else ""))
    for name in CHAPTER_MODULES:  # in the book's order: a run shared with an earlier chapter is counted there
        chapter = chapter_named(name)
        settings = chapter.configure(args.scale)
        configs = chapter.run_configs(settings)
        if hasattr(settings, "sgd_configs"):  # the Condition-2 chapter's SGD runs, at the rate its probes choose
            configs += settings.sgd_configs(1.0)
        mlp_steps = lm_steps = shared = cached = 0
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
            else:
                lm_steps += config.steps * config.shape.n_layers / 4  # in 4-layer-step equivalents
        line = f"{name:26s}{len(configs):6d}{shared:8d}{mlp_steps:15,d}{lm_steps:14,.0f}{cached:8d}"
        if args.mlp_step_ms and args.lm_step_ms:
            minutes = (mlp_steps * args.mlp_step_ms + lm_steps * args.lm_step_ms) / 60_000 / args.workers
            total_minutes += minutes
            line += f"  {minutes:8.0f}"
        print(line)
    if total_minutes:
        print(f"predicted training minutes of a cold build on {args.workers} workers: {total_minutes:.0f} "
              "(set-up, analysis and rendering come on top)")


if __name__ == "__main__":
    main()

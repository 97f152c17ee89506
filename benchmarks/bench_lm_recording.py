"""Language-model training speed (tokens/s) with and without continuity recording.

Runs the transformer chapter's base configuration at a scale alternately without and
with recording (seven projection groups); prints tokens/s, step time and the overhead.
Usage: python benchmarks/bench_lm_recording.py [--scale cpu] [--steps N] [--repeats 2]
"""

from __future__ import annotations

import argparse
import time

import torch

from geocont import lm
from geocont.recorder import ContinuityRecorder
from geocont.chapters.transformer_projections import lm_chapter_settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--steps", type=int, help="default: the chapter's number of steps at this scale")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    settings = lm_chapter_settings(args.scale)
    config = settings.base.replace(steps=args.steps or settings.base.steps)
    lm.token_splits(config.corpus, config.shape.vocab_size)  # tokenizer and encoding outside the timing
    tokens = config.steps * config.batch_size * config.shape.max_seq_len
    inside = [0.0]
    observe = ContinuityRecorder.observe

    def timed_observe(self, step):
        start = time.perf_counter()
        try:
            return observe(self, step)
        finally:
            inside[0] += time.perf_counter() - start

    ContinuityRecorder.observe = timed_observe
    print(f"scale={args.scale} steps={config.steps} batch={config.batch_size}x{config.shape.max_seq_len} "
          f"snapshots={config.n_snapshots} directions={config.n_directions} threads={torch.get_num_threads()}")
    plain, recorded, recorder_seconds = [], [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        lm.train_lm(config, progress=False, record=False)
        plain.append(time.perf_counter() - start)
        inside[0] = 0.0
        start = time.perf_counter()
        lm.train_lm(config, progress=False, record=True)
        recorded.append(time.perf_counter() - start)
        recorder_seconds.append(inside[0])
    p, r = min(plain), min(recorded)
    print(f"without recording: {p:6.2f} s, {tokens / p:8.0f} tokens/s, {1000 * p / config.steps:.1f} ms/step")
    print(f"with recording:    {r:6.2f} s, {tokens / r:8.0f} tokens/s, {1000 * r / config.steps:.1f} ms/step")
    print(f"end-to-end overhead, best of {args.repeats}: {100 * (r - p) / p:.1f} %; time inside the recorder "
          f"{min(recorder_seconds):.2f} s = {100 * min(recorder_seconds) / (r - min(recorder_seconds)):.1f} % of training")


if __name__ == "__main__":
    main()

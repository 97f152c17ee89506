"""Language-model training speed (tokens/s) with and without continuity recording.

Runs the transformer chapter's base configuration at a scale, shortened to ``--steps``, alternately
without and with recording (seven projection groups, the chapter's snapshot schedule for that
length, with the validation loss at each snapshot); prints tokens/s, step time (wall and CPU), the
measured overhead, and the overhead predicted at the chapter's full schedule (its number of
snapshots over its number of steps), from the measured cost per snapshot.
Usage: python benchmarks/bench_lm_recording.py [--scale cpu] [--steps N] [--n-layers L] [--repeats 2]
"""

from __future__ import annotations

import argparse
import time

import torch

from geocont import lm
from geocont.chapters import chapter
from geocont.recorder import ContinuityRecorder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--steps", type=int, help="default: the chapter's number of steps at this scale")
    parser.add_argument("--n-layers", type=int, help="default: the scale's (the chapter's deeper model: 8)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    overrides = {"n_layers": args.n_layers} if args.n_layers else {}
    full = chapter("transformer_projections").configure(args.scale, **overrides).base
    steps = args.steps or full.steps
    config = full.replace(steps=steps, snapshot_steps=tuple(s for s in full.snapshot_steps if s < steps))
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
    n_short, n_full = len(config.schedule()), len(full.schedule())
    print(
        f"scale={args.scale} layers={config.shape.n_layers} steps={config.steps} "
        f"batch={config.batch_size}x{config.shape.max_seq_len} snapshots={n_short} (the chapter: {n_full} over "
        f"{full.steps} steps) directions={config.n_directions} eval_windows={config.eval_windows} "
        f"threads={torch.get_num_threads()}"
    )
    plain, recorded, recorder_seconds, plain_cpu, recorded_cpu = [], [], [], [], []
    for _ in range(args.repeats):
        start, cpu = time.perf_counter(), time.process_time()
        lm.train_lm(config, progress=False, record=False)
        plain.append(time.perf_counter() - start)
        plain_cpu.append(time.process_time() - cpu)
        inside[0] = 0.0
        start, cpu = time.perf_counter(), time.process_time()
        lm.train_lm(config, progress=False, record=True)
        recorded.append(time.perf_counter() - start)
        recorded_cpu.append(time.process_time() - cpu)
        recorder_seconds.append(inside[0])
    p, r = min(plain), min(recorded)
    print(
        f"without recording: {p:6.2f} s, {tokens / p:8.0f} tokens/s, {1000 * p / config.steps:.1f} ms/step "
        f"(CPU {1000 * min(plain_cpu) / config.steps:.1f} ms/step)"
    )
    print(
        f"with recording:    {r:6.2f} s, {tokens / r:8.0f} tokens/s, {1000 * r / config.steps:.1f} ms/step "
        f"(CPU {1000 * min(recorded_cpu) / config.steps:.1f} ms/step)"
    )
    print(
        f"end-to-end overhead, best of {args.repeats}: {100 * (r - p) / p:.1f} %; time inside the recorder "
        f"{min(recorder_seconds):.2f} s = {100 * min(recorder_seconds) / (r - min(recorder_seconds)):.1f} % of training"
    )
    per_snapshot = max(r - p, 0.0) / n_short  # recorder and validation loss, per snapshot
    predicted = per_snapshot * n_full / (p / config.steps * full.steps)
    print(
        f"per snapshot (recorder + validation loss): {1000 * per_snapshot:.0f} ms; predicted overhead at the "
        f"chapter's schedule ({n_full} snapshots in {full.steps} steps): {100 * predicted:.1f} %, i.e. "
        f"{tokens / p * (1 - predicted / (1 + predicted)):.0f} tokens/s with recording"
    )


if __name__ == "__main__":
    main()

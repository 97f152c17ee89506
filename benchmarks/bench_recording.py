"""Recording overhead: MLP training with and without the continuity recorder.

Prints seconds per run and per step, and the overhead of recording at the default
cadence of the chosen scale. Usage: python benchmarks/bench_recording.py [--scale cpu]
"""

from __future__ import annotations

import argparse
import time

import torch

from geocont.scales import mlp_chapter_settings
from geocont.training import _dataset, steps_for, train_mlp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--condition", default="res-relu")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    settings = mlp_chapter_settings(args.scale)
    config = settings.base.replace(condition=args.condition)
    data = _dataset(config.dataset, config.max_train)
    steps = steps_for(config, len(data.y_train))
    print(f"scale={args.scale} condition={config.condition} width={config.width} depth={config.depth} "
          f"steps={steps} snapshots={config.n_snapshots} directions={config.n_directions} "
          f"threads={torch.get_num_threads()}")
    timings = {}
    for record in (False, True, False, True)[: 2 * args.repeats]:
        start = time.perf_counter()
        train_mlp(config, progress=False, record=record)
        timings.setdefault(record, []).append(time.perf_counter() - start)
    plain, recorded = min(timings[False]), min(timings[True])
    print(f"without recording: {plain:7.2f} s  ({1000 * plain / steps:.2f} ms/step)")
    print(f"with recording:    {recorded:7.2f} s  ({1000 * recorded / steps:.2f} ms/step)")
    print(f"recording overhead: {100 * (recorded - plain) / plain:.1f} % (best of {args.repeats})")


if __name__ == "__main__":
    main()

"""Recording overhead: MLP training with and without the continuity recorder.

Runs the same configuration alternately without and with recording, and reports
(1) end-to-end seconds per run and per step, and (2) the seconds spent inside the
recorder and the held-out evaluation at snapshots, measured directly. On a shared
2-core machine run-to-run noise is often larger than the overhead itself, so (2) is the
sharper figure; both are printed.
Usage: python benchmarks/bench_recording.py [--scale cpu] [--chapter mlp_conditions|timeline]
(the timeline chapter snapshots about three times as often, recording v1/u1 only).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from geocont import training
from geocont.recorder import ContinuityRecorder
from geocont.chapters import chapter


class Stopwatch:
    """Accumulates the wall time spent inside wrapped callables."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, function):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--chapter", default="mlp_conditions", help="whose snapshot schedule to use")
    parser.add_argument("--condition", default="res-relu")
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()
    config = chapter(args.chapter).configure(args.scale).base.replace(condition=args.condition)
    data = training._dataset(config.dataset, config.max_train)
    steps = training.steps_for(config, len(data.y_train))
    print(f"scale={args.scale} chapter={args.chapter} condition={config.condition} width={config.width} depth={config.depth} "
          f"steps={steps} snapshots={config.n_snapshots} directions={config.n_directions} "
          f"threads={torch.get_num_threads()}")
    watch = Stopwatch()
    ContinuityRecorder.observe = watch.wrap(ContinuityRecorder.observe)
    training.evaluate_classifier = watch.wrap(training.evaluate_classifier)
    plain, recorded, inside = [], [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        training.train_mlp(config, progress=False, record=False)
        plain.append(time.perf_counter() - start)
        watch.seconds = 0.0
        start = time.perf_counter()
        training.train_mlp(config, progress=False, record=True)
        recorded.append(time.perf_counter() - start)
        inside.append(watch.seconds)
    p, r = min(plain), min(recorded)
    i = statistics.median(inside)
    print(f"without recording: best {p:6.2f} s ({1000 * p / steps:.2f} ms/step); all runs: {', '.join(f'{x:.2f}' for x in plain)}")
    print(f"with recording:    best {r:6.2f} s ({1000 * r / steps:.2f} ms/step); all runs: {', '.join(f'{x:.2f}' for x in recorded)}")
    print(f"end-to-end overhead, best of {args.repeats}: {100 * (r - p) / p:.1f} %  "
          f"(medians: {100 * (statistics.median(recorded) - statistics.median(plain)) / statistics.median(plain):.1f} %)")
    print(f"time inside recorder + snapshot evaluation: {i:.2f} s per run = {100 * i / (r - i):.1f} % of the training it accompanies")


if __name__ == "__main__":
    main()

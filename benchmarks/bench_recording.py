"""Recording overhead: MLP training with and without the continuity recorder.

Runs the same configuration alternately without and with recording, and reports
(1) end-to-end seconds per run and per step, and (2) the seconds spent inside the
recorder and the held-out evaluation at snapshots, measured directly. On a shared
2-core machine run-to-run noise is often larger than the overhead itself, so (2) is the
sharper figure; both are printed.
Usage: python benchmarks/bench_recording.py [--scale cpu] [--chapter mlp_conditions|timeline]
(the timeline chapter snapshots about three times as often, recording v1/u1 only).

``--snapshot``: instead, the seconds one snapshot of one synthetic group costs (16 matrices of
256 x 256 that move a little between snapshots, so that warm starts work as in training), at
``n_directions`` 8 and 1 (the timeline's setting), on one torch thread: Gaussian matrices (as at
initialisation, whose small leading gaps keep the iterative solver from converging) and the same
with six singular-value spikes added (as in trained weights).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import torch

from geocont import training
from geocont.chapters import chapter
from geocont.recorder import ContinuityRecorder


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


def _synthetic_group(n_layers: int, width: int, spikes: tuple[float, ...], generator) -> list[torch.nn.Parameter]:
    """Gaussian matrices of spectral norm about 2, plus a rank-len(spikes) part of these singular values."""
    params = []
    for _ in range(n_layers):
        W = torch.randn(width, width, generator=generator) / width**0.5
        if spikes:
            u, _ = torch.linalg.qr(torch.randn(width, len(spikes), generator=generator))
            v, _ = torch.linalg.qr(torch.randn(width, len(spikes), generator=generator))
            W += (u * torch.tensor(spikes)) @ v.T
        params.append(torch.nn.Parameter(W))
    return params


def time_snapshots(n_layers: int = 16, width: int = 256, snapshots: int = 12, repeats: int = 3) -> None:
    """Seconds per snapshot (the best and the median; the first, cold one left out) at n_directions 8 and 1."""
    torch.set_num_threads(1)
    for (kind, spikes), n_directions in itertools.product(
        (("gaussian", ()), ("spiked", (8.0, 6.0, 5.0, 4.0, 3.5, 3.0))), (8, 1)
    ):
        generator = torch.Generator().manual_seed(0)
        params = _synthetic_group(n_layers, width, spikes, generator)
        seconds = []
        for _ in range(repeats):
            recorder = ContinuityRecorder({"hidden": params}, schedule=range(snapshots), n_directions=n_directions)
            for step in range(snapshots):
                with torch.no_grad():
                    for p in params:
                        p.add_(torch.randn(p.shape, generator=generator), alpha=1e-3 / width**0.5)
                        p.grad = torch.randn(p.shape, generator=generator)
                start = time.perf_counter()
                recorder.observe(step)
                if step:
                    seconds.append(time.perf_counter() - start)
        print(
            f"{kind:8s} n_directions={n_directions}: {1000 * min(seconds):.1f} ms per snapshot of "
            f"{n_layers} x {width} x {width} at best, median {1000 * statistics.median(seconds):.1f} ms "
            f"({len(seconds)} snapshots, threads={torch.get_num_threads()}; on a shared machine the best is the "
            f"sharper figure)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--chapter", default="mlp_conditions", help="whose snapshot schedule to use")
    parser.add_argument("--condition", default="res-relu")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--snapshot", action="store_true", help="time one snapshot of a synthetic group instead")
    args = parser.parse_args()
    if args.snapshot:
        time_snapshots()
        return
    config = chapter(args.chapter).configure(args.scale).base.replace(condition=args.condition)
    data = training._dataset(config.dataset, config.max_train)
    steps = training.steps_for(config, len(data.y_train))
    print(
        f"scale={args.scale} chapter={args.chapter} condition={config.condition} width={config.width} depth={config.depth} "
        f"steps={steps} snapshots={config.n_snapshots} directions={config.n_directions} "
        f"threads={torch.get_num_threads()}"
    )
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
    print(
        f"without recording: best {p:6.2f} s ({1000 * p / steps:.2f} ms/step); all runs: {', '.join(f'{x:.2f}' for x in plain)}"
    )
    print(
        f"with recording:    best {r:6.2f} s ({1000 * r / steps:.2f} ms/step); all runs: {', '.join(f'{x:.2f}' for x in recorded)}"
    )
    print(
        f"end-to-end overhead, best of {args.repeats}: {100 * (r - p) / p:.1f} %  "
        f"(medians: {100 * (statistics.median(recorded) - statistics.median(plain)) / statistics.median(plain):.1f} %)"
    )
    print(
        f"time inside recorder + snapshot evaluation: {i:.2f} s per run = {100 * i / (r - i):.1f} % of the training it accompanies"
    )


if __name__ == "__main__":
    main()

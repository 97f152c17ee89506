"""Cost of the compression chapter's pieces on this machine.

Prints SmolLM2-135M's load time, its forward throughput (tokens/s) on held-out windows at
the chapter's window length and batch size, and the time to decompose one projection's
layer groups for each sharing scheme. The chapter's `cpu` scale is sized from these
numbers (see geocont.chapters.compression._COMPRESSION_SCALES).
Usage: python benchmarks/bench_compression.py [--scale cpu] [--windows 12] [--repeats 2]
"""

from __future__ import annotations

import argparse
import time

import torch

from geocont import sharing
from geocont.chapters import compression as chapter
from geocont.transformer import projection_groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--windows", type=int, help="default: the scale's n_windows")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    settings = chapter.configure(args.scale)
    n_windows = args.windows or settings.n_windows
    subject = sharing.pretrained_subject(settings.pretrained, window_length=settings.window_length)
    start = time.perf_counter()
    model, ids = subject.loaded()
    print(
        f"{settings.pretrained}: load + tokenize held-out text {time.perf_counter() - start:.1f} s "
        f"({len(ids):,} tokens); torch threads {torch.get_num_threads()}"
    )
    windows = sharing.validation_windows(ids, n_windows, settings.window_length)
    sharing.window_nll(model, windows[: settings.batch_size], settings.batch_size)  # warm-up
    for _ in range(args.repeats):
        start = time.perf_counter()
        sharing.window_nll(model, windows, settings.batch_size)
        seconds = time.perf_counter() - start
        print(
            f"forward: {windows.numel():,} tokens ({n_windows} x {settings.window_length}, batch "
            f"{settings.batch_size}) in {seconds:.2f} s = {windows.numel() / seconds:,.0f} tokens/s"
        )
    layers = list(range(len(model.model.layers)))
    for projection in ("q_proj", "gate_proj", "down_proj"):
        weights = [p.data for p in projection_groups(model)[projection]]
        for scheme in sharing.SHARINGS:
            start = time.perf_counter()
            sharing.plan_sharing(weights, projection, layers, settings.group_size, scheme, settings.budgets[0])
            print(
                f"decompose + approximate {projection} {tuple(weights[0].shape)} x {len(layers)} layers, "
                f"{scheme:6s}: {time.perf_counter() - start:.2f} s"
            )


if __name__ == "__main__":
    main()

"""Cost of one MLP training step at the chapters' settings, against this machine's matmul peak.

Times Adam steps of the residual MLP (forward, backward, update) at a chosen torch thread
count, for a condition with and without flushing subnormal floats to zero (the linear
residual net produces subnormals that slow CPU arithmetic), and a large square matmul for
the peak. Prints milliseconds per step, the achieved GFLOP/s (counting 6 FLOPs per
multiply-accumulate of the matrices: forward, and two products backward) and the ratio to
the peak, and what a run to the horizon costs.
Usage: python benchmarks/bench_mlp_step.py [--threads 1] [--scale cpu] [--steps 200]
"""

from __future__ import annotations

import argparse
import time

import torch

from geocont import training
from geocont.chapters import chapter
from geocont.mlp import ResidualMLP


def step_seconds(condition: str, config, data, steps: int, flush: bool) -> float:
    """Mean seconds per Adam step over ``steps`` steps (after 20 warm-up steps)."""
    torch.set_flush_denormal(flush)
    torch.manual_seed(0)
    model = ResidualMLP(
        condition,
        in_features=data.n_features,
        width=config.width,
        depth=config.depth,
        n_classes=data.n_classes,
        init_scale=config.init_scale,
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=config.optimizer.lr)
    x, y = data.x_train[: config.batch_size], data.y_train[: config.batch_size]

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    for _ in range(20):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    torch.set_flush_denormal(False)
    return (time.perf_counter() - start) / steps


def matmul_peak(n: int = 2048, repeats: int = 5) -> float:
    """GFLOP/s of an n x n float32 matmul."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * n**3 * repeats / (time.perf_counter() - start) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = chapter("mlp_conditions").configure(args.scale).base
    data = training._dataset(config.dataset, config.max_train)
    macs = config.batch_size * (
        data.n_features * config.width + config.depth * config.width**2 + config.width * data.n_classes
    )
    flops = 6 * macs
    peak = matmul_peak()
    print(
        f"{args.threads} torch thread(s); {config.depth}x{config.width} MLP, batch {config.batch_size}: "
        f"{flops / 1e9:.3f} GFLOP per step; 2048^2 matmul peak {peak:.1f} GFLOP/s"
    )
    for condition in ("res-relu", "res-none"):
        for flush in (False, True):
            seconds = step_seconds(condition, config, data, args.steps, flush)
            horizon = config.steps or 0
            print(
                f"  {condition:9s} flush subnormals={str(flush):5s}: {1e3 * seconds:6.1f} ms/step, "
                f"{flops / seconds / 1e9:5.1f} GFLOP/s ({flops / seconds / 1e9 / peak:4.0%} of peak); "
                f"{horizon:,} steps: {seconds * horizon / 60:.1f} min"
            )


if __name__ == "__main__":
    main()

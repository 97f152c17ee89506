"""Leading singular pair of a large spiked matrix: iterative (with convergence check) vs exact SVD.

Prints wall times, the speed-up, and |cos| of the iterative v1 / u1 to the exact ones.
Usage: python benchmarks/bench_singular.py [--size 4096]
"""

from __future__ import annotations

import argparse
import time

import torch

from geocont import metrics


def spiked_matrix(n: int, seed: int = 0) -> torch.Tensor:
    """Gaussian bulk (spectral norm ~2) plus three planted directions (6, 4, 3)."""
    g = torch.Generator().manual_seed(seed)
    bulk = torch.randn(n, n, generator=g) / n**0.5
    u, _ = torch.linalg.qr(torch.randn(n, 3, generator=g))
    v, _ = torch.linalg.qr(torch.randn(n, 3, generator=g))
    return bulk + (u * torch.tensor([6.0, 4.0, 3.0])) @ v.T


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args()
    W = spiked_matrix(args.size)
    print(f"matrix {args.size}x{args.size}, torch threads {torch.get_num_threads()}")
    start = time.perf_counter()
    iterative = metrics.top_singular_triplets(W, 1)
    t_iterative = time.perf_counter() - start
    start = time.perf_counter()
    exact = metrics.top_singular_triplets(W, 1, method="exact")
    t_exact = time.perf_counter() - start
    cos_v = float(metrics.abs_cos(iterative.v[:, 0], exact.v[:, 0]))
    cos_u = float(metrics.abs_cos(iterative.u[:, 0], exact.u[:, 0]))
    print(f"iterative ({iterative.method}): {t_iterative:8.3f} s")
    print(f"exact SVD:            {t_exact:8.3f} s")
    print(f"speed-up: {t_exact / t_iterative:.1f}x")
    print(
        f"|cos| to exact: v1 {cos_v:.7f}, u1 {cos_u:.7f}; sigma1 {float(iterative.s[0]):.5f} vs {float(exact.s[0]):.5f}"
    )


if __name__ == "__main__":
    main()

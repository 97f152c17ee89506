"""How well each solver resolves v1 of a nearly tied leading pair: the basis of metrics.DEGENERACY_TOL.

Each 256 x 256 test matrix is ``U diag(s) V^T`` with random orthogonal U, V and
``s = (1, 1 - g, bulk)`` (bulk: 254 values spread below 0.5), stored in float32 as weights
are. For each relative leading gap ``g`` and solver it prints, over ``--trials`` matrices:

* ``vs_exact``: the smallest |cos| between the solver's v1 and float64 SVD's v1 of the
  same matrix (the solver's own accuracy);
* ``noise``: the smallest |cos| between the solver's v1 of two copies of the matrix with
  independent noise of spectral norm ``--noise`` (1e-6 sigma1) added, i.e. whether a
  perturbation far below any measurement's precision flips v1;
* ``gap_err``: the largest error of the solver's estimate of the gap (from s_1 and s_2).

Solvers: ``exact`` (float64 SVD, the analyzer's default for matrices up to 1024),
``gram-eigh`` (float32 Gram eigendecomposition, the recorder's default),
``stacked-iterative`` (30 steps of subspace iteration, then gram-eigh; the recorder's k = 1
path) and ``iterative`` (subspace iteration with a residual test at tolerance 1e-4, the
analyzer's method for large matrices; ``-`` where it did not converge and would fall back
to exact SVD). Usage: python benchmarks/bench_degeneracy.py [--trials 10]
"""

from __future__ import annotations

import argparse
import math

import torch

from geocont import metrics

GAPS = (0.0, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
SIZE = 256


def test_matrix(gap: float, generator: torch.Generator) -> torch.Tensor:
    U, _ = torch.linalg.qr(torch.randn(SIZE, SIZE, generator=generator, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(SIZE, SIZE, generator=generator, dtype=torch.float64))
    bulk = 0.5 * torch.rand(SIZE - 2, generator=generator, dtype=torch.float64).sort(descending=True).values
    s = torch.cat([torch.tensor([1.0, 1.0 - gap], dtype=torch.float64), bulk])
    return (U * s) @ V.T


def noisy(W: torch.Tensor, size: float, generator: torch.Generator) -> torch.Tensor:
    noise = torch.randn(W.shape, generator=generator, dtype=torch.float64)
    return (W + size * noise / torch.linalg.matrix_norm(noise, ord=2)).float()


def solve(name: str, W: torch.Tensor) -> metrics.SingularTriplets | None:
    if name == "exact":
        return metrics.exact_singular_triplets(W)
    if name == "iterative":
        return metrics.iterative_singular_triplets(W, 1, oversample=8)
    return metrics.stacked_singular_triplets(W[None], 1, method=name)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--noise", type=float, default=1e-6)
    args = parser.parse_args()
    torch.set_num_threads(1)
    solvers = ("exact", "gram-eigh", "stacked-iterative", "iterative")
    print(f"{'gap':>8} {'solver':>16} {'vs_exact':>9} {'noise':>9} {'gap_err':>9}")
    for gap in GAPS:
        generator = torch.Generator().manual_seed(0)
        results = {name: {"vs_exact": 1.0, "noise": 1.0, "gap_err": 0.0, "unconverged": 0} for name in solvers}
        for _ in range(args.trials):
            W64 = test_matrix(gap, generator)
            W = W64.float()
            reference = torch.linalg.svd(W.double())[2][0].float()
            copies = noisy(W64, args.noise, generator), noisy(W64, args.noise, generator)
            for name in solvers:
                found = solve(name, W)
                pair = [solve(name, copy) for copy in copies]
                if found is None or None in pair:
                    results[name]["unconverged"] += 1
                    continue
                record = results[name]
                record["vs_exact"] = min(record["vs_exact"], float(metrics.abs_cos(found.v[:, 0], reference)))
                record["noise"] = min(record["noise"], float(metrics.abs_cos(pair[0].v[:, 0], pair[1].v[:, 0])))
                record["gap_err"] = max(record["gap_err"], abs(float(metrics.direction_gaps(found)[0]) - gap))
        for name, record in results.items():
            if record["unconverged"] == args.trials:
                print(f"{gap:8.0e} {name:>16} {'-':>9} {'-':>9} {'-':>9}")
                continue
            note = f"  ({record['unconverged']} unconverged)" if record["unconverged"] else ""
            print(
                f"{gap:8.0e} {name:>16} {record['vs_exact']:9.6f} {record['noise']:9.6f} {record['gap_err']:9.1e}{note}"
            )
    print(
        f"metrics.DEGENERACY_TOL = {metrics.DEGENERACY_TOL:g}; Wedin's bound: v1 moves by at most "
        f"noise / gap = {args.noise / metrics.DEGENERACY_TOL:.0e} rad at that gap (cos >= "
        f"{math.cos(args.noise / metrics.DEGENERACY_TOL):.9f})"
    )


if __name__ == "__main__":
    main()

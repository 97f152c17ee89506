"""Geometric-continuity metrics: the single implementation every chapter calls.

Conventions
-----------
* A weight matrix ``W`` has shape ``[out, in]`` (PyTorch's ``nn.Linear`` layout).
  Its SVD is ``W = U diag(s) V^T``; ``v_i`` (columns of V) live in the *input* space,
  ``u_i`` (columns of U) in the *output* space.
* Singular vectors have arbitrary sign, so every comparison uses ``|cos|``.
* "Adjacent-layer continuity" of direction ``i`` is ``|cos(v_i(W_l), v_i(W_{l+1}))|``
  (input space) or the same with ``u_i`` (output space), for consecutive layers.
* The sigma^2-weighted alignment compares whole spectra; see :func:`spectral_alignment`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch

Space = Literal["input", "output"]
SPACES: tuple[str, ...] = ("input", "output")


def vector_name(space: str) -> str:
    """The leading singular vector that lives in ``space``: ``v1`` (input) or ``u1`` (output)."""
    return "v1" if space == "input" else "u1"


#: Matrices whose smaller side is at most this use exact SVD; larger ones use
#: subspace iteration with a convergence check (and exact SVD if it fails).
EXACT_SVD_MAX_DIM = 1024

#: Singular direction ``i`` of a matrix is *defined* only if its singular value stands apart
#: from both neighbours by at least this fraction of sigma1:
#: ``min(s_{i-1} - s_i, s_i - s_{i+1}) / s_1 >= DEGENERACY_TOL`` (for v1 / u1: the leading
#: gap ``(s_1 - s_2) / s_1``). Below it, which vector inside the nearly tied pair a solver
#: returns depends on its rounding and on noise far below any measurement's precision, so
#: its |cos| to another layer's is not reported (NaN, with a reason; see
#: :func:`direction_flags`). Chosen from the solvers' measured accuracy on 256 x 256
#: float32 matrices (``benchmarks/bench_degeneracy.py``; book/methods.md): from a gap of
#: 1e-4 up, all four solvers returned float64 SVD's v1 to |cos| >= 0.999999 and noise of
#: 1e-6 sigma1 did not move it; at 1e-6 the iterative solvers were off by up to 0.05, and
#: at 1e-7 v1 landed anywhere in the pair. The tolerance keeps a factor 10 above 1e-4.
DEGENERACY_TOL = 1e-3


@dataclass(frozen=True)
class SingularTriplets:
    """Leading ``k`` singular triplets of a matrix, in descending order of ``s``.

    ``u``: ``[out, k]``, ``s``: ``[k]``, ``v``: ``[in, k]``. ``method`` says how they were
    computed ("exact", "iterative", or "exact-fallback" when iteration did not converge).
    ``s_next`` is the next singular value ``s_{k+1}`` (0 where the matrix has no more), so
    that the gap of the last computed direction is known too (see :func:`direction_gaps`);
    iterative solvers give its Rayleigh-Ritz estimate.
    """

    u: torch.Tensor
    s: torch.Tensor
    v: torch.Tensor
    method: str = "exact"
    s_next: float = 0.0

    def vectors(self, space: Space) -> torch.Tensor:
        """Singular vectors of one space: ``v`` for "input", ``u`` for "output"."""
        _check_space(space)
        return self.v if space == "input" else self.u


def _check_space(space: str) -> None:
    if space not in SPACES:
        raise ValueError(f"unknown space {space!r}; valid choices: {', '.join(SPACES)}")


def _all_finite(tensor: torch.Tensor) -> bool:
    """True if no entry is NaN or Inf (one reduction: NaN propagates through amax)."""
    return bool(torch.isfinite(tensor.detach().abs().amax()))


def _as_matrix(W: torch.Tensor) -> torch.Tensor:
    if W.ndim != 2:
        raise ValueError(f"expected a 2-D weight matrix [out, in], got shape {tuple(W.shape)}")
    if not _all_finite(W):
        raise ValueError("matrix contains NaN or Inf; cannot compute singular vectors")
    return W.detach()


def exact_singular_triplets(W: torch.Tensor, k: int = 1) -> SingularTriplets:
    """Leading ``k`` singular triplets by full (thin) SVD, computed in float64 for small inputs."""
    W = _as_matrix(W)
    dtype = torch.float64 if max(W.shape) <= EXACT_SVD_MAX_DIM else torch.float32
    U, S, Vh = torch.linalg.svd(W.to(dtype), full_matrices=False)
    k = min(k, S.numel())
    s_next = float(S[k]) if k < S.numel() else 0.0
    return SingularTriplets(U[:, :k].float(), S[:k].float(), Vh[:k].T.float(), "exact", s_next)


def _power_of_two_scaled(stack: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(W, scale, finite)``: each matrix of ``stack`` divided by a power of two near its largest entry (exact in
    floating point, so the result is bit for bit that of the unscaled matrix: W^T W of a matrix with entries ~1e20
    would overflow float32), the powers, and which matrices are finite (a matrix with a non-finite entry is zeroed
    and left unconverged; callers fall back to SVD)."""
    W = stack.detach().float()
    largest = W.abs().amax(dim=(1, 2))
    finite = torch.isfinite(largest)
    scale = torch.ldexp(torch.ones_like(largest), torch.frexp(torch.where(finite, largest, 0)).exponent)
    return torch.where(finite[:, None, None], W / scale[:, None, None], 0), scale, finite


def _start_block(W: torch.Tensor, q: int, *, seed: int, start: torch.Tensor | None) -> torch.Tensor:
    """The ``[L, in, q]`` start block: seeded Gaussian columns, the first ``j`` replaced by ``start``'s."""
    n_layers, _, n_in = W.shape
    generator = torch.Generator().manual_seed(seed)
    block = torch.randn(n_layers, n_in, q, generator=generator).to(W.device)
    if start is not None:
        if start.shape[:2] != (n_layers, n_in):
            raise ValueError(f"start must be [{n_layers}, {n_in}, j], got {tuple(start.shape)}")
        j = min(start.shape[2], q)
        block[..., :j] = start[..., :j].to(block)
    return block


def batched_subspace_iteration(
    stack: torch.Tensor,
    k: int = 1,
    *,
    oversample: int = 4,
    tol: float = 1e-4,
    max_iter: int = 300,
    check_every: int = 3,
    seed: int = 0,
    start: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Leading ``k`` triplets of every matrix of a ``[L, out, in]`` stack, iteratively.

    Block subspace iteration on ``W^T W`` with a Rayleigh-Ritz step at each check. A
    matrix has converged when each requested triplet passes the residual test
    ``||W^T u_i - s_i v_i|| <= tol * s_1`` (``W v_i = s_i u_i`` holds by construction);
    iteration stops when all have, or after ``max_iter``. Returns ``(u, s, v, converged,
    s_next)`` with ``converged`` a boolean ``[L]`` (unconverged entries must not be used)
    and ``s_next`` ``[L]`` the Rayleigh-Ritz estimate of ``s_{k+1}`` (0 where the block has
    no further column). The start
    block is seeded, so results are reproducible. ``start`` (``[L, in, j]``, e.g. the right
    singular vectors found at the previous snapshot) replaces the first ``j`` random start
    columns: a warm start that converges in a few steps when the matrices changed little.
    """
    W, scale, finite = _power_of_two_scaled(stack)
    n_layers, n_out, n_in = W.shape
    q = min(k + oversample, n_in, n_out)
    V, _ = torch.linalg.qr(_start_block(W, q, seed=seed, start=start))
    Wt = W.transpose(1, 2)  # a strided view: batched matmul reads it without a copy
    u = s = v = s_next = None
    converged = torch.zeros(n_layers, dtype=torch.bool, device=W.device)
    for iteration in range(1, max_iter + 1):
        V, _ = torch.linalg.qr(Wt @ (W @ V))
        if iteration % check_every and iteration != max_iter:
            continue
        Ub, S, Vbh = torch.linalg.svd(W @ V, full_matrices=False)  # Rayleigh-Ritz
        u, s, v = Ub[..., :k], S[..., :k], V @ Vbh.transpose(1, 2)[..., :k]
        s_next = S[..., k] if q > k else torch.zeros_like(S[..., 0])
        residual = torch.linalg.vector_norm(Wt @ u - v * s.unsqueeze(1), dim=1)
        converged = (residual <= tol * s[:, :1]).all(dim=1) & (s[:, 0] > 0) & finite
        if bool(converged.all()):
            break
    return u, s * scale[:, None], v, converged, s_next * scale


def iterative_singular_triplets(W: torch.Tensor, k: int = 1, **options) -> SingularTriplets | None:
    """Leading ``k`` triplets of one matrix by :func:`batched_subspace_iteration`.

    Returns ``None`` if the iteration did not converge; callers then fall back to exact SVD.
    """
    u, s, v, converged, s_next = batched_subspace_iteration(_as_matrix(W)[None], k, **options)
    return SingularTriplets(u[0], s[0], v[0], "iterative", float(s_next[0])) if bool(converged[0]) else None


#: How singular triplets are computed, the same words for every function that computes them:
#: ``exact`` (full SVD), ``gram-eigh`` (eigendecomposition of the smaller Gram matrix),
#: ``iterative`` (subspace iteration with a convergence check, then a fallback), and ``auto``
#: (each function's default, documented there). Results report the solver actually used.
Method = Literal["auto", "exact", "gram-eigh", "iterative"]
METHODS: tuple[str, ...] = ("auto", "exact", "gram-eigh", "iterative")


def check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid choices: {', '.join(METHODS)}")


def top_singular_triplets(W: torch.Tensor, k: int = 1, *, method: Method = "auto") -> SingularTriplets:
    """Leading ``k`` singular triplets (u, s, v) of ``W`` ([out, in]).

    ``auto`` uses exact SVD when ``min(W.shape) <= EXACT_SVD_MAX_DIM`` and otherwise
    ``iterative``: subspace iteration with a convergence check, falling back to exact SVD
    (reported as ``method="exact-fallback"``) when the iteration does not converge.
    """
    check_method(method)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    W = _as_matrix(W)
    if method == "gram-eigh":
        return _gram_eigh_triplets(W[None], min(k, *W.shape))[0]
    if method == "exact" or (method == "auto" and min(W.shape) <= EXACT_SVD_MAX_DIM):
        return exact_singular_triplets(W, k)
    result = iterative_singular_triplets(W, k, oversample=8)
    if result is not None:
        return result
    fallback = exact_singular_triplets(W, k)
    return SingularTriplets(fallback.u, fallback.s, fallback.v, "exact-fallback", fallback.s_next)


@functools.lru_cache(maxsize=1)
def _blas_controller():
    """One threadpoolctl controller per process (building one scans every loaded library)."""
    import importlib

    from threadpoolctl import ThreadpoolController

    importlib.import_module("scipy.linalg")  # load SciPy's BLAS before the scan

    return ThreadpoolController()


def _top_gram_eigenpairs(grams: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Largest ``k`` eigenpairs (descending) of a ``[L, d, d]`` stack of symmetric matrices,
    and the next eigenvalue of each (``[L]``; 0 where ``k = d``).

    On the CPU, LAPACK's subset solver (``syevr`` via SciPy) computes only the ``k``
    wanted pairs, about 1.5x faster than a full batched ``eigh``; the next eigenvalue comes
    from a second, eigenvalues-only call (asking the first for ``k + 1`` pairs would change
    the wanted vectors in their last bits). Elsewhere, torch's full ``eigh``.
    SciPy's BLAS is held to one thread: inside a training loop its threads otherwise
    compete with torch's OpenMP workers, which made snapshots 2.5x slower on 2 cores.
    """
    d = grams.shape[-1]
    if grams.device.type == "cpu":
        import scipy.linalg

        values, vectors, following = [], [], []
        with _blas_controller().limit(limits=1, user_api="blas"):
            for gram in grams.numpy():
                w, z = scipy.linalg.eigh(gram, subset_by_index=[d - k, d - 1], driver="evr", check_finite=False)
                values.append(torch.from_numpy(w[::-1].copy()))
                vectors.append(torch.from_numpy(z[:, ::-1].copy()))
                following.append(
                    float(
                        scipy.linalg.eigh(
                            gram,
                            subset_by_index=[d - k - 1, d - k - 1],
                            driver="evr",
                            eigvals_only=True,
                            check_finite=False,
                        )[0]
                    )
                    if k < d
                    else 0.0
                )
        return torch.stack(values), torch.stack(vectors), torch.tensor(following, dtype=grams.dtype)
    eigenvalues, eigenvectors = torch.linalg.eigh(grams)
    eigenvalues, eigenvectors = eigenvalues.flip(-1), eigenvectors.flip(-1)
    following = eigenvalues[..., k] if k < d else torch.zeros_like(eigenvalues[..., 0])
    return eigenvalues[..., :k], eigenvectors[..., :k], following


def stacked_singular_triplets(
    stack: torch.Tensor,
    k: int = 1,
    *,
    method: Method = "auto",
    start: torch.Tensor | None = None,
) -> list[SingularTriplets]:
    """Leading ``k`` triplets of each matrix in a ``[L, out, in]`` stack of small matrices.

    ``gram-eigh``: one symmetric eigendecomposition per matrix of its smaller Gram
    matrix (``W^T W`` or ``W W^T``); the other side follows from ``u_i = W v_i / s_i``.
    Several times cheaper than SVD at 256 x 256, and equal to it wherever the leading
    singular values are separated.

    ``iterative``: a short :func:`batched_subspace_iteration` (at most 30 steps),
    then ``gram-eigh`` for the matrices that did not converge. Much cheaper for matrices
    with a clear spectral gap, such as minibatch gradients (5 iterations at 256 x 256).
    ``start`` warm-starts the iteration (see :func:`batched_subspace_iteration`).

    ``exact``: SVD of each matrix. ``auto`` is ``gram-eigh``. Large matrices go one by one
    through :func:`top_singular_triplets` (with ``method`` passed on, ``gram-eigh`` as ``auto``).
    """
    if stack.ndim != 3:
        raise ValueError(f"expected a [layers, out, in] stack, got shape {tuple(stack.shape)}")
    check_method(method)
    if min(stack.shape[1:]) > EXACT_SVD_MAX_DIM:
        return [top_singular_triplets(W, k, method="auto" if method == "gram-eigh" else method) for W in stack]
    if method == "exact":
        return [exact_singular_triplets(W, k) for W in stack]
    if not _all_finite(stack):
        raise ValueError("matrix stack contains NaN or Inf; cannot compute singular vectors")
    k = min(k, *stack.shape[1:])
    results: list[SingularTriplets | None] = [None] * stack.shape[0]
    if method == "iterative":
        u, s, v, converged, s_next = batched_subspace_iteration(
            stack, k, oversample=2, max_iter=30, start=start, check_every=3 if start is None else 2
        )
        for i in converged.nonzero().flatten().tolist():
            results[i] = SingularTriplets(u[i], s[i], v[i], "iterative", float(s_next[i]))
    todo = [i for i, r in enumerate(results) if r is None]
    if todo:
        for i, triplets in zip(todo, _gram_eigh_triplets(stack[todo], k)):
            results[i] = triplets
    return results  # type: ignore[return-value]


def _gram_eigh_triplets(stack: torch.Tensor, k: int) -> list[SingularTriplets]:
    W = stack.detach().float()
    transposed = W.shape[1] < W.shape[2]  # eigendecompose the smaller Gram
    if transposed:
        W = W.transpose(1, 2)
    # scale each matrix to max |entry| = 1 so that the Gram cannot overflow float32
    scale = W.abs().amax(dim=(1, 2), keepdim=True).clamp_min(torch.finfo(W.dtype).tiny)
    W = W / scale
    s2, v, next_s2 = _top_gram_eigenpairs(W.transpose(1, 2) @ W, k)
    s = s2.clamp_min(0).sqrt()
    s_next = next_s2.clamp_min(0).sqrt() * scale[:, 0, 0].to(next_s2)
    u = (W @ v) / s.clamp_min(torch.finfo(s.dtype).tiny).unsqueeze(1)
    s = s * scale[:, 0]
    if transposed:
        u, v = v, u
    return [SingularTriplets(u[i], s[i], v[i], "gram-eigh", float(s_next[i])) for i in range(stack.shape[0])]


def abs_cos(a: torch.Tensor, b: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Sign-invariant cosine ``|<a, b>| / (|a| |b|)`` along ``dim``.

    Computed in float32, or in the inputs' dtype where that is wider: in bfloat16 the
    rounded products can sum to more than 1, and in float16 products of entries below
    about 2.4e-4 underflow to 0.
    """
    if a.shape != b.shape:
        raise ValueError(f"cannot compare vectors of shapes {tuple(a.shape)} and {tuple(b.shape)}")
    dtype = torch.promote_types(torch.promote_types(a.dtype, b.dtype), torch.float32)
    a, b = a.to(dtype), b.to(dtype)
    num = (a * b).sum(dim).abs()
    den = torch.linalg.vector_norm(a, dim=dim) * torch.linalg.vector_norm(b, dim=dim)
    return num / den.clamp_min(torch.finfo(den.dtype).tiny)


def direction_gaps(triplets: SingularTriplets) -> torch.Tensor:
    """Relative gap of each computed direction ``i``: ``min(s_{i-1} - s_i, s_i - s_{i+1}) / s_1``.

    Direction 1 has no upper neighbour, so its gap is ``(s_1 - s_2) / s_1``; the last
    computed direction is compared with :attr:`SingularTriplets.s_next`. NaN for a zero
    matrix and where sigma1 overflowed (inf). ``[k]``, float64.
    """
    s = torch.cat([triplets.s.detach().double().cpu(), torch.tensor([triplets.s_next], dtype=torch.float64)])
    below = s[:-1] - s[1:]
    above = torch.cat([torch.tensor([math.inf], dtype=torch.float64), below[:-1]])
    if float(s[0]) <= 0:
        return torch.full_like(below, math.nan)
    return torch.minimum(above, below) / s[0]


def direction_flags(triplets: SingularTriplets, tol: float = DEGENERACY_TOL) -> list[str]:
    """Why each computed singular direction is undefined ("" where it is defined).

    A zero matrix defines none ("zero matrix"), nor does one whose sigma1 overflowed to inf
    (or came out NaN) in the solver's precision ("overflow (sigma1 = inf)"); otherwise
    direction ``i`` is undefined when its relative gap (:func:`direction_gaps`) is below
    ``tol``, e.g. ``"tied sigma1/sigma2 (gap 3e-07 < 1e-03)"``.
    """
    gaps = direction_gaps(triplets).tolist()
    s = [*triplets.s.tolist(), triplets.s_next]
    if not math.isfinite(s[0]):
        return [f"overflow (sigma1 = {s[0]})"] * len(gaps)
    flags = []
    for i, gap in enumerate(gaps):
        if math.isnan(gap):
            flags.append("zero matrix")
        elif gap < tol:
            j = i - 1 if i > 0 and s[i - 1] - s[i] < s[i] - s[i + 1] else i  # the closer neighbour
            flags.append(f"tied sigma{j + 1}/sigma{j + 2} (gap {gap:.0e} < {tol:.0e})")
        else:
            flags.append("")
    return flags


class DirectionPair(NamedTuple):
    """Directions ``1..k`` of two matrices compared in one space (:func:`pair_directions`).

    ``cos``: ``[k]`` float32, ``|cos|`` of direction ``i + 1``, NaN where it is undefined;
    ``reasons``: per direction, why it is undefined (empty where defined), e.g.
    ``("layer 3: zero matrix",)``; ``mismatch``: ``""``, or why no direction can be compared
    (``"different input-space dimensions (64 vs 48)"``).
    """

    cos: torch.Tensor
    reasons: tuple[tuple[str, ...], ...]
    mismatch: str

    @property
    def defined(self) -> torch.Tensor:
        """``[k]`` bool: whether direction ``i + 1`` is defined in both matrices and comparable."""
        return torch.tensor([not why for why in self.reasons], dtype=torch.bool)


def pair_directions(
    lower: SingularTriplets,
    upper: SingularTriplets,
    space: Space,
    k: int | None = None,
    tol: float = DEGENERACY_TOL,
    *,
    labels: tuple[str, str] = ("lower", "upper"),
    flags: tuple[Sequence[str], Sequence[str]] | None = None,
) -> DirectionPair:
    """``|cos|`` of singular directions ``1..k`` of two matrices in ``space``: the one rule for a pair.

    Direction ``i`` is compared only where it is defined in both matrices
    (:func:`direction_flags`: not a zero matrix, no overflow, a gap of at least ``tol``)
    and both live in a space of one dimension; elsewhere its ``|cos|`` is NaN and
    :attr:`DirectionPair.reasons` says why, each matrix's flag prefixed with its label
    (``labels``, e.g. ``("layer 3", "layer 4")``). ``k`` defaults to the directions both
    computed. ``flags``: both matrices' :func:`direction_flags`, where the caller already has
    them (a stack flags each matrix once for its two pairs).

    Adjacent layers (:func:`adjacent_direction_cosines`, the analyzer), one layer's weights
    and cumulative gradient, and one layer at two snapshots are all compared through it.
    """
    _check_space(space)
    available = min(lower.s.numel(), upper.s.numel())
    k = available if k is None else k
    if not 0 <= k <= available:
        raise ValueError(f"asked for {k} directions but only {available} were computed")
    if flags is None:
        flags = direction_flags(lower, tol), direction_flags(upper, tol)
    lower_flags, upper_flags = flags[0][:k], flags[1][:k]
    a, b = lower.vectors(space)[:, :k], upper.vectors(space)[:, :k]
    mismatch = "" if a.shape[0] == b.shape[0] else f"different {space}-space dimensions ({a.shape[0]} vs {b.shape[0]})"
    if not (mismatch or any(lower_flags) or any(upper_flags)):  # the common case, kept cheap for the recorder
        return DirectionPair(abs_cos(a, b, dim=0), ((),) * k, "")
    reasons = tuple(
        tuple(f"{label}: {flag}" for label, flag in zip(labels, pair) if flag) + ((mismatch,) if mismatch else ())
        for pair in zip(lower_flags, upper_flags)
    )
    if mismatch:
        return DirectionPair(torch.full((k,), torch.nan), reasons, mismatch)
    defined = torch.tensor([not why for why in reasons], dtype=torch.bool)
    return DirectionPair(torch.where(defined, abs_cos(a, b, dim=0), torch.nan), reasons, mismatch)


def adjacent_direction_cosines(
    triplets: Sequence[SingularTriplets], space: Space, k: int | None = None, tol: float = DEGENERACY_TOL
) -> torch.Tensor:
    """``|cos|`` of the i-th singular direction between consecutive layers.

    Returns ``[len(triplets) - 1, k]``: row ``l`` compares layer ``l`` with ``l + 1``
    (:func:`pair_directions`); column ``i`` is direction ``i + 1`` (column 0 is v1 / u1).
    NaN where the direction is undefined in either layer (a zero matrix, an overflow, or a
    relative gap below ``tol``; see :func:`direction_flags`). Layers whose ``space`` has
    different dimensions are an error here (a stack holds one kind of layer).
    """
    _check_space(space)
    if len(triplets) < 2:
        raise ValueError("need at least two layers to measure adjacent-layer continuity")
    available = min(t.s.numel() for t in triplets)
    k = available if k is None else k
    if k > available:
        raise ValueError(f"asked for {k} directions but only {available} were computed")
    flags = [direction_flags(t, tol) for t in triplets]  # each layer's once, for both of its pairs
    rows = []
    for l, (lower, upper) in enumerate(zip(triplets[:-1], triplets[1:])):
        pair = pair_directions(lower, upper, space, k, tol, flags=(flags[l], flags[l + 1]))
        if pair.mismatch:
            raise ValueError(f"adjacent layers have {pair.mismatch}; continuity is undefined there")
        rows.append(pair.cos)
    return torch.stack(rows)


def subspace_flag(triplets: SingularTriplets, k: int, tol: float = DEGENERACY_TOL) -> str:
    """Why the top-``k`` singular subspace of a matrix is undefined ("" where it is defined).

    It is defined where ``sigma_k`` stands apart from ``sigma_{k+1}`` (:attr:`SingularTriplets.s_next`
    after the last computed direction): ``(s_k - s_{k+1}) / s_1 >= tol``, the tolerance of
    :func:`direction_flags`; ties *inside* the subspace do not matter. As there, a zero matrix
    and one whose sigma1 overflowed define none. For ``k = 1`` it is direction 1's flag.
    """
    n = triplets.s.numel()
    if not 1 <= k <= n:
        raise ValueError(f"asked for the top-{k} subspace but {n} directions were computed")
    s = [*triplets.s.detach().double().cpu().tolist(), float(triplets.s_next)]
    if not math.isfinite(s[0]):
        return f"overflow (sigma1 = {s[0]})"
    if s[0] <= 0:
        return "zero matrix"
    gap = (s[k - 1] - s[k]) / s[0]
    return f"tied sigma{k}/sigma{k + 1} (gap {gap:.0e} < {tol:.0e})" if gap < tol else ""


def subspace_cosines(
    triplets: Sequence[SingularTriplets], space: Space, ks: Sequence[int], tol: float = DEGENERACY_TOL
) -> torch.Tensor:
    """Mean cosine of the principal angles between consecutive layers' top-``k`` singular subspaces.

    Returns ``[len(triplets) - 1, len(ks)]``: row ``l`` compares layer ``l`` with ``l + 1``, column
    ``j`` the top-``ks[j]`` subspaces: the mean singular value of ``V_l[:, :k]^T V_{l+1}[:, :k]``
    (input space; ``U`` for output). 1 for a shared subspace, about :func:`random_subspace_cos`
    ``(d, k)`` for independent ones; ``k = 1`` gives direction 1's ``|cos|``. NaN where either
    layer's subspace is undefined (:func:`subspace_flag`).
    """
    _check_space(space)
    if len(triplets) < 2:
        raise ValueError("need at least two layers to measure adjacent-layer continuity")
    dims = sorted({t.vectors(space).shape[0] for t in triplets})
    if len(dims) > 1:
        raise ValueError(f"layers have different {space}-space dimensions {dims}; continuity is undefined there")
    n = min(t.s.numel() for t in triplets)
    vectors = torch.stack([t.vectors(space)[:, :n] for t in triplets]).detach().double()  # [L, d, n]
    if not ks:
        return torch.empty(len(triplets) - 1, 0)
    columns = []
    for k in ks:
        defined = torch.tensor([not subspace_flag(t, k, tol) for t in triplets])
        overlap = vectors[:-1, :, :k].transpose(1, 2) @ vectors[1:, :, :k]  # [L - 1, k, k]
        cosines = torch.linalg.svdvals(overlap).clamp(max=1.0).mean(-1)
        columns.append(torch.where(defined[:-1] & defined[1:], cosines, torch.nan))
    return torch.stack(columns, dim=1).float()


def _gram_frobenius_sq(W: torch.Tensor) -> torch.Tensor:
    """``||W^T W||_F^2 = ||W W^T||_F^2 = sum_i s_i^4``, via the smaller Gram matrix."""
    small = W @ W.T if W.shape[0] <= W.shape[1] else W.T @ W
    return torch.linalg.matrix_norm(small) ** 2


#: A Gram matrix ``A`` counts as isotropic (no direction stands out; the alignment is not defined) when
#: its trace-free part is this small: ``|A0|_F^2 <= ISOTROPY_TOL |A|_F^2``. Above float32 rounding (an
#: orthogonal 256 x 256 matrix gives ~1e-7 from Grams formed in float32), far below any trained or random
#: matrix (a square Gaussian matrix gives ~0.5).
ISOTROPY_TOL = 1e-6


def _centred_gram_cosine(
    cross: torch.Tensor,
    norm_a: torch.Tensor,
    norm_b: torch.Tensor,
    trace_a: torch.Tensor,
    trace_b: torch.Tensor,
    d: int,
) -> torch.Tensor:
    """``<A0, B0> / (|A0| |B0|)`` from ``<A,B>``, ``|A|^2``, ``|B|^2``, ``tr A``, ``tr B``.

    ``A0 = A - (tr A / d) I``. NaN where either Gram matrix is isotropic: ``|A0|^2 <=``
    :data:`ISOTROPY_TOL` ``|A|^2``, each matrix judged against its own size, so the rule does not
    depend on the two matrices' scales.
    """
    centred_a = (norm_a - trace_a**2 / d).clamp_min(0)
    centred_b = (norm_b - trace_b**2 / d).clamp_min(0)
    value = (cross - trace_a * trace_b / d) / (centred_a * centred_b).sqrt()
    isotropic = (centred_a <= ISOTROPY_TOL * norm_a) | (centred_b <= ISOTROPY_TOL * norm_b)
    return torch.where(isotropic, torch.full_like(value, float("nan")), value)


def spectral_alignment(Wa: torch.Tensor, Wb: torch.Tensor, space: Space) -> float:
    """Sigma^2-weighted alignment of two matrices' singular spaces (centred Gram cosine).

    With ``A = sum_i s_i^2 v_i v_i^T`` (``= W^T W``, input space; ``W W^T`` for output)
    and its trace-free part ``A0 = A - (tr A / d) I``::

        align(Wa, Wb) = <A0, B0>_F / (||A0||_F ||B0||_F)
                      = sum_ij (s_i^2 - mean s^2)(t_j^2 - mean t^2) cos^2(v_i, w_j) / norms

    It scores every singular direction, weighted by how far its sigma^2 stands out from
    the mean. It is 1 for identical matrices (and for matrices equal up to scale),
    invariant to signs and to rotations inside degenerate singular subspaces (it depends
    only on the Gram matrices), and near 0 for independent random matrices because the
    isotropic part is removed. It can be negative (anisotropies that avoid each other).
    No ``d x d`` Gram is formed when the compared space is the larger one.
    """
    _check_space(space)
    Wa, Wb = _as_matrix(Wa).double(), _as_matrix(Wb).double()
    if space == "output":
        Wa, Wb = Wa.T, Wb.T  # the compared space is now the column space of both
    if Wa.shape[1] != Wb.shape[1]:
        raise ValueError(f"matrices have different {space}-space dimensions ({Wa.shape[1]} vs {Wb.shape[1]})")
    d = Wa.shape[1]
    if d * d <= Wa.shape[0] * Wb.shape[0]:
        cross = ((Wa.T @ Wa) * (Wb.T @ Wb)).sum()  # two [d, d] Grams
    else:
        cross = torch.linalg.matrix_norm(Wb @ Wa.T) ** 2  # one [out_b, out_a] product
    value = _centred_gram_cosine(cross, _gram_frobenius_sq(Wa), _gram_frobenius_sq(Wb), (Wa**2).sum(), (Wb**2).sum(), d)
    return float(value)


def adjacent_spectral_alignment(stack: torch.Tensor | Sequence[torch.Tensor], space: Space) -> torch.Tensor:
    """:func:`spectral_alignment` of each consecutive pair of a stack; ``[L - 1]``.

    For a ``[L, out, in]`` tensor of small matrices the Gram matrices are formed once,
    batched; a list of (possibly large or differently shaped) matrices goes pair by pair.
    """
    _check_space(space)
    if len(stack) < 2:
        raise ValueError("need at least two layers to measure adjacent-layer alignment")
    if not isinstance(stack, torch.Tensor) or min(stack.shape[1:]) > EXACT_SVD_MAX_DIM:
        return torch.tensor([spectral_alignment(a, b, space) for a, b in zip(stack[:-1], stack[1:])])
    W = stack.detach().float()
    grams = W.transpose(1, 2) @ W if space == "input" else W @ W.transpose(1, 2)
    flat = grams.flatten(1)
    cross = (flat[:-1] * flat[1:]).sum(1).double()  # 10x faster than the equivalent einsum on CPU
    norms = torch.linalg.vector_norm(flat, dim=1).double() ** 2
    traces = grams.diagonal(dim1=1, dim2=2).sum(-1).double()
    return _centred_gram_cosine(cross, norms[:-1], norms[1:], traces[:-1], traces[1:], grams.shape[-1]).float()


class SpectralNorms(NamedTuple):
    """Largest singular value of each matrix of a stack (``[L]``) and its right singular vectors (``[L, in]``)."""

    norms: torch.Tensor
    vectors: torch.Tensor


class MeanSd(NamedTuple):
    """A mean and a standard deviation (e.g. over random draws)."""

    mean: float
    sd: float


def spectral_norms(stack: torch.Tensor, start: torch.Tensor | None = None) -> SpectralNorms:
    """Largest singular value of each matrix in a ``[L, out, in]`` stack (0 for a zero
    matrix), and the leading right singular vectors ``[L, in, 1]`` (to warm-start the next call)."""
    norms = torch.zeros(stack.shape[0])
    vectors = torch.zeros(stack.shape[0], stack.shape[2], 1)
    nonzero = [i for i in range(stack.shape[0]) if bool(stack[i].any())]
    if nonzero:
        triplets = stacked_singular_triplets(
            stack[nonzero], 1, method="iterative", start=None if start is None else start[nonzero]
        )
        norms[nonzero] = torch.stack([t.s[0] for t in triplets]).float()
        vectors[nonzero] = torch.stack([t.v[:, :1] for t in triplets]).float()
    return SpectralNorms(norms, vectors)


def relative_update(W: torch.Tensor, W0: torch.Tensor) -> torch.Tensor:
    """``||W - W0||_F / ||W0||_F``: how far training has moved a matrix from its init.

    Works on one matrix (a 0-d result) or on stacks ``[..., out, in]`` (one value each).
    """
    if W.shape != W0.shape:
        raise ValueError(f"shape mismatch {tuple(W.shape)} vs {tuple(W0.shape)}")
    W, W0 = W.detach(), W0.detach()
    return torch.linalg.matrix_norm(W - W0) / torch.linalg.matrix_norm(W0)


def _unit_rows(vectors: torch.Tensor) -> torch.Tensor:
    vectors = vectors.detach().double()
    return vectors / torch.linalg.vector_norm(vectors, dim=-1, keepdim=True).clamp_min(1e-300)


def direction_turn(previous: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
    """How far a sign-free direction turned: ``arccos |cos(previous, current)|`` in degrees.

    ``previous``, ``current``: ``[..., d]`` (one direction per row, e.g. each layer's v1 at
    two snapshots). 0 = unchanged (up to sign), 90 = turned to an orthogonal direction.
    """
    if previous.shape != current.shape:
        raise ValueError(f"shape mismatch {tuple(previous.shape)} vs {tuple(current.shape)}")
    cosine = (_unit_rows(previous) * _unit_rows(current)).sum(-1).abs().clamp(max=1.0)
    return torch.rad2deg(torch.arccos(cosine)).float()


def _sign_aligned_tangent_turns(previous: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
    """Each row's turn as a vector: ``current`` (sign-aligned to ``previous``) minus its
    projection on ``previous``, i.e. the direction in which ``previous`` moved."""
    previous, current = _unit_rows(previous), _unit_rows(current)
    overlap = (previous * current).sum(-1, keepdim=True)
    current = current * torch.where(overlap < 0, -1.0, 1.0)
    return current - overlap.abs() * previous


def co_rotation(previous: torch.Tensor, current: torch.Tensor, min_turn_degrees: float = 1e-3) -> torch.Tensor:
    """Do adjacent layers' directions turn together (+1), apart (-1) or independently (~0)?

    ``previous``, ``current``: ``[L, d]``, row ``l`` = layer ``l``'s direction (e.g. v1) at
    two snapshots. Each layer's turn is the vector by which its direction moved (tangent
    to the unit sphere, sign-aligned); layer ``l + 1``'s sign is aligned to layer ``l``'s
    through their previous directions. Returns ``[L - 1]``: the signed cosine between
    the turns of layers ``l`` and ``l + 1``; NaN where either layer turned by less than
    ``min_turn_degrees``. Two independent random turns in ``d`` dimensions give
    ``|co-rotation|`` about :func:`random_abs_cos` ``(d)``; the sign is only meaningful
    where adjacent directions are aligned (high continuity).
    """
    if previous.ndim != 2 or previous.shape != current.shape or previous.shape[0] < 2:
        raise ValueError(
            f"expected two [layers >= 2, d] tensors, got {tuple(previous.shape)} and {tuple(current.shape)}"
        )
    turns = _sign_aligned_tangent_turns(previous, current)
    unit_previous = _unit_rows(previous)
    pair_sign = torch.where((unit_previous[:-1] * unit_previous[1:]).sum(-1) < 0, -1.0, 1.0).unsqueeze(-1)
    lower, upper = turns[:-1], turns[1:] * pair_sign
    norms = torch.linalg.vector_norm(lower, dim=-1) * torch.linalg.vector_norm(upper, dim=-1)
    cosine = (lower * upper).sum(-1) / norms.clamp_min(1e-300)
    turned = direction_turn(previous, current) >= min_turn_degrees
    return torch.where(turned[:-1] & turned[1:], cosine, torch.nan).float()


def random_abs_cos(d: int, exact: bool = True) -> float:
    """E|cos| between two independent uniformly random unit vectors in ``d`` dimensions.

    Exact: ``Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2))``; the large-d approximation is
    ``sqrt(2 / (pi d))`` (0.0499 vs 0.0500 at d = 256).
    """
    if d < 2:
        raise ValueError(f"dimension must be >= 2, got {d}")
    if not exact:
        return math.sqrt(2.0 / (math.pi * d))
    return math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)


@functools.cache
def random_subspace_cos(d: int, k: int, n_samples: int = 20_000, seed: int = 0) -> float:
    """E[mean principal-angle cosine] of two independent uniformly random ``k``-dim subspaces of R^d.

    An empirical Monte-Carlo estimate (``n_samples`` draws with a fixed ``seed``, so the same
    number on every call; cached): by rotation invariance one subspace can be the span of the
    first ``k`` axes, and each draw is the mean singular value of the first ``k`` rows of a
    random orthonormal ``[d, k]`` basis. Its standard error is about 0.5 % of the value for
    ``k = 1`` (``0.75 / sqrt(n_samples)``) and less for larger ``k``. The baseline of :func:`subspace_cosines`; for ``k = 1`` it estimates
    :func:`random_abs_cos` ``(d)``.
    """
    if not 1 <= k <= d:
        raise ValueError(f"need 1 <= k <= d (got k = {k}, d = {d})")
    generator = torch.Generator().manual_seed(seed)
    total = 0.0
    for size in [500] * (n_samples // 500) + [n_samples % 500]:
        if size:
            basis, _ = torch.linalg.qr(torch.randn(size, d, k, generator=generator, dtype=torch.float64))
            total += float(torch.linalg.svdvals(basis[:, :k, :]).clamp(max=1.0).mean(-1).sum())
    return total / n_samples


def empirical_random_abs_cos(d: int, n_samples: int = 10_000, seed: int = 0) -> MeanSd:
    """Mean and standard deviation of |cos| between random Gaussian vectors in ``d`` dims."""
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(n_samples, d, generator=generator, dtype=torch.float64)
    b = torch.randn(n_samples, d, generator=generator, dtype=torch.float64)
    values = abs_cos(a, b, dim=1)
    return MeanSd(float(values.mean()), float(values.std()))


def random_matrix_baseline(
    shape: tuple[int, int], n_layers: int, n_directions: int = 1, n_draws: int = 5, seed: int = 0
) -> dict[str, MeanSd]:
    """Empirical baseline: the continuity metrics on independent Gaussian matrices.

    Draws ``n_draws`` stacks of ``n_layers`` random ``shape`` matrices, runs exactly the
    pipeline used on trained weights, and returns ``{metric: (mean, std)}`` for
    ``v_cos``/``u_cos`` (direction 1) and ``align_input``/``align_output``.
    """
    generator = torch.Generator().manual_seed(seed)
    samples: dict[str, list[torch.Tensor]] = {"v_cos": [], "u_cos": [], "align_input": [], "align_output": []}
    for _ in range(n_draws):
        stack = torch.randn(n_layers, *shape, generator=generator)
        triplets = stacked_singular_triplets(stack, n_directions)
        samples["v_cos"].append(adjacent_direction_cosines(triplets, "input")[:, 0])
        samples["u_cos"].append(adjacent_direction_cosines(triplets, "output")[:, 0])
        samples["align_input"].append(adjacent_spectral_alignment(stack, "input"))
        samples["align_output"].append(adjacent_spectral_alignment(stack, "output"))
    values = {name: torch.cat(v) for name, v in samples.items()}
    values = {name: v[~v.isnan()] for name, v in values.items()}  # pairs with an undefined direction
    return {name: MeanSd(float(v.mean()), float(v.std())) for name, v in values.items()}

"""Metric tests on cases whose answers are known in closed form."""

import math

import pytest
import torch

from geocont import metrics


def orthonormal(n: int, k: int, seed: int) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(n, k, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    return q.float()


def with_spectrum(u: torch.Tensor, s: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (u * s) @ v.T


def spiked(n_out: int, n_in: int, seed: int, spikes=(30.0, 20.0, 12.0), noise: float = 1.0) -> torch.Tensor:
    """Low-rank spikes plus Gaussian noise of spectral norm about 2 * noise."""
    g = torch.Generator().manual_seed(seed)
    k = len(spikes)
    u, v = orthonormal(n_out, k, seed), orthonormal(n_in, k, seed + 1)
    bulk = torch.randn(n_out, n_in, generator=g) * noise / math.sqrt(max(n_out, n_in))
    return with_spectrum(u, torch.tensor(spikes), v) + bulk


def test_identical_matrices_have_continuity_one():
    W = spiked(64, 48, seed=0)
    triplets = [metrics.top_singular_triplets(W, 3)] * 2
    for space in metrics.SPACES:
        assert torch.allclose(metrics.adjacent_direction_cosines(triplets, space), torch.ones(1, 3), atol=1e-5)
        assert metrics.spectral_alignment(W, W, space) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("angle", [0.0, 0.3, 1.0, math.pi / 2])
def test_known_rotation_gives_its_cosine(angle):
    basis = orthonormal(32, 3, seed=1)
    v1 = basis[:, 0]
    v1_rotated = math.cos(angle) * basis[:, 0] + math.sin(angle) * basis[:, 1]
    u = orthonormal(24, 1, seed=2)
    Wa = 5.0 * u @ v1[None] + 0.01 * with_spectrum(orthonormal(24, 1, 3), torch.tensor([1.0]), basis[:, 2:3])
    Wb = 5.0 * u @ v1_rotated[None] + 0.01 * with_spectrum(orthonormal(24, 1, 3), torch.tensor([1.0]), basis[:, 2:3])
    triplets = [metrics.top_singular_triplets(Wa), metrics.top_singular_triplets(Wb)]
    cosine = float(metrics.adjacent_direction_cosines(triplets, "input")[0, 0])
    assert cosine == pytest.approx(abs(math.cos(angle)), abs=1e-4)
    assert float(metrics.adjacent_direction_cosines(triplets, "output")[0, 0]) == pytest.approx(1.0, abs=1e-5)


def test_random_matrices_land_near_the_baseline():
    d, layers = 128, 40
    stack = torch.randn(layers, d, d, generator=torch.Generator().manual_seed(0))
    cosines = metrics.adjacent_direction_cosines(metrics.stacked_singular_triplets(stack, 1), "input")[:, 0]
    baseline = metrics.random_abs_cos(d)
    standard_error = 0.75 * baseline / math.sqrt(layers - 1)  # sd of |cos| is about 0.75 x its mean
    assert abs(float(cosines.mean()) - baseline) < 4 * standard_error
    alignment = metrics.adjacent_spectral_alignment(stack, "input")
    assert float(alignment.abs().mean()) < 0.05


def test_sign_flips_change_nothing():
    W = spiked(40, 30, seed=4)
    flipped = -W
    a, b = metrics.top_singular_triplets(W, 3), metrics.top_singular_triplets(flipped, 3)
    for space in metrics.SPACES:
        assert torch.allclose(metrics.adjacent_direction_cosines([a, b], space), torch.ones(1, 3), atol=1e-5)
        assert metrics.spectral_alignment(W, flipped, space) == pytest.approx(1.0, abs=1e-9)
    # flipping one singular pair (u_i, v_i) -> (-u_i, -v_i) leaves W itself unchanged
    flipped_pair = metrics.SingularTriplets(-a.u, a.s, -a.v)
    assert torch.allclose(metrics.adjacent_direction_cosines([a, flipped_pair], "input"), torch.ones(1, 3))


def test_abs_cos_is_scale_and_sign_invariant():
    a = torch.randn(10)
    assert float(metrics.abs_cos(a, -3 * a)) == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="shapes"):
        metrics.abs_cos(torch.randn(3), torch.randn(4))


@pytest.mark.parametrize("shape", [(1200, 1100), (1100, 1300)])
def test_iterative_matches_exact_svd_on_spiked_matrices(shape):
    W = spiked(*shape, seed=5)
    iterative = metrics.iterative_singular_triplets(W, 3)
    exact = metrics.exact_singular_triplets(W, 3)
    assert iterative is not None and iterative.method == "iterative"
    assert float(metrics.abs_cos(iterative.v, exact.v).min()) > 0.9999
    assert float(metrics.abs_cos(iterative.u, exact.u).min()) > 0.9999
    assert torch.allclose(iterative.s, exact.s, rtol=1e-4)
    auto = metrics.top_singular_triplets(W, 1)
    assert auto.method == "iterative"  # above EXACT_SVD_MAX_DIM, auto iterates


def test_unconverged_iteration_falls_back_to_exact(monkeypatch):
    W = torch.randn(300, 300, generator=torch.Generator().manual_seed(6))  # no spectral gap
    assert metrics.iterative_singular_triplets(W, 1, max_iter=3) is None
    monkeypatch.setattr(metrics, "iterative_singular_triplets", lambda *a, **k: None)
    result = metrics.top_singular_triplets(W, 2, method="iterative")
    exact = metrics.exact_singular_triplets(W, 2)
    assert result.method == "exact-fallback"
    assert float(metrics.abs_cos(result.v, exact.v).min()) > 0.999999


@pytest.mark.parametrize("method", ["auto", "exact", "gram-eigh", "iterative"])
def test_stacked_triplets_match_exact(method):
    stack = torch.stack([spiked(70, 50, seed=s) for s in range(4)])
    for triplets, W in zip(metrics.stacked_singular_triplets(stack, 3, method=method), stack):
        exact = metrics.exact_singular_triplets(W, 3)
        assert float(metrics.abs_cos(triplets.v, exact.v).min()) > 0.9999
        assert float(metrics.abs_cos(triplets.u, exact.u).min()) > 0.9999
        assert torch.allclose(triplets.s, exact.s, rtol=1e-4)


def test_direction_continuity_sees_a_shared_subspace():
    """Layers share their top-3 right singular vectors, and nothing below them."""
    n, shared = 64, orthonormal(64, 3, seed=7)
    spectrum = torch.tensor([10.0, 8.0, 6.0] + [1.0 / (i + 1) for i in range(5)])
    layers = []
    for seed in range(8, 20):
        private = orthonormal(n, 8, seed)
        private = private - shared @ (shared.T @ private)  # keep the private part off the shared span
        private, _ = torch.linalg.qr(private)
        v = torch.cat([shared, private[:, :5]], dim=1)
        layers.append(with_spectrum(orthonormal(n, 8, seed + 100), spectrum, v))
    cosines = metrics.adjacent_direction_cosines(metrics.stacked_singular_triplets(torch.stack(layers), 8), "input")
    assert float(cosines[:, :3].min()) > 0.9999
    assert float(cosines[:, 3:].mean()) < 0.3
    assert cosines.shape == (11, 8)


def test_spectral_alignment_properties():
    Wa = spiked(50, 40, seed=9)
    assert metrics.spectral_alignment(Wa, 3.0 * Wa, "input") == pytest.approx(1.0, abs=1e-9)
    # degenerate spectrum: rotating inside the degenerate subspace changes nothing
    u, v = orthonormal(30, 4, 10), orthonormal(30, 4, 11)
    rotation, _ = torch.linalg.qr(torch.randn(2, 2, generator=torch.Generator().manual_seed(12)))
    v_rotated = v.clone()
    v_rotated[:, :2] = v[:, :2] @ rotation
    spectrum = torch.tensor([5.0, 5.0, 1.0, 0.5])
    A, B = with_spectrum(u, spectrum, v), with_spectrum(u, spectrum, v_rotated)
    assert metrics.spectral_alignment(A, B, "input") == pytest.approx(1.0, abs=1e-6)
    # the memory-saving branch (one [out_b, out_a] product) agrees with the Gram branch
    wide_a, wide_b = spiked(20, 400, seed=13), spiked(20, 400, seed=14)
    gram_a, gram_b = wide_a.double().T @ wide_a.double(), wide_b.double().T @ wide_b.double()
    centred = [g - torch.trace(g) / 400 * torch.eye(400, dtype=torch.float64) for g in (gram_a, gram_b)]
    expected = float((centred[0] * centred[1]).sum() / (centred[0].norm() * centred[1].norm()))
    assert metrics.spectral_alignment(wide_a, wide_b, "input") == pytest.approx(expected, abs=1e-9)
    stack = torch.stack([wide_a, wide_b])
    assert float(metrics.adjacent_spectral_alignment(stack, "output")[0]) == pytest.approx(
        metrics.spectral_alignment(wide_a, wide_b, "output"), abs=1e-5
    )
    assert math.isnan(metrics.spectral_alignment(torch.eye(5), torch.eye(5), "input"))


def test_relative_update_and_baselines():
    W0 = torch.ones(4, 4)
    assert float(metrics.relative_update(W0 * 1.5, W0)) == pytest.approx(0.5)
    assert metrics.random_abs_cos(256) == pytest.approx(0.0499, abs=1e-4)
    assert metrics.random_abs_cos(256, exact=False) == pytest.approx(math.sqrt(2 / (math.pi * 256)))
    assert metrics.random_abs_cos(2) == pytest.approx(2 / math.pi)  # E|cos theta|, theta uniform
    mean, std = metrics.empirical_random_abs_cos(256, n_samples=20000)
    assert mean == pytest.approx(metrics.random_abs_cos(256), rel=0.03)
    baseline = metrics.random_matrix_baseline((64, 64), n_layers=8, n_draws=4)
    assert baseline["v_cos"][0] == pytest.approx(metrics.random_abs_cos(64), rel=0.35)
    assert abs(baseline["align_input"][0]) < 0.05


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="NaN"):
        metrics.top_singular_triplets(torch.tensor([[1.0, float("nan")], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="valid choices"):
        metrics.spectral_alignment(torch.eye(3), torch.eye(3), "sideways")
    with pytest.raises(ValueError, match="dimensions"):
        metrics.adjacent_direction_cosines(
            [metrics.top_singular_triplets(torch.randn(4, 5)), metrics.top_singular_triplets(torch.randn(4, 6))],
            "input",
        )
    with pytest.raises(ValueError, match="2-D"):
        metrics.top_singular_triplets(torch.randn(3))


def _plane_rotation(d: int, i: int, j: int, degrees: float) -> torch.Tensor:
    """Rotation by ``degrees`` in the (e_i, e_j) plane of R^d."""
    R = torch.eye(d, dtype=torch.float64)
    c, s = math.cos(math.radians(degrees)), math.sin(math.radians(degrees))
    R[i, i], R[i, j], R[j, i], R[j, j] = c, -s, s, c
    return R


@pytest.mark.parametrize("degrees", [0.5, 10.0, 45.0, 89.0])
def test_direction_turn_measures_a_constructed_rotation(degrees):
    d = 64
    v = torch.zeros(2, d, dtype=torch.float64)
    v[:, 0] = 1.0
    turned = v @ _plane_rotation(d, 0, 1, degrees).T
    assert torch.allclose(
        metrics.direction_turn(v, turned).double(), torch.tensor([degrees] * 2, dtype=torch.float64), atol=1e-3
    )
    # sign-free: a flipped singular vector has not turned
    assert torch.allclose(metrics.direction_turn(v, -v), torch.zeros(2), atol=1e-6)
    assert torch.allclose(
        metrics.direction_turn(v, -turned).double(), torch.tensor([degrees] * 2, dtype=torch.float64), atol=1e-3
    )


def test_co_rotation_tells_together_apart_and_independent():
    d, layers = 256, 6
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(d, generator=generator, dtype=torch.float64)
    base /= base.norm()
    # aligned adjacent layers (continuity ~1), random signs as real singular vectors have
    signs = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0, -1.0], dtype=torch.float64).unsqueeze(1)
    previous = base.expand(layers, d) * signs
    rotation = torch.linalg.matrix_exp(0.05 * _skew(d, generator))
    together = previous @ rotation.T
    assert torch.allclose(
        metrics.co_rotation(previous, together).double(), torch.ones(layers - 1, dtype=torch.float64), atol=1e-6
    )
    # the same turn seen through a sign flip of one snapshot is still "together"
    flipped = together.clone()
    flipped[2] *= -1
    assert torch.allclose(
        metrics.co_rotation(previous, flipped).double(), torch.ones(layers - 1, dtype=torch.float64), atol=1e-6
    )
    # alternate layers turn by the inverse rotation: apart
    apart = together.clone()
    apart[1::2] = previous[1::2] @ rotation
    assert torch.allclose(
        metrics.co_rotation(previous, apart).double(), -torch.ones(layers - 1, dtype=torch.float64), atol=1e-2
    )
    # independent random turns: |co-rotation| at the random baseline
    many = 400
    previous = base.expand(many, d).clone()
    independent = previous + 0.05 * torch.randn(many, d, generator=generator, dtype=torch.float64)
    values = metrics.co_rotation(previous, independent)
    assert abs(float(values.abs().mean()) - metrics.random_abs_cos(d)) < 0.015
    # a layer that did not turn gives NaN, not a spurious number
    still = together.clone()
    still[0] = previous[0]
    assert torch.isnan(metrics.co_rotation(previous[:6], still[:6])[0])


def _skew(d: int, generator: torch.Generator) -> torch.Tensor:
    A = torch.randn(d, d, generator=generator, dtype=torch.float64) / math.sqrt(d)
    return A - A.T


def test_co_rotation_rejects_bad_shapes():
    with pytest.raises(ValueError, match="layers >= 2"):
        metrics.co_rotation(torch.ones(1, 4), torch.ones(1, 4))
    with pytest.raises(ValueError, match="shape mismatch"):
        metrics.direction_turn(torch.ones(3), torch.ones(4))


def test_warm_started_iteration_converges_faster_to_the_same_vectors():
    generator = torch.Generator().manual_seed(3)
    u = torch.randn(8, 128, 1, generator=generator)
    v = torch.randn(8, 96, 1, generator=generator)
    stack = 3 * (u @ v.transpose(1, 2)) / (
        u.norm(dim=1, keepdim=True) * v.norm(dim=1, keepdim=True)
    ) + 0.5 * torch.randn(8, 128, 96, generator=generator) / math.sqrt(128)
    cold = metrics.batched_subspace_iteration(stack, 1, max_iter=300)
    warm = metrics.batched_subspace_iteration(stack, 1, max_iter=3, check_every=3, start=cold[2])
    assert bool(warm[3].all())  # converged at the first check, from the previous answer
    assert torch.allclose(metrics.abs_cos(warm[2][..., 0], cold[2][..., 0], dim=1), torch.ones(8), atol=1e-4)
    exact = [metrics.exact_singular_triplets(W, 1) for W in stack]
    for i, t in enumerate(metrics.stacked_singular_triplets(stack, 1, method="iterative", start=cold[2])):
        assert float(metrics.abs_cos(t.v[:, 0], exact[i].v[:, 0])) > 1 - 1e-4
    with pytest.raises(ValueError, match="start must be"):
        metrics.batched_subspace_iteration(stack, 1, start=torch.ones(8, 5, 1))
    norms, vectors = metrics.spectral_norms(torch.cat([stack, torch.zeros(1, 128, 96)]))
    assert norms[-1] == 0 and torch.allclose(norms[:-1], torch.linalg.matrix_norm(stack, 2), rtol=1e-4)


# --------------------------------------------------------------------------- undefined directions


def tied_pair(n: int, gap: float, seed: int) -> torch.Tensor:
    """``s = (1, 1 - gap, 0.5, 0.3, 0.1)`` on a random basis: the top-2 subspace is shared by
    every matrix built with the same ``seed``."""
    u, v = orthonormal(n, 5, seed), orthonormal(n, 5, seed + 1)
    return with_spectrum(
        u.double(), torch.tensor([1.0, 1.0 - gap, 0.5, 0.3, 0.1], dtype=torch.float64), v.double()
    ).float()


SOLVERS = {
    "exact": lambda stack, k: [metrics.exact_singular_triplets(W, k) for W in stack],
    "gram-eigh": lambda stack, k: metrics.stacked_singular_triplets(stack, k, method="gram-eigh"),
    "stacked-iterative": lambda stack, k: metrics.stacked_singular_triplets(stack, k, method="iterative"),
    "iterative": lambda stack, k: [metrics.top_singular_triplets(W, k, method="iterative") for W in stack],
}


@pytest.mark.parametrize("solver", SOLVERS)
def test_zero_matrix_has_no_direction_and_never_gives_cos_one(solver):
    stack = torch.stack([torch.zeros(32, 24), torch.zeros(32, 24), spiked(32, 24, seed=1)])
    triplets = SOLVERS[solver](stack, 1)
    assert metrics.direction_flags(triplets[0]) == ["zero matrix"]
    assert math.isnan(float(metrics.direction_gaps(triplets[0])[0]))
    for space in metrics.SPACES:
        cosines = metrics.adjacent_direction_cosines(triplets, space)
        assert torch.isnan(cosines).all()  # zero-zero and zero-nonzero pairs alike


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("gap", [0.0, 1e-7, 1e-5])
def test_tied_and_nearly_tied_leading_pairs_are_flagged_by_every_solver(solver, gap):
    noise = 1e-6 * torch.randn(48, 48, generator=torch.Generator().manual_seed(4))  # spectral norm ~1.4e-5
    stack = torch.stack([tied_pair(48, gap, seed=3), tied_pair(48, gap, seed=3) + noise])
    triplets = SOLVERS[solver](stack, 1)
    for t in triplets:
        assert float(metrics.direction_gaps(t)[0]) == pytest.approx(gap, abs=3e-5)
        assert metrics.direction_flags(t)[0].startswith("tied sigma1/sigma2 (gap ")
        assert metrics.direction_flags(t)[0].endswith(f"< {metrics.DEGENERACY_TOL:.0e})")
    assert torch.isnan(metrics.adjacent_direction_cosines(triplets, "input")).all()
    assert torch.isnan(metrics.adjacent_direction_cosines(triplets, "output")).all()
    # the sigma^2-weighted alignment is defined for tied spectra and still sees identical matrices
    assert float(metrics.adjacent_spectral_alignment(stack, "input")[0]) > 0.9999


def test_a_separated_pair_is_reported_and_a_tie_below_flags_both_of_its_directions():
    spectrum = torch.tensor([10.0, 6.0, 6.0, 2.0, 1.0])
    u, v = orthonormal(40, 5, seed=5), orthonormal(40, 5, seed=6)
    stack = torch.stack([with_spectrum(u, spectrum, v)] * 3)
    triplets = metrics.stacked_singular_triplets(stack, 4)
    flags = metrics.direction_flags(triplets[0])
    assert flags[0] == "" and flags[3] == ""
    assert flags[1].startswith("tied sigma2/sigma3") and flags[2].startswith("tied sigma2/sigma3")
    cosines = metrics.adjacent_direction_cosines(triplets, "input")
    assert torch.allclose(cosines[:, [0, 3]], torch.ones(2, 2), atol=1e-5)
    assert torch.isnan(cosines[:, 1:3]).all()
    # the last computed direction is compared with the next singular value (s_next)
    assert triplets[0].s_next == pytest.approx(1.0, rel=1e-4)
    assert metrics.exact_singular_triplets(stack[0][:, :5], 5).s_next == 0.0  # 40 x 5: no sixth value


def test_a_sigma1_that_overflows_is_flagged_as_an_overflow_not_as_a_zero_matrix():
    huge = torch.full((8, 6), 3e38) + torch.randn(8, 6, generator=torch.Generator().manual_seed(0)) * 1e36
    triplet = metrics.top_singular_triplets(huge)  # finite entries, sigma1 ~ 2e39 > float32's largest
    assert math.isinf(float(triplet.s[0]))
    assert metrics.direction_flags(triplet) == ["overflow (sigma1 = inf)"]
    assert metrics.direction_flags(metrics.top_singular_triplets(torch.zeros(8, 6))) == ["zero matrix"]
    pair = metrics.pair_directions(
        metrics.top_singular_triplets(spiked(8, 6, seed=1)), triplet, "input", labels=("layer 0", "layer 1")
    )
    assert math.isnan(float(pair.cos[0])) and pair.reasons == (("layer 1: overflow (sigma1 = inf)",),)


def test_one_pairing_rule_for_adjacent_layers_and_any_two_matrices():
    stack = torch.stack([spiked(40, 30, seed=s) for s in range(3)] + [torch.zeros(40, 30)])
    triplets = metrics.stacked_singular_triplets(stack, 3)
    for space in metrics.SPACES:
        adjacent = metrics.adjacent_direction_cosines(triplets, space)
        for l in range(3):
            pair = metrics.pair_directions(triplets[l], triplets[l + 1], space)
            assert torch.equal(pair.cos.nan_to_num(-1), adjacent[l].nan_to_num(-1))  # bit for bit
        assert metrics.pair_directions(triplets[0], triplets[1], space).reasons == ((), (), ())
        last = metrics.pair_directions(triplets[2], triplets[3], space, k=2, labels=("layer 2", "layer 3"))
        assert last.reasons == (("layer 3: zero matrix",),) * 2 and not last.defined.any()
    one = metrics.pair_directions(triplets[0], triplets[1], "input", k=1)  # the leading pair only
    assert torch.equal(one.cos, metrics.abs_cos(triplets[0].v[:, :1], triplets[1].v[:, :1]))
    with pytest.raises(ValueError, match="asked for 4 directions but only 3 were computed"):
        metrics.pair_directions(triplets[0], triplets[1], "input", k=4)


def test_matrices_of_different_shapes_compare_only_the_space_they_share():
    a = metrics.top_singular_triplets(spiked(40, 30, seed=0), 2)
    b = metrics.top_singular_triplets(spiked(20, 30, seed=1), 2)
    inside = metrics.pair_directions(a, b, "input")
    assert inside.mismatch == "" and inside.defined.all()
    across = metrics.pair_directions(a, b, "output", labels=("layer 0", "layer 1"))
    assert across.mismatch == "different output-space dimensions (40 vs 20)"
    assert torch.isnan(across.cos).all() and across.reasons == (("different output-space dimensions (40 vs 20)",),) * 2
    with pytest.raises(ValueError, match=r"adjacent layers have different output-space dimensions \(40 vs 20\)"):
        metrics.adjacent_direction_cosines([a, b], "output")


def test_abs_cos_computes_in_float32_at_least():
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(576, generator=generator)
    assert float(metrics.abs_cos(a.bfloat16(), a.bfloat16())) == pytest.approx(1.0, abs=1e-6)
    tiny = torch.full((64,), 1e-4, dtype=torch.float16)
    assert float(metrics.abs_cos(tiny, tiny)) == pytest.approx(1.0, abs=1e-6)
    assert metrics.abs_cos(tiny, tiny).dtype == torch.float32
    assert metrics.abs_cos(a.double(), a.double()).dtype == torch.float64


def test_one_method_vocabulary_for_every_triplet_function():
    W = spiked(40, 30, seed=0)
    for method in metrics.METHODS:
        single = metrics.top_singular_triplets(W, 2, method=method)
        stacked = metrics.stacked_singular_triplets(W[None], 2, method=method)[0]
        assert float(metrics.abs_cos(single.v, stacked.v).min()) > 0.9999
    for function in (
        metrics.top_singular_triplets,
        lambda W, k, method: metrics.stacked_singular_triplets(W[None], k, method=method),
    ):
        with pytest.raises(ValueError, match="valid choices: auto, exact, gram-eigh, iterative"):
            function(W, 1, method="iterative-first")


def _shared_top(n: int, top: torch.Tensor, spectrum, seed: int) -> torch.Tensor:
    """A [n, n] matrix whose top-``top.shape[1]`` right singular subspace is span(top), rotated
    inside at random, with private directions (off that span) below."""
    k = top.shape[1]
    inside = orthonormal(k, k, seed)
    private = orthonormal(n, len(spectrum) - k, seed + 1)
    private, _ = torch.linalg.qr(private - top @ (top.T @ private))
    v = torch.cat([top @ inside, private], dim=1)
    return with_spectrum(orthonormal(n, len(spectrum), seed + 2), torch.tensor(spectrum), v)


def test_layers_sharing_a_top_two_subspace_have_subspace_cos_one_whatever_their_v1():
    n, top = 48, orthonormal(48, 2, seed=30)
    spectrum = [9.0, 7.0, 3.0, 2.0, 1.0, 0.5]
    stack = torch.stack([_shared_top(n, top, spectrum, seed) for seed in (31, 41, 51)])
    triplets = metrics.stacked_singular_triplets(stack, 5)
    cos = metrics.subspace_cosines(triplets, "input", [1, 2, 4])
    assert cos.shape == (2, 3)
    assert torch.allclose(cos[:, 1], torch.ones(2), atol=1e-5)  # the shared top-2 subspace
    assert float(cos[:, 0].max()) < 0.999  # though v1 differs (rotated inside the subspace)
    # k = 1 is direction 1's |cos|; the output spaces share nothing
    assert torch.allclose(cos[:, 0], metrics.adjacent_direction_cosines(triplets, "input")[:, 0], atol=1e-6)
    assert float(metrics.subspace_cosines(triplets, "output", [2]).max()) < 0.6


def test_subspace_cos_of_known_principal_angles_is_the_mean_of_their_cosines():
    basis = orthonormal(20, 4, seed=60)
    a, b = [0.3, 1.1], [basis[:, 0], basis[:, 1]]
    rotated = torch.stack([math.cos(t) * e + math.sin(t) * basis[:, 2 + i] for i, (t, e) in enumerate(zip(a, b))], 1)
    u = orthonormal(16, 2, seed=61)
    lower = with_spectrum(u, torch.tensor([5.0, 3.0]), basis[:, :2])
    upper = with_spectrum(u, torch.tensor([5.0, 3.0]), rotated)
    triplets = metrics.stacked_singular_triplets(torch.stack([lower, upper]), 2)
    value = float(metrics.subspace_cosines(triplets, "input", [2])[0, 0])
    assert value == pytest.approx((math.cos(0.3) + math.cos(1.1)) / 2, abs=1e-5)
    assert float(metrics.subspace_cosines(triplets, "output", [2])[0, 0]) == pytest.approx(1.0, abs=1e-5)


def test_a_tie_at_k_makes_the_top_k_subspace_undefined_and_a_tie_inside_it_does_not():
    u, v = orthonormal(40, 5, seed=70), orthonormal(40, 5, seed=71)
    tie_below_two = with_spectrum(u, torch.tensor([10.0, 6.0, 6.0, 2.0, 1.0]), v)  # sigma2 = sigma3
    tie_inside_two = with_spectrum(u, torch.tensor([6.0, 6.0, 3.0, 2.0, 1.0]), v)  # sigma1 = sigma2
    for W, undefined in ((tie_below_two, [2]), (tie_inside_two, [1])):
        triplets = metrics.stacked_singular_triplets(torch.stack([W, W]), 5)
        cos = metrics.subspace_cosines(triplets, "input", [1, 2, 4])
        for j, k in enumerate([1, 2, 4]):
            if k in undefined:
                assert math.isnan(float(cos[0, j]))
                assert metrics.subspace_flag(triplets[0], k).startswith(f"tied sigma{k}/sigma{k + 1} (gap ")
            else:
                assert float(cos[0, j]) == pytest.approx(1.0, abs=1e-5) and metrics.subspace_flag(triplets[0], k) == ""
    zero = metrics.stacked_singular_triplets(torch.stack([torch.zeros(40, 40), tie_below_two]), 4)
    assert metrics.subspace_flag(zero[0], 2) == "zero matrix"
    assert torch.isnan(metrics.subspace_cosines(zero, "output", [2, 4])).all()
    with pytest.raises(ValueError, match="top-5 subspace but 4 directions"):
        metrics.subspace_flag(zero[1], 5)
    assert metrics.subspace_cosines(zero, "input", []).shape == (1, 0)
    mixed = [metrics.top_singular_triplets(spiked(40, n, seed=n), 2) for n in (30, 20)]
    with pytest.raises(ValueError, match="different input-space dimensions"):
        metrics.subspace_cosines(mixed, "input", [2])
    assert metrics.subspace_cosines(mixed, "output", [2]).shape == (1, 1)


def test_the_random_subspace_level_agrees_with_random_abs_cos_at_k_one_and_with_random_matrices():
    for d in (16, 256):  # |cos| has sd about 0.75 x its mean: the estimate's standard error
        assert metrics.random_subspace_cos(d, 1) == pytest.approx(metrics.random_abs_cos(d), rel=4 * 0.75 / 20_000**0.5)
    assert metrics.random_subspace_cos(8, 8) == pytest.approx(1.0)
    assert metrics.random_subspace_cos(64, 2) < metrics.random_subspace_cos(64, 4) < metrics.random_subspace_cos(32, 4)
    hits = metrics.random_subspace_cos.cache_info().hits
    metrics.random_subspace_cos(16, 1)
    assert metrics.random_subspace_cos.cache_info().hits == hits + 1  # cached
    # two independent random subspaces (no axis-aligned one), and Gaussian matrices' top-4 subspaces
    d, generator = 64, torch.Generator().manual_seed(80)
    a, _ = torch.linalg.qr(torch.randn(4000, d, 4, generator=generator, dtype=torch.float64))
    b, _ = torch.linalg.qr(torch.randn(4000, d, 4, generator=generator, dtype=torch.float64))
    direct = torch.linalg.svdvals(a.transpose(1, 2) @ b).mean(-1)
    assert float(direct.mean()) == pytest.approx(
        metrics.random_subspace_cos(d, 4), abs=4 * float(direct.std()) / 4000**0.5
    )
    stack = torch.randn(41, d, d, generator=generator)
    cos = metrics.subspace_cosines(metrics.stacked_singular_triplets(stack, 5), "input", [4])[:, 0]
    assert float(cos.mean()) == pytest.approx(metrics.random_subspace_cos(d, 4), abs=4 * float(cos.std()) / 40**0.5)
    with pytest.raises(ValueError, match="1 <= k <= d"):
        metrics.random_subspace_cos(4, 5)


def test_subspace_iteration_handles_entries_whose_gram_overflows_float32_and_is_scale_exact():
    generator = torch.Generator().manual_seed(3)
    stack = torch.randn(3, 64, 48, generator=generator)
    u, s, v, converged, s_next = metrics.batched_subspace_iteration(stack, 2)
    hu, hs, hv, hconverged, hs_next = metrics.batched_subspace_iteration(stack * 2.0**120, 2)  # ~1e36
    assert converged.all() and hconverged.all()
    assert torch.equal(hu, u) and torch.equal(hv, v)  # a power of two changes no digit
    assert torch.equal(hs, s * 2.0**120) and torch.equal(hs_next, s_next * 2.0**120)
    broken = stack.clone()
    broken[1, 0, 0] = float("inf")
    assert metrics.batched_subspace_iteration(broken, 1)[3].tolist() == [True, False, True]


def test_spectral_alignment_does_not_depend_on_the_two_matrices_scales_and_flags_isotropy():
    generator = torch.Generator().manual_seed(4)
    a = torch.randn(100, 80, generator=generator, dtype=torch.float64)
    b = a + 0.3 * torch.randn(100, 80, generator=generator, dtype=torch.float64)
    assert metrics.spectral_alignment(a, b * 1e5, "input") == pytest.approx(metrics.spectral_alignment(a, b, "input"))
    orthogonal, _ = torch.linalg.qr(torch.randn(64, 64, generator=generator))
    assert math.isnan(metrics.spectral_alignment(orthogonal, a[:64, :64], "input"))
    batched = metrics.adjacent_spectral_alignment(
        torch.stack([orthogonal, torch.randn(64, 64, generator=generator), torch.randn(64, 64, generator=generator)]),
        "input",
    )
    assert math.isnan(float(batched[0])) and math.isfinite(float(batched[1]))

"""``adam-rotated``: Adam in a random orthogonal frame per hidden matrix (geocont.optimizers)."""

import pytest
import torch

from geocont.cache import cache_key
from geocont.config import LMRunConfig, MLPRunConfig, OptimizerConfig
from geocont.optimizers import FrameAdam, random_frames, random_orthogonal
from geocont.training import make_optimizer, train_mlp

OPTIONS = dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-8, weight_decay=1e-3)


def problem(seed=0, out=5, inp=4):
    """A matrix and a bias fitted by least squares: ``loss(W, b) = ||A W B + b - C||^2``."""
    g = torch.Generator().manual_seed(seed)
    a, b, c = (torch.randn(n, m, generator=g, dtype=torch.float64) for n, m in ((7, out), (inp, 3), (7, 3)))
    w0 = torch.randn(out, inp, generator=g, dtype=torch.float64)
    return (lambda w, bias: ((a @ w @ b + bias - c) ** 2).sum()), w0


def trajectory(optimizer_for, loss, w0, steps=12, map_to_w=lambda v: v):
    w = torch.nn.Parameter(w0.clone())
    bias = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    optimizer = optimizer_for(w, bias)
    path = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss(map_to_w(w), bias).backward()
        optimizer.step()
        path.append((map_to_w(w.detach()).clone(), bias.detach().clone()))
    return path


def test_identity_frames_give_torch_adam_bit_for_bit():
    loss, w0 = problem()
    eye = (torch.eye(5, dtype=torch.float64), torch.eye(4, dtype=torch.float64))
    framed = trajectory(lambda w, b: FrameAdam([w, b], {w: eye}, **OPTIONS), loss, w0)
    adam = trajectory(lambda w, b: torch.optim.Adam([w, b], foreach=False, **OPTIONS), loss, w0)
    assert all(torch.equal(fw, aw) and torch.equal(fb, ab) for (fw, fb), (aw, ab) in zip(framed, adam))


def test_frame_adam_is_adam_on_the_rotated_problem():
    """Training W in frame (R, R') == plain Adam on W' = R^T W R', mapped back by W = R W' R'^T."""
    loss, w0 = problem()
    g = torch.Generator().manual_seed(1)
    left, right = (torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))[0] for n in (5, 4))
    framed = trajectory(lambda w, b: FrameAdam([w, b], {w: (left, right)}, **OPTIONS), loss, w0)
    rotated = trajectory(
        lambda v, b: torch.optim.Adam([v, b], foreach=False, **OPTIONS),
        loss,
        left.T @ w0 @ right,
        map_to_w=lambda v: left @ v @ right.T,
    )
    for (fw, fb), (rw, rb) in zip(framed, rotated):
        assert torch.allclose(fw, rw, atol=1e-10) and torch.allclose(fb, rb, atol=1e-10)
    # the control it is: plain Adam in the standard frame follows another path (SGD would not)
    plain = trajectory(lambda w, b: torch.optim.Adam([w, b], foreach=False, **OPTIONS), loss, w0)
    assert not torch.allclose(plain[-1][0], framed[-1][0], atol=1e-3)
    sgd = trajectory(lambda w, b: torch.optim.SGD([w, b], lr=1e-3), loss, w0)
    sgd_rotated = trajectory(
        lambda v, b: torch.optim.SGD([v, b], lr=1e-3), loss, left.T @ w0 @ right, map_to_w=lambda v: left @ v @ right.T
    )
    assert torch.allclose(sgd[-1][0], sgd_rotated[-1][0], atol=1e-10)


def test_random_frames_are_orthogonal_per_layer_and_seeded():
    matrices = [torch.zeros(6, 4) for _ in range(3)]
    frames = random_frames(matrices, seed=0)
    for left, right in frames.values():
        assert left.dtype == torch.float32 and left.shape == (6, 6) and right.shape == (4, 4)
        assert torch.allclose(left.T @ left, torch.eye(6), atol=1e-5) and torch.allclose(
            right @ right.T, torch.eye(4), atol=1e-5
        )
    lefts = [frames[m][0] for m in matrices]
    assert not torch.allclose(lefts[0], lefts[1], atol=0.1)  # each layer has its own axes
    again = random_frames(matrices, seed=0)
    assert all(torch.equal(frames[m][0], again[m][0]) and torch.equal(frames[m][1], again[m][1]) for m in matrices)
    assert not torch.equal(random_frames(matrices, seed=1)[matrices[0]][0], lefts[0])
    with pytest.raises(ValueError, match="matrices"):
        random_frames([torch.zeros(3)], seed=0)


def test_random_orthogonal_is_not_biased_towards_the_identity():
    import numpy as np

    diagonals = [float(random_orthogonal(8, np.random.default_rng(s)).diagonal().mean()) for s in range(200)]
    assert abs(sum(diagonals) / len(diagonals)) < 0.05  # Haar measure: E[Q_ii] = 0


def test_frame_adam_rejects_frames_that_do_not_fit():
    w = torch.nn.Parameter(torch.zeros(3, 2))
    with pytest.raises(ValueError, match="do not fit"):
        FrameAdam([w], {w: (torch.eye(2), torch.eye(2))})
    with pytest.raises(ValueError, match="one of the optimizer's parameters"):
        FrameAdam([w], {torch.nn.Parameter(torch.zeros(2, 2)): (torch.eye(2), torch.eye(2))})


def test_make_optimizer_and_config_wire_adam_rotated():
    config = OptimizerConfig("adam-rotated", lr=1, beta2=0)
    assert config.lr == 1.0 and config.label == "adam-rotated(beta2=0)"
    assert OptimizerConfig("adam-rotated").label == "adam-rotated"
    with pytest.raises(ValueError, match="momentum"):
        OptimizerConfig("adam-rotated", momentum=0.9)
    with pytest.raises(ValueError, match="language-model"):
        LMRunConfig(optimizer=OptimizerConfig("adam-rotated"))
    layers = [torch.nn.Linear(4, 4) for _ in range(2)]
    params = [p for layer in layers for p in layer.parameters()]
    with pytest.raises(ValueError, match="framed="):
        make_optimizer(params, OptimizerConfig("adam-rotated"))
    optimizer = make_optimizer(params, OptimizerConfig("adam-rotated"), framed=[l.weight for l in layers], frame_seed=3)
    assert isinstance(optimizer, FrameAdam)
    assert all("left" in optimizer.state[l.weight] and "left" not in optimizer.state[l.bias] for l in layers)
    assert type(make_optimizer(params, OptimizerConfig("adam"), framed=[layers[0].weight])) is torch.optim.Adam


def test_existing_cache_keys_are_unchanged():
    # the optimizer's identity gained no field (tests/test_config.py pins the default run's whole identity)
    assert MLPRunConfig().to_dict()["optimizer"] == {
        "name": "adam",
        "lr": 0.001,
        "beta1": 0.9,
        "beta2": 0.999,
        "eps": 1e-08,
        "momentum": 0.0,
        "weight_decay": 0.0,
    }
    rotated = MLPRunConfig(optimizer=OptimizerConfig("adam-rotated"))
    assert cache_key("mlp", rotated.to_dict()) != cache_key("mlp", MLPRunConfig().to_dict())


def test_train_mlp_with_adam_rotated(monkeypatch, tmp_path):
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path))
    config = MLPRunConfig(
        condition="res-none",
        max_train=256,
        width=16,
        depth=4,
        epochs=3,
        batch_size=64,
        n_snapshots=4,
        n_directions=1,
        optimizer=OptimizerConfig("adam-rotated", lr=3e-3),
    )
    table = train_mlp(config, progress=False)
    losses = table[table.metric == "train_loss"].value
    assert losses.notna().all() and losses.iloc[-1] < losses.iloc[0]
    plain = train_mlp(config.replace(optimizer=OptimizerConfig("adam", lr=3e-3)), progress=False)
    assert not plain.value.equals(table.value)  # a different optimizer, not Adam under another name

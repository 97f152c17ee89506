"""``res-radial-tau``: x tanh(||x|| / tau), rotation-equivariant and nonlinear at initialisation."""

import math

import pytest
import torch

from geocont.config import MLPRunConfig
from geocont.data import load_image_data
from geocont.mlp import ResidualMLP, ScaledRadialActivation, preactivation_norms
from geocont.training import train_mlp


def first_batch(size=128):
    data = load_image_data("mnist-subset")
    return data.x_train[torch.randperm(len(data.y_train), generator=torch.Generator().manual_seed(0))[:size]]


def test_tau_is_the_median_norm_of_the_first_batch_and_then_fixed():
    activation = ScaledRadialActivation().double()
    x = torch.randn(9, 6, dtype=torch.float64) * 3
    activation(x)
    assert float(activation.tau) == float(torch.linalg.vector_norm(x, dim=-1).median())
    tau = activation.tau.clone()
    activation(10 * torch.randn(4, 6, dtype=torch.float64))
    assert torch.equal(activation.tau, tau)
    assert "tau" in dict(activation.named_buffers()) and not list(activation.parameters())


def test_scaled_radial_activation_is_rotation_equivariant():
    activation = ScaledRadialActivation().double()
    x = torch.randn(16, 8, dtype=torch.float64)
    activation(x)  # fixes tau
    for seed in range(3):
        rotation, _ = torch.linalg.qr(
            torch.randn(8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
        )
        assert torch.allclose(activation(x @ rotation.T), activation(x) @ rotation.T, atol=1e-12)
    assert not torch.allclose(activation(2 * x), 2 * activation(x))


def test_markedly_nonlinear_at_initialisation_where_sigma_rad_is_not():
    x = torch.as_tensor(first_batch(), dtype=torch.float32)
    torch.manual_seed(0)
    scaled = ResidualMLP("res-radial-tau")
    norms = preactivation_norms(scaled, x)  # its first forward pass: sets every layer's tau
    taus = torch.stack([block.activation.tau for block in scaled.blocks])
    assert torch.equal(norms.median(dim=1).values, taus)
    deviation = 1 - torch.tanh(norms / taus[:, None])  # |sigma(z) - z| / |z|: 1 - tanh(1) = 0.24 at the median
    assert float(deviation.min()) > 0 and float((deviation > 1 - math.tanh(1) - 1e-6).float().mean()) >= 0.5
    assert float((deviation < 0.01).float().mean()) < 0.02
    torch.manual_seed(0)
    plain = ResidualMLP("res-radial")
    plain_deviation = 1 - torch.tanh(preactivation_norms(plain, x))
    assert float((plain_deviation < 0.01).float().mean()) > 0.95  # sigma_rad: the identity in practice


def test_tau_survives_a_state_dict_round_trip():
    source = ResidualMLP("res-radial-tau", in_features=8, width=8, depth=2)
    source(torch.randn(5, 8))
    target = ResidualMLP("res-radial-tau", in_features=8, width=8, depth=2)
    target.load_state_dict(source.state_dict())
    x = torch.randn(3, 8)
    assert torch.equal(target(x), source(x))
    assert all(block.activation.calibrated for block in target.blocks)


def test_res_radial_tau_trains_with_tau_fixed():
    torch.manual_seed(0)
    model = ResidualMLP("res-radial-tau", in_features=20, width=16, depth=4, n_classes=3)
    x, y = torch.randn(64, 20), torch.randint(0, 3, (64,))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(20):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
        if len(losses) == 1:
            taus = [block.activation.tau.clone() for block in model.blocks]
    assert losses[-1] < 0.8 * losses[0]
    assert all(torch.equal(block.activation.tau, tau) for block, tau in zip(model.blocks, taus))


def test_train_mlp_runs_res_radial_tau(monkeypatch, tmp_path):
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path))
    config = MLPRunConfig(
        condition="res-radial-tau",
        max_train=256,
        width=16,
        depth=4,
        epochs=2,
        batch_size=64,
        n_snapshots=4,
        n_directions=1,
    )
    table = train_mlp(config, progress=False)
    losses = table[table.metric == "train_loss"].value
    assert len(losses) >= 3 and losses.notna().all() and losses.iloc[-1] < losses.iloc[0]


def test_tracking_tau_follows_the_median_norm_in_training_and_not_in_eval():
    from geocont.mlp import RUNNING_MOMENTUM, TrackingRadialActivation

    activation = TrackingRadialActivation().double()
    x = torch.randn(9, 6, dtype=torch.float64) * 3
    out = activation(x)
    tau0 = float(torch.linalg.vector_norm(x, dim=-1).median())
    assert float(activation.tau) == tau0 and not list(activation.parameters())
    assert torch.allclose(out, x * torch.tanh(torch.linalg.vector_norm(x, dim=-1, keepdim=True) / tau0))
    wider = 10 * torch.randn(5, 6, dtype=torch.float64)
    out = activation(wider)  # uses tau0, then moves tau towards this batch's median norm
    norms = torch.linalg.vector_norm(wider, dim=-1, keepdim=True)
    assert torch.equal(out, wider * torch.tanh(norms / tau0))
    assert float(activation.tau) == pytest.approx(
        (1 - RUNNING_MOMENTUM) * tau0 + RUNNING_MOMENTUM * float(norms.median())
    )
    activation.eval()
    tau1 = activation.tau.clone()
    activation(100 * wider)
    assert torch.equal(activation.tau, tau1)  # eval never updates tau
    rotation, _ = torch.linalg.qr(torch.randn(6, 6, dtype=torch.float64))
    assert torch.allclose(activation(x @ rotation.T), activation(x) @ rotation.T, atol=1e-12)


def test_res_radial_track_trains_with_tau_moving_and_survives_a_state_dict_round_trip():
    torch.manual_seed(0)
    model = ResidualMLP("res-radial-track", in_features=20, width=16, depth=4, n_classes=3)
    x, y = torch.randn(64, 20), torch.randint(0, 3, (64,))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(20):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
        if len(losses) == 1:
            taus = [block.activation.tau.clone() for block in model.blocks]
    assert losses[-1] < 0.8 * losses[0]
    assert all(not torch.equal(block.activation.tau, tau) for block, tau in zip(model.blocks, taus))
    target = ResidualMLP("res-radial-track", in_features=20, width=16, depth=4, n_classes=3)
    target.load_state_dict(model.state_dict())
    model.eval(), target.eval()
    assert torch.equal(target(x), model(x)) and all(block.activation.calibrated for block in target.blocks)


def test_near_linear_share_reads_each_layers_tau():
    from geocont.mlp import NEAR_LINEAR, near_linear_share

    norms = torch.tensor([[3.0, 1.0, 2.7, 2.6], [6.0, 2.0, 5.4, 5.2]])  # tanh(2.7) = 0.9910, tanh(2.6) = 0.9890
    assert math.tanh(2.7) >= NEAR_LINEAR > math.tanh(2.6)
    plain = ResidualMLP("res-radial", in_features=4, width=4, depth=2)
    assert near_linear_share(plain, norms).tolist() == [0.5, 0.75]  # tau = 1
    for condition in ("res-radial-tau", "res-radial-track"):
        scaled = ResidualMLP(condition, in_features=4, width=4, depth=2)
        for block, tau in zip(scaled.blocks, (1.0, 2.0)):
            block.activation.tau.fill_(tau)
        assert near_linear_share(scaled, norms).tolist() == [0.5, 0.5]
    assert near_linear_share(ResidualMLP("res-relu", in_features=4, width=4, depth=2), norms) is None

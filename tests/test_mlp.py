"""The residual MLP and its ablation conditions."""

import pytest
import torch

from geocont.mlp import CONDITIONS, RadialActivation, ResidualMLP


@pytest.mark.parametrize("condition", list(CONDITIONS))
def test_every_condition_builds_and_runs(condition):
    model = ResidualMLP(condition, in_features=20, width=16, depth=4, n_classes=3)
    assert model(torch.randn(5, 20)).shape == (5, 3)
    weights = model.hidden_weights()
    assert len(weights) == 4 and all(w.shape == (16, 16) for w in weights)


def test_residual_switch_and_activation_are_what_the_condition_says():
    x = torch.randn(3, 8)
    res = ResidualMLP("res-none", in_features=8, width=8, depth=2).blocks[0]
    nores = ResidualMLP("nores-relu", in_features=8, width=8, depth=2).blocks[0]
    assert torch.allclose(res(x), x + res.linear(x))  # linear residual: h + W h + b
    assert torch.allclose(nores(x), torch.relu(nores.linear(x)))  # no identity path
    assert isinstance(ResidualMLP("res-gelu", in_features=8, width=8, depth=2).blocks[0].activation, torch.nn.GELU)
    assert isinstance(ResidualMLP("res-radial", in_features=8, width=8, depth=2).blocks[0].activation, RadialActivation)


def test_radial_activation_is_rotation_equivariant_and_nonlinear():
    activation = RadialActivation()
    x = torch.randn(4, 6, dtype=torch.float64) * 0.3
    rotation, _ = torch.linalg.qr(torch.randn(6, 6, dtype=torch.float64))
    assert torch.allclose(activation(x @ rotation.T), activation(x) @ rotation.T)
    assert not torch.allclose(activation(2 * x), 2 * activation(x))
    relu = torch.nn.ReLU()
    assert not torch.allclose(relu(x @ rotation.T), relu(x) @ rotation.T)  # element-wise breaks it


def test_init_scale_and_gain():
    residual = ResidualMLP("res-relu", in_features=10, width=128, depth=16, init_scale=2.0)
    std = residual.blocks[0].linear.weight.std().item()
    assert std == pytest.approx(2.0 / 4 / 128**0.5, rel=0.05)  # init_scale * depth^-1/2 / sqrt(fan_in)
    plain = ResidualMLP("nores-relu", in_features=10, width=128, depth=16)
    assert plain.blocks[0].linear.weight.std().item() == pytest.approx(2**0.5 / 128**0.5, rel=0.05)
    assert all(float(b.linear.bias.detach().abs().max()) == 0 for b in plain.blocks)


def test_bad_model_arguments_name_the_choices():
    with pytest.raises(ValueError, match="valid choices: res-relu"):
        ResidualMLP("res-tanh")
    with pytest.raises(ValueError, match="init_scale"):
        ResidualMLP("res-relu", init_scale=0.0)


def test_preactivation_norms_follow_the_forward_pass():
    from geocont.mlp import preactivation_norms

    model = ResidualMLP("res-radial", in_features=8, width=8, depth=3)
    x = torch.randn(5, 8)
    norms = preactivation_norms(model, x)
    assert norms.shape == (3, 5)
    first = model.blocks[0].linear(model.embed(x))
    assert torch.allclose(norms[0], first.norm(dim=-1))


@pytest.mark.parametrize(
    "condition, norm_type",
    [
        ("res-ln", torch.nn.LayerNorm),
        ("res-ln-relu", torch.nn.LayerNorm),
        ("res-rms", torch.nn.RMSNorm),
        ("res-rms-relu", torch.nn.RMSNorm),
    ],
)
def test_normalisation_is_applied_before_the_linear_map(condition, norm_type):
    model = ResidualMLP(condition, in_features=8, width=8, depth=2)
    block = model.blocks[0]
    assert isinstance(block.norm, norm_type)
    assert not any(True for _ in block.norm.parameters())  # no learnable gain or bias
    h = torch.randn(4, 8) * 3 + 1
    if norm_type is torch.nn.LayerNorm:
        normed = (h - h.mean(-1, keepdim=True)) / torch.sqrt(h.var(-1, unbiased=False, keepdim=True) + 1e-5)
    else:
        normed = h / torch.sqrt((h**2).mean(-1, keepdim=True) + 1e-5)
    pre = block.linear(normed)
    expected = h + (torch.relu(pre) if condition.endswith("relu") else pre)
    assert torch.allclose(block(h), expected, atol=1e-5)
    plain = ResidualMLP("res-relu", in_features=8, width=8, depth=2).blocks[0]
    assert isinstance(plain.norm, torch.nn.Identity)


def test_rmsnorm_is_rotation_equivariant_and_layernorm_is_not():
    from geocont.mlp import make_norm

    x = torch.randn(5, 16, dtype=torch.float64)
    rotation, _ = torch.linalg.qr(torch.randn(16, 16, dtype=torch.float64))
    rms, ln = make_norm("rmsnorm", 16).double(), make_norm("layernorm", 16).double()
    assert torch.allclose(rms(x @ rotation.T), rms(x) @ rotation.T)
    assert not torch.allclose(ln(x @ rotation.T), ln(x) @ rotation.T)
    with pytest.raises(ValueError, match="valid choices: none, layernorm, rmsnorm"):
        make_norm("batchnorm", 16)


def test_the_leaky_dose_runs_from_relu_to_the_identity():
    from geocont.mlp import CONDITIONS, LEAKY_SLOPES

    assert LEAKY_SLOPES[0.0] == "res-relu" and LEAKY_SLOPES[1.0] == "res-none"
    assert list(LEAKY_SLOPES) == sorted(LEAKY_SLOPES) and all(name in CONDITIONS for name in LEAKY_SLOPES.values())
    for slope, name in LEAKY_SLOPES.items():
        block = ResidualMLP(name, in_features=8, width=8, depth=2).blocks[0]
        assert block.residual
        x = torch.randn(4, 8)
        z = block.linear(x)
        assert torch.allclose(block(x), x + torch.where(z > 0, z, slope * z))  # slope 0: ReLU; slope 1: identity
        if 0 < slope < 1:
            assert isinstance(block.activation, torch.nn.LeakyReLU) and block.activation.negative_slope == slope


def test_batch_centred_relu_removes_the_batch_mean_inside_the_gradient_and_keeps_a_running_mean():
    from geocont.mlp import RUNNING_MOMENTUM, BatchCentredReLU

    activation = BatchCentredReLU().double()
    first = torch.randn(64, 6, dtype=torch.float64) + 0.5
    eval_before = activation.eval()(first)  # before any training batch: the batch's own mean, nothing kept
    assert eval_before.mean(0).abs().max() < 1e-12 and activation.mu.numel() == 0
    activation.train()
    out = activation(first)
    assert out.mean(0).abs().max() < 1e-12  # zero mean on the training batch
    assert torch.equal(activation.mu, torch.relu(first).mean(0)) and not list(activation.parameters())
    second = torch.randn(32, 6, dtype=torch.float64, requires_grad=True)
    out = activation(second)
    assert out.detach().mean(0).abs().max() < 1e-12
    expected = (1 - RUNNING_MOMENTUM) * torch.relu(first).mean(0) + RUNNING_MOMENTUM * torch.relu(second.detach()).mean(
        0
    )
    assert torch.allclose(activation.mu, expected, rtol=0, atol=1e-15)
    out.sum().backward()  # the gradient flows through the mean: the sum of a centred output does not move
    assert second.grad.abs().max() < 1e-12
    activation.eval()
    mu = activation.mu.clone()
    assert torch.equal(activation(3 * second.detach()), torch.relu(3 * second.detach()) - mu)
    assert torch.equal(activation.mu, mu)  # eval reads mu, never moves it


def test_batch_centred_relu_survives_a_state_dict_round_trip_and_trains():
    source = ResidualMLP("res-relu-batch-centred", in_features=8, width=8, depth=2)
    source(torch.randn(5, 8))
    target = ResidualMLP("res-relu-batch-centred", in_features=8, width=8, depth=2)
    target.load_state_dict(source.state_dict())
    source.eval(), target.eval()
    x = torch.randn(3, 8)
    assert torch.equal(target(x), source(x))
    torch.manual_seed(0)
    model = ResidualMLP("nores-relu-batch-centred", in_features=20, width=16, depth=4, n_classes=3)
    x, y = torch.randn(64, 20), torch.randint(0, 3, (64,))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(20):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.8 * losses[0]


def test_the_centred_relu_without_residual_starts_with_a_stable_signal():
    from geocont.mlp import CENTRED_RELU_GAIN, forward_trace

    assert CENTRED_RELU_GAIN == pytest.approx(1 / (0.5 - 1 / (2 * torch.pi)) ** 0.5)
    torch.manual_seed(0)
    model = ResidualMLP("nores-relu-batch-centred", in_features=64, width=256, depth=16)
    assert model.hidden_gain() == CENTRED_RELU_GAIN
    norms = [float(u.norm(dim=1).mean()) for u in forward_trace(model, torch.randn(512, 64)).inputs]
    assert 0.5 < norms[-1] / norms[1] < 2  # He's sqrt(2) would shrink it ~20x over the 16 layers


@pytest.mark.parametrize(
    "condition",
    [
        "res-leaky-0.5",
        "res-leaky-0.9",
        "res-leaky-0.99",
        "res-relu-batch-centred",
        "nores-relu-batch-centred",
        "res-radial-track",
    ],
)
def test_the_new_conditions_train(condition):
    from geocont.config import MLPRunConfig
    from geocont.tables import select
    from geocont.training import train_mlp

    config = MLPRunConfig(
        condition=condition, max_train=256, width=16, depth=4, steps=8, batch_size=64, n_snapshots=3, n_directions=1
    )
    table = train_mlp(config, progress=False)
    losses = select(table, "train_loss")["value"]
    assert select(table, "diverged").empty and losses.notna().all() and losses.iloc[-1] < losses.iloc[0]
    assert select(table, "weight_cos", "input", 1)["value"].notna().all()


def test_every_condition_has_a_colour():
    from geocont.plotting import condition_colours

    assert set(condition_colours()) == set(CONDITIONS)

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


@pytest.mark.parametrize("condition, norm_type", [("res-ln", torch.nn.LayerNorm), ("res-ln-relu", torch.nn.LayerNorm),
                                                  ("res-rms", torch.nn.RMSNorm), ("res-rms-relu", torch.nn.RMSNorm)])
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

"""Configurations and scales reject bad input before any work, naming the valid choices."""

import pytest

from geocont.config import MLPRunConfig, OptimizerConfig
from geocont.scales import SCALES, mlp_chapter_settings


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(condition="res-swish"), "valid choices: res-relu, res-gelu"),
        (dict(dataset="cifar"), "valid choices: mnist, mnist-subset, fashion-mnist"),
        (dict(depth=1), "depth"),
        (dict(width=0), "width"),
        (dict(epochs=2.5), "epochs"),
        (dict(n_directions=300), "n_directions"),
        (dict(device="tpu"), "valid choices: cpu, cuda, auto"),
        (dict(seed=-1), "seed"),
        (dict(init_scale=-1.0), "init_scale"),
    ],
)
def test_run_config_validation(changes, message):
    with pytest.raises(ValueError, match=message):
        MLPRunConfig(**changes)


def test_optimizer_validation_and_labels():
    with pytest.raises(ValueError, match="valid choices: adam, sgd"):
        OptimizerConfig("rmsprop")
    with pytest.raises(ValueError, match="beta2"):
        OptimizerConfig(beta2=1.0)
    assert OptimizerConfig(beta2=0.0).label == "adam(beta2=0)"
    assert OptimizerConfig("sgd", lr=0.1, momentum=0.9).label == "sgd(momentum=0.9)"
    assert OptimizerConfig().label == "adam"


def test_scales_and_overrides():
    assert SCALES == ("smoke", "cpu", "paper")
    with pytest.raises(ValueError, match="valid choices: smoke, cpu, paper"):
        mlp_chapter_settings("huge")
    with pytest.raises(ValueError, match="unknown parameter"):
        mlp_chapter_settings("smoke", epoch=3)
    with pytest.raises(ValueError, match="valid choices"):
        mlp_chapter_settings("smoke", conditions=["res-relu", "nope"])
    cpu = mlp_chapter_settings("cpu", epochs=None, seeds=None)  # None = keep the preset
    assert cpu.base.width == 256 and cpu.base.depth == 16 and len(cpu.seeds) >= 3
    custom = mlp_chapter_settings("smoke", epochs=2, seeds=5, beta2=0.0, conditions=["res-relu"])
    assert custom.base.epochs == 2 and custom.seeds == (0, 1, 2, 3, 4)
    assert custom.base.optimizer.beta2 == 0.0
    assert [c.condition for c in custom.condition_configs()] == ["res-relu"] * 5
    paper = mlp_chapter_settings("paper")
    assert paper.base.dataset == "mnist" and (paper.base.width, paper.base.depth) == (256, 16)


def test_configs_are_hashable_identities():
    a, b = MLPRunConfig(), MLPRunConfig()
    assert a == b and a.to_dict() == b.to_dict()
    assert a.replace(seed=1) != a

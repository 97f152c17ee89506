"""Configurations and scales reject bad input before any work, naming the valid choices."""

import pytest

from geocont.config import MLPRunConfig, OptimizerConfig


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


def test_configs_are_hashable_identities():
    a, b = MLPRunConfig(), MLPRunConfig()
    assert a == b and a.to_dict() == b.to_dict()
    assert a.replace(seed=1) != a

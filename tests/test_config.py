"""Configurations and scales reject bad input before any work, naming the valid choices."""

import pytest

from geocont.config import MLPRunConfig, OptimizerConfig
from geocont.chapters.mlp_runs import mlp_chapter_settings


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


def test_timeline_chapter_has_a_finer_schedule_and_an_init_sweep():
    timeline = mlp_chapter_settings("cpu", chapter="timeline")
    plain = mlp_chapter_settings("cpu")
    assert timeline.base.n_snapshots > 2 * plain.base.n_snapshots and timeline.base.n_directions == 1
    scales = sorted({c.init_scale for c in timeline.init_configs()})
    assert len(scales) >= 4 and max(scales) / min(scales) >= 100  # two orders of magnitude
    assert {c.optimizer.label for c in timeline.robustness_configs()} == {"adam", "adam(beta2=0)", "sgd(momentum=0.9)"}
    assert mlp_chapter_settings("smoke", chapter="timeline", extra_init_scales=[0.5]).extra_init_scales == (0.5,)
    with pytest.raises(ValueError, match="extra_init_scales"):
        mlp_chapter_settings("smoke", chapter="timeline", extra_init_scales=[-1.0])
    with pytest.raises(ValueError, match="valid choices"):
        mlp_chapter_settings("smoke", chapter="timeline", robustness_conditions=["res-tanh"])
    with pytest.raises(ValueError, match="valid choices: mlp_conditions, activation_vs_norm, timeline"):
        mlp_chapter_settings("smoke", chapter="timelines")


def test_configs_are_hashable_identities():
    a, b = MLPRunConfig(), MLPRunConfig()
    assert a == b and a.to_dict() == b.to_dict()
    assert a.replace(seed=1) != a

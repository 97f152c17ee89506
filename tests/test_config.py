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


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: OptimizerConfig(lr=float("inf")), r"lr must be a finite number in \(0, inf\), got inf"),
        (lambda: OptimizerConfig(lr=float("nan")), "lr must be a finite number"),
        (lambda: MLPRunConfig(init_scale=float("nan")), "init_scale must be a finite number"),
        (lambda: OptimizerConfig(eps=0.0), r"eps must be a finite number in \(0, inf\)"),
        (lambda: OptimizerConfig(eps=-1e-8), "eps must be a finite number"),
        (lambda: MLPRunConfig(seed=True), "seed must be an integer >= 0, got True"),
        (lambda: MLPRunConfig(depth=True), "depth must be an integer"),
        (lambda: MLPRunConfig(n_snapshots=2.5), "n_snapshots must be an integer >= 2, got 2.5"),
        (lambda: MLPRunConfig(epochs=3.0), "epochs must be an integer"),
        (lambda: MLPRunConfig(max_train=100.5), "max_train must be an integer"),
        (lambda: OptimizerConfig("adam", momentum=0.9), "momentum=0.9 is an SGD option that Adam ignores"),
        (lambda: OptimizerConfig("sgd", lr=0.1, beta2=0.0), "beta2=0: Adam option"),
        (lambda: OptimizerConfig("sgd", lr=0.1, eps=1e-4), "eps=0.0001: Adam option"),
        (lambda: OptimizerConfig(beta1="0.5"), "beta1 must be a number, got '0.5'"),
        (lambda: MLPRunConfig(width="256"), "width must be an integer"),
        (lambda: OptimizerConfig(weight_decay=float("inf")), "weight_decay must be a finite number"),
    ],
)
def test_configs_reject_what_would_fail_later(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_lm_config_rejects_booleans_fractions_and_non_integers():
    from geocont.lm import LMRunConfig

    for changes, message in [
        (dict(seed=True), "seed"),
        (dict(n_snapshots=2.5), "n_snapshots"),
        (dict(steps=10.0), "steps"),
        (dict(batch_size=False), "batch_size"),
    ]:
        with pytest.raises(ValueError, match=message):
            LMRunConfig(**changes)
    assert LMRunConfig(optimizer=OptimizerConfig("adam", lr=1)).optimizer.lr == 1.0


def test_equal_runs_get_equal_cache_keys_and_existing_keys_are_unchanged():
    import numpy as np

    from geocont.cache import cache_key

    def key(config):
        return cache_key("mlp", config.to_dict())

    assert key(MLPRunConfig(init_scale=1)) == key(MLPRunConfig(init_scale=1.0))
    assert key(MLPRunConfig(optimizer=OptimizerConfig(lr=1))) == key(MLPRunConfig(optimizer=OptimizerConfig(lr=1.0)))
    assert key(MLPRunConfig(seed=np.int64(3), epochs=np.int32(5))) == key(MLPRunConfig(seed=3, epochs=5))
    assert type(MLPRunConfig(init_scale=1).init_scale) is float and type(MLPRunConfig(seed=np.int64(3)).seed) is int
    # the identity of the default run, unfused, is the plain dict it had before normalisation existed
    # (its key changes only with the cache's SCHEMA_VERSION); fused runs add fused_optimizer=True
    assert MLPRunConfig(fused_optimizer=False).to_dict() == {
        "condition": "res-relu",
        "seed": 0,
        "dataset": "mnist-subset",
        "max_train": None,
        "depth": 16,
        "width": 256,
        "init_scale": 1.0,
        "optimizer": {
            "name": "adam",
            "lr": 0.001,
            "beta1": 0.9,
            "beta2": 0.999,
            "eps": 1e-08,
            "momentum": 0.0,
            "weight_decay": 0.0,
        },
        "batch_size": 128,
        "epochs": 30,
        "n_snapshots": 12,
        "n_directions": 8,
        "device": "cpu",
    }
    # fields added later join the identity only away from the default that reproduces the earlier runs
    long = MLPRunConfig(steps=9360, n_late_snapshots=4, snapshot_steps=[930]).to_dict()
    assert (long["steps"], long["n_late_snapshots"], long["snapshot_steps"]) == (9360, 4, (930,))
    assert key(MLPRunConfig(snapshot_steps=[])) == key(MLPRunConfig())


def test_lm_schedule_fields_keep_old_cache_keys_and_add_snapshots():
    from geocont.config import LMRunConfig

    plain = LMRunConfig(steps=100, n_snapshots=4)
    assert (
        "n_late_snapshots" not in plain.to_dict() and "snapshot_steps" not in plain.to_dict()
    )  # keys of older runs unchanged
    assert plain.schedule() == [0, 1, 10, 100]
    scheduled = LMRunConfig(steps=100, n_snapshots=4, n_late_snapshots=4, snapshot_steps=(40, 40))
    assert scheduled.snapshot_steps == (40,) and scheduled.to_dict()["snapshot_steps"] == (40,)
    assert scheduled.schedule() == [0, 1, 10, 25, 40, 50, 75, 100]
    with pytest.raises(ValueError, match="snapshot_steps"):
        LMRunConfig(steps=100, snapshot_steps=(200,))


def test_the_step_schedule_needs_its_factor_and_the_factor_needs_the_schedule():
    from geocont.cache import cache_key

    step = MLPRunConfig(lr_schedule="step", lr_step_factor=1)
    assert step.lr_step_factor == 1.0 and type(step.lr_step_factor) is float
    assert step.to_dict()["lr_step_factor"] == 1.0 and step.to_dict()["lr_schedule"] == "step"
    assert "lr_step_factor" not in MLPRunConfig().to_dict()  # at its default: the keys of earlier runs unchanged
    assert cache_key("mlp", MLPRunConfig(lr_step_factor=None).to_dict()) == cache_key("mlp", MLPRunConfig().to_dict())
    with pytest.raises(ValueError, match=r"^lr_schedule='step' needs lr_step_factor \(the learning rate's multiplier"):
        MLPRunConfig(lr_schedule="step")
    with pytest.raises(
        ValueError,
        match=r"^lr_step_factor and lr_switch_step apply only to lr_schedule='step' "
        r"\(got lr_schedule='constant'\)$",
    ):
        MLPRunConfig(lr_step_factor=0.1)
    with pytest.raises(ValueError, match="apply only to lr_schedule='step' \\(got lr_schedule='cosine'\\)"):
        MLPRunConfig(lr_schedule="cosine", lr_step_factor=0.1)
    with pytest.raises(ValueError, match="apply only to lr_schedule='step'"):
        MLPRunConfig(lr_switch_step=100)
    assert {"lr_switch_step", "record_balance"}.isdisjoint(MLPRunConfig().to_dict())  # defaults: earlier keys kept
    switched = MLPRunConfig(lr_schedule="step", lr_step_factor=0.1, lr_switch_step=147)
    assert switched.to_dict()["lr_switch_step"] == 147
    for bad in (0.0, -0.1, float("inf"), "0.1", True):
        with pytest.raises(ValueError, match="lr_step_factor must be"):
            MLPRunConfig(lr_schedule="step", lr_step_factor=bad)
    with pytest.raises(ValueError, match="valid choices: constant, cosine, step"):
        MLPRunConfig(lr_schedule="linear")


def test_a_step_count_past_what_any_run_can_finish_is_refused():
    from geocont.config import MAX_STEPS, LMRunConfig, MLPRunConfig

    for config in (LMRunConfig, MLPRunConfig):
        assert config(steps=MAX_STEPS).steps == MAX_STEPS
        with pytest.raises(ValueError, match=r"^steps must be at most 10,000,000 .* got 1,000,000,000,000"):
            config(steps=10**12)

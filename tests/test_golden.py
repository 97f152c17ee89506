"""The golden runs (geocont.golden): the training code still gives the numbers the results store was trained with.

On the fixtures' platform (torch, CPU model, kernels, threads) a golden run must repeat bit for bit; elsewhere
within GOLDEN_TOLERANCE. A change that fails here must bump NUMERICS_REVISION and rewrite the fixtures
(`python -m geocont.golden write`): see golden.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from geocont import golden, training
from geocont.keys import NUMERICS_REVISION

FIXTURE_PLATFORM = golden.manifest().get("platform", {})
SAME_PLATFORM = golden.same_platform(FIXTURE_PLATFORM, golden.platform_record())


def test_the_fixtures_are_of_this_numerics_revision_and_list_every_golden_run():
    recorded = golden.manifest()
    assert recorded["numerics_revision"] == NUMERICS_REVISION
    assert set(recorded["runs"]) == set(golden.GOLDEN_RUNS)
    for name, config in golden.GOLDEN_RUNS.items():
        assert recorded["runs"][name] == config.to_dict(), f"{name}: its configuration changed; rewrite the fixtures"
        assert golden.fixture_path(name).exists()


@pytest.mark.parametrize("name", list(golden.GOLDEN_RUNS))
def test_a_golden_run_retrained_gives_its_fixture(name):
    result = golden.compare(golden.read_fixture(name), golden.train(name))
    if SAME_PLATFORM:
        assert result.identical, f"{name} is not bit-identical on its fixtures' platform: {result.text()}"
    else:
        assert result.within(), f"{name} differs beyond {golden.GOLDEN_TOLERANCE:g} on other kernels: {result.text()}"


def _with_learning_rate_scaled(monkeypatch, factor: float) -> None:
    """A deliberate change of the numerics: every optimizer built with its learning rate times ``factor``."""
    original = training.make_optimizer

    def changed(params, config, *args, **kwargs):
        return original(params, dataclasses.replace(config, lr=config.lr * factor), *args, **kwargs)

    monkeypatch.setattr(training, "make_optimizer", changed)


def test_a_deliberate_change_of_the_numerics_fails_the_golden_comparison(monkeypatch):
    fixture = golden.read_fixture("mlp-res-relu")
    _with_learning_rate_scaled(monkeypatch, 1.01)
    result = golden.compare(fixture, golden.train("mlp-res-relu"))
    assert not result.identical and not result.within()
    assert result.largest > golden.GOLDEN_TOLERANCE


def test_a_change_below_float_rounding_is_not_bit_identical(monkeypatch):
    fixture = golden.read_fixture("mlp-res-none")
    _with_learning_rate_scaled(monkeypatch, 1 + 1e-6)
    assert not golden.compare(fixture, golden.train("mlp-res-none")).identical


def test_an_unknown_golden_run_lists_the_valid_names():
    with pytest.raises(ValueError, match="valid choices: mlp-res-relu, "):
        golden.train("mlp-res-tanh")

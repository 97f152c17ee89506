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

RECORDED = golden.manifest()
HERE = golden.platform_record()


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
    if golden.same_platform(golden.fixture_platform(RECORDED, name), HERE):
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


def test_the_golden_tools_inputs_are_checked_in_one_line_before_any_training(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(golden, "train", lambda *a, **k: pytest.fail("trained before its inputs were checked"))
    (tmp_path / golden.MANIFEST).write_text("[1, 2]")
    with pytest.raises(golden.GoldenInputError, match="is not a golden manifest"):
        golden.compare_all(["mlp-res-relu"], root=tmp_path)
    (tmp_path / golden.MANIFEST).write_text('{"numerics_revision": 1, "platforms": {}}')
    (tmp_path / "mlp-res-relu.parquet").write_bytes(b"PAR1 truncated")
    with pytest.raises(
        golden.GoldenInputError, match=r"fixture .*mlp-res-relu.parquet is unreadable .* write mlp-res-relu"
    ):
        golden.compare_all(["mlp-res-relu", "lm-silu"], root=tmp_path)
    golden.read_fixture("mlp-res-none").to_parquet(tmp_path / "mlp-res-none.parquet")
    with pytest.raises(golden.GoldenInputError, match="golden run lm-silu has no fixture"):
        golden.compare_all(["mlp-res-none", "lm-silu"], root=tmp_path)  # the late one is missing: no run trained
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    read_only.chmod(0o500)
    try:
        if not __import__("os").access(read_only, __import__("os").W_OK):  # root writes anywhere
            with pytest.raises(golden.GoldenInputError, match="cannot write golden fixtures into"):
                golden.write(["mlp-res-relu"], root=read_only)
    finally:
        read_only.chmod(0o700)
    for bad in ("0", "-2", "x"):
        with pytest.raises(SystemExit):
            golden.main(["compare", "--threads", bad])
        assert "must be a whole number from 1 to" in capsys.readouterr().err


def test_writing_one_fixture_keeps_every_other_fixtures_platform(tmp_path, monkeypatch):
    import pandas as pd

    table = pd.DataFrame({c: [0] for c in golden.VALUE_INDEX} | {"value": [1.0]})
    monkeypatch.setattr(golden, "train", lambda name, threads=1: table)
    other = {"torch": "0", "cpu_model": "elsewhere"}
    (tmp_path / golden.MANIFEST).write_text(__import__("json").dumps({"numerics_revision": 1, "platform": other}))
    golden.write(["mlp-res-relu"], root=tmp_path)
    written = golden.manifest(tmp_path)
    assert golden.fixture_platform(written, "mlp-res-none") == other  # untouched: still the other platform's
    assert golden.fixture_platform(written, "mlp-res-relu") == golden.platform_record()

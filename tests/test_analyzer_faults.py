"""The analyzer's faults: output format checked before work, no empty file left, a flag on every NaN,
one checkpoint format chosen by a stated rule."""

import math
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import save_file
from test_analyzer import LLAMA_NAMES, planted_model, state_from_names, write_gguf

from geocont import analyzer, checkpoints
from geocont.cli import main as cli_main


@pytest.fixture
def checkpoint(tmp_path):
    path = tmp_path / "tiny.safetensors"
    save_file(state_from_names(planted_model(["q_proj"]), LLAMA_NAMES), str(path))
    return path


def test_an_unknown_figure_format_is_refused_before_any_work(checkpoint, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(analyzer, "_stream", lambda *a, **k: pytest.fail("analysed before checking the figure format"))
    table = tmp_path / "t.csv"
    assert cli_main(["analyze", str(checkpoint), "-o", str(table), "--figure", str(tmp_path / "fig.xyz"), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {tmp_path / 'fig.xyz'}: unknown figure format '.xyz'; valid choices: ")
    assert ".png" in err and ".svg" in err and "\n" not in err
    assert not table.exists()  # nothing written either


def test_a_write_that_fails_half_way_leaves_no_file_and_names_the_path(checkpoint, tmp_path, monkeypatch, capsys):
    original = pd.DataFrame.to_csv

    def half_then_full(self, target, **kwargs):
        Path(target).write_text("projection,la")  # part of the table, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", half_then_full)
    target = tmp_path / "out" / "t.csv"
    assert cli_main(["analyze", str(checkpoint), "-o", str(target), "-q"]) == 2
    assert capsys.readouterr().err.strip() == f"error: No space left on device: {target}"
    assert list((tmp_path / "out").iterdir()) == []  # neither the table nor a partial or empty file
    monkeypatch.setattr(pd.DataFrame, "to_csv", original)
    assert cli_main(["analyze", str(checkpoint), "-o", str(target), "-q"]) == 0 and target.stat().st_size > 0


def test_a_full_disk_leaves_no_empty_output(checkpoint, full_tmpfs, capsys):
    mount, _ = full_tmpfs
    try:
        (mount / "rest").write_bytes(b"\0" * 8192)  # the last pages
    except OSError:
        pass
    target = mount / "t.json"
    assert cli_main(["analyze", str(checkpoint), "-o", str(target), "-q", "--no-cache"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: No space left on device: {target}"
    assert sorted(p.name for p in mount.iterdir()) == ["filler", "rest"]  # no 0-byte t.json, no temporary file


def flipped_exponent_table(tmp_path, factor):
    model = planted_model(["q_proj"])
    model["q_proj"][0][2] = model["q_proj"][0][2] * factor
    path = tmp_path / "flipped.safetensors"
    save_file(state_from_names(model, LLAMA_NAMES), str(path))
    table = analyzer.analyze(str(path), progress=False, use_cache=False)
    return table[table["layer"] < table["layer"].max()]


def test_every_nan_pair_value_is_flagged(tmp_path):
    pairs = flipped_exponent_table(tmp_path, 1e38)  # entries near float32's largest: sigma1 overflows
    nan = pairs[pairs[["v1_cos", "u1_cos", "align_input", "align_output"]].isna().any(axis=1)]
    assert len(nan) == 2 and (nan["flag"] != "").all()
    assert all("overflow (sigma1 = inf)" in flag for flag in nan["flag"])
    clean = pairs.drop(nan.index)
    assert (clean["flag"] == "").all() and clean[["v1_cos", "align_input"]].notna().all().all()


def test_a_huge_but_finite_matrix_is_measured_like_any_other(tmp_path):
    pairs = flipped_exponent_table(tmp_path, 1.95e35)  # a flipped exponent bit: sigma1 ~ 1.95e36
    assert float(pairs["sigma1"].max()) == pytest.approx(1.95e36, rel=0.01)
    assert pairs[["v1_cos", "u1_cos", "align_input", "align_output"]].notna().all().all()
    assert (pairs["flag"] == "").all()


def test_adjacent_layers_of_different_shapes_say_which_space_they_do_not_share(tmp_path):
    generator = torch.Generator().manual_seed(0)
    shapes = [(64, 64), (48, 64), (48, 32)]  # layers 0/1 share the input space, 1/2 the output space
    state = {
        f"model.layers.{l}.self_attn.q_proj.weight": torch.randn(*shape, generator=generator)
        for l, shape in enumerate(shapes)
    }
    save_file(state, str(tmp_path / "odd.safetensors"))
    table = analyzer.analyze(str(tmp_path / "odd.safetensors"), progress=False, use_cache=False).set_index("layer")
    assert not math.isnan(table.loc[0, "v1_cos"]) and math.isnan(table.loc[0, "u1_cos"])
    assert table.loc[0, "flag"] == (
        "different output-space dimensions (64 vs 48); align_input, align_output not "
        "computed: different shapes (64x64 vs 48x64)"
    )
    assert math.isnan(table.loc[1, "v1_cos"]) and not math.isnan(table.loc[1, "u1_cos"])
    assert table.loc[1, "flag"].startswith("different input-space dimensions (64 vs 32); ")
    assert table[["align_input", "align_output"]].iloc[:2].isna().all().all()


def test_a_layer_whose_sigma1_overflows_is_flagged_as_an_overflow(tmp_path):
    generator = torch.Generator().manual_seed(0)
    state = {f"model.layers.{l}.self_attn.q_proj.weight": torch.randn(16, 32, generator=generator) for l in range(3)}
    state["model.layers.1.self_attn.q_proj.weight"] = torch.full((16, 32), 1e38)  # finite, but sigma1 = 2.3e39
    save_file(state, str(tmp_path / "huge.safetensors"))
    table = analyzer.analyze(str(tmp_path / "huge.safetensors"), progress=False, use_cache=False).set_index("layer")
    assert table.loc[1, "sigma1"] == math.inf and math.isnan(table.loc[1, "gap"])
    for layer in (0, 1):
        assert math.isnan(table.loc[layer, "v1_cos"]) and math.isnan(table.loc[layer, "u1_cos"])
        assert table.loc[layer, "flag"].startswith("layer 1: overflow (sigma1 = inf)")
        assert "zero matrix" not in table.loc[layer, "flag"]


def test_a_folder_with_both_formats_uses_the_safetensors_and_says_so(tmp_path, capsys):
    model = planted_model(["q_proj"])
    save_file(state_from_names(model, LLAMA_NAMES), str(tmp_path / "model.safetensors"))
    write_gguf(tmp_path / "model-q8.gguf", model, __import__("gguf").GGMLQuantizationType.Q8_0)
    with pytest.warns(
        UserWarning,
        match=r"holds both safetensors and GGUF files \(model-q8.gguf\); analysing the "
        r"safetensors",
    ):
        source = checkpoints.open_source(tmp_path)
    assert source.metadata["format"] == "safetensors"
    with pytest.warns(UserWarning, match="holds both"):
        assert cli_main(["analyze", str(tmp_path), "-q", "--no-cache"]) == 0

"""The streaming analyzer on small synthetic checkpoints with planted singular vectors.

Each layer's matrix is ``W_l = 10 u v_l^T + small noise``: the output-space direction u is
shared by every layer (u1 |cos| = 1) and the input-space directions v_l are random, so
the expected v1 |cos| between layers l and l + 1 is |<v_l, v_l+1>|, known exactly.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import gguf
import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import save_file

from geocont import analyzer, checkpoints, layouts
from geocont.cli import main as cli_main
from geocont.metrics import random_abs_cos

N_LAYERS = 4
D_MODEL, D_KV, D_FFN = 64, 32, 96


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path / "cache"))


def _unit(generator, d):
    x = torch.randn(d, generator=generator, dtype=torch.float64)
    return x / x.norm()


def planted(out_dim, in_dim, seed):
    """(matrices per layer [out, in], expected v1 |cos| per pair)."""
    generator = torch.Generator().manual_seed(seed)
    u = _unit(generator, out_dim)
    vs = [_unit(generator, in_dim) for _ in range(N_LAYERS)]
    mats = [
        (
            10 * torch.outer(u, v) + 0.001 * torch.randn(out_dim, in_dim, generator=generator, dtype=torch.float64)
        ).float()
        for v in vs
    ]
    expected = [float(abs(vs[i] @ vs[i + 1])) for i in range(N_LAYERS - 1)]
    return mats, expected


SHAPES = {
    "q_proj": (D_MODEL, D_MODEL),
    "k_proj": (D_KV, D_MODEL),
    "v_proj": (D_KV, D_MODEL),
    "o_proj": (D_MODEL, D_MODEL),
    "gate_proj": (D_FFN, D_MODEL),
    "up_proj": (D_FFN, D_MODEL),
    "down_proj": (D_MODEL, D_FFN),
}


def planted_model(projections):
    """{projection: (matrices, expected v1 cos)}; a different seed per projection."""
    return {p: planted(*SHAPES[p], seed=i) for i, p in enumerate(projections)}


def check_table(table, model, tolerance):
    assert list(table.columns) == analyzer.COLUMNS
    assert set(table["projection"]) == set(model)
    for projection, (_mats, expected) in model.items():
        rows = table[table["projection"] == projection].sort_values("layer")
        assert list(rows["layer"]) == list(range(N_LAYERS))
        assert tuple(rows[["out_dim", "in_dim"]].iloc[0]) == SHAPES[projection]
        np.testing.assert_allclose(rows["v1_cos"].iloc[:-1], expected, atol=tolerance)
        np.testing.assert_allclose(rows["u1_cos"].iloc[:-1], 1.0, atol=tolerance)
        np.testing.assert_allclose(rows["sigma1"], 10.0, rtol=10 * tolerance)
        assert math.isnan(rows["v1_cos"].iloc[-1])  # the last layer has no next layer
        assert rows["v1_baseline"].iloc[0] == pytest.approx(random_abs_cos(SHAPES[projection][1]))
        assert rows["u1_baseline"].iloc[0] == pytest.approx(random_abs_cos(SHAPES[projection][0]))
        # rank-one matrices: the centred Gram cosine of v v^T and w w^T is (cos^2 - 1/d) / (1 - 1/d)
        d = SHAPES[projection][1]
        expected_align = [(c**2 - 1 / d) / (1 - 1 / d) for c in expected]
        np.testing.assert_allclose(rows["align_input"].iloc[:-1], expected_align, atol=2 * tolerance)
        np.testing.assert_allclose(rows["align_output"].iloc[:-1], 1.0, atol=2 * tolerance)


LLAMA_NAMES = {p: f"model.layers.{{i}}.{'self_attn' if p[0] in 'qkvo' else 'mlp'}.{p}.weight" for p in SHAPES}
BERT_NAMES = {
    "q_proj": "encoder.layer.{i}.attention.self.query.weight",
    "k_proj": "encoder.layer.{i}.attention.self.key.weight",
    "v_proj": "encoder.layer.{i}.attention.self.value.weight",
    "o_proj": "encoder.layer.{i}.attention.output.dense.weight",
    "up_proj": "encoder.layer.{i}.intermediate.dense.weight",
    "down_proj": "encoder.layer.{i}.output.dense.weight",
}


def write_shards(directory, state, n_shards=2):
    """Sharded safetensors with a Hugging Face index, tensors spread over the shards."""
    directory.mkdir(parents=True, exist_ok=True)
    names = sorted(state)
    weight_map = {}
    for shard in range(n_shards):
        file = f"model-{shard + 1:05d}-of-{n_shards:05d}.safetensors"
        part = {n: state[n].contiguous() for n in names[shard::n_shards]}
        save_file(part, str(directory / file))
        weight_map.update({n: file for n in part})
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return directory


def state_from_names(model, names):
    state = {}
    for projection, (mats, _) in model.items():
        for i, W in enumerate(mats):
            state[names[projection].format(i=i)] = W
    return state


@pytest.mark.parametrize(
    "layout, names, extra",
    [
        ("llama", LLAMA_NAMES, {}),
        ("gemma3", LLAMA_NAMES, {"model.layers.{i}.post_feedforward_layernorm.weight": torch.ones(D_MODEL)}),
        ("bert", BERT_NAMES, {"encoder.layer.{i}.output.LayerNorm.weight": torch.ones(D_MODEL)}),
    ],
)
def test_sharded_safetensors_per_layout(tmp_path, layout, names, extra):
    model = planted_model([p for p in SHAPES if p in names])
    state = state_from_names(model, names)
    for name, tensor in extra.items():
        state.update({name.format(i=i): tensor.clone() for i in range(N_LAYERS)})
    state["model.embed_tokens.weight"] = torch.randn(10, D_MODEL)  # ignored by every layout
    directory = write_shards(tmp_path / layout, state)
    table = analyzer.analyze(directory, progress=False)
    assert table.attrs["layout"] == layout
    check_table(table, model, tolerance=1e-3)


def test_gpt2_fused_qkv_and_conv1d_orientation(tmp_path):
    model = planted_model(["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj"])
    # GPT-2 has equal Q/K/V widths: use D_MODEL x D_MODEL for K and V here
    model["k_proj"] = planted(D_MODEL, D_MODEL, seed=11)
    model["v_proj"] = planted(D_MODEL, D_MODEL, seed=12)
    state = {}
    for i in range(N_LAYERS):
        fused = torch.cat([model[p][0][i] for p in ("q_proj", "k_proj", "v_proj")])  # [3d, in]
        state[f"transformer.h.{i}.attn.c_attn.weight"] = fused.T.contiguous()  # Conv1D stores [in, out]
        state[f"transformer.h.{i}.attn.c_proj.weight"] = model["o_proj"][0][i].T.contiguous()
        state[f"transformer.h.{i}.mlp.c_fc.weight"] = model["up_proj"][0][i].T.contiguous()
        state[f"transformer.h.{i}.mlp.c_proj.weight"] = model["down_proj"][0][i].T.contiguous()
    save_file(state, str(tmp_path / "model.safetensors"))
    table = analyzer.analyze(tmp_path / "model.safetensors", progress=False)
    assert table.attrs["layout"] == "gpt2"
    shapes = dict(SHAPES, k_proj=(D_MODEL, D_MODEL), v_proj=(D_MODEL, D_MODEL))
    for projection, (_mats, expected) in model.items():
        rows = table[table["projection"] == projection]
        assert tuple(rows[["out_dim", "in_dim"]].iloc[0]) == shapes[projection]
        np.testing.assert_allclose(rows["v1_cos"].iloc[:-1], expected, atol=1e-3)
        np.testing.assert_allclose(rows["u1_cos"].iloc[:-1], 1.0, atol=1e-3)


def write_gguf(path, model, qtype, architecture="llama", extra=()):
    names = {
        "q_proj": "attn_q",
        "k_proj": "attn_k",
        "v_proj": "attn_v",
        "o_proj": "attn_output",
        "gate_proj": "ffn_gate",
        "up_proj": "ffn_up",
        "down_proj": "ffn_down",
    }
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_block_count(N_LAYERS)
    for projection, (mats, _) in model.items():
        for i, W in enumerate(mats):
            array = W.numpy().astype(np.float32)  # [out, in]
            name = f"blk.{i}.{names[projection]}.weight"
            if qtype == gguf.GGMLQuantizationType.F32:
                writer.add_tensor(name, array)
            else:
                writer.add_tensor(name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
    for name in extra:
        for i in range(N_LAYERS):
            writer.add_tensor(f"blk.{i}.{name}.weight", np.ones(D_MODEL, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize(
    "qtype, tolerance",
    [
        (gguf.GGMLQuantizationType.F32, 1e-3),
        (gguf.GGMLQuantizationType.Q8_0, 0.01),
        (gguf.GGMLQuantizationType.Q4_1, 0.05),
    ],
)
def test_gguf_quantized_orientation_and_values(tmp_path, qtype, tolerance):
    model = planted_model(list(SHAPES))
    path = write_gguf(tmp_path / "model.gguf", model, qtype)
    source = checkpoints.GGUFSource(path)
    assert source.shape("blk.0.ffn_down.weight") == (D_MODEL, D_FFN)  # [out, in], not GGUF's [in, out]
    W = source.read("blk.0.ffn_gate.weight")
    assert W.shape == (D_FFN, D_MODEL) and W.dtype == torch.float32
    assert torch.allclose(W, model["gate_proj"][0][0], atol=tolerance * 3)
    table = analyzer.analyze(path, progress=False)
    assert table.attrs["layout"] == "gguf" and table.attrs["architecture"] == "llama"
    assert set(table["dtype"]) == {qtype.name}
    check_table(table, model, tolerance)


def test_gemma3_gguf_is_told_apart_by_its_post_norms(tmp_path):
    model = planted_model(["q_proj", "down_proj"])
    path = write_gguf(
        tmp_path / "gemma.gguf",
        model,
        gguf.GGMLQuantizationType.F32,
        "gemma3",
        extra=("post_attention_norm", "post_ffw_norm"),
    )
    table = analyzer.analyze(path, progress=False)
    assert table.attrs["layout"] == "gemma3-gguf" and "post" in table.attrs["layout_notes"]


def test_in_memory_llama_matches_the_metric_on_its_weights():
    from geocont.metrics import abs_cos, top_singular_triplets
    from geocont.transformer import TransformerShape, build_llama, projection_groups

    model = build_llama(TransformerShape(n_layers=3, d_model=32, n_heads=2, n_kv_heads=1, ffn_dim=48, vocab_size=64))
    table = analyzer.analyze(model, progress=False)
    assert table.attrs["layout"] == "llama" and len(table) == 7 * 3
    weights = projection_groups(model)["up_proj"]
    a, b = (top_singular_triplets(w) for w in weights[:2])
    row = table[(table["projection"] == "up_proj") & (table["layer"] == 0)].iloc[0]
    assert row["v1_cos"] == pytest.approx(float(abs_cos(a.v[:, 0], b.v[:, 0])), abs=1e-5)
    assert row["out_dim"] == 48 and row["in_dim"] == 32


def test_truncated_or_corrupt_files_are_named_and_never_half_read(tmp_path):
    model = planted_model(["q_proj", "k_proj"])
    gguf_path = write_gguf(tmp_path / "model.gguf", model, gguf.GGMLQuantizationType.Q8_0)
    data = gguf_path.read_bytes()
    gguf_path.write_bytes(data[: len(data) - 500])
    with pytest.raises(checkpoints.CorruptCheckpoint, match="model.gguf"):
        analyzer.analyze(gguf_path, progress=False)
    st_path = tmp_path / "model.safetensors"
    save_file(state_from_names(model, LLAMA_NAMES), str(st_path))
    data = st_path.read_bytes()
    st_path.write_bytes(data[: len(data) - 100])
    with pytest.raises(checkpoints.CorruptCheckpoint, match="model.safetensors"):
        analyzer.analyze(st_path, progress=False)
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"not a gguf file at all" * 10)
    with pytest.raises(checkpoints.CorruptCheckpoint, match="garbage.gguf"):
        analyzer.analyze(garbage, progress=False)


def test_missing_shard_and_missing_layer_are_errors(tmp_path):
    model = planted_model(["q_proj"])
    directory = write_shards(tmp_path / "ckpt", state_from_names(model, LLAMA_NAMES))
    (directory / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(checkpoints.CorruptCheckpoint, match="missing"):
        analyzer.analyze(directory, progress=False)
    state = state_from_names(model, LLAMA_NAMES)
    del state["model.layers.2.self_attn.q_proj.weight"]
    save_file(state, str(tmp_path / "gap.safetensors"))
    with pytest.raises(ValueError, match=r"missing layer\(s\) \[2\]"):
        analyzer.analyze(tmp_path / "gap.safetensors", progress=False)


def test_unknown_layout_lists_the_known_ones_and_how_to_add_one(tmp_path):
    save_file({f"blocks.{i}.attn.wq.weight": torch.randn(8, 8) for i in range(3)}, str(tmp_path / "odd.safetensors"))
    with pytest.raises(layouts.UnknownLayout) as info:
        analyzer.analyze(tmp_path / "odd.safetensors", progress=False)
    message = str(info.value)
    for name in ("llama", "gguf", "gemma3", "bert", "gpt2"):
        assert name in message
    assert "register_layout" in message and "blocks.0.attn.wq.weight" in message
    custom = layouts.Layout("test-odd", (layouts.Rule(r"^blocks\.(?P<layer>\d+)\.attn\.wq\.weight$", "q_proj"),))
    layouts.register_layout(custom, replace=True)
    try:
        table = analyzer.analyze(tmp_path / "odd.safetensors", layout="test-odd", progress=False)
        assert list(table["layer"]) == [0, 1, 2]
    finally:
        del layouts.LAYOUTS["test-odd"]
    with pytest.raises(layouts.UnknownLayout, match="valid choices"):
        analyzer.analyze(tmp_path / "odd.safetensors", layout="nope", progress=False)


def test_results_are_cached_by_file_identity(tmp_path, monkeypatch):
    model = planted_model(["q_proj"])
    path = tmp_path / "model.safetensors"
    save_file(state_from_names(model, LLAMA_NAMES), str(path))
    first = analyzer.analyze(path, progress=False)
    calls = []
    monkeypatch.setattr(analyzer, "_stream", lambda *a, **k: calls.append(1))
    again = analyzer.analyze(path, progress=False)
    assert not calls and again.equals(first) and again.attrs["layout"] == "llama"
    assert again.attrs["parameters"] == N_LAYERS * D_MODEL * D_MODEL


def test_cli_writes_csv_and_json_and_reports_errors(tmp_path, capsys):
    model = planted_model(["q_proj", "down_proj"])
    path = tmp_path / "model.safetensors"
    save_file(state_from_names(model, LLAMA_NAMES), str(path))
    csv, js, fig = tmp_path / "out" / "t.csv", tmp_path / "out" / "t.json", tmp_path / "out" / "depth.png"
    assert cli_main(["analyze", str(path), "-o", str(csv), "-o", str(js), "--figure", str(fig), "-q"]) == 0
    import pandas as pd

    from_csv, from_json = pd.read_csv(csv), pd.read_json(js)
    assert list(from_csv.columns) == analyzer.COLUMNS and len(from_csv) == 2 * N_LAYERS
    assert from_json["v1_cos"].iloc[0] == pytest.approx(from_csv["v1_cos"].iloc[0])
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # a PNG image, not an empty file
    assert cli_main(["analyze", str(path), "--summary"]) == 0
    assert "q_proj" in capsys.readouterr().out
    assert cli_main(["analyze", str(tmp_path / "missing.gguf"), "-q"]) == 2
    assert "missing.gguf" in capsys.readouterr().err


def test_gguf_export_round_trip_keeps_the_metric():
    from geocont.chapters.pretrained_continuity import quantization_effect, quantization_shift
    from geocont.transformer import TransformerShape, build_llama

    model = build_llama(TransformerShape(n_layers=3, d_model=64, n_heads=2, n_kv_heads=1, ffn_dim=96, vocab_size=64))
    effect = quantization_effect(model, ("F32", "Q8_0"))
    fp32 = effect[effect["format"] == "fp32"].reset_index(drop=True)
    exact = effect[effect["format"] == "F32"].reset_index(drop=True)
    np.testing.assert_allclose(exact["v1_cos"], fp32["v1_cos"], atol=1e-5)  # names and orientation survive
    shift = quantization_shift(effect)
    q8 = shift[shift["format"] == "Q8_0"]
    assert set(q8["stored_as"]) == {"Q8_0"} and (q8["v1_shift_max"] < 0.02).all()


def test_hugging_face_ids_resolve_through_the_hub_cache(tmp_path, monkeypatch):
    model = planted_model(["q_proj"])
    directory = write_shards(tmp_path / "snapshot", state_from_names(model, LLAMA_NAMES))
    asked, real_snapshot = [], checkpoints.hub_snapshot
    monkeypatch.setattr(checkpoints, "hub_snapshot", lambda model_id: asked.append(model_id) or directory)
    table = analyzer.analyze("meta-llama/Llama-3.1-8B", progress=False)
    assert asked == ["meta-llama/Llama-3.1-8B"] and len(table) == N_LAYERS
    import huggingface_hub

    def offline(*args, **kwargs):
        raise OSError("no network")

    monkeypatch.setattr(checkpoints, "hub_snapshot", real_snapshot)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    from geocont.pretrained import ModelNotAvailable

    with pytest.raises(ModelNotAvailable, match="huggingface-cli download owner/missing-model"):
        analyzer.analyze("owner/missing-model", progress=False)


# --------------------------------------------------------------------------- undefined directions, refusals


def test_zero_layers_give_flagged_nan_pairs_the_same_on_every_run():
    from geocont.transformer import TransformerShape, build_llama

    model = build_llama(TransformerShape(n_layers=4, d_model=32, n_heads=2, n_kv_heads=1, ffn_dim=48, vocab_size=64))
    with torch.no_grad():
        for layer in (1, 2):
            model.model.layers[layer].self_attn.q_proj.weight.zero_()
    first, second = analyzer.analyze(model, progress=False), analyzer.analyze(model, progress=False)
    pd.testing.assert_frame_equal(first, second)
    q = first[first["projection"] == "q_proj"].set_index("layer")
    assert q["v1_cos"].iloc[:3].isna().all() and q["u1_cos"].iloc[:3].isna().all()  # pairs 0-1, 1-2, 2-3
    assert (
        q.loc[0, "flag"] == "layer 1: zero matrix" and q.loc[1, "flag"] == "layer 1: zero matrix; layer 2: zero matrix"
    )
    assert q.loc[1, "sigma1"] == 0 and math.isnan(q.loc[1, "gap"])
    stats = analyzer.summary(first)
    assert stats.loc["q_proj", "flagged"] == 3 and stats.loc["q_proj", "pairs"] == 3
    assert math.isnan(stats.loc["q_proj", "v1_cos"])  # every q_proj pair is flagged: no mean
    assert stats.loc["k_proj", "flagged"] == 0 and not math.isnan(stats.loc["k_proj", "v1_cos"])


def _tied(n, gap, seed):
    generator = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(n, 4, generator=generator, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(n, 4, generator=generator, dtype=torch.float64))
    return ((u * torch.tensor([1.0, 1.0 - gap, 0.5, 0.2], dtype=torch.float64)) @ v.T).float()


@pytest.mark.parametrize("method", ["exact", "iterative"])
def test_tied_leading_pairs_are_flagged_and_their_alignment_reported(tmp_path, method):
    noise = torch.Generator().manual_seed(9)
    state = {
        f"model.layers.{i}.self_attn.q_proj.weight": _tied(D_MODEL, 0.0 if i < 2 else 1e-6, seed=0)
        + 1e-6 * torch.randn(D_MODEL, D_MODEL, generator=noise)
        for i in range(3)
    }
    state["model.layers.3.self_attn.q_proj.weight"] = _tied(D_MODEL, 0.2, seed=0)
    save_file(state, str(tmp_path / "tied.safetensors"))
    table = analyzer.analyze(tmp_path / "tied.safetensors", method=method, progress=False).set_index("layer")
    assert table["v1_cos"].iloc[:3].isna().all() and table["u1_cos"].iloc[:3].isna().all()
    assert table.loc[0, "flag"].startswith("layer 0: tied sigma1/sigma2 (gap ")
    assert "< 1e-03)" in table.loc[2, "flag"] and "layer 3" not in table.loc[2, "flag"]
    assert (table["gap"].iloc[:3] < 1e-4).all() and table.loc[3, "gap"] == pytest.approx(0.2, abs=1e-4)
    assert table.loc[3, "sigma2"] == pytest.approx(0.8, abs=1e-4)
    assert (table["align_input"].iloc[:2] > 0.999).all()  # the shared top-2 subspace is still seen


def test_a_projection_with_one_layer_is_refused(tmp_path):
    model = planted_model([p for p in SHAPES if p in BERT_NAMES])
    state = {name: W for name, W in state_from_names(model, BERT_NAMES).items() if ".layer.0." in name}
    save_file(state, str(tmp_path / "bert.safetensors"))
    with pytest.raises(layouts.IncompleteLayers, match="has 1 layer; continuity compares adjacent layers"):
        analyzer.analyze(tmp_path / "bert.safetensors", progress=False)


def test_a_gap_at_the_start_is_refused_and_outside_a_requested_subset_is_a_warning(tmp_path):
    model = planted_model(["q_proj", "k_proj"])
    state = state_from_names(model, LLAMA_NAMES)
    state["model.layers.0.self_attn.q_proj.renamed"] = state.pop("model.layers.0.self_attn.q_proj.weight")
    save_file(state, str(tmp_path / "renamed.safetensors"))
    with pytest.raises(layouts.IncompleteLayers, match=r"q_proj is missing layer\(s\) \[0\]"):
        analyzer.analyze(tmp_path / "renamed.safetensors", progress=False)
    with pytest.warns(UserWarning, match=r"q_proj is missing layer\(s\) \[0\] \(not analysed\)"):
        table = analyzer.analyze(tmp_path / "renamed.safetensors", projections=["k_proj"], progress=False)
    assert list(table["layer"]) == list(range(N_LAYERS))
    state = state_from_names(model, LLAMA_NAMES)
    del state["model.layers.3.self_attn.k_proj.weight"], state["model.layers.3.self_attn.q_proj.weight"]
    state["model.layers.4.self_attn.q_proj.weight"] = model["q_proj"][0][0].clone()
    save_file(state, str(tmp_path / "late_gap.safetensors"))
    with pytest.warns(UserWarning, match=r"q_proj is missing layer\(s\) \[3\] beyond the first 3 analysed"):
        table = analyzer.analyze(tmp_path / "late_gap.safetensors", max_layers=3, progress=False)
    assert table.groupby("projection", observed=True)["layer"].max().tolist() == [2, 2]


def test_output_paths_are_checked_before_any_work(tmp_path, monkeypatch, capsys):
    path = tmp_path / "model.safetensors"
    save_file(state_from_names(planted_model(["q_proj"]), LLAMA_NAMES), str(path))
    monkeypatch.setattr(analyzer, "_stream", lambda *a, **k: pytest.fail("analysed before checking the output"))
    assert cli_main(["analyze", str(path), "-o", str(path / "t.csv"), "-q"]) == 2
    assert f"{path} is a file, not a directory" in capsys.readouterr().err
    assert cli_main(["analyze", str(path), "--figure", str(tmp_path), "-q"]) == 2
    assert "is a directory" in capsys.readouterr().err
    if Path("/proc").is_dir():  # not writable even for root
        assert cli_main(["analyze", str(path), "-o", "/proc/geocont/t.csv", "-q"]) == 2
        err = capsys.readouterr().err
        assert "cannot write in /proc" in err and len(err.strip().splitlines()) == 1


def test_an_os_error_while_writing_is_one_line(tmp_path, monkeypatch, capsys):
    path = tmp_path / "model.safetensors"
    save_file(state_from_names(planted_model(["q_proj"]), LLAMA_NAMES), str(path))

    def full_disk(self, target, **kwargs):
        raise OSError(28, "No space left on device", str(target))

    monkeypatch.setattr(pd.DataFrame, "to_csv", full_disk)
    assert cli_main(["analyze", str(path), "-o", str(tmp_path / "t.csv"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"error: No space left on device: {tmp_path / 't.csv'}"


def test_a_missing_path_like_source_says_no_such_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for source in ("models/missing.gguf", "./models/x", "../nowhere/model.safetensors", "~/no-such-dir-geocont"):
        with pytest.raises(FileNotFoundError, match="^no such file or directory: "):
            checkpoints.open_source(source)
    assert cli_main(["analyze", "models/missing.gguf", "-q"]) == 2
    err = capsys.readouterr().err
    assert "no such file or directory: models/missing.gguf" in err and "huggingface-cli" not in err
    assert not checkpoints.looks_like_path("org/name")  # a Hugging Face id stays an id


def test_truncated_files_are_called_truncated_when_opened(tmp_path):
    model = planted_model(["q_proj", "k_proj"])
    gguf_path = write_gguf(tmp_path / "model.gguf", model, gguf.GGMLQuantizationType.F32)
    data = gguf_path.read_bytes()
    for keep in (len(data) - 500, len(data) // 2, 40):
        gguf_path.write_bytes(data[:keep])
        with pytest.raises(checkpoints.CorruptCheckpoint, match="model.gguf: truncated"):
            analyzer.plan(gguf_path)
    st_path = tmp_path / "model.safetensors"
    save_file(state_from_names(model, LLAMA_NAMES), str(st_path))
    data = st_path.read_bytes()
    for keep in (len(data) - 100, 200, 4):
        st_path.write_bytes(data[:keep])
        with pytest.raises(checkpoints.CorruptCheckpoint, match="model.safetensors: truncated"):
            analyzer.plan(st_path)


def test_random_bytes_in_tensor_data_are_a_corrupt_tensor_named_when_read(tmp_path):
    model = planted_model(["q_proj", "k_proj"])
    gguf_path = write_gguf(tmp_path / "model.gguf", model, gguf.GGMLQuantizationType.F32)
    source = checkpoints.GGUFSource(gguf_path)
    tensor = source._tensors["blk.2.attn_k.weight"]
    data = bytearray(gguf_path.read_bytes())
    data[tensor.data_offset + 40 : tensor.data_offset + 48] = b"\xff" * 8  # two NaN floats
    gguf_path.write_bytes(bytes(data))
    src, _, _ = analyzer.plan(gguf_path)  # opens cleanly: a format without checksums
    with pytest.raises(checkpoints.CorruptCheckpoint, match=r"model.gguf: tensor 'blk.2.attn_k.weight' holds NaN"):
        src.read("blk.2.attn_k.weight")
    with pytest.raises(checkpoints.CorruptCheckpoint, match=r"tensor 'blk.2.attn_k.weight' holds NaN or Inf"):
        analyzer.analyze(gguf_path, progress=False, use_cache=False)
    st_path = tmp_path / "model.safetensors"
    state = state_from_names(model, LLAMA_NAMES)
    state["model.layers.1.self_attn.q_proj.weight"][3, 5] = float("inf")
    save_file(state, str(st_path))
    with pytest.raises(checkpoints.CorruptCheckpoint, match=r"tensor 'model.layers.1.self_attn.q_proj.weight' holds"):
        analyzer.analyze(st_path, progress=False)


def test_the_analyzer_table_reads_in_the_run_tables_vocabulary():
    from geocont import tables
    from geocont.transformer import TransformerShape, build_llama

    model = build_llama(TransformerShape(n_layers=3, d_model=32, n_heads=2, n_kv_heads=1, ffn_dim=48, vocab_size=64))
    table = analyzer.analyze(model, progress=False)
    long = analyzer.as_run_table(table)
    assert list(long.columns) == tables.RUN_COLUMNS and set(long["metric"]) <= set(tables.METRICS)
    v1 = tables.select(long, "weight_cos", "input", 1, group="up_proj").set_index("layer")["value"]
    wide = table[table["projection"] == "up_proj"].set_index("layer")["v1_cos"].dropna()
    pd.testing.assert_series_equal(v1, wide, check_names=False)

"""Llama-style models, the offline corpus, tokenizers and language-model training runs."""

import math

import pandas as pd
import pytest
import torch

from geocont import text
from geocont.chapters.lm_runs import LM_SHAPES
from geocont.config import LMRunConfig, TransformerShape
from geocont.lm import train_lm
from geocont.transformer import PROJECTIONS, build_llama, causal_linear_attention, projection_groups

TINY = TransformerShape(n_layers=2, d_model=16, n_heads=2, n_kv_heads=1, ffn_dim=24, vocab_size=300, max_seq_len=16)


def test_ablation_switches_change_the_model():
    silu, relu, none = (
        build_llama(TransformerShape(**{**TINY.__dict__, "mlp_activation": a})) for a in ("silu", "relu", "none")
    )
    assert [type(m.model.layers[0].mlp.act_fn).__name__ for m in (silu, relu, none)] == [
        "SiLUActivation",
        "ReLU",
        "LinearActivation",
    ]
    softmax = build_llama(TINY)
    linear = build_llama(TransformerShape(**{**TINY.__dict__, "attention": "linear"}))
    assert softmax.config._attn_implementation == "eager"
    assert linear.config._attn_implementation == "geocont_linear"
    x = torch.randint(0, 300, (2, 16))
    assert not torch.allclose(softmax(input_ids=x).logits, linear(input_ids=x).logits)
    with pytest.raises(ValueError, match="valid choices: silu, relu, none"):
        TransformerShape(mlp_activation="gelu")
    with pytest.raises(ValueError, match="valid choices: softmax, linear"):
        TransformerShape(attention="flash")


def test_linear_attention_is_causal_and_has_no_softmax():
    module = torch.nn.Module()
    q, k, v = (torch.randn(1, 2, 5, 4) for _ in range(3))
    out, weights = causal_linear_attention(module, q, k, v, None, scaling=0.5)
    assert out.shape == (1, 5, 2, 4)
    assert torch.all(weights[..., 0, 1:] == 0)  # position 0 sees only itself
    k2, v2 = k.clone(), v.clone()
    k2[..., 4, :] += 10
    v2[..., 4, :] -= 3
    out2, _ = causal_linear_attention(module, q, k2, v2, None, scaling=0.5)
    assert torch.allclose(out[:, :4], out2[:, :4])  # the future does not leak
    expected = (q[..., 2:3, :] @ k[..., :3, :].transpose(-1, -2) * 0.5 / 3) @ v[..., :3, :]
    assert torch.allclose(out[:, 2], expected.squeeze(-2), atol=1e-6)


def test_projection_groups_follow_the_layers():
    groups = projection_groups(build_llama(TINY))
    assert list(groups) == list(PROJECTIONS)
    assert all(len(g) == 2 for g in groups.values())
    assert groups["k_proj"][0].shape == (8, 16) and groups["down_proj"][1].shape == (16, 24)


def test_kjv_corpus_and_tokenizer_round_trip():
    corpus = text.load_corpus("kjv")
    assert corpus.train.startswith("In the beginning God created the heaven and the earth.")
    assert 0.08 < len(corpus.validation) / (len(corpus.train) + len(corpus.validation)) < 0.12
    tokenizer = text.train_tokenizer(corpus, 512)
    sample = "And God said, Let there be light: and there was light. Zwölf!"
    assert tokenizer.decode(tokenizer.encode(sample).ids) == sample
    assert tokenizer.get_vocab_size() == 512


def test_missing_corpus_says_how_to_install_it(monkeypatch):
    from geocont import kjv

    monkeypatch.setattr(kjv.shutil, "which", lambda name: None)
    with pytest.raises(text.CorpusNotAvailable, match="apt-get install bible-kjv bible-kjv-text"):
        text.load_corpus("kjv")
    with pytest.raises(ValueError, match="valid choices: kjv, wikitext-103"):
        text.load_corpus("tinystories")


def test_lm_run_is_deterministic_and_recorded_per_projection():
    config = LMRunConfig(shape=LM_SHAPES["smoke"], steps=6, n_snapshots=3, batch_size=4, eval_windows=4, n_directions=2)
    a, model_a = train_lm(config, progress=False)
    b, model_b = train_lm(config, progress=False)
    pd.testing.assert_frame_equal(a, b)
    assert torch.equal(model_a.model.layers[0].mlp.down_proj.weight, model_b.model.layers[0].mlp.down_proj.weight)
    assert set(a["group"].unique()) == set(PROJECTIONS) | {"model", "up~gate"}  # "model": loss rows
    cross = a[a["group"] == "up~gate"]  # the up and gate projections of each layer, compared in both spaces
    assert set(cross["metric"]) == {"cross_cos"} and set(cross["space"]) == {"input", "output"}
    assert len(cross) == 3 * 2 * config.shape.n_layers and cross["value"].between(0, 1).all()
    val = a[a["metric"] == "val_loss"].sort_values("step")["value"]
    assert len(val) == 3 and abs(val.iloc[0] - math.log(512)) < 0.5  # untrained: about uniform guessing


def test_trained_model_is_cached_with_its_table_and_a_corrupt_file_is_retrained():
    from geocont import cache
    from geocont.lm import MODEL_ARTIFACT, run_lm, trained_lm

    config = LMRunConfig(shape=LM_SHAPES["smoke"], steps=4, n_snapshots=2, batch_size=2, eval_windows=2, n_directions=1)
    table = run_lm(config, progress=False)
    weights = cache.artifact_path("lm", config.to_dict(), MODEL_ARTIFACT)
    assert weights is not None
    model = trained_lm(config, progress=False)
    fresh_table, fresh_model = train_lm(config, progress=False)
    pd.testing.assert_frame_equal(table, fresh_table)
    for (name, tensor), (_, expected) in zip(model.state_dict().items(), fresh_model.state_dict().items()):
        assert torch.equal(tensor, expected), name
    weights.write_bytes(weights.read_bytes()[:100])  # truncated file
    with pytest.warns(UserWarning, match="unreadable"):
        again = trained_lm(config, progress=False)
    assert torch.equal(again.lm_head.weight, fresh_model.lm_head.weight)

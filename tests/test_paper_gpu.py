"""scripts/paper_gpu.py (the paper-size runs on a GPU, most valuable first) and geocont.flops."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from geocont.chapters.lm_runs import LM_SHAPES
from geocont.flops import mlp_step_flops, transformer_step_flops
from geocont.text import Corpus, load_corpus, save_corpus
from geocont.transformer import build_llama

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "paper_gpu.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("paper_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_step_flops_count_every_weight_matrix_six_times_per_example():
    shape = LM_SHAPES["smoke"]
    matrices = sum(m.weight.numel() for m in build_llama(shape).modules() if isinstance(m, torch.nn.Linear))
    tokens = 3 * shape.max_seq_len
    attention = 3 * shape.n_layers * 4 * 3 * shape.max_seq_len**2 * shape.d_model
    assert transformer_step_flops(shape, 3) == 6 * matrices * tokens + attention
    assert mlp_step_flops(depth=2, width=4, batch=5, features=3, classes=2) == 6 * 5 * (3 * 4 + 2 * 16 + 4 * 2)


def test_the_plan_puts_the_transformers_first_then_the_condition_2_core(script):
    runs = script.plan("kjv", "fashion-mnist")
    labels = [r.label for r in runs]
    assert labels[:2] == ["transformer silu seed=0", "transformer none seed=0"]
    core = labels[2 : 2 + 3 * len(script.CONDITION_2_CORE)]
    assert all(l.startswith("MLP ") and "fashion-mnist" in l for l in core)
    assert [l.split()[1] for l in core[: len(script.CONDITION_2_CORE)]] == list(script.CONDITION_2_CORE)
    assert len(set(labels)) == len(labels)
    first = runs[0].job.argument
    assert first.precision == "bf16-autocast" and first.device == "auto" and first.corpus == "kjv"
    assert 60e15 < runs[0].flops < 70e15  # 8 x 512 Llama, 20,000 steps of 32 x 512 tokens
    assert runs[2].job.argument.dataset == "fashion-mnist" and runs[2].job.argument.steps == 9360


def test_a_saved_corpus_is_read_before_the_packages(tmp_path, monkeypatch):
    save_corpus(Corpus("kjv", "train text", "held out", "test"), tmp_path)
    monkeypatch.setenv("GEOCONT_CORPUS_DIR", str(tmp_path))
    assert load_corpus("kjv") == Corpus("kjv", "train text", "held out", "test")

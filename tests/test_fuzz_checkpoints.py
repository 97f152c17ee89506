"""Bounded fuzz test: random corruptions of a small GGUF and a small safetensors file.

Each corruption (a truncation, a few flipped bytes, or a zeroed block; fixed seed) must
end in a geocont error (:data:`GEOCONT_ERRORS`), raised when the file is opened or while it
is analysed, or in a table, equal to the clean one where the damage missed everything
that is measured and different where it hit tensor data that still look like numbers
(neither format has checksums). A traceback from a library fails the test: nothing
broader than :data:`GEOCONT_ERRORS` is caught. The counts are printed (``pytest -s``).
"""

from __future__ import annotations

from collections import Counter

import gguf
import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from geocont import analyzer
from geocont.checkpoints import CorruptCheckpoint
from geocont.layouts import IncompleteLayers, UnknownLayout

#: What a damaged checkpoint may raise: nothing else is caught.
GEOCONT_ERRORS = (CorruptCheckpoint, UnknownLayout, IncompleteLayers)
CORRUPTIONS_PER_FORMAT = 200
N_LAYERS, D = 3, 32


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path / "cache"))


def _matrices(seed: int) -> list[np.ndarray]:
    """Per layer, a shared rank-one spike plus noise: well-separated leading pairs."""
    generator = torch.Generator().manual_seed(seed)
    u, v = torch.randn(D, generator=generator), torch.randn(D, generator=generator)
    return [
        (
            torch.outer(u, v + 0.3 * torch.randn(D, generator=generator)) / D
            + 0.01 * torch.randn(D, D, generator=generator)
        ).numpy()
        for _ in range(N_LAYERS)
    ]


def write_small_gguf(path):
    """Q (Q8_0) and K (F32) of three layers."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(N_LAYERS)
    for i, W in enumerate(_matrices(0)):
        writer.add_tensor(
            f"blk.{i}.attn_q.weight",
            gguf.quants.quantize(W, gguf.GGMLQuantizationType.Q8_0),
            raw_dtype=gguf.GGMLQuantizationType.Q8_0,
        )
    for i, W in enumerate(_matrices(1)):
        writer.add_tensor(f"blk.{i}.attn_k.weight", W.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_small_safetensors(path):
    """Q (bfloat16) and K (float32) of three layers, Llama names."""
    state = {
        f"model.layers.{i}.self_attn.q_proj.weight": torch.from_numpy(W).bfloat16() for i, W in enumerate(_matrices(0))
    }
    state.update({f"model.layers.{i}.self_attn.k_proj.weight": torch.from_numpy(W) for i, W in enumerate(_matrices(1))})
    save_file(state, str(path))
    return path


def corrupt(data: bytes, rng: np.random.Generator) -> tuple[str, bytes]:
    """One random corruption: a truncation, 1-8 flipped bytes, or a zeroed block of 1-512 bytes."""
    kind = ("truncate", "flip", "zero")[int(rng.integers(3))]
    if kind == "truncate":
        return kind, data[: int(rng.integers(len(data)))]
    damaged = bytearray(data)
    if kind == "flip":
        for position in rng.integers(len(data), size=int(rng.integers(1, 9))):
            damaged[position] ^= int(rng.integers(1, 256))
    else:
        start = int(rng.integers(len(data)))
        end = min(start + int(rng.integers(1, 513)), len(data))
        damaged[start:end] = bytes(end - start)
    return kind, bytes(damaged)


def fuzz(path, clean_bytes: bytes, clean_table, seed: int) -> Counter:
    rng = np.random.default_rng(seed)
    outcomes: Counter = Counter()
    for _ in range(CORRUPTIONS_PER_FORMAT):
        _, damaged = corrupt(clean_bytes, rng)
        path.write_bytes(damaged)
        try:
            analyzer.plan(path)
        except GEOCONT_ERRORS:
            outcomes["caught at open"] += 1
            continue
        try:
            table = analyzer.analyze(path, progress=False, use_cache=False)
        except GEOCONT_ERRORS:
            outcomes["caught at compute"] += 1
            continue
        outcomes["not caught, table equal" if table.equals(clean_table) else "not caught, table differs"] += 1
    return outcomes


@pytest.mark.parametrize(
    "fmt, write, seed",
    [
        ("gguf", write_small_gguf, 0),
        ("safetensors", write_small_safetensors, 1),
    ],
)
def test_random_corruptions_end_in_a_geocont_error_or_a_table(tmp_path, fmt, write, seed):
    path = write(tmp_path / f"model.{fmt}")
    clean_bytes = path.read_bytes()
    clean = analyzer.analyze(path, progress=False, use_cache=False)
    assert len(clean) == 2 * N_LAYERS and not clean["v1_cos"].iloc[:2].isna().any()
    outcomes = fuzz(path, clean_bytes, clean, seed)
    print(f"\n{fmt} ({len(clean_bytes)} bytes), {CORRUPTIONS_PER_FORMAT} corruptions: {dict(sorted(outcomes.items()))}")
    assert sum(outcomes.values()) == CORRUPTIONS_PER_FORMAT and outcomes["caught at open"] > 0

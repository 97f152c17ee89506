"""Synthetic checkpoints with the shapes of public models, for tests and cost measurements.

The shapes are those of Llama-3.1-8B and -70B (from their config.json files), which cannot be
downloaded here; :func:`write_spiked_checkpoint` writes random weights of such shapes with a
planted leading direction, so the analyzer's path for a large model can be run and timed.
"""

from __future__ import annotations

import math

import torch

#: Per-layer matrix shapes [out, in] of two public models (from their config.json files).
LLAMA_31_8B_LAYER = {
    "q_proj": (4096, 4096),
    "k_proj": (1024, 4096),
    "v_proj": (1024, 4096),
    "o_proj": (4096, 4096),
    "gate_proj": (14336, 4096),
    "up_proj": (14336, 4096),
    "down_proj": (4096, 14336),
}


LLAMA_31_70B_LAYER = {
    "q_proj": (8192, 8192),
    "k_proj": (1024, 8192),
    "v_proj": (1024, 8192),
    "o_proj": (8192, 8192),
    "gate_proj": (28672, 8192),
    "up_proj": (28672, 8192),
    "down_proj": (8192, 28672),
}


#: Layers of the models whose analysis cost the book extrapolates.
LARGE_MODELS = {"Llama-3.1-8B": (LLAMA_31_8B_LAYER, 32), "Llama-3.1-70B": (LLAMA_31_70B_LAYER, 80)}


def layer_parameters(shapes: dict[str, tuple[int, int]]) -> int:
    return sum(out_dim * in_dim for out_dim, in_dim in shapes.values())


def write_spiked_checkpoint(
    directory, shapes: dict[str, tuple[int, int]], n_layers: int = 2, seed: int = 0, dtype: torch.dtype = torch.bfloat16
):
    """A Llama-layout safetensors shard of random weights with a planted leading direction.

    Each matrix is Gaussian (entries of sd 0.02, like an initialisation) plus a rank-one
    spike ``s u v^T`` whose singular value is three times the noise's largest, with u and
    v shared by adjacent layers up to a small rotation, so that the leading pair is
    well separated, as in trained weights. Returns the path of the written file.
    """
    from pathlib import Path

    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for projection, (out_dim, in_dim) in shapes.items():
        u, v = torch.randn(out_dim, generator=generator), torch.randn(in_dim, generator=generator)
        for layer in range(n_layers):
            u_l = u + 0.3 * torch.randn(out_dim, generator=generator)
            v_l = v + 0.3 * torch.randn(in_dim, generator=generator)
            noise = torch.randn(out_dim, in_dim, generator=generator).mul_(0.02)
            spike = 3 * 0.02 * (math.sqrt(out_dim) + math.sqrt(in_dim))  # 3x the noise's top singular value
            noise.addr_(u_l / u_l.norm(), v_l / v_l.norm(), alpha=spike)
            block = "self_attn" if projection in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
            state[f"model.layers.{layer}.{block}.{projection}.weight"] = noise.to(dtype)
            del noise
    path = directory / "model.safetensors"
    save_file(state, str(path))
    return path

"""Floating-point operations of one training step, counted from the shapes (matrix products only).

A weight matrix costs 6 FLOPs per multiply-accumulate and example (token): 2 forward, 4 backward
(the gradients of its input and of itself). Attention adds its scores and their mixing of the
values over the full square (eager attention computes it, causal masking or not). Elementwise
work, norms and the optimizer's update are left out: at these sizes they are a few per cent.
"""

from __future__ import annotations

from typing import Any

from .config import TransformerShape

#: Input features and classes of the 28 x 28 image datasets the MLP trains on.
IMAGE_FEATURES, IMAGE_CLASSES = 784, 10


def mlp_step_flops(depth: int, width: int, batch: int, features: int, classes: int) -> float:
    """One step of the residual MLP: ``features -> width``, ``depth`` hidden ``width x width``, ``-> classes``."""
    return 6.0 * batch * (features * width + depth * width**2 + width * classes)


def transformer_step_flops(shape: TransformerShape, batch: int) -> float:
    """One step of the Llama-style model on ``batch`` windows of ``shape.max_seq_len`` tokens."""
    kv = shape.d_model // shape.n_heads * shape.n_kv_heads
    per_layer = 2 * shape.d_model**2 + 2 * shape.d_model * kv + 3 * shape.d_model * shape.ffn_dim
    matrices = shape.n_layers * per_layer + shape.d_model * shape.vocab_size
    tokens = batch * shape.max_seq_len
    attention = shape.n_layers * 2 * 2 * batch * shape.max_seq_len**2 * shape.d_model  # forward: scores, mixing
    return 6.0 * matrices * tokens + 3.0 * attention


def run_steps(config: Any) -> int | None:
    """The optimizer steps of an MLP or LM run configuration; None where they depend on the size of a
    dataset not yet loaded (an MLP run set by ``epochs`` without ``max_train``)."""
    if config.steps is not None:
        return config.steps
    return config.epochs * max(1, config.max_train // config.batch_size) if config.max_train else None


def run_flops(config: Any) -> float | None:
    """Training FLOPs of a run (the evaluations at snapshots are a few per cent more); None where its steps are
    not known (:func:`run_steps`)."""
    from .config import LMRunConfig

    steps = run_steps(config)
    if steps is None:
        return None
    if isinstance(config, LMRunConfig):
        return steps * transformer_step_flops(config.shape, config.batch_size)
    return steps * mlp_step_flops(config.depth, config.width, config.batch_size, IMAGE_FEATURES, IMAGE_CLASSES)

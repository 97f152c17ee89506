"""Does one residual coordinate carry a projection's continuity? The residual channel of a Llama-style model.

The singular vector of a projection that lives in the residual stream (``v1`` of Q, K, V, Gate and Up, which read
it; ``u1`` of O and Down, which write it) is spread over the stream's ``d`` coordinates, or sits on a few. Per
layer and projection:

* ``channel_share``: the vector's largest squared coordinate (``1/d`` for a spread vector, 1 for one coordinate);
* ``channel_index``: which coordinate that is (the same in every layer for one privileged channel);
* ``channel_pr``: the participation ratio ``1 / sum_i x_i^4`` (``d`` for a flat vector, 1 for one coordinate);
* ``channel_gain``: the gain of the RMSNorm that reads the vector's space, at that coordinate, over its median
  gain (Q, K, V: the layer's attention norm; Gate, Up, O: its MLP norm; Down: the next layer's attention norm,
  the final norm after the last layer);
* ``ones_cos`` (Gate only): |cos| of Gate's ``u1`` (in the MLP's hidden space) with the all-ones direction.

Nothing here knows a chapter: :func:`channel_rows` takes the matrices and gains as tensors; :func:`model_channel`
reads them from a ``transformers`` Llama model; :mod:`geocont.checkpoint_channel` from any checkpoint the analyzer
reads.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from .metrics import top_singular_triplets

#: The projections whose leading vector in the residual stream is the input one (they read the stream).
READERS = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")

#: The projections whose leading vector in the residual stream is the output one (they write it).
WRITERS = ("o_proj", "down_proj")

#: The metrics :func:`channel_rows` gives, per layer and projection (``ones_cos``: Gate only).
CHANNEL_METRICS = ("channel_share", "channel_index", "channel_pr", "channel_gain", "ones_cos")

#: Which RMSNorm reads each projection's residual-space vector, and whether it is the next layer's.
GAIN_OF = {
    "q_proj": ("attention", 0),
    "k_proj": ("attention", 0),
    "v_proj": ("attention", 0),
    "gate_proj": ("mlp", 0),
    "up_proj": ("mlp", 0),
    "o_proj": ("mlp", 0),
    "down_proj": ("attention", 1),
}


def concentration(vector: torch.Tensor) -> tuple[float, int, float]:
    """``(largest squared coordinate, its index, participation ratio)`` of a vector (normalised here)."""
    unit = vector.double() / torch.linalg.vector_norm(vector.double())
    squares = unit**2
    index = int(torch.argmax(squares))
    return float(squares[index]), index, float(1.0 / torch.sum(squares**2))


def leading_vectors(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(u1, v1)`` of an [out, in] matrix (signs arbitrary): :func:`geocont.metrics.top_singular_triplets`, the
    book's own singular-vector routine (exact for small matrices, converged subspace iteration for large ones)."""
    found = top_singular_triplets(matrix.detach().float(), 1)
    return found.u.reshape(-1).double(), found.v.reshape(-1).double()


def _gain_ratio(gains: torch.Tensor | None, index: int) -> float:
    if gains is None:
        return math.nan
    magnitudes = gains.detach().double().abs()
    median = float(torch.median(magnitudes))
    return float(magnitudes[index]) / median if median > 0 else math.nan


def channel_rows(
    projections: Mapping[str, Sequence[torch.Tensor]],
    attention_gains: Sequence[torch.Tensor] | None = None,
    mlp_gains: Sequence[torch.Tensor] | None = None,
    final_gain: torch.Tensor | None = None,
) -> list[tuple[str, int, str, float]]:
    """``(projection, layer, metric, value)`` for every layer of every projection given (``{name: [layer 0,
    ...]}``, [out, in] matrices) and every metric of :data:`CHANNEL_METRICS`; the gains per layer (RMSNorm weights)
    give ``channel_gain`` (NaN without them)."""
    rows = []
    for name, matrices in projections.items():
        if name not in GAIN_OF:
            raise ValueError(f"unknown projection {name!r}; valid choices: {', '.join(GAIN_OF)}")
        norm, ahead = GAIN_OF[name]
        for layer, matrix in enumerate(matrices):
            u1, v1 = leading_vectors(matrix)
            share, index, ratio = concentration(u1 if name in WRITERS else v1)
            gains = _gains(norm, layer + ahead, len(matrices), attention_gains, mlp_gains, final_gain)
            rows += [
                (name, layer, "channel_share", share),
                (name, layer, "channel_index", float(index)),
                (name, layer, "channel_pr", ratio),
                (name, layer, "channel_gain", _gain_ratio(gains, index)),
            ]
            if name == "gate_proj":
                ones = torch.full_like(u1, 1.0 / math.sqrt(len(u1)))
                rows.append((name, layer, "ones_cos", float(torch.abs(u1 @ ones))))
    return rows


def _gains(norm, layer, n_layers, attention_gains, mlp_gains, final_gain) -> torch.Tensor | None:
    if layer == n_layers:
        return final_gain
    chosen = attention_gains if norm == "attention" else mlp_gains
    return None if chosen is None else chosen[layer]


def model_channel(model) -> list[tuple[str, int, str, float]]:
    """:func:`channel_rows` of a ``transformers`` Llama model (``model.model.layers``), gains included."""
    from .transformer import projection_groups

    layers = model.model.layers
    return channel_rows(
        projection_groups(model),
        attention_gains=[layer.input_layernorm.weight for layer in layers],
        mlp_gains=[layer.post_attention_layernorm.weight for layer in layers],
        final_gain=model.model.norm.weight,
    )


#: Random unit vectors drawn to estimate :func:`random_top_share` (its standard error is under 0.5% of it).
RANDOM_SHARE_DRAWS = 20000


@functools.lru_cache(maxsize=32)
def random_top_share(d: int) -> float:
    """The random level of ``channel_share``: E[max_i x_i^2] of a uniformly random unit vector in ``d`` dimensions
    (about 2 ln(d) / d for large d, not 1/d, the share of a perfectly flat vector), estimated from
    :data:`RANDOM_SHARE_DRAWS` vectors of a fixed seed."""
    rng = np.random.default_rng(d)
    draws = rng.standard_normal((RANDOM_SHARE_DRAWS, d))
    squares = draws**2 / (draws**2).sum(axis=1, keepdims=True)
    return float(squares.max(axis=1).mean())

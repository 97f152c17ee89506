"""Llama-style transformers built from transformers' own Llama implementation.

The trained models share code and weight names (``q_proj`` ... ``down_proj``) with
pretrained Llama checkpoints. Ablations are configuration, not forks:

* ``mlp_activation``: the SwiGLU gate's activation, ``silu`` (Llama), ``relu``, or
  ``none`` (transformers' ``linear`` activation: a bilinear, ungated-nonlinearity MLP);
* ``attention``: ``softmax`` (Llama) or ``linear``, a causal linear attention with no
  feature map, ``out_t = (1/t) sum_{s<=t} (q_t . k_s / sqrt(d_head)) v_s``, registered
  through transformers' ``AttentionInterface``: no nonlinearity acts on the attention
  scores, which tests the claim that the softmax anchors Q and K.
"""

from __future__ import annotations

import torch
from torch import nn

from .config import MLP_ACTIVATIONS, TransformerShape
from .layouts import PROJECTIONS

LINEAR_ATTENTION = "geocont_linear"


def causal_linear_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Causal attention without softmax: position-averaged (q . k) weighted values.

    Signature of transformers' attention functions; ``query`` is ``[batch, heads, seq, d]``
    and ``key``/``value`` may have fewer (grouped) heads. Padding masks are not supported
    (training batches here are unpadded); causality is built in.
    """
    groups = query.shape[1] // key.shape[1]
    key = key.repeat_interleave(groups, dim=1)
    value = value.repeat_interleave(groups, dim=1)
    seq = query.shape[-2]
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    causal = torch.ones(seq, seq, dtype=torch.bool, device=query.device).tril()
    positions = torch.arange(1, seq + 1, device=query.device, dtype=query.dtype).view(1, 1, seq, 1)
    weights = scores.masked_fill(~causal, 0.0) / positions
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


def _register_linear_attention() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(LINEAR_ATTENTION, causal_linear_attention)


def build_llama(shape: TransformerShape, seed: int = 0):
    """A freshly initialised ``LlamaForCausalLM`` of this shape (seeded)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    if shape.attention == "linear":
        _register_linear_attention()
    config = LlamaConfig(
        vocab_size=shape.vocab_size,
        hidden_size=shape.d_model,
        intermediate_size=shape.ffn_dim,
        num_hidden_layers=shape.n_layers,
        num_attention_heads=shape.n_heads,
        num_key_value_heads=shape.n_kv_heads,
        max_position_embeddings=shape.max_seq_len,
        hidden_act=MLP_ACTIVATIONS[shape.mlp_activation],
        tie_word_embeddings=False,
        attn_implementation=LINEAR_ATTENTION if shape.attention == "linear" else "eager",
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def projection_groups(model) -> dict[str, list[nn.Parameter]]:
    """``{projection: [weight of layer 0, layer 1, ...]}`` for the seven Llama projections."""
    groups: dict[str, list[nn.Parameter]] = {name: [] for name in PROJECTIONS}
    for layer in model.model.layers:
        for name in PROJECTIONS:
            parent = layer.self_attn if name in ("q_proj", "k_proj", "v_proj", "o_proj") else layer.mlp
            groups[name].append(getattr(parent, name).weight)
    return groups


def projection_dims(shape: TransformerShape) -> dict[str, dict[str, int]]:
    """``{projection: {"input": in_dim, "output": out_dim}}``: the spaces' dimensions."""
    d, kv, ffn = shape.d_model, shape.d_model // shape.n_heads * shape.n_kv_heads, shape.ffn_dim
    sizes = {
        "q_proj": (d, d),
        "k_proj": (kv, d),
        "v_proj": (kv, d),
        "o_proj": (d, d),
        "gate_proj": (ffn, d),
        "up_proj": (ffn, d),
        "down_proj": (d, ffn),
    }
    return {name: {"input": n_in, "output": n_out} for name, (n_out, n_in) in sizes.items()}


def parameter_count(model) -> int:
    return sum(p.numel() for p in model.parameters())

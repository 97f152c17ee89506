"""Balances: the quantities a residual MLP's symmetries conserve under gradient flow, whose motion measures drift.

* the **pair balance** of adjacent hidden blocks ``(l, l + 1)`` of the linear residual net (``res-none``, no
  norm, block ``h -> M_l h + b_l`` with ``M_l = I + W_l``): ``C_l = M_{l+1}^T M_{l+1} - M_l M_l^T - b_l b_l^T``;
* the **unit balance** of a residual ReLU net (and of the linear one), the vector
  ``q = diag(E E^T + e e^T + sum_l (W_l W_l^T - W_l^T W_l + b_l b_l^T) - H^T H)`` (``E``, ``e`` the embedding's
  weight and bias, ``H`` the head's weight).

Each balance is reported as its change since the first snapshot relative to its size: :func:`relative_motion`.
docs/design.md ("Balances") derives them from the symmetries.
"""

from __future__ import annotations

import torch

from .mlp import ResidualMLP


def pair_balances(model: ResidualMLP) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per adjacent pair of hidden blocks ``(l, l + 1)``: ``C_l`` without the identity (it cancels) and its size,
    as ``(C_l, S_l)`` in float64, ``S_l = ||M_{l+1}^T M_{l+1} - I|| + ||M_l M_l^T + b_l b_l^T - I||`` (Frobenius)."""
    weights = [block.linear.weight.detach().double() for block in model.blocks]
    biases = [block.linear.bias.detach().double() for block in model.blocks]
    out = []
    for w, b, following in zip(weights, biases, weights[1:]):
        later = following + following.T + following.T @ following  # M^T M - I
        earlier = w + w.T + w @ w.T + torch.outer(b, b)  # M M^T + b b^T - I
        out.append((later - earlier, torch.linalg.matrix_norm(later) + torch.linalg.matrix_norm(earlier)))
    return out


def unit_balance(model: ResidualMLP) -> tuple[torch.Tensor, torch.Tensor]:
    """The stream's per-unit balance ``q`` (module docstring) in float64, and its size: the norm of its positive
    part plus that of its negative part."""
    embed, head = model.embed.weight.detach().double(), model.head.weight.detach().double()
    positive = (embed * embed).sum(1) + model.embed.bias.detach().double() ** 2
    negative = (head * head).sum(0)
    for block in model.blocks:
        w, b = block.linear.weight.detach().double(), block.linear.bias.detach().double()
        positive = positive + (w * w).sum(1) + b * b  # diag(W W^T) + b^2
        negative = negative + (w * w).sum(0)  # diag(W^T W)
    return positive - negative, torch.linalg.vector_norm(positive) + torch.linalg.vector_norm(negative)


def relative_motion(
    current: torch.Tensor, start: torch.Tensor, current_size: torch.Tensor, start_size: torch.Tensor
) -> float:
    """``||current - start|| / max(size now, size at the start)``: how far a balance moved, as a share of it."""
    scale = float(torch.maximum(current_size, start_size))
    return float(torch.linalg.vector_norm((current - start).flatten())) / scale if scale > 0 else float("nan")

"""Adam in a random orthogonal frame per matrix: the control for "is Adam the symmetry breaker?".

Plain SGD is rotation-equivariant; Adam is not: its per-coordinate scaling singles out the standard basis, the
same one in every layer, so Adam alone may align the layers of a linear net. :class:`FrameAdam` runs Adam for
each matrix ``W`` ([out, in]) in the coordinates ``W' = R^T W R'``, with fixed orthogonal ``R`` ([out, out]) and
``R'`` ([in, in]) drawn independently for every layer: each layer has its own Adam axes, none of them shared.
Parameters without a frame (biases, embedding, head) get plain Adam. CONTRIBUTING.md ("FrameAdam") gives the
argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

#: Mixed into the frame seed so that frames are not drawn from the stream of the run's own seed.
FRAME_STREAM = 0x0F4A3E


def random_orthogonal(n: int, rng: np.random.Generator) -> torch.Tensor:
    """A Haar-random orthogonal ``n x n`` matrix (QR of a Gaussian, signs fixed by R's diagonal), float64."""
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return torch.from_numpy(q * np.sign(np.diag(r)))


def random_frames(matrices: Sequence[torch.Tensor], seed: int) -> dict[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Independent ``(R, R')`` for each [out, in] matrix, in order, reproducible from ``seed``."""
    rng = np.random.default_rng([FRAME_STREAM, seed])
    frames = {}
    for matrix in matrices:
        if matrix.dim() != 2:
            raise ValueError(f"frames are for matrices; got a parameter of shape {tuple(matrix.shape)}")
        out_features, in_features = matrix.shape
        left, right = random_orthogonal(out_features, rng), random_orthogonal(in_features, rng)
        frames[matrix] = (left.to(matrix), right.to(matrix))
    return frames


class FrameAdam(torch.optim.Optimizer):
    """Adam (as ``torch.optim.Adam``, L2 ``weight_decay`` included) with each framed matrix
    ``W`` updated in the coordinates ``R^T W R'`` (see the module docstring).

    ``frames`` maps parameters to ``(R, R')``; the other parameters get plain Adam. The Adam
    arithmetic is ``torch.optim.Adam``'s own, run on the unframed parameters and, for each framed
    matrix, on a zero stand-in whose gradient is the rotated one: the stand-in's update ``dW'``
    is mapped back as ``dW = R dW' R'^T``. ``fused`` picks torch's fused kernel for it (else its
    default loop). With ``R = R' = I`` the steps are those of ``torch.optim.Adam(...,
    foreach=False)`` bit for bit (unfused) and to float rounding (fused).
    """

    def __init__(
        self,
        params: Iterable[nn.Parameter],
        frames: Mapping[torch.Tensor, tuple[torch.Tensor, torch.Tensor]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        fused: bool = False,
    ):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        owned = {p for group in self.param_groups for p in group["params"]}
        for param, (left, right) in frames.items():
            if param not in owned:
                raise ValueError("every framed matrix must be one of the optimizer's parameters")
            if left.shape != (param.shape[0],) * 2 or right.shape != (param.shape[1],) * 2:
                raise ValueError(
                    f"frame shapes {tuple(left.shape)}, {tuple(right.shape)} do not fit a "
                    f"matrix of shape {tuple(param.shape)}"
                )
            self.state[param]["left"], self.state[param]["right"] = left, right
            self.state[param]["stand_in"] = torch.zeros_like(param)
        self.adam = torch.optim.Adam(
            [
                dict(
                    group, params=[self.state[p]["stand_in"] if "left" in self.state[p] else p for p in group["params"]]
                )
                for group in self.param_groups
            ],
            **(dict(fused=True) if fused else dict(foreach=False)),
        )

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group, inner in zip(self.param_groups, self.adam.param_groups):
            inner.update({key: group[key] for key in ("lr", "betas", "eps", "weight_decay")})
            for param in group["params"]:
                state = self.state[param]
                if "left" not in state:
                    continue
                stand_in = state["stand_in"]
                stand_in.zero_()
                if param.grad is None:
                    stand_in.grad = None
                    continue
                grad = param.grad
                if group["weight_decay"]:  # L2 decay on W itself; the stand-in is 0, so Adam adds none
                    grad = grad.add(param, alpha=group["weight_decay"])
                stand_in.grad = state["left"].T @ grad @ state["right"]
        self.adam.step()
        for group in self.param_groups:
            for param in group["params"]:
                state = self.state[param]
                if "left" in state and state["stand_in"].grad is not None:
                    param.add_(state["left"] @ state["stand_in"] @ state["right"].T)
        return loss

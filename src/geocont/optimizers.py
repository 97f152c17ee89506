"""Adam in a random orthogonal frame per matrix: the control for "is Adam the symmetry breaker?".

Plain SGD is rotation-equivariant; Adam is not: its per-coordinate scaling singles out the standard basis, the
same one in every layer, so Adam alone may align the layers of a linear net. :class:`FrameAdam` runs Adam for
each matrix ``W`` ([out, in]) in the coordinates ``W' = R^T W R'``, with fixed orthogonal ``R`` ([out, out]) and
``R'`` ([in, in]) drawn independently for every layer: each layer has its own Adam axes, none of them shared.
Parameters without a frame (biases, embedding, head) get plain Adam. docs/design.md ("FrameAdam") gives the
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


def _closure_loss(closure) -> torch.Tensor | None:
    """The loss of an optimizer step's ``closure`` (evaluated with gradients on), or None without one."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


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
        loss = _closure_loss(closure)
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


#: Mixed into the seed of the residual stream's frame (:func:`residual_frame`), apart from the per-layer frames.
RESIDUAL_STREAM = 0x2E5D


def residual_frame(d_model: int, seed: int) -> torch.Tensor:
    """The fixed random orthonormal frame ``R`` ([d, d], float64) of a language model's residual stream, from ``seed``."""
    return random_orthogonal(d_model, np.random.default_rng([FRAME_STREAM, RESIDUAL_STREAM, seed]))


class ResidualFrameAdam(torch.optim.Optimizer):
    """Adam (or AdamW) whose moments for the residual stream's axis live in one fixed rotated frame ``R``.

    Every matrix that reads the stream (``readers``: its input axis, the second one, is the stream's) is optimised
    as ``P = W R``, every matrix that writes it (``writers``: its first axis) as ``P = R^T W``; the other parameters
    (RMSNorm gains, biases) as they are. ``P`` is the tensor the inner ``torch.optim`` optimizer updates (its
    gradient is ``g R`` or ``R^T g``); after each step ``W`` is set from it (``P R^T`` or ``R P``), so the weights
    never accumulate the rounding of a back-and-forth rotation. With ``R`` the identity every product is exact and
    the steps are the inner optimizer's bit for bit; with a random ``R`` Adam's per-coordinate normaliser no longer
    singles out the stream's standard basis (Elhage et al. 2023). ``inner`` is ``torch.optim.Adam`` or
    ``torch.optim.AdamW``; ``options`` go to it unchanged (``lr``, ``betas``, ``eps``, ``weight_decay``, ``fused``).
    """

    def __init__(
        self,
        params: Iterable[nn.Parameter],
        *,
        frame: torch.Tensor,
        readers: Sequence[nn.Parameter],
        writers: Sequence[nn.Parameter],
        inner: type[torch.optim.Optimizer] = torch.optim.Adam,
        **options,
    ):
        params = list(params)
        super().__init__(params, dict(lr=options.get("lr", 1e-3)))
        owned = {id(p) for p in params}
        side = frame.shape[0]
        self.sides: dict[int, str] = {}
        for matrices, name, axis in ((readers, "reader", 1), (writers, "writer", 0)):
            for matrix in matrices:
                if id(matrix) not in owned:
                    raise ValueError(f"every {name} must be one of the optimizer's parameters")
                if matrix.dim() != 2 or matrix.shape[axis] != side:
                    raise ValueError(
                        f"a {name}'s axis {axis} must be the residual stream's ({side}); got shape {tuple(matrix.shape)}"
                    )
                self.sides[id(matrix)] = name
        self.frame = frame.to(params[0])
        self.shadows: dict[int, torch.Tensor] = {
            id(p): self._into_frame(p.detach(), self.sides[id(p)]).clone() for p in params if id(p) in self.sides
        }
        self.inner = inner([self.shadows.get(id(p), p) for p in params], **options)

    def _into_frame(self, tensor: torch.Tensor, side: str) -> torch.Tensor:
        return tensor @ self.frame if side == "reader" else self.frame.T @ tensor

    def _out_of_frame(self, tensor: torch.Tensor, side: str) -> torch.Tensor:
        return tensor @ self.frame.T if side == "reader" else self.frame @ tensor

    @torch.no_grad()
    def step(self, closure=None):
        loss = _closure_loss(closure)
        self.inner.param_groups[0]["lr"] = self.param_groups[0]["lr"]
        for param in self.param_groups[0]["params"]:
            shadow = self.shadows.get(id(param))
            if shadow is not None:
                shadow.grad = None if param.grad is None else self._into_frame(param.grad, self.sides[id(param)])
        self.inner.step()
        for param in self.param_groups[0]["params"]:
            shadow = self.shadows.get(id(param))
            if shadow is not None:
                param.copy_(self._out_of_frame(shadow, self.sides[id(param)]))
        return loss

"""The residual MLP of the paper's toy experiments, with its ablation conditions.

Architecture (our choice where the paper is silent)::

    h_0     = embed(x)                         Linear(784 -> width)
    h_{l+1} = h_l + act(W_l norm(h_l) + b_l)   residual block, l = 0 .. depth-1
            = act(W_l norm(h_l) + b_l)         without the residual (NoRes)
    logits  = head(h_depth)                    Linear(width -> classes)

``norm`` is the identity except in the normalisation conditions, where it is a pre-norm
LayerNorm or RMSNorm *without* learnable gain or bias (an element-wise gain would break
the rotational symmetry by itself): LayerNorm centres and rescales, so it singles out the
all-ones direction and breaks SO(d) symmetry; RMSNorm only rescales and is
rotation-equivariant.

The ``depth`` hidden matrices ``W_l`` ([width, width]) are the ones whose adjacent-layer
continuity is measured.

Initialisation (our choice; the paper does not give its own). Every condition starts
with a forward signal of stable scale, by one rule rather than per-condition tuning:

* hidden ``W_l ~ N(0, (init_scale * gain)^2 / fan_in)`` with ``gain = 1/sqrt(depth)``
  for residual blocks (the stream's variance then grows by at most ``(1 + 1/depth)^depth
  <= e`` through the network; with gain 1 it would grow ~650x for ReLU and ~65,000x for
  the linear residual net at depth 16, and SGD diverges in a few steps) and
  ``gain = sqrt(2)`` (He) for blocks without a residual;
* embedding and head ``N(0, 1 / fan_in)``; all biases zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


class RadialActivation(nn.Module):
    """sigma_rad(x) = x * tanh(||x||), the norm taken over the hidden vector.

    Nonlinear but rotation-equivariant: sigma(R x) = R sigma(x) for every orthogonal R,
    so it keeps the SO(d) symmetry that element-wise activations break.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.tanh(torch.linalg.vector_norm(x, dim=-1, keepdim=True))


class ScaledRadialActivation(nn.Module):
    """sigma(x) = x * tanh(||x|| / tau): sigma_rad at the scale of the pre-activations it meets.

    At our initialisation the hidden pre-activations on standardised MNIST have norms of
    about 4 to 6, where ``tanh(||x||)`` is 1 to within 1% (for 99.95% of them in a 16x256
    net at seed 0): sigma_rad is then the identity in practice.
    Here ``tau`` is the median pre-activation norm of the first batch this layer sees (in
    :func:`geocont.training.train_mlp`, the first training batch at initialisation; the
    lower median for an even batch), so the median pre-activation is shrunk by the factor
    tanh(1) = 0.76 and only those above 2.65 tau pass within 1%. ``tau`` is a buffer, set
    once and never trained. The activation stays rotation-equivariant: sigma(R x) = R sigma(x).
    """

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("tau", torch.tensor(float("nan")))
        self.calibrated = False  # a flag, so that the forward pass never reads the buffer back

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        norms = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        if not self.calibrated:
            with torch.no_grad():
                self.tau.copy_(norms.detach().flatten().median())
            self.calibrated = True
        return x * torch.tanh(norms / self.tau)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.calibrated = bool(torch.isfinite(self.tau))


ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "none": nn.Identity,
    "radial": RadialActivation,
    "radial-tau": ScaledRadialActivation,
}


NORMS: tuple[str, ...] = ("none", "layernorm", "rmsnorm")


def make_norm(name: str, width: int) -> nn.Module:
    """The pre-norm of a block, without learnable gain or bias (see the module docstring)."""
    if name == "layernorm":
        return nn.LayerNorm(width, elementwise_affine=False)
    if name == "rmsnorm":
        return nn.RMSNorm(width, elementwise_affine=False)
    if name == "none":
        return nn.Identity()
    raise ValueError(f"unknown norm {name!r}; valid choices: {', '.join(NORMS)}")


@dataclass(frozen=True)
class BlockSpec:
    """What one hidden block contains."""

    residual: bool
    activation: str
    description: str
    norm: str = "none"


#: The named ablation conditions; the chapters refer to these names only.
CONDITIONS: dict[str, BlockSpec] = {
    "res-relu": BlockSpec(True, "relu", "residual + ReLU (baseline)"),
    "res-gelu": BlockSpec(True, "gelu", "residual + GELU"),
    "res-silu": BlockSpec(True, "silu", "residual + SiLU"),
    "nores-relu": BlockSpec(False, "relu", "NoRes: ReLU, residual removed"),
    "res-none": BlockSpec(True, "none", "Res+None: linear residual network"),
    "res-radial": BlockSpec(True, "radial", "Res+Radial: x tanh(||x||), rotation-equivariant"),
    "res-radial-tau": BlockSpec(True, "radial-tau",
                                "Res+Radial(tau): x tanh(||x||/tau), tau = median initial pre-activation norm"),
    "res-ln": BlockSpec(True, "none", "pre-LayerNorm, no activation", norm="layernorm"),
    "res-ln-relu": BlockSpec(True, "relu", "pre-LayerNorm + ReLU", norm="layernorm"),
    "res-rms": BlockSpec(True, "none", "pre-RMSNorm (no centring), no activation", norm="rmsnorm"),
    "res-rms-relu": BlockSpec(True, "relu", "pre-RMSNorm + ReLU", norm="rmsnorm"),
}


def block_spec(condition: str) -> BlockSpec:
    """The :class:`BlockSpec` of a condition name, or a ValueError listing the valid names."""
    try:
        return CONDITIONS[condition]
    except KeyError:
        raise ValueError(
            f"unknown condition {condition!r}; valid choices: {', '.join(CONDITIONS)}"
        ) from None


class ResidualBlock(nn.Module):
    """``h + act(W norm(h) + b)``, or ``act(W norm(h) + b)`` when ``residual`` is False."""

    def __init__(self, width: int, spec: BlockSpec):
        super().__init__()
        self.norm = make_norm(spec.norm, width)
        self.linear = nn.Linear(width, width)
        self.activation = ACTIVATIONS[spec.activation]()
        self.residual = spec.residual

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        out = self.activation(self.linear(self.norm(h)))
        return h + out if self.residual else out


class ResidualMLP(nn.Module):
    """Embedding, ``depth`` hidden blocks of equal ``width``, and a linear classifier head."""

    def __init__(
        self,
        condition: str,
        *,
        in_features: int = 784,
        width: int = 256,
        depth: int = 16,
        n_classes: int = 10,
        init_scale: float = 1.0,
    ):
        super().__init__()
        spec = block_spec(condition)
        if depth < 2 or width < 2:
            raise ValueError(f"depth and width must be >= 2 (got depth={depth}, width={width})")
        if not init_scale > 0:
            raise ValueError(f"init_scale must be positive, got {init_scale}")
        self.condition = condition
        self.embed = nn.Linear(in_features, width)
        self.blocks = nn.ModuleList(ResidualBlock(width, spec) for _ in range(depth))
        self.head = nn.Linear(width, n_classes)
        self.reset_parameters(init_scale)

    def hidden_gain(self) -> float:
        """The hidden layers' init gain: ``1/sqrt(depth)`` with residuals, ``sqrt(2)`` without."""
        return len(self.blocks) ** -0.5 if self.blocks[0].residual else 2**0.5

    @torch.no_grad()
    def reset_parameters(self, init_scale: float) -> None:
        """Hidden W ~ N(0, (init_scale * gain)^2 / fan_in); embed/head N(0, 1/fan_in); zero biases."""
        for module in (self.embed, self.head):
            nn.init.normal_(module.weight, std=module.in_features**-0.5)
            nn.init.zeros_(module.bias)
        std = init_scale * self.hidden_gain() / self.blocks[0].linear.in_features**0.5
        for block in self.blocks:
            nn.init.normal_(block.linear.weight, std=std)
            nn.init.zeros_(block.linear.bias)

    def hidden_weights(self) -> list[nn.Parameter]:
        """The ``depth`` square hidden matrices, in order; the ones continuity is measured on."""
        return [block.linear.weight for block in self.blocks]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x.flatten(1))
        for block in self.blocks:
            h = block(h)
        return self.head(h)


@torch.no_grad()
def preactivation_norms(model: ResidualMLP, x: torch.Tensor) -> torch.Tensor:
    """``||W_l h_l + b_l||`` of every block for every example: ``[depth, batch]``.

    Tells how nonlinear a norm-based activation really is: sigma_rad(z) = z tanh(||z||)
    is within 1% of the identity wherever ``||z|| > 2.65``.
    """
    h = model.embed(x.flatten(1))
    norms = []
    for block in model.blocks:
        z = block.linear(block.norm(h))
        norms.append(torch.linalg.vector_norm(z, dim=-1))
        h = h + block.activation(z) if block.residual else block.activation(z)
    return torch.stack(norms)

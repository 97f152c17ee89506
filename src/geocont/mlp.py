"""The residual MLP of the paper's toy experiments, with its ablation conditions.

Architecture (our choice where the paper is silent)::

    h_0     = embed(x)                         Linear(784 -> width)
    h_{l+1} = h_l + act(W_l norm(h_l) + b_l)   residual block, l = 0 .. depth-1
            = act(W_l norm(h_l) + b_l)         without the residual (NoRes)
    logits  = head(h_depth)                    Linear(width -> classes)

``norm`` is the identity, or in the normalisation conditions a pre-norm LayerNorm or RMSNorm without learnable
gain or bias. The ``depth`` hidden matrices ``W_l`` ([width, width]) are the ones whose adjacent-layer continuity
is measured. Every condition starts with a forward signal of stable scale, by one initialisation rule.
docs/design.md ("The residual MLP") gives the norms' symmetries and the initialisation rule.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
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


#: The per-step weight of the newest batch in the running statistics of :class:`BatchCentredReLU` (mu) and
#: :class:`TrackingRadialActivation` (tau): ``stat <- (1 - m) stat + m batch_stat``. A memory of about
#: ``1 / m = 100`` steps, short against a run of thousands of steps, long against the noise of one batch; Adam at
#: lr 1e-3 moves the weights, hence these statistics, by little in 100 steps.
RUNNING_MOMENTUM = 0.01


class BatchCentredReLU(nn.Module):
    """relu(z) minus its batch mean, the mean inside the gradient: a ReLU whose output has mean 0 in training.

    The control for the reading "v1 of each layer follows the mean of its (non-negative) input". In training
    mode the output is ``relu(z) - mean_batch(relu(z))`` and the gradient flows through the mean, as batch
    normalisation's centring does (without its scaling). In eval mode, in the probes and in every evaluation,
    the output is ``relu(z) - mu``, with ``mu`` a per-unit running mean of the training batches' means
    (momentum :data:`RUNNING_MOMENTUM`; set by the first training batch), so that an example's output there does
    not depend on the rest of its batch; before the first training batch (the snapshot at step 0) eval mode
    subtracts the batch's own mean and keeps nothing. A running mean outside the gradient could not serve: the
    optimizer grows the component it removes. docs/design.md ("The residual MLP") gives the design.
    """

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mu", torch.empty(0))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        out = torch.relu(z)
        if not self.training:
            return out - self.mu if self.mu.numel() else out - out.flatten(0, -2).mean(0)
        batch_mean = out.flatten(0, -2).mean(0)
        with torch.no_grad():
            # float32 at least: under bf16 autocast the running mean keeps full precision
            observed = batch_mean.detach().to(torch.promote_types(batch_mean.dtype, torch.float32))
            if self.mu.numel():
                self.mu.lerp_(observed.to(self.mu), RUNNING_MOMENTUM)
            else:
                self.mu = observed.clone()
        return out - batch_mean

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        key = prefix + "mu"
        if key in state_dict:  # the buffer's size is set by the first batch: take the saved one's
            self.mu = torch.empty_like(state_dict[key])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


#: The init gain of blocks with a centred ReLU and no residual: ``1 / sqrt(E[(relu(z) - E relu(z))^2])``
#: for ``z ~ N(0, 1)``, i.e. ``1 / sqrt(1/2 - 1/(2 pi))``; He's sqrt(2) is the same rule for the ReLU.
CENTRED_RELU_GAIN = math.sqrt(2 * math.pi / (math.pi - 1))


class TrackingRadialActivation(nn.Module):
    """sigma(x) = x * tanh(||x|| / tau), tau following the median pre-activation norm.

    :class:`ScaledRadialActivation` fixes tau at initialisation, but the hidden pre-activation
    norms grow during training, so ``res-radial-tau`` may end in its linear regime
    (``tanh(||x|| / tau) ~ 1``: the identity, a linear residual net again) and test nothing
    about a rotation-equivariant *nonlinearity*. Here tau is calibrated the same way (the
    median norm of the first batch, the lower median for an even batch) and then, in training
    mode, follows each batch's median norm as an exponential moving average with momentum
    :data:`RUNNING_MOMENTUM`, so the median pre-activation keeps being shrunk by about
    tanh(1) = 0.76 throughout training. tau is a buffer without gradient; each forward pass uses
    the tau before its batch's update; in eval mode tau is read, never updated. The activation
    stays rotation-equivariant: sigma(R x) = R sigma(x).
    """

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("tau", torch.tensor(float("nan")))
        self.calibrated = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        norms = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        if not self.calibrated:
            with torch.no_grad():
                self.tau.copy_(norms.detach().flatten().median())
            self.calibrated = True
        tau = self.tau.clone()  # the value before this batch's update (autograd saves it for backward)
        if self.training:
            with torch.no_grad():
                self.tau.lerp_(norms.detach().flatten().median().to(self.tau), RUNNING_MOMENTUM)
        return x * torch.tanh(norms / tau)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.calibrated = bool(torch.isfinite(self.tau))


#: The negative slopes of the Leaky-ReLU dose (``res-leaky-<slope>``: residual + LeakyReLU),
#: with the condition that gives each: slope 0 is ReLU (``res-relu``) and slope 1 the identity
#: (``res-none``, the linear residual net), so a chapter reuses those runs for the dose's ends.
LEAKY_SLOPES: dict[float, str] = {
    0.0: "res-relu",
    0.5: "res-leaky-0.5",
    0.9: "res-leaky-0.9",
    0.99: "res-leaky-0.99",
    1.0: "res-none",
}


#: activation name -> a constructor without arguments
ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "none": nn.Identity,
    "radial": RadialActivation,
    "radial-tau": ScaledRadialActivation,
    "radial-track": TrackingRadialActivation,
    "relu-batch-centred": BatchCentredReLU,
    **{f"leaky-{slope:g}": functools.partial(nn.LeakyReLU, slope) for slope in LEAKY_SLOPES if 0 < slope < 1},
}

#: The norm-based (rotation-equivariant) activations, x * tanh(||x|| / tau) (tau = 1 for ``radial``;
#: :func:`radial_tau`).
RADIAL_ACTIVATIONS = ("radial", "radial-tau", "radial-track")


NORMS: tuple[str, ...] = ("none", "layernorm", "rmsnorm")


def make_norm(name: str, width: int) -> nn.Module:
    """The pre-norm of a block, without learnable gain or bias (docs/design.md, "The residual MLP")."""
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
    "res-radial-tau": BlockSpec(
        True, "radial-tau", "Res+Radial(tau): x tanh(||x||/tau), tau = median initial pre-activation norm"
    ),
    "res-radial-track": BlockSpec(
        True, "radial-track", "Res+Radial(tracked tau): x tanh(||x||/tau), tau a running median pre-activation norm"
    ),
    **{
        name: BlockSpec(True, f"leaky-{slope:g}", f"residual + LeakyReLU (negative slope {slope:g})")
        for slope, name in LEAKY_SLOPES.items()
        if 0 < slope < 1
    },
    "res-relu-batch-centred": BlockSpec(True, "relu-batch-centred", "residual + centred ReLU (relu(z) - batch mean)"),
    "nores-relu-batch-centred": BlockSpec(
        False, "relu-batch-centred", "NoRes: centred ReLU (relu(z) - batch mean), residual removed"
    ),
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
        raise ValueError(f"unknown condition {condition!r}; valid choices: {', '.join(CONDITIONS)}") from None


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
        """The hidden layers' init gain: ``1/sqrt(depth)`` with residuals, ``sqrt(2)`` without
        (:data:`CENTRED_RELU_GAIN` for the centred ReLU without residual)."""
        if self.blocks[0].residual:
            return len(self.blocks) ** -0.5
        return CENTRED_RELU_GAIN if isinstance(self.blocks[0].activation, BatchCentredReLU) else 2**0.5

    @torch.no_grad()
    def reset_parameters(self, init_scale: float) -> None:
        """Hidden W ~ N(0, (init_scale * gain)^2 / fan_in); embed/head N(0, 1/fan_in); zero biases."""
        for module in (self.embed, self.head):
            nn.init.normal_(module.weight, std=module.in_features**-0.5)
            nn.init.zeros_(module.bias)
        std = init_scale * self.hidden_gain() / self.blocks[0].linear.in_features ** 0.5
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


@dataclass(frozen=True)
class ForwardTrace:
    """What one forward pass of a :class:`ResidualMLP` met, block by block (:func:`forward_trace`)."""

    #: per block ``l``, the vector ``W_l`` multiplies: ``norm(h_l)`` (``h_l`` in norm-free blocks), ``[batch, width]``
    inputs: list[torch.Tensor]
    #: ``||W_l norm(h_l) + b_l||`` of every block for every example, ``[depth, batch]``
    preactivation_norms: torch.Tensor
    #: the head's output, ``[batch, classes]``
    logits: torch.Tensor


@torch.no_grad()
def forward_trace(model: ResidualMLP, x: torch.Tensor) -> ForwardTrace:
    """The forward pass of ``model`` on ``x``, keeping each block's input and pre-activation norm.

    Runs in the model's current mode: in training mode the running statistics of
    :class:`BatchCentredReLU` and :class:`TrackingRadialActivation` move, and a first call calibrates
    tau or mu; callers that must not change the model put it in eval mode first.
    """
    h = model.embed(x.flatten(1))
    inputs, norms = [], []
    for block in model.blocks:
        u = block.norm(h)
        z = block.linear(u)
        inputs.append(u)
        norms.append(torch.linalg.vector_norm(z, dim=-1))
        h = h + block.activation(z) if block.residual else block.activation(z)
    return ForwardTrace(inputs, torch.stack(norms), model.head(h))


@torch.no_grad()
def preactivation_norms(model: ResidualMLP, x: torch.Tensor) -> torch.Tensor:
    """``||W_l h_l + b_l||`` of every block for every example: ``[depth, batch]``.

    Tells how nonlinear a norm-based activation really is: sigma_rad(z) = z tanh(||z||)
    is within 1% of the identity wherever ``||z|| > 2.65``.
    """
    return forward_trace(model, x).preactivation_norms


#: A radial activation z tanh(||z|| / tau) is "near linear" at z where tanh(||z|| / tau) >= this:
#: within 1% of the identity (||z|| >= 2.65 tau).
NEAR_LINEAR = 0.99


def radial_tau(activation: nn.Module) -> torch.Tensor | None:
    """The tau of a norm-based activation (1 for :class:`RadialActivation`); None for any other."""
    if isinstance(activation, RadialActivation):
        return torch.tensor(1.0)
    if isinstance(activation, (ScaledRadialActivation, TrackingRadialActivation)):
        return activation.tau.detach()
    return None


def near_linear_share(model: ResidualMLP, norms: torch.Tensor) -> torch.Tensor | None:
    """Per block, the share of examples at which its radial activation is within 1% of the identity
    (``tanh(||z|| / tau) >= NEAR_LINEAR``), from the ``[depth, batch]`` pre-activation norms
    (:func:`preactivation_norms`): ``[depth]``, or None where the blocks' activation is not radial."""
    taus = [radial_tau(block.activation) for block in model.blocks]
    if any(tau is None for tau in taus):
        return None
    taus = torch.stack([tau.to(norms) for tau in taus])
    return (torch.tanh(norms / taus[:, None]) >= NEAR_LINEAR).to(norms.dtype).mean(dim=1)

"""Run configurations: plain, frozen, validated data. A config is the cache key of a run.

:class:`MLPRunConfig` (one residual-MLP run), :class:`LMRunConfig` (one language-model run, with
its :class:`TransformerShape`) and the :class:`OptimizerConfig` both use.

Validation rejects at construction what would fail later or silently change nothing:
non-finite numbers, booleans or non-integers (``2.5``, ``2.0``) where counts are meant,
strings where numbers are meant, and options the chosen optimizer ignores. Numbers are
normalised (integer fields to ``int``, real fields to ``float``) so that equal runs get
equal cache keys (``init_scale=1`` and ``init_scale=1.0`` are one run).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

from .dataset_names import check_dataset_name
from .mlp import block_spec
from .text import check_corpus_name

OPTIMIZERS = ("adam", "sgd", "adam-rotated", "adamw")
LR_SCHEDULES = ("constant", "cosine", "step")
DEVICES = ("cpu", "cuda", "auto")
#: Arithmetic of a run's forward and backward pass. ``bf16-autocast``: matrix products in
#: bfloat16 under ``torch.autocast``; weights, gradients, optimizer state and every recorded
#: metric stay float32 (:func:`geocont.training.precision_context`).
PRECISIONS = ("fp32", "bf16-autocast")


def check_precision(value: Any) -> str:
    """``value`` if it is one of :data:`PRECISIONS`; else a ValueError naming them."""
    if value not in PRECISIONS:
        raise ValueError(f"unknown precision {value!r}; valid choices: {', '.join(PRECISIONS)}")
    return value


def check_flag(name: str, value: Any) -> bool:
    """``value`` if it is a bool; else a ValueError."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


#: The most optimizer steps one run may take: 500 times the paper's longest run (20,000 steps), weeks of a GPU and
#: decades of this project's 2-core machine. A count past it is a typo, refused before any work.
MAX_STEPS = 10_000_000


def check_steps(value: Any, name: str = "steps") -> int:
    """A run's step count: an integer from 1 to :data:`MAX_STEPS`; else a ValueError naming both bounds."""
    steps = check_integer(name, value)
    if steps > MAX_STEPS:
        raise ValueError(
            f"{name} must be at most {MAX_STEPS:,} (500 times the paper's longest run), got {steps:,}; "
            "a run that long would not finish"
        )
    return steps


def check_integer(name: str, value: Any, minimum: int = 1) -> int:
    """``value`` as an ``int`` if it is an integer (not a bool, not a float) ``>= minimum``; else a ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_number(
    name: str,
    value: Any,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """``value`` as a ``float`` if it is a finite real number (not a bool or a string) in the
    interval from ``low`` to ``high`` (``*_open``: that end excluded); else a ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    value = float(value)
    below = value <= low if low_open else value < low
    above = value >= high if high_open else value > high
    if not math.isfinite(value) or below or above:
        opening = "(" if low_open or low == -math.inf else "["
        closing = ")" if high_open or high == math.inf else "]"
        interval = f"{opening}{low:g}, {high:g}{closing}"
        raise ValueError(f"{name} must be a finite number in {interval}, got {value!r}")
    return value


def check_positive(name: str, value: Any, integer: bool = True) -> int | float:
    """``value`` if it is a positive integer (or a positive finite number, ``integer=False``,
    returned as a float); else a ValueError."""
    if integer:
        return check_integer(name, value, minimum=1)
    return check_number(name, value, low=0.0, low_open=True)


def normalise(config: Any, integers: tuple[str, ...] = (), reals: dict[str, dict[str, Any]] | None = None) -> None:
    """Validate fields of a frozen dataclass and store them normalised (``int`` / ``float``).

    ``integers``: fields that must be positive integers; ``reals``: ``{field: keyword
    arguments of check_number}``.
    """
    for field in integers:
        object.__setattr__(config, field, check_integer(field, getattr(config, field)))
    for field, bounds in (reals or {}).items():
        object.__setattr__(config, field, check_number(field, getattr(config, field), **bounds))


@dataclass(frozen=True)
class OptimizerConfig:
    """Adam (with any betas, beta2 = 0 included), SGD (with optional momentum),
    ``adam-rotated``: Adam with each hidden matrix in its own random orthogonal frame
    (:class:`geocont.optimizers.FrameAdam`; the same options as Adam), or ``adamw``: Adam with
    decoupled weight decay (``torch.optim.AdamW``; ``weight_decay`` is then the decoupled
    coefficient, applied as ``W <- W - lr * weight_decay * W`` each step)."""

    name: str = "adam"
    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    momentum: float = 0.0
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        if self.name not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.name!r}; valid choices: {', '.join(OPTIMIZERS)}")
        unit = dict(low=0.0, high=1.0, high_open=True)
        normalise(
            self,
            reals={
                "lr": dict(low=0.0, low_open=True),
                "beta1": unit,
                "beta2": unit,
                "eps": dict(low=0.0, low_open=True),
                "momentum": unit,
                "weight_decay": dict(low=0.0),
            },
        )
        if self.name != "sgd" and self.momentum != 0.0:
            raise ValueError(f"momentum={self.momentum:g} is an SGD option that Adam ignores; set beta1 instead")
        if self.name == "sgd":
            ignored = [
                f"{f}={getattr(self, f):g}"
                for f in ("beta1", "beta2", "eps")
                if getattr(self, f) != getattr(OptimizerConfig, f)
            ]
            if ignored:
                raise ValueError(f"{', '.join(ignored)}: Adam option(s) that SGD ignores; leave them at their defaults")

    @property
    def label(self) -> str:
        """Short human name, e.g. ``adam``, ``adam(beta2=0)``, ``sgd(momentum=0.9)``."""
        if self.name != "sgd":
            changed = [
                f"{f}={getattr(self, f):g}"
                for f in ("beta1", "beta2")
                if getattr(self, f) != getattr(OptimizerConfig, f)
            ]
            if self.name == "adamw":
                changed.append(f"weight_decay={self.weight_decay:g}")
        else:
            changed = [f"momentum={self.momentum:g}"] if self.momentum else []
        return f"{self.name}({', '.join(changed)})" if changed else self.name


class RunConfig:
    """What every run configuration offers: its identity as plain data, and validated copies."""

    #: Fields added after runs were first cached, with the default that reproduces the runs
    #: before them: at that default they are left out of :meth:`to_dict`, so that the cache
    #: keys of earlier runs stay valid.
    ADDED_FIELDS: ClassVar[dict[str, Any]] = {}

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (JSON-ready): the run's identity in the cache."""
        identity = dataclasses.asdict(self)
        for name, default in self.ADDED_FIELDS.items():
            if identity[name] == default:
                del identity[name]
        return identity

    def replace(self, **changes: Any):
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class MLPRunConfig(RunConfig):
    """Everything that determines one MLP training run (and so its cache key)."""

    ADDED_FIELDS = {
        "steps": None,
        "n_late_snapshots": 0,
        "snapshot_steps": (),
        "lr_schedule": "constant",
        "grad_clip": None,
        "trace_every": 0,
        "precision": "fp32",
        "fused_optimizer": False,
        "lr_step_factor": None,
        "lr_switch_step": None,
        "record_balance": False,
    }

    condition: str = "res-relu"
    seed: int = 0
    dataset: str = "mnist-subset"
    max_train: int | None = None
    depth: int = 16
    width: int = 256
    init_scale: float = 1.0
    optimizer: OptimizerConfig = OptimizerConfig()
    batch_size: int = 128
    epochs: int = 30
    #: total optimizer steps; None: ``epochs`` passes over the training set. Set, it overrides
    #: ``epochs``, so that runs on datasets of different sizes take the same number of steps.
    steps: int | None = None
    n_snapshots: int = 12  # log-spaced snapshots (step 0 and the last step included)
    #: evenly spaced snapshots added to the log-spaced ones (they resolve the late run)
    n_late_snapshots: int = 0
    #: steps snapshotted besides the schedule (an early horizon read off a long run)
    snapshot_steps: tuple[int, ...] = ()
    n_directions: int = 8  # singular directions compared; 1 = leading pair only (no σ²-alignment; cheap)
    device: str = "cpu"
    #: ``constant``; ``cosine``: the learning rate decays from ``optimizer.lr`` to zero at the last step;
    #: ``step``: ``optimizer.lr`` for the first half of the run (or up to ``lr_switch_step``), then
    #: ``optimizer.lr * lr_step_factor`` (:func:`geocont.training.step_factor`)
    lr_schedule: str = "constant"
    #: clip the global gradient norm (all parameters) to this value before each update; None: no clipping
    grad_clip: float | None = None
    #: every this many steps, record the dense trace (``trace_loss``, ``trace_weight_cos``; see
    #: :func:`geocont.training.train_mlp`); 0: no trace
    trace_every: int = 0
    #: one of :data:`PRECISIONS`
    precision: str = "fp32"
    #: the optimizer's update as one fused kernel where torch has it (:func:`geocont.training.make_optimizer`);
    #: False: torch's default loop, the runs cached before fusing. Part of the identity, because the
    #: two differ by float rounding, which a long run amplifies to a seed-like difference.
    fused_optimizer: bool = True
    #: the ``step`` schedule's multiplier of the learning rate in the second half of the run (required
    #: there, > 0; e.g. 0.1 for "lr 1e-3 then x0.1"); None for every other schedule
    lr_step_factor: float | None = None
    #: the ``step`` schedule's switch: the updates after steps ``0 .. lr_switch_step - 1`` use ``optimizer.lr``,
    #: the later ones ``optimizer.lr * lr_step_factor``; None: half the run
    lr_switch_step: int | None = None
    #: record the balances the symmetries conserve (:mod:`geocont.balance`) at every snapshot
    record_balance: bool = False

    def __post_init__(self) -> None:
        block_spec(self.condition)  # raises with the valid names
        check_dataset_name(self.dataset)
        if not isinstance(self.optimizer, OptimizerConfig):
            raise TypeError("optimizer must be an OptimizerConfig")
        self._normalise_counts()
        self._normalise_snapshot_steps()
        if self.depth < 2:
            raise ValueError(f"depth must be >= 2 to have adjacent layers, got {self.depth}")
        if self.n_directions > self.width:
            raise ValueError(f"n_directions ({self.n_directions}) cannot exceed width ({self.width})")
        if self.device not in DEVICES:
            raise ValueError(f"unknown device {self.device!r}; valid choices: {', '.join(DEVICES)}")
        self._check_lr_schedule()
        check_flag("record_balance", self.record_balance)
        if self.grad_clip is not None:
            object.__setattr__(self, "grad_clip", check_number("grad_clip", self.grad_clip, low=0.0, low_open=True))
        object.__setattr__(self, "trace_every", check_integer("trace_every", self.trace_every, minimum=0))
        check_precision(self.precision)
        check_flag("fused_optimizer", self.fused_optimizer)

    def _normalise_counts(self) -> None:
        """Validate the sizes, the seed and the step and snapshot counts, and store them as ``int``."""
        normalise(
            self,
            integers=("depth", "width", "batch_size", "epochs", "n_directions"),
            reals={"init_scale": dict(low=0.0, low_open=True)},
        )
        object.__setattr__(self, "seed", check_integer("seed", self.seed, minimum=0))
        object.__setattr__(self, "n_snapshots", check_integer("n_snapshots", self.n_snapshots, minimum=2))
        if self.max_train is not None:
            object.__setattr__(self, "max_train", check_integer("max_train", self.max_train))
        if self.steps is not None:
            object.__setattr__(self, "steps", check_steps(self.steps))
        object.__setattr__(
            self, "n_late_snapshots", check_integer("n_late_snapshots", self.n_late_snapshots, minimum=0)
        )

    def _normalise_snapshot_steps(self) -> None:
        """Store ``snapshot_steps`` as a sorted tuple of distinct steps, each within the run's steps."""
        if isinstance(self.snapshot_steps, (str, bytes)) or not hasattr(self.snapshot_steps, "__iter__"):
            raise ValueError(f"snapshot_steps must be a list of steps, got {self.snapshot_steps!r}")
        object.__setattr__(
            self,
            "snapshot_steps",
            tuple(sorted({check_integer("snapshot_steps", s, minimum=0) for s in self.snapshot_steps})),
        )
        if self.steps is not None and any(s > self.steps for s in self.snapshot_steps):
            raise ValueError(
                f"snapshot_steps {list(self.snapshot_steps)} must lie within the {self.steps} training steps"
            )

    def _check_lr_schedule(self) -> None:
        """Validate the schedule and its options: ``lr_step_factor`` (required) and ``lr_switch_step`` only
        for the ``step`` schedule."""
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"unknown lr_schedule {self.lr_schedule!r}; valid choices: {', '.join(LR_SCHEDULES)}")
        if self.lr_schedule == "step":
            if self.lr_step_factor is None:
                raise ValueError(
                    "lr_schedule='step' needs lr_step_factor (the learning rate's multiplier after half the run)"
                )
            object.__setattr__(
                self, "lr_step_factor", check_number("lr_step_factor", self.lr_step_factor, low=0.0, low_open=True)
            )
        elif self.lr_step_factor is not None or self.lr_switch_step is not None:
            raise ValueError(
                f"lr_step_factor and lr_switch_step apply only to lr_schedule='step' "
                f"(got lr_schedule={self.lr_schedule!r})"
            )
        if self.lr_switch_step is not None:
            object.__setattr__(self, "lr_switch_step", check_integer("lr_switch_step", self.lr_switch_step, minimum=1))


MLP_ACTIVATIONS = {"silu": "silu", "relu": "relu", "none": "linear"}


ATTENTIONS = ("softmax", "linear")


@dataclass(frozen=True)
class TransformerShape:
    """Size and ablation switches of a Llama-style model."""

    n_layers: int = 4
    d_model: int = 128
    n_heads: int = 4
    n_kv_heads: int = 4
    ffn_dim: int = 344
    vocab_size: int = 4096
    max_seq_len: int = 128
    mlp_activation: str = "silu"
    attention: str = "softmax"

    def __post_init__(self) -> None:
        if self.mlp_activation not in MLP_ACTIVATIONS:
            raise ValueError(
                f"unknown mlp_activation {self.mlp_activation!r}; valid choices: {', '.join(MLP_ACTIVATIONS)}"
            )
        if self.attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {self.attention!r}; valid choices: {', '.join(ATTENTIONS)}")
        for name in ("n_layers", "d_model", "n_heads", "n_kv_heads", "ffn_dim", "vocab_size", "max_seq_len"):
            check_positive(name, getattr(self, name))
        if self.n_layers < 2:
            raise ValueError(f"n_layers must be >= 2 to have adjacent layers, got {self.n_layers}")
        if self.d_model % self.n_heads or self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must divide by n_heads ({self.n_heads}), and n_heads by "
                f"n_kv_heads ({self.n_kv_heads})"
            )
        head_dim = self.d_model // self.n_heads
        if head_dim % 2:  # Llama's rotary position embedding turns pairs of coordinates of every head
            step = 2 * self.n_heads
            below, above = self.d_model // step * step, (self.d_model // step + 1) * step
            raise ValueError(
                f"d_model ({self.d_model}) / n_heads ({self.n_heads}) gives a head dimension of {head_dim}; "
                f"the rotary position embedding needs an even one: choose d_model a multiple of "
                f"2 x n_heads = {step}" + (f" (e.g. {below} or {above})" if below else f" (e.g. {above})")
            )

    @property
    def smallest_matrix_side(self) -> int:
        """The smallest dimension of any projection matrix (K and V have n_kv_heads heads)."""
        return min(self.d_model, self.n_kv_heads * (self.d_model // self.n_heads), self.ffn_dim)


#: Where a language model's Adam moments for the residual stream live: its standard basis, or a random frame.
RESIDUAL_FRAMES = ("standard", "rotated")

#: Whether a language model's RMSNorm gains are trained or frozen at 1.
NORM_GAINS = ("trained", "frozen")


@dataclass(frozen=True)
class LMRunConfig(RunConfig):
    """Everything that determines one language-model training run (its cache key)."""

    ADDED_FIELDS = {
        "n_late_snapshots": 0,
        "snapshot_steps": (),
        "precision": "fp32",
        "fused_optimizer": False,
        "residual_frame": "standard",
        "norm_gains": "trained",
        "record_channel": False,
    }

    shape: TransformerShape = TransformerShape()
    corpus: str = "kjv"
    seed: int = 0
    optimizer: OptimizerConfig = OptimizerConfig("adam", lr=1e-3)
    batch_size: int = 16
    steps: int = 600
    n_snapshots: int = 10
    n_directions: int = 4
    eval_windows: int = 64
    device: str = "cpu"
    #: evenly spaced snapshots added to the ``n_snapshots`` log-spaced ones (0: none;
    #: :func:`geocont.recorder.log_and_linear_steps`)
    n_late_snapshots: int = 0
    #: further snapshot steps (e.g. an earlier horizon that a longer run must show exactly)
    snapshot_steps: tuple[int, ...] = ()
    #: one of :data:`PRECISIONS`
    precision: str = "fp32"
    #: the optimizer's update as one fused kernel where torch has it (:func:`geocont.training.make_optimizer`);
    #: False: torch's default loop, the runs cached before fusing. Part of the identity, because the
    #: two differ by float rounding, which a long run amplifies to a seed-like difference.
    fused_optimizer: bool = True
    #: one of :data:`RESIDUAL_FRAMES`: ``rotated`` keeps Adam's moments for the residual stream's axis in a fixed
    #: random orthonormal frame (:class:`geocont.optimizers.ResidualFrameAdam`)
    residual_frame: str = "standard"
    #: one of :data:`NORM_GAINS`: ``frozen`` holds every RMSNorm gain at 1 (not trained)
    norm_gains: str = "trained"
    #: record the residual channel at every snapshot (:mod:`geocont.channel`)
    record_channel: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.shape, TransformerShape):
            raise TypeError(f"shape must be a TransformerShape, got {self.shape!r}")
        check_corpus_name(self.corpus)
        check_precision(self.precision)
        check_flag("fused_optimizer", self.fused_optimizer)
        check_flag("record_channel", self.record_channel)
        for name, choices in (("residual_frame", RESIDUAL_FRAMES), ("norm_gains", NORM_GAINS)):
            if getattr(self, name) not in choices:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}; valid choices: {', '.join(choices)}")
        if not isinstance(self.optimizer, OptimizerConfig):
            raise TypeError("optimizer must be an OptimizerConfig")
        if self.residual_frame == "rotated" and self.optimizer.name not in ("adam", "adamw"):
            raise ValueError(
                f"residual_frame 'rotated' rotates Adam's moments; optimizer {self.optimizer.name!r} has none"
            )
        if self.optimizer.name == "adam-rotated":
            raise ValueError("adam-rotated frames the MLP's hidden matrices; it is not defined for language-model runs")
        normalise(self, integers=("batch_size", "steps", "n_directions", "eval_windows"))
        object.__setattr__(self, "steps", check_steps(self.steps))
        object.__setattr__(self, "seed", check_integer("seed", self.seed, minimum=0))
        object.__setattr__(self, "n_snapshots", check_integer("n_snapshots", self.n_snapshots, minimum=2))
        if self.device not in DEVICES:
            raise ValueError(f"unknown device {self.device!r}; valid choices: {', '.join(DEVICES)}")
        object.__setattr__(
            self, "n_late_snapshots", check_integer("n_late_snapshots", self.n_late_snapshots, minimum=0)
        )
        smallest = self.shape.smallest_matrix_side
        if self.n_directions > smallest:
            raise ValueError(
                f"n_directions ({self.n_directions}) cannot exceed the smallest side of the model's "
                f"matrices ({smallest})"
            )
        if isinstance(self.snapshot_steps, (str, bytes)) or not hasattr(self.snapshot_steps, "__iter__"):
            raise ValueError(f"snapshot_steps must be a list of steps, got {self.snapshot_steps!r}")
        extra = tuple(sorted({check_integer("snapshot_steps", s, minimum=0) for s in self.snapshot_steps}))
        if any(s > self.steps for s in extra):
            raise ValueError(f"snapshot_steps {list(extra)} must lie within the {self.steps} training steps")
        object.__setattr__(self, "snapshot_steps", extra)

    def schedule(self) -> list[int]:
        """The recorder's snapshot steps (:func:`geocont.recorder.snapshot_schedule`)."""
        from .recorder import snapshot_schedule

        return snapshot_schedule(self.steps, self.n_snapshots, self.n_late_snapshots, self.snapshot_steps)

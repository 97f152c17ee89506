"""Run configurations: plain, frozen, validated data. A config is the cache key of a run.

:class:`MLPRunConfig` (one residual-MLP run), :class:`LMRunConfig` (one language-model run, with
its :class:`TransformerShape`) and the :class:`OptimizerConfig` both use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .data import check_dataset_name
from .mlp import block_spec
from .text import check_corpus_name

OPTIMIZERS = ("adam", "sgd")
DEVICES = ("cpu", "cuda", "auto")


def check_positive(name: str, value: Any, integer: bool = True) -> None:
    """Raise a ValueError unless ``value`` is a positive integer (or number, ``integer=False``)."""
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or value <= 0:
        raise ValueError(f"{name} must be a positive {'integer' if integer else 'number'}, got {value!r}")


@dataclass(frozen=True)
class OptimizerConfig:
    """Adam (with any betas, beta2 = 0 included) or SGD (with optional momentum)."""

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
        check_positive("lr", self.lr, integer=False)
        for field in ("beta1", "beta2", "momentum"):
            value = getattr(self, field)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{field} must be in [0, 1), got {value!r}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}")

    @property
    def label(self) -> str:
        """Short human name, e.g. ``adam``, ``adam(beta2=0)``, ``sgd(momentum=0.9)``."""
        if self.name == "adam":
            changed = [f"{f}={getattr(self, f):g}" for f in ("beta1", "beta2") if getattr(self, f) != getattr(OptimizerConfig, f)]
        else:
            changed = [f"momentum={self.momentum:g}"] if self.momentum else []
        return f"{self.name}({', '.join(changed)})" if changed else self.name


@dataclass(frozen=True)
class MLPRunConfig:
    """Everything that determines one MLP training run (and so its cache key)."""

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
    n_snapshots: int = 12
    n_directions: int = 8  # singular directions compared; 1 = leading pair only (no σ²-alignment; cheap)
    device: str = "cpu"

    def __post_init__(self) -> None:
        block_spec(self.condition)  # raises with the valid names
        check_dataset_name(self.dataset)
        for field in ("depth", "width", "batch_size", "epochs", "n_directions"):
            check_positive(field, getattr(self, field))
        if self.depth < 2:
            raise ValueError(f"depth must be >= 2 to have adjacent layers, got {self.depth}")
        if self.n_snapshots < 2:
            raise ValueError(f"n_snapshots must be >= 2, got {self.n_snapshots}")
        if self.n_directions > self.width:
            raise ValueError(f"n_directions ({self.n_directions}) cannot exceed width ({self.width})")
        check_positive("init_scale", self.init_scale, integer=False)
        if self.max_train is not None:
            check_positive("max_train", self.max_train)
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        if self.device not in DEVICES:
            raise ValueError(f"unknown device {self.device!r}; valid choices: {', '.join(DEVICES)}")
        if not isinstance(self.optimizer, OptimizerConfig):
            raise TypeError("optimizer must be an OptimizerConfig")

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (JSON-ready): the run's identity in the cache."""
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> "MLPRunConfig":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)



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
            raise ValueError(f"unknown mlp_activation {self.mlp_activation!r}; valid choices: {', '.join(MLP_ACTIVATIONS)}")
        if self.attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {self.attention!r}; valid choices: {', '.join(ATTENTIONS)}")
        for name in ("n_layers", "d_model", "n_heads", "n_kv_heads", "ffn_dim", "vocab_size", "max_seq_len"):
            check_positive(name, getattr(self, name))
        if self.n_layers < 2:
            raise ValueError(f"n_layers must be >= 2 to have adjacent layers, got {self.n_layers}")
        if self.d_model % self.n_heads or self.n_heads % self.n_kv_heads:
            raise ValueError("d_model must divide by n_heads, and n_heads by n_kv_heads")


@dataclass(frozen=True)
class LMRunConfig:
    """Everything that determines one language-model training run (its cache key)."""

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

    def __post_init__(self) -> None:
        check_corpus_name(self.corpus)
        for name in ("batch_size", "steps", "n_directions", "eval_windows"):
            check_positive(name, getattr(self, name))
        if self.n_snapshots < 2:
            raise ValueError(f"n_snapshots must be >= 2, got {self.n_snapshots}")
        if self.device not in DEVICES:
            raise ValueError(f"unknown device {self.device!r}; valid choices: {', '.join(DEVICES)}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> "LMRunConfig":
        return dataclasses.replace(self, **changes)

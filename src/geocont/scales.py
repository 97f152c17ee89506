"""The three named scales of every chapter, and per-parameter overrides.

* ``smoke``: what nbval and CI run; about a minute per chapter on 2 CPU cores.
* ``cpu``: what the rendered book shows; at most about ten minutes per chapter on
  2 CPU cores, with at least three seeds.
* ``paper``: the paper's settings (full MNIST, 16 x 256 MLP); meant for a GPU and a network.

A chapter calls ``<chapter>_settings(scale, **overrides)``; overrides that are ``None``
are ignored (papermill's defaults), unknown names and bad values raise before any work.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .config import MLPRunConfig, OptimizerConfig
from .transformer import TransformerShape

if TYPE_CHECKING:  # lm imports transformers; load it only when a transformer chapter runs
    from .lm import LMRunConfig
from .mlp import block_spec

SCALES: tuple[str, ...] = ("smoke", "cpu", "paper")


def check_scale(scale: str) -> None:
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; valid choices: {', '.join(SCALES)}")


def _apply_overrides(preset: dict[str, Any], overrides: dict[str, Any], valid: set[str]) -> tuple[dict, tuple[int, ...]]:
    """The preset with the non-None overrides applied, and its seeds parsed.

    Unknown override names raise a ValueError listing ``valid``. ``seeds`` may be a count
    n (seeds 0..n-1) or a list of distinct seeds.
    """
    overrides = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(overrides) - valid)
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)}; valid choices: {', '.join(sorted(valid))}")
    merged = {**preset, **overrides}
    seeds = merged.pop("seeds")
    seeds = tuple(range(seeds)) if isinstance(seeds, int) else tuple(int(s) for s in seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be a positive count or a list of distinct seeds, got {seeds!r}")
    return merged, seeds


#: Optimizer settings compared in the robustness experiment (the same for every
#: condition). Adam with beta2 = 0 divides by the current |gradient|, so coordinates whose
#: gradient is momentarily ~0 get huge steps: with eps = 1e-8 or 1e-6 it diverged within
#: 10 steps at lr 1e-3 and 1e-4, and with eps = 1e-4 at lr 1e-4 res-none diverged after
#: 437 steps; lr 3e-5 with eps = 1e-4 trained all 3 seeds of both conditions for 30
#: epochs. SGD with momentum 0.9 at lr 0.03 diverged; 0.01 trains.
ROBUSTNESS_OPTIMIZERS: dict[str, OptimizerConfig] = {
    "adam": OptimizerConfig("adam", lr=1e-3),
    "adam(beta2=0)": OptimizerConfig("adam", lr=3e-5, beta2=0.0, eps=1e-4),
    "sgd(momentum=0.9)": OptimizerConfig("sgd", lr=0.01, momentum=0.9),
}

#: The conditions each MLP chapter compares (any may be overridden with ``conditions=``).
CHAPTER_CONDITIONS: dict[str, tuple[str, ...]] = {
    "mlp_conditions": ("res-relu", "res-gelu", "res-silu", "nores-relu", "res-none", "res-radial"),
    "activation_vs_norm": ("res-relu", "res-ln", "res-ln-relu", "res-none", "res-rms", "res-rms-relu"),
}

_MLP_SCALES: dict[str, dict[str, Any]] = {
    "smoke": dict(dataset="mnist-subset", max_train=1024, width=32, depth=16, epochs=3,
                  batch_size=64, n_snapshots=8, seeds=(0, 1)),
    "cpu": dict(dataset="mnist-subset", max_train=None, width=256, depth=16, epochs=30,
                batch_size=128, n_snapshots=12, seeds=(0, 1, 2)),
    "paper": dict(dataset="mnist", max_train=None, width=256, depth=16, epochs=20,
                  batch_size=128, n_snapshots=24, seeds=(0, 1, 2), device="auto"),
}


@dataclass(frozen=True)
class MLPChapterSettings:
    """Everything the MLP chapter runs: a base config, seeds, conditions, optimizers."""

    scale: str
    base: MLPRunConfig
    seeds: tuple[int, ...]
    conditions: tuple[str, ...] = CHAPTER_CONDITIONS["mlp_conditions"]
    robustness_conditions: tuple[str, ...] = ("res-relu", "res-none")
    optimizers: dict[str, OptimizerConfig] = field(default_factory=lambda: dict(ROBUSTNESS_OPTIMIZERS))
    #: extra initialisation scales tried on the robustness conditions (base optimizer)
    extra_init_scales: tuple[float, ...] = (4.0,)

    def condition_configs(self) -> list[MLPRunConfig]:
        """Every condition x seed under the base optimizer."""
        return [self.base.replace(condition=c, seed=s) for c in self.conditions for s in self.seeds]

    def robustness_configs(self) -> list[MLPRunConfig]:
        """The robustness conditions x every optimizer setting x seed."""
        return [
            self.base.replace(condition=c, optimizer=o, seed=s)
            for c in self.robustness_conditions for o in self.optimizers.values() for s in self.seeds
        ]

    def init_configs(self) -> list[MLPRunConfig]:
        """The robustness conditions at the base and every extra init scale, x seed."""
        scales = (self.base.init_scale, *self.extra_init_scales)
        return [
            self.base.replace(condition=c, init_scale=i, seed=s)
            for c in self.robustness_conditions for i in scales for s in self.seeds
        ]


def mlp_chapter_settings(scale: str, chapter: str = "mlp_conditions", **overrides: Any) -> MLPChapterSettings:
    """Settings of an MLP chapter at ``scale``, with optional overrides.

    ``chapter`` picks the default conditions (:data:`CHAPTER_CONDITIONS`). Overrides may
    name any :class:`MLPRunConfig` field, ``seeds`` (an int n means ``range(n)``, or a
    list), ``conditions``, ``lr``, ``beta1``, ``beta2``, ``momentum`` or ``optimizer``
    ("adam" / "sgd") for the base optimizer.
    """
    check_scale(scale)
    if chapter not in CHAPTER_CONDITIONS:
        raise ValueError(f"unknown chapter {chapter!r}; valid choices: {', '.join(CHAPTER_CONDITIONS)}")
    optimizer_fields = {"lr", "beta1", "beta2", "momentum", "weight_decay"}
    run_fields = {f.name for f in dataclasses.fields(MLPRunConfig)} - {"condition", "seed"}
    preset, seeds = _apply_overrides(_MLP_SCALES[scale], overrides, run_fields | optimizer_fields | {"seeds", "conditions"})
    conditions = tuple(preset.pop("conditions", CHAPTER_CONDITIONS[chapter]))
    for condition in conditions:
        block_spec(condition)
    optimizer_changes = {k: preset.pop(k) for k in list(preset) if k in optimizer_fields}
    if isinstance(preset.get("optimizer"), str):
        optimizer_changes["name"] = preset.pop("optimizer")
    optimizer = dataclasses.replace(ROBUSTNESS_OPTIMIZERS["adam"], **optimizer_changes)
    base = MLPRunConfig(optimizer=optimizer, **preset)
    return MLPChapterSettings(scale=scale, base=base, seeds=seeds, conditions=conditions)


#: Transformer sizes per scale. ``paper``: 8 layers, d = 512, SwiGLU width 1376, and an
#: 8192-token BPE vocabulary (untied embeddings): about 33.7M parameters, the paper's
#: "about 34M" (its tokenizer is not given; the vocabulary size is our choice).
LM_SHAPES: dict[str, TransformerShape] = {
    "smoke": TransformerShape(n_layers=2, d_model=32, n_heads=2, n_kv_heads=2, ffn_dim=88, vocab_size=512,
                              max_seq_len=64),
    "cpu": TransformerShape(n_layers=4, d_model=128, n_heads=4, n_kv_heads=4, ffn_dim=344, vocab_size=2048,
                            max_seq_len=128),
    "paper": TransformerShape(n_layers=8, d_model=512, n_heads=8, n_kv_heads=8, ffn_dim=1376, vocab_size=8192,
                              max_seq_len=512),
}


#: The transformer chapter's variants: (MLP activation, attention).
LM_VARIANTS: dict[str, tuple[str, str]] = {
    "silu": ("silu", "softmax"),
    "none": ("none", "softmax"),
    "relu": ("relu", "softmax"),
    "silu, linear attention": ("silu", "linear"),
}

_LM_SCALES: dict[str, dict[str, Any]] = {
    "smoke": dict(corpus="kjv", steps=12, batch_size=4, n_snapshots=4, seeds=(0, 1), eval_windows=8),
    "cpu": dict(corpus="kjv", steps=400, batch_size=16, n_snapshots=10, seeds=(0, 1, 2), eval_windows=64),
    "paper": dict(corpus="wikitext-103", steps=20000, batch_size=32, n_snapshots=24, seeds=(0,),
                  eval_windows=256, device="auto"),
}


@dataclass(frozen=True)
class LMChapterSettings:
    """What the transformer chapter runs: a base config, seeds, and the variants."""

    scale: str
    base: "LMRunConfig"
    seeds: tuple[int, ...]
    variants: dict[str, tuple[str, str]] = field(default_factory=lambda: dict(LM_VARIANTS))

    def configs(self) -> dict[str, list["LMRunConfig"]]:
        """``{variant label: [config per seed]}``."""
        out = {}
        for label, (activation, attention) in self.variants.items():
            shape = dataclasses.replace(self.base.shape, mlp_activation=activation, attention=attention)
            out[label] = [self.base.replace(shape=shape, seed=s) for s in self.seeds]
        return out


def lm_chapter_settings(scale: str, **overrides: Any) -> LMChapterSettings:
    """Settings of the transformer chapter at ``scale``, with optional overrides.

    Overrides may name any :class:`geocont.lm.LMRunConfig` field, any
    :class:`TransformerShape` size field (``n_layers``, ``d_model``, ...), ``seeds``,
    ``variants`` (a list of :data:`LM_VARIANTS` labels), and ``lr``.
    """
    from .lm import LMRunConfig

    check_scale(scale)
    shape_fields = {f.name for f in dataclasses.fields(TransformerShape)} - {"mlp_activation", "attention"}
    run_fields = {f.name for f in dataclasses.fields(LMRunConfig)} - {"shape", "seed", "optimizer"}
    preset, seeds = _apply_overrides(_LM_SCALES[scale], overrides, shape_fields | run_fields | {"seeds", "variants", "lr"})
    labels = preset.pop("variants", list(LM_VARIANTS))
    unknown_variants = [v for v in labels if v not in LM_VARIANTS]
    if unknown_variants:
        raise ValueError(f"unknown variant(s) {unknown_variants}; valid choices: {', '.join(LM_VARIANTS)}")
    shape = dataclasses.replace(LM_SHAPES[scale], **{k: preset.pop(k) for k in list(preset) if k in shape_fields})
    optimizer = OptimizerConfig("adam", lr=preset.pop("lr", 1e-3))
    base = LMRunConfig(shape=shape, optimizer=optimizer, **preset)
    return LMChapterSettings(scale=scale, base=base, seeds=seeds, variants={v: LM_VARIANTS[v] for v in labels})


#: The pretrained checkpoints each scale analyses, and the large ones it looks for.
PRETRAINED_OFFLINE = ("smollm2-135m", "gemma3-270m", "all-minilm-l6")
PRETRAINED_LARGE = ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B")

_PRETRAINED_SCALES: dict[str, dict[str, Any]] = {
    "smoke": dict(models=("smollm2-135m",), max_layers=6, trained_scale="smoke", seeds=(0,),
                  quantize=("Q8_0", "Q4_1"), large_models=(), measure_cost=False),
    "cpu": dict(models=PRETRAINED_OFFLINE, max_layers=None, trained_scale="cpu", seeds=(0, 1, 2),
                quantize=("Q8_0", "Q4_1"), large_models=PRETRAINED_LARGE, measure_cost=True),
    "paper": dict(models=PRETRAINED_OFFLINE, max_layers=None, trained_scale="paper", seeds=(0,),
                  quantize=("Q8_0", "Q4_1"), large_models=PRETRAINED_LARGE, measure_cost=True),
}


@dataclass(frozen=True)
class PretrainedChapterSettings:
    """What the pretrained-continuity chapter analyses.

    ``models``: offline model names (:data:`geocont.pretrained.OFFLINE_MODELS`), local
    paths or Hugging Face ids; ``max_layers``: only the first n layers of each;
    ``trained``: the transformer chapter's trained models (variant ``silu``) at
    ``trained_scale``, one per seed; ``quantize``: GGUF types the quantization check
    compares with fp32; ``large_models``: checkpoints looked for (analysed where present);
    ``measure_cost``: time two Llama-3.1-8B-shaped layers to extrapolate the large models' cost.
    """

    scale: str
    models: tuple[str, ...]
    max_layers: int | None
    trained_scale: str
    seeds: tuple[int, ...]
    quantize: tuple[str, ...]
    large_models: tuple[str, ...]
    measure_cost: bool

    def trained_configs(self) -> list["LMRunConfig"]:
        """The transformer chapter's ``silu`` models, one per seed."""
        settings = lm_chapter_settings(self.trained_scale, variants=["silu"], seeds=list(self.seeds))
        return settings.configs()["silu"]


def pretrained_chapter_settings(scale: str, **overrides: Any) -> PretrainedChapterSettings:
    """Settings of the pretrained-continuity chapter at ``scale``, with optional overrides
    (``models``, ``max_layers``, ``trained_scale``, ``seeds``, ``quantize``, ``large_models``,
    ``measure_cost``)."""
    check_scale(scale)
    valid = set(_PRETRAINED_SCALES["cpu"])
    preset, seeds = _apply_overrides(_PRETRAINED_SCALES[scale], overrides, valid)
    check_scale(preset["trained_scale"])
    if preset["max_layers"] is not None and int(preset["max_layers"]) < 2:
        raise ValueError(f"max_layers must be >= 2, got {preset['max_layers']}")
    import gguf

    known_types = {t.name for t in gguf.GGMLQuantizationType}
    bad = [q for q in preset["quantize"] if q not in known_types]
    if bad:
        raise ValueError(f"unknown GGUF type(s) {bad}; valid choices include F16, Q8_0, Q4_1, Q4_0, Q5_0")
    models = (preset["models"],) if isinstance(preset["models"], str) else tuple(preset["models"])
    large = (preset["large_models"],) if isinstance(preset["large_models"], str) else tuple(preset["large_models"])
    return PretrainedChapterSettings(scale=scale, models=models, max_layers=preset["max_layers"],
                                     trained_scale=preset["trained_scale"], seeds=seeds,
                                     quantize=tuple(preset["quantize"]), large_models=large,
                                     measure_cost=bool(preset["measure_cost"]))

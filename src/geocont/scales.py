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

from .config import MLPRunConfig, OptimizerConfig, check_positive
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
    "timeline": ("res-relu", "nores-relu", "res-none", "res-radial"),
}

#: Per-chapter departures from the scale presets and from the MLPChapterSettings defaults.
#: The timeline chapter needs a fine snapshot schedule (so it records only v1/u1, k = 1,
#: which keeps the recorder cheap) and sweeps the initialisation scale over two orders
#: of magnitude on the baseline condition.
_CHAPTER_PRESETS: dict[str, dict[str, Any]] = {
    "timeline": dict(n_snapshots={"smoke": 12, "cpu": 32, "paper": 48}, n_directions=1,
                     robustness_conditions=("res-relu",), extra_init_scales=(0.03, 0.1, 0.3, 3.0)),
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
    sweep_fields = {"robustness_conditions", "extra_init_scales"}
    chapter_preset = dict(_CHAPTER_PRESETS.get(chapter, {}))
    if isinstance(chapter_preset.get("n_snapshots"), dict):
        chapter_preset["n_snapshots"] = chapter_preset["n_snapshots"][scale]
    preset, seeds = _apply_overrides({**_MLP_SCALES[scale], **chapter_preset}, overrides,
                                     run_fields | optimizer_fields | sweep_fields | {"seeds", "conditions"})
    conditions = tuple(preset.pop("conditions", CHAPTER_CONDITIONS[chapter]))
    sweeps = {name: tuple(preset.pop(name)) for name in sweep_fields if name in preset}
    for condition in conditions + sweeps.get("robustness_conditions", ()):
        block_spec(condition)
    for init_scale in sweeps.get("extra_init_scales", ()):
        check_positive("extra_init_scales", init_scale, integer=False)
    optimizer_changes = {k: preset.pop(k) for k in list(preset) if k in optimizer_fields}
    if isinstance(preset.get("optimizer"), str):
        optimizer_changes["name"] = preset.pop("optimizer")
    optimizer = dataclasses.replace(ROBUSTNESS_OPTIMIZERS["adam"], **optimizer_changes)
    base = MLPRunConfig(optimizer=optimizer, **preset)
    return MLPChapterSettings(scale=scale, base=base, seeds=seeds, conditions=conditions, **sweeps)


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


def _seeds_text(seeds) -> str:
    seeds = tuple(range(seeds)) if isinstance(seeds, int) else tuple(seeds)
    return f"{len(seeds)} ({', '.join(map(str, seeds))})"


def scales_markdown() -> str:
    """The three scales of the MLP and transformer chapters as one Markdown table.

    The methods page (``book/methods.md``) holds this table verbatim; a test keeps the two equal.
    """
    rows: list[tuple[str, ...]] = []

    def add(label: str, values) -> None:
        rows.append((label, *(str(v) for v in values)))

    mlp = [_MLP_SCALES[s] for s in SCALES]
    add("MLP: data", (f"`{p['dataset']}`" + (f", first {p['max_train']} training digits" if p["max_train"] else "")
                      for p in mlp))
    add("MLP: hidden layers × width", (f"{p['depth']} × {p['width']}" for p in mlp))
    add("MLP: epochs × batch", (f"{p['epochs']} × {p['batch_size']}" for p in mlp))
    add("MLP: snapshots", (p["n_snapshots"] for p in mlp))
    add("MLP: seeds", (_seeds_text(p["seeds"]) for p in mlp))
    timeline = _CHAPTER_PRESETS["timeline"]
    add("MLP timeline: snapshots (v1/u1 only)", (timeline["n_snapshots"][s] for s in SCALES))
    add("MLP timeline: init scales", [", ".join(f"{x:g}" for x in sorted((1.0, *timeline["extra_init_scales"])))] * len(SCALES))
    lm = [_LM_SCALES[s] for s in SCALES]
    shapes = [LM_SHAPES[s] for s in SCALES]
    add("transformer: corpus", (f"`{p['corpus']}`" for p in lm))
    add("transformer: layers × d_model (heads)", (f"{s.n_layers} × {s.d_model} ({s.n_heads})" for s in shapes))
    add("transformer: SwiGLU width, vocabulary", (f"{s.ffn_dim}, {s.vocab_size}" for s in shapes))
    add("transformer: steps × batch × sequence", (f"{p['steps']} × {p['batch_size']} × {s.max_seq_len}"
                                                    for p, s in zip(lm, shapes)))
    add("transformer: snapshots", (p["n_snapshots"] for p in lm))
    add("transformer: seeds", (_seeds_text(p["seeds"]) for p in lm))
    lines = ["| setting | " + " | ".join(f"`{s}`" for s in SCALES) + " |", "|---" * (len(SCALES) + 1) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
#: The compression chapter: a pretrained model (SmolLM2-135M offline; a Llama-3.1-8B id at
#: ``paper``) and the transformer chapter's ``silu`` models. ``budgets`` are fractions of
#: the dense parameters of the replaced matrices. ``sharing_layers`` are the pretrained
#: model's blocks whose weights are shared (None: all); at ``cpu`` the middle 12 of 30, as
#: compressing every block without fine-tuning breaks the model (V or Gate of all 30 blocks
#: at a 50% budget: +6 nats/token). ``pruning_layers``: the blocks dropped in turn (None: all).
#: Sized from SmolLM2's measured CPU throughput (benchmarks/bench_compression.py: 160-430
#: tokens/s on the 2-core machine, depending on the other load): at ``cpu`` one evaluation is
#: 12 x 128 tokens (4-10 s), and the chapter runs 7 x 3 x 3 sharing + 30 pruning evaluations
#: of it, 10-20 minutes in all with our models.
_COMPRESSION_SCALES: dict[str, dict[str, Any]] = {
    "smoke": dict(pretrained="smollm2-135m", sharing_layers=(12, 13, 14, 15), pruning_layers=(12, 13, 14, 15),
                  budgets=(0.25,), group_size=2,
                  projections=("q_proj", "v_proj", "o_proj"),
                  n_windows=4, window_length=64, batch_size=4, seeds=(0, 1), n_boot=500, device="cpu"),
    "cpu": dict(pretrained="smollm2-135m", sharing_layers=tuple(range(9, 21)), pruning_layers=None,
                budgets=(0.25, 0.5, 0.75), group_size=2,
                n_windows=12, window_length=128, batch_size=4, seeds=(0, 1, 2), n_boot=2000, device="cpu"),
    "paper": dict(pretrained="meta-llama/Llama-3.1-8B", sharing_layers=tuple(range(10, 22)), pruning_layers=None,
                  budgets=(0.25, 0.5, 0.75),
                  group_size=2, n_windows=64, window_length=512, batch_size=4, seeds=(0, 1, 2), n_boot=2000,
                  device="auto"),
}


@dataclass(frozen=True)
class CompressionSettings:
    """What the compression chapter runs (see :data:`_COMPRESSION_SCALES`)."""

    scale: str
    pretrained: str | None
    sharing_layers: tuple[int, ...] | None
    pruning_layers: tuple[int, ...] | None
    budgets: tuple[float, ...]
    group_size: int
    n_windows: int
    window_length: int
    batch_size: int
    n_boot: int
    projections: tuple[str, ...]
    lm: LMChapterSettings
    device: str = "cpu"

    def lm_configs(self) -> list["LMRunConfig"]:
        """The transformer chapter's ``silu`` model, one config per seed."""
        return self.lm.configs()["silu"]


def compression_chapter_settings(scale: str, **overrides: Any) -> CompressionSettings:
    """Settings of the compression chapter at ``scale``, with optional overrides.

    Overrides: any preset key (``pretrained`` may be "none" to skip the pretrained model, an
    offline short name, or a Hugging Face id / local directory), ``projections`` (a list of
    :data:`geocont.transformer.PROJECTIONS`) and ``seeds`` (of our trained models).
    """
    from .transformer import PROJECTIONS

    check_scale(scale)
    valid = set(_COMPRESSION_SCALES[scale]) | {"projections"}
    preset, seeds = _apply_overrides(_COMPRESSION_SCALES[scale], overrides, valid)
    projections = tuple(preset.pop("projections", PROJECTIONS))
    unknown = [p for p in projections if p not in PROJECTIONS]
    if unknown or not projections:
        raise ValueError(f"unknown projection(s) {unknown}; valid choices: {', '.join(PROJECTIONS)}")
    budgets = tuple(float(b) for b in preset.pop("budgets"))
    if not budgets or any(not 0 < b < 2 for b in budgets):
        raise ValueError(f"budgets must be fractions of the dense parameters in (0, 2), got {budgets}")
    for name in ("group_size", "n_windows", "window_length", "batch_size", "n_boot"):
        if int(preset[name]) < 1:
            raise ValueError(f"{name} must be a positive integer, got {preset[name]!r}")
    if int(preset["group_size"]) < 2:
        raise ValueError("group_size must be >= 2: sharing needs at least two layers per group")
    layers = {}
    for name in ("sharing_layers", "pruning_layers"):
        value = preset.pop(name)
        layers[name] = None if value is None else tuple(int(l) for l in value)
        if layers[name] is not None and (len(layers[name]) < 3 or any(l < 0 for l in layers[name])):
            raise ValueError(f"{name} needs at least 3 non-negative block indices (or None for all), got {value}")
    from .config import DEVICES

    device = preset.pop("device")
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; valid choices: {', '.join(DEVICES)}")
    lm = lm_chapter_settings(scale, variants=["silu"], seeds=list(seeds))
    pretrained = preset.pop("pretrained")
    pretrained = None if pretrained in (None, "none") else str(pretrained)
    return CompressionSettings(scale=scale, pretrained=pretrained, **layers,
                               budgets=budgets, projections=projections, lm=lm, device=device,
                               **{k: int(v) for k, v in preset.items()})


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

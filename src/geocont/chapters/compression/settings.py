"""The compression chapter's settings: the paper's sharing guideline, the models and presets per scale, the
settings they build and its :class:`~geocont.book.chapter.Chapter`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...book.chapter import Chapter, presets
from ...config import DEVICES, LMRunConfig
from ...layouts import PROJECTIONS
from ...scales import parse_seeds
from ...transformer import build_llama, parameter_count
from .. import lm_runs
from ..lm_runs import LMChapterSettings

#: The notebook's parameters, in the order of its ``parameters`` cell.
_PARAMETERS: dict[str, str] = {
    "scale": "smoke | cpu | paper: the whole preset, see geocont.chapters.compression",
    "seeds": "seeds of our trained transformers: an int n (0..n-1) or a list; None keeps the preset",
    "pretrained": '"smollm2-135m" (offline), a Hugging Face id / local dir, or "none" to skip; None keeps it',
    "budgets": "a list of parameter budgets, fractions of the dense matrices, e.g. [0.125, 0.25, 0.5]",
    "group_size": "adjacent layers per shared basis",
    "n_windows": "held-out windows per evaluation of the pretrained model",
    "window_length": "tokens per window (pretrained model)",
    "sharing_layers": "pretrained blocks whose weights are shared, e.g. [9, 10, ..., 20]; None keeps the preset",
    "projections": "a list of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj",
}


#: The paper's guideline: the space each projection should share its basis in (None: neither).
GUIDELINE: dict[str, str | None] = {
    "q_proj": "input",
    "k_proj": "input",
    "gate_proj": "input",
    "up_proj": "input",
    "o_proj": "output",
    "down_proj": "output",
    "v_proj": None,
}


#: Label of our trained transformers in the results (their seeds are in the ``seed`` column).
OURS = "ours (silu)"


#: The chapter's presets: a pretrained model (SmolLM2-135M offline; a Llama-3.1-8B id at
#: ``paper``) and the transformer chapter's ``silu`` models (its seeds and its long, settled runs). ``budgets`` are fractions of
#: the dense parameters of the replaced matrices. ``sharing_layers`` are the pretrained
#: model's blocks whose weights are shared (None: all); at ``cpu`` the middle 12 of 30, as
#: compressing every block without fine-tuning breaks the model (V or Gate of all 30 blocks
#: at a 50% budget: +6 nats/token). ``pruning_layers``: the blocks dropped in turn (None: all).
#: Sized from SmolLM2's measured CPU throughput (benchmarks/bench_compression.py: 160-430
#: tokens/s on the 2-core machine, depending on the other load): at ``cpu`` one evaluation is
#: 12 x 128 tokens (4-10 s), and the chapter runs 7 x 3 x 3 sharing + 30 pruning evaluations
#: of it, 10-20 minutes in all with our models.
_PRESET_VALUES: dict[str, dict[str, Any]] = {
    "smoke": dict(
        pretrained="smollm2-135m",
        sharing_layers=(12, 13, 14, 15),
        pruning_layers=(12, 13, 14, 15),
        budgets=(0.25,),
        group_size=2,
        projections=("q_proj", "v_proj", "o_proj"),
        n_windows=4,
        window_length=64,
        batch_size=4,
        seeds=(0, 1),
        n_boot=500,
        device="cpu",
    ),
    "cpu": dict(
        pretrained="smollm2-135m",
        sharing_layers=tuple(range(9, 21)),
        pruning_layers=None,
        budgets=(0.25, 0.5, 0.75),
        group_size=2,
        n_windows=12,
        window_length=128,
        batch_size=4,
        n_boot=2000,
        device="cpu",
    ),
    "paper": dict(
        pretrained="meta-llama/Llama-3.1-8B",
        sharing_layers=tuple(range(10, 22)),
        pruning_layers=None,
        budgets=(0.25, 0.5, 0.75),
        group_size=2,
        n_windows=64,
        window_length=512,
        batch_size=4,
        n_boot=2000,
        device="auto",
    ),
}


#: The seeds (of the transformer chapter's models) come from the language-model presets, except at ``smoke``.
_PRESETS = presets(lm_runs.lm_preset, _PRESET_VALUES, keep=("seeds",))


@dataclass(frozen=True)
class CompressionSettings:
    """What the compression chapter runs (see :data:`_PRESETS`)."""

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
    overrides: dict[str, Any] = field(default_factory=dict)

    def lm_configs(self) -> list[LMRunConfig]:
        """The transformer chapter's reference (``silu``) model, one config per seed."""
        return self.lm.configs()[self.lm.reference]

    @property
    def middle_budget(self) -> float:
        return sorted(self.budgets)[len(self.budgets) // 2]


def build_settings(scale: str, values: dict[str, Any]) -> CompressionSettings:
    """The chapter's settings from its preset values (:data:`_PRESETS`, any of them replaced).

    ``pretrained`` may be "none" to skip the pretrained model, an offline short name, or a
    Hugging Face id / local directory; ``projections`` is a list of :data:`PROJECTIONS`;
    ``seeds`` are those of our trained models. A bad value raises ``ValueError``.
    """
    preset = dict(values)
    seeds = parse_seeds(preset.pop("seeds"))
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
    layers: dict[str, tuple[int, ...] | None] = {}
    for name in ("sharing_layers", "pruning_layers"):
        value = preset.pop(name)
        layers[name] = None if value is None else _block_indices(name, value)
        if layers[name] is not None and (len(layers[name]) < 3 or any(l < 0 for l in layers[name])):
            raise ValueError(f"{name} needs at least 3 non-negative block indices (or None for all), got {value}")
    device = preset.pop("device")
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; valid choices: {', '.join(DEVICES)}")
    lm = lm_runs.reference_settings(scale, seeds)
    pretrained = preset.pop("pretrained")
    pretrained = None if pretrained in (None, "none") else str(pretrained)
    return CompressionSettings(
        scale=scale,
        pretrained=pretrained,
        **layers,
        budgets=budgets,
        projections=projections,
        lm=lm,
        device=device,
        **{k: int(v) for k, v in preset.items()},
    )


def _blocks(layers: Sequence[int] | None) -> str:
    """``blocks 9–20`` (a run of blocks), ``blocks [1, 3, 5]`` or ``all blocks`` (None), for the provenance."""
    if layers is None:
        return "all blocks"
    if list(layers) == list(range(layers[0], layers[-1] + 1)):
        return f"blocks {layers[0]}–{layers[-1]}"
    return f"blocks {list(layers)}"


def describe(settings: CompressionSettings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    lm = settings.lm.base
    if settings.pretrained is None:
        pretrained = "none"
    elif settings.pretrained == "smollm2-135m":
        pretrained = (
            f"`{settings.pretrained}` (the offline SmolLM2-135M-Instruct GGUF, Q4_1, dequantized to float32 "
            "by transformers)"
        )
    else:
        pretrained = f"`{settings.pretrained}`"
    layers = f"shares the weights of {_blocks(settings.sharing_layers)}, prunes {_blocks(settings.pruning_layers)}"
    return dict(
        seeds=settings.lm.seeds,
        data=f"held-out split of `{lm.corpus}` (every tenth chapter); the pretrained model reads it with its own "
        f"tokenizer ({settings.n_windows} windows × {settings.window_length} tokens), our models with their BPE "
        f"tokenizer ({lm.eval_windows} windows × {lm.shape.max_seq_len} tokens, the windows of their validation "
        "loss)",
        model=f"pretrained: {pretrained}, {layers}; ours: the `silu` transformer of the projections chapter "
        f"({lm.shape.n_layers} layers, d = {lm.shape.d_model}, "
        f"{parameter_count(build_llama(lm.shape)) / 1e6:.2f}M parameters), one per seed",
        training=f"ours: {lm.steps} steps of {lm.batch_size} × {lm.shape.max_seq_len} tokens, {lm.optimizer.label}; "
        f"compression: budgets {list(settings.budgets)} of the dense parameters, groups of "
        f"{settings.group_size} adjacent layers; no fine-tuning after compression",
    )


CHAPTER = Chapter(
    name="compression",
    parameters=_PARAMETERS,
    presets=_PRESETS,
    build=build_settings,
    describe=describe,
    runs=CompressionSettings.lm_configs,
)


def _block_indices(name: str, value) -> tuple[int, ...]:
    """A list of block indices, or a one-line ``ValueError`` naming the parameter and the form it takes."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ValueError(f"{name} must be a list of block indices such as [9, 10, 11] (or None), got {value!r}")
    try:
        return tuple(int(index) for index in value)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a list of block indices such as [9, 10, 11] (or None), got {value!r}"
        ) from None

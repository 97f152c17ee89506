"""The pretrained-continuity chapter's settings: the checkpoints each scale analyses, the trained models it
compares, the settings they build and its :class:`~geocont.book.chapter.Chapter`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...book.chapter import Chapter, presets
from ...scales import ParameterError, check_scale, parse_seeds
from ..lm_runs import lm_preset, reference_configs

if TYPE_CHECKING:
    from ...config import LMRunConfig


#: The notebook's parameters, in the order of its ``parameters`` cell.
_PARAMETERS: dict[str, str] = {
    "scale": "smoke | cpu | paper: the whole preset, see geocont.chapters.pretrained_continuity",
    "models": "offline names (smollm2-135m, gemma3-270m, all-minilm-l6), paths or Hugging Face ids",
    "max_layers": "analyse only the first n layers of each checkpoint",
    "trained_scale": "scale of the transformer chapter whose trained models are compared",
    "seeds": "seeds of those trained models (an int n or a list)",
    "quantize": 'GGUF types of the quantization check, e.g. ["Q8_0", "Q4_1"]',
    "large_models": "large checkpoints to look for (Hugging Face ids or paths)",
    "measure_cost": "time two Llama-3.1-8B-shaped layers to extrapolate the large models' cost",
}


#: The pretrained checkpoints each scale analyses, and the large ones it looks for.
PRETRAINED_OFFLINE = ("smollm2-135m", "gemma3-270m", "all-minilm-l6")


PRETRAINED_LARGE = ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B")


_PRESET_VALUES: dict[str, dict[str, Any]] = {
    "smoke": dict(
        models=("smollm2-135m",),
        max_layers=6,
        trained_scale="smoke",
        seeds=(0,),
        quantize=("Q8_0", "Q4_1"),
        large_models=(),
        measure_cost=False,
    ),
    "cpu": dict(
        models=PRETRAINED_OFFLINE,
        max_layers=None,
        trained_scale="cpu",
        quantize=("Q8_0", "Q4_1"),
        large_models=PRETRAINED_LARGE,
        measure_cost=True,
    ),
    "paper": dict(
        models=PRETRAINED_OFFLINE,
        max_layers=None,
        trained_scale="paper",
        seeds=(0,),
        quantize=("Q8_0", "Q4_1"),
        large_models=PRETRAINED_LARGE,
        measure_cost=True,
    ),
}


#: At ``cpu`` the trained models' seeds are the language-model presets' (``smoke`` and ``paper`` set one seed).
_PRESETS = presets(lm_preset, _PRESET_VALUES, keep=("seeds",))


@dataclass(frozen=True)
class PretrainedChapterSettings:
    """What the pretrained-continuity chapter analyses.

    ``models``: offline model names (:data:`geocont.pretrained.OFFLINE_MODELS`), local
    paths or Hugging Face ids; ``max_layers``: only the first n layers of each;
    ``trained``: the transformer chapter's trained models (variant ``silu``) at
    ``trained_scale``, one per seed; ``quantize``: GGUF types the quantization check
    compares with fp32; ``large_models``: checkpoints looked for (analysed where present);
    ``measure_cost``: time two Llama-3.1-8B-shaped layers to extrapolate the large models' cost;
    ``overrides``: the parameters that were set (for provenance and publishing).
    """

    scale: str
    models: tuple[str, ...]
    max_layers: int | None
    trained_scale: str
    seeds: tuple[int, ...]
    quantize: tuple[str, ...]
    large_models: tuple[str, ...]
    measure_cost: bool
    overrides: dict[str, Any] = field(default_factory=dict)

    def trained_configs(self) -> list[LMRunConfig]:
        """The transformer chapter's reference (``silu``) models, one per seed."""
        return reference_configs(self.trained_scale, self.seeds)


def _names(value: Any, parameter: str) -> tuple[str, ...]:
    """A name or a list of names as a tuple of strings."""
    names = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(name, str) and name for name in names):
        raise ParameterError(f"{parameter} must be a name or a list of names, got {value!r}")
    return names


def build_settings(scale: str, values: dict[str, Any]) -> PretrainedChapterSettings:
    """The chapter's settings from its preset values (:data:`_PRESETS`, any of them replaced). An
    unknown scale or GGUF type, ``max_layers`` below 2 or a bad seed list raises ``ValueError``."""
    import gguf

    check_scale(values["trained_scale"])
    max_layers = values["max_layers"]
    if max_layers is not None and (isinstance(max_layers, bool) or not isinstance(max_layers, int) or max_layers < 2):
        raise ParameterError(
            f"max_layers must be an integer >= 2 (continuity compares adjacent layers), got {max_layers!r}"
        )
    quantize = _names(values["quantize"], "quantize")
    known_types = {t.name for t in gguf.GGMLQuantizationType}
    bad = [q for q in quantize if q not in known_types]
    if bad:
        raise ParameterError(f"unknown GGUF type(s) {bad}; valid choices include F16, Q8_0, Q4_1, Q4_0, Q5_0")
    if not isinstance(values["measure_cost"], bool):
        raise ParameterError(f"measure_cost must be True or False, got {values['measure_cost']!r}")
    return PretrainedChapterSettings(
        scale=scale,
        models=_names(values["models"], "models"),
        max_layers=max_layers,
        trained_scale=values["trained_scale"],
        seeds=parse_seeds(values["seeds"]),
        quantize=quantize,
        large_models=() if not values["large_models"] else _names(values["large_models"], "large_models"),
        measure_cost=values["measure_cost"],
    )


def describe(settings: PretrainedChapterSettings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    trained_shape = settings.trained_configs()[0].shape
    return dict(
        seeds=settings.seeds,
        data="pretrained checkpoints: "
        + ", ".join(f"`{m}`" for m in settings.models)
        + (f" (first {settings.max_layers} layers)" if settings.max_layers else " (all layers)")
        + f"; trained models: the transformer chapter's `silu` variant at its `{settings.trained_scale}` scale",
        model=f"see the table below; trained: {trained_shape.n_layers} layers, d = {trained_shape.d_model}",
        training="none for the pretrained checkpoints (weights as published); trained models from the cache of the "
        "transformer chapter (trained once if missing)",
    )


CHAPTER = Chapter(
    name="pretrained_continuity",
    parameters=_PARAMETERS,
    presets=_PRESETS,
    build=build_settings,
    describe=describe,
    runs=PretrainedChapterSettings.trained_configs,
)


#: The cache kind of the chapter's analyses (that of :func:`geocont.analyzer.analyze`): ``store`` captures them.
ANALYSIS_KIND = "pretrained"

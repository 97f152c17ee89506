"""The language-model runs shared by the transformer chapters: shapes and presets per scale, the
variants, the settings they build, and the paper's per-projection prediction.

The transformer chapter trains every variant; the compression and pretrained-continuity chapters
analyse its reference (``silu``) models through :func:`reference_configs`.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, field
from typing import Any

from ..book.chapter import seeds_text
from ..config import LMRunConfig, OptimizerConfig, TransformerShape, check_integer
from ..scales import SCALES, ParameterError, parse_seeds
from ..text import check_corpus_name

#: Transformer sizes per scale. ``paper``: 8 layers, d = 512, SwiGLU width 1376, and an
#: 8192-token BPE vocabulary (untied embeddings): about 33.7M parameters, the paper's
#: "about 34M" (its tokenizer is not given; the vocabulary size is our choice).
LM_SHAPES: dict[str, TransformerShape] = {
    "smoke": TransformerShape(
        n_layers=2, d_model=32, n_heads=2, n_kv_heads=2, ffn_dim=88, vocab_size=512, max_seq_len=64
    ),
    "cpu": TransformerShape(
        n_layers=4, d_model=128, n_heads=4, n_kv_heads=4, ffn_dim=344, vocab_size=2048, max_seq_len=128
    ),
    "paper": TransformerShape(
        n_layers=8, d_model=512, n_heads=8, n_kv_heads=8, ffn_dim=1376, vocab_size=8192, max_seq_len=512
    ),
}

#: The variants: (MLP activation, attention).
LM_VARIANTS: dict[str, tuple[str, str]] = {
    "silu": ("silu", "softmax"),
    "none": ("none", "softmax"),
    "relu": ("relu", "softmax"),
    "silu, linear attention": ("silu", "linear"),
}

#: The variants run with ``seeds``; the others run with ``other_seeds``.
MAIN_VARIANTS = ("silu", "none")

#: The variant every claim is judged on (the others are ablations of it).
REFERENCE = "silu"

#: The size fields of :class:`TransformerShape` a preset sets (the variants set the other two).
SHAPE_FIELDS = tuple(
    f.name for f in dataclasses.fields(TransformerShape) if f.name not in ("mlp_activation", "attention")
)


def _shape_values(shape: TransformerShape) -> dict[str, Any]:
    return {name: getattr(shape, name) for name in SHAPE_FIELDS}


#: Presets: the values of the settings per scale. ``steps`` is the horizon the verdicts are judged
#: at; ``early_step`` a snapshot of every run, the earlier horizon every claim's early value is read
#: at (the learning rate is constant, so a longer run passes through the same weights). Snapshots:
#: ``n_snapshots`` log-spaced and ``n_late_snapshots`` evenly spaced
#: (``geocont.recorder.log_and_linear_steps``), plus ``early_step``.
LM_PRESETS: dict[str, dict[str, Any]] = {
    "smoke": dict(
        corpus="kjv",
        steps=16,
        early_step=4,
        batch_size=4,
        n_snapshots=4,
        n_late_snapshots=3,
        seeds=(0, 1),
        other_seeds=(0,),
        variants=tuple(LM_VARIANTS),
        depth_layers=3,
        depth_seeds=(0,),
        eval_windows=8,
        pretrained="smollm2-135m",
        **_shape_values(LM_SHAPES["smoke"]),
    ),
    "cpu": dict(
        corpus="offline-english",
        steps=16000,
        early_step=4000,
        batch_size=16,
        n_snapshots=16,
        n_late_snapshots=24,
        seeds=(0, 1, 2),
        other_seeds=(0,),
        variants=tuple(LM_VARIANTS),
        depth_layers=8,
        depth_seeds=(0,),
        eval_windows=64,
        pretrained="smollm2-135m",
        **_shape_values(LM_SHAPES["cpu"]),
    ),
    "paper": dict(
        corpus="wikitext-103",
        steps=20000,
        early_step=2000,
        batch_size=32,
        n_snapshots=24,
        n_late_snapshots=12,
        seeds=(0,),
        other_seeds=(0,),
        variants=tuple(LM_VARIANTS),
        depth_layers=16,
        depth_seeds=(),
        eval_windows=256,
        device="auto",
        pretrained="smollm2-135m",
        precision="bf16-autocast",
        **_shape_values(LM_SHAPES["paper"]),
    ),
}
assert set(LM_PRESETS) == set(SCALES)

#: The paper's projection-specific prediction: (projection, space) that should be continuous. Why each should
#: (what the projection reads or writes) is worded in the prose of the chapters that test it
#: (``prediction.<projection>`` in their ``prose.md``).
PROJECTION_PREDICTIONS = [
    ("q_proj", "input"),
    ("k_proj", "input"),
    ("gate_proj", "input"),
    ("up_proj", "input"),
    ("o_proj", "output"),
    ("down_proj", "output"),
]


def lm_preset(scale: str) -> dict[str, Any]:
    """The shared language-model presets at ``scale`` (:data:`LM_PRESETS`), read when a chapter is configured."""
    return dict(LM_PRESETS[scale])


def optional_seeds(value: Any, name: str) -> tuple[int, ...]:
    """Seeds as :func:`geocont.scales.parse_seeds`, where 0 or an empty list means none."""
    if value in (0, (), []) and not isinstance(value, bool):
        return ()
    try:
        return parse_seeds(value)
    except ParameterError:
        raise ParameterError(
            f"{name} must be a count, a list of distinct seeds, or 0 / [] for none; got {value!r}"
        ) from None


@dataclass(frozen=True)
class LMChapterSettings:
    """What the transformer chapter runs: a base config, the variants and their seeds, and a deeper model."""

    scale: str
    base: LMRunConfig
    seeds: tuple[int, ...]
    variants: dict[str, tuple[str, str]] = field(default_factory=lambda: dict(LM_VARIANTS))
    other_seeds: tuple[int, ...] = (0,)
    depth_layers: int = 8
    depth_seeds: tuple[int, ...] = ()
    pretrained: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    #: the variant every claim is judged on
    reference: str = REFERENCE
    #: the longer reference run trains ``long_factor`` times ``steps`` (0 or 1: no longer run)
    long_factor: int = 1
    #: the memorisation control: the reference variant trained as the others are, on this corpus (None: not run)
    control_corpus: str | None = None
    control_seeds: tuple[int, ...] = (0,)

    @property
    def early_step(self) -> int:
        return self.base.snapshot_steps[0] if self.base.snapshot_steps else self.base.steps

    @property
    def depth_label(self) -> str:
        return f"{self.reference}, {self.depth_layers} layers"

    def seeds_of(self, label: str) -> tuple[int, ...]:
        if label == self.depth_label:
            return self.depth_seeds
        return self.seeds if label in MAIN_VARIANTS else self.other_seeds

    @property
    def long_label(self) -> str:
        return f"{self.reference}, {self.long_factor}× steps"

    def long_configs(self) -> dict[str, list[LMRunConfig]]:
        """``{long_label: [config]}``: the reference variant, its first seed, ``long_factor`` times the
        steps, snapshotted at ``early_step`` and at ``steps`` too (so it can be read at equal steps);
        empty where ``long_factor`` is 0 or 1."""
        if self.long_factor <= 1:
            return {}
        base = self.configs()[self.reference][0]
        return {
            self.long_label: [
                base.replace(steps=base.steps * self.long_factor, snapshot_steps=(*base.snapshot_steps, base.steps))
            ]
        }

    @property
    def control_label(self) -> str:
        return f"{self.reference}, {self.control_corpus}"

    def control_configs(self) -> dict[str, list[LMRunConfig]]:
        """``{control_label: [config per control seed]}``: the reference variant as :meth:`configs` trains it
        (steps and snapshots alike), on ``control_corpus`` (with that corpus's own tokenizer); empty where no
        control corpus is set."""
        if not self.control_corpus or not self.control_seeds:
            return {}
        activation, attention = LM_VARIANTS[self.reference]
        shape = dataclasses.replace(self.base.shape, mlp_activation=activation, attention=attention)
        base = self.base.replace(shape=shape, corpus=self.control_corpus)
        return {self.control_label: [base.replace(seed=s) for s in self.control_seeds]}

    def all_configs(self) -> dict[str, list[LMRunConfig]]:
        """Every run the chapter trains: :meth:`configs`, the longer run (:meth:`long_configs`), then the
        memorisation control (:meth:`control_configs`)."""
        return {**self.configs(), **self.long_configs(), **self.control_configs()}

    def configs(self) -> dict[str, list[LMRunConfig]]:
        """``{variant label: [config per seed]}``, the deeper model last (where it has seeds)."""
        out = {}
        for label, (activation, attention) in self.variants.items():
            shape = dataclasses.replace(self.base.shape, mlp_activation=activation, attention=attention)
            if self.seeds_of(label):
                out[label] = [self.base.replace(shape=shape, seed=s) for s in self.seeds_of(label)]
        if self.depth_seeds:
            activation, attention = LM_VARIANTS[self.reference]
            shape = dataclasses.replace(
                self.base.shape, n_layers=self.depth_layers, mlp_activation=activation, attention=attention
            )
            out[self.depth_label] = [self.base.replace(shape=shape, seed=s) for s in self.depth_seeds]
        return out


def _control(values: dict[str, Any]) -> tuple[str | None, tuple[int, ...]]:
    """The memorisation control's corpus (None: not run) and seeds, popped from ``values`` and checked."""
    corpus = values.pop("control_corpus", None)
    corpus = None if corpus in (None, "", "none") else str(corpus)
    seeds = optional_seeds(values.pop("control_seeds", (0,)), "control_seeds")
    if corpus is not None:
        check_corpus_name(corpus)
        if corpus == values.get("corpus"):
            raise ValueError(f"control_corpus must differ from corpus ({corpus!r}); None runs no control")
    return corpus, seeds


def build_settings(scale: str, values: dict[str, Any]) -> LMChapterSettings:
    """The settings from a preset's values (:data:`LM_PRESETS`, any of them replaced): every
    :class:`LMRunConfig` field, the :data:`SHAPE_FIELDS`, ``seeds``, ``variants`` (labels of
    :data:`LM_VARIANTS`), ``lr``, ``early_step``, ``other_seeds``, ``depth_layers``,
    ``depth_seeds``, ``pretrained``, ``reference`` (default :data:`REFERENCE`), ``long_factor``
    (default 1: none), ``control_corpus`` (default None: none) and ``control_seeds`` (default (0,)); a bad
    value raises ``ValueError``."""
    values = dict(values)
    long_factor = check_integer("long_factor", values.pop("long_factor", 1), minimum=0)
    control_corpus, control_seeds = _control(values)
    seeds = parse_seeds(values.pop("seeds"))
    labels = list(values.pop("variants"))
    unknown_variants = [v for v in labels if v not in LM_VARIANTS]
    if unknown_variants:
        raise ValueError(f"unknown variant(s) {unknown_variants}; valid choices: {', '.join(map(repr, LM_VARIANTS))}")
    reference = values.pop("reference", REFERENCE)
    if reference not in labels:
        raise ValueError(f"variants must include {reference}, the reference every claim is judged on")
    other_seeds = optional_seeds(values.pop("other_seeds"), "other_seeds")
    depth_seeds = optional_seeds(values.pop("depth_seeds"), "depth_seeds")
    depth_layers = values.pop("depth_layers")
    early_step = values.pop("early_step")
    pretrained = values.pop("pretrained")
    shape = TransformerShape(**{name: values.pop(name) for name in SHAPE_FIELDS})
    dataclasses.replace(shape, n_layers=depth_layers)  # validated like the base shape
    optimizer = OptimizerConfig("adam", lr=values.pop("lr", 1e-3))
    steps = check_integer("steps", values["steps"])
    if isinstance(early_step, numbers.Integral) and not 0 < early_step < steps:
        raise ValueError(
            f"early_step ({early_step}) must lie strictly between 0 and steps ({steps}); set early_step below steps"
        )
    base = LMRunConfig(shape=shape, optimizer=optimizer, snapshot_steps=(early_step,), **values)
    if not 0 < base.snapshot_steps[0] < base.steps:
        raise ValueError(f"early_step must lie strictly between 0 and steps ({base.steps}), got {early_step}")
    return LMChapterSettings(
        scale=scale,
        base=base,
        seeds=seeds,
        variants={v: LM_VARIANTS[v] for v in labels},
        other_seeds=other_seeds,
        depth_layers=int(depth_layers),
        depth_seeds=depth_seeds,
        pretrained=None if pretrained in (None, "none") else str(pretrained),
        reference=reference,
        long_factor=long_factor,
        control_corpus=control_corpus,
        control_seeds=control_seeds,
    )


def scale_rows(settings: LMChapterSettings) -> list[tuple[str, str]]:
    """The transformer's rows of the methods page's table of the scales."""
    base, shape = settings.base, settings.base.shape
    others = [v for v in settings.variants if v not in MAIN_VARIANTS]
    return [
        ("transformer: corpus", f"`{base.corpus}`"),
        ("transformer: layers × d_model (heads)", f"{shape.n_layers} × {shape.d_model} ({shape.n_heads})"),
        ("transformer: SwiGLU width, vocabulary", f"{shape.ffn_dim}, {shape.vocab_size}"),
        ("transformer: steps × batch × sequence", f"{base.steps} × {base.batch_size} × {shape.max_seq_len}"),
        ("transformer: early horizon (a snapshot of every run)", str(settings.early_step)),
        (
            "transformer: snapshots (log-spaced, evenly spaced; repeats merged)",
            f"{len(base.schedule())} ({base.n_snapshots}, {base.n_late_snapshots})",
        ),
        (f"transformer: seeds of {' and '.join(MAIN_VARIANTS)}", seeds_text(settings.seeds)),
        (
            "transformer: other variants; deeper model",
            (
                ", ".join(f"`{v}`" for v in others) + f" × {len(settings.other_seeds)} seed"
                if settings.other_seeds and others
                else "not run"
            )
            + "; "
            + (
                f"{settings.depth_layers} layers × {len(settings.depth_seeds)} seed"
                if settings.depth_seeds
                else "not run"
            ),
        ),
        (
            "transformer: memorisation control (corpus, seeds)",
            f"`{settings.control_label}`: `{settings.control_corpus}`, {seeds_text(settings.control_seeds)}"
            if settings.control_configs()
            else "not run",
        ),
        (
            "transformer: longer reference run (steps, seed)",
            f"{settings.long_factor} × {base.steps} = {settings.long_factor * base.steps}, seed {settings.seeds[0]}"
            if settings.long_configs()
            else "not run",
        ),
    ]


def run_configs(settings: LMChapterSettings) -> list[LMRunConfig]:
    """Every run of the transformer chapter, variant by variant (the deeper model, then the longer run, last)."""
    return [config for configs in settings.all_configs().values() for config in configs]


def reference_settings(scale: str, seeds: Any) -> LMChapterSettings:
    """The settings of the reference variant alone at ``scale``'s preset, with ``seeds``: the trained
    models the compression and pretrained-continuity chapters analyse."""
    return build_settings(scale, {**lm_preset(scale), "variants": (REFERENCE,), "seeds": seeds, "control_corpus": None})


def reference_configs(scale: str, seeds: Any) -> list[LMRunConfig]:
    """The reference variant's runs at ``scale``'s preset (:func:`reference_settings`), one per seed."""
    return reference_settings(scale, seeds).configs()[REFERENCE]

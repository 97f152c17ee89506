"""Chapter "projection-specific continuity in transformers": a Llama-style model trained on the
offline corpus, with MLP-activation and linear-attention ablations."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from ..config import LMRunConfig, OptimizerConfig
from ..scales import apply_overrides, check_scale
from ..statistics import Estimate, at_final_step, estimate, verdict_for_difference
from ..tables import RUN_KEYS, claim_row
from ..transformer import TransformerShape



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


    check_scale(scale)
    shape_fields = {f.name for f in dataclasses.fields(TransformerShape)} - {"mlp_activation", "attention"}
    run_fields = {f.name for f in dataclasses.fields(LMRunConfig)} - {"shape", "seed", "optimizer"}
    preset, seeds = apply_overrides(_LM_SCALES[scale], overrides, shape_fields | run_fields | {"seeds", "variants", "lr"})
    labels = preset.pop("variants", list(LM_VARIANTS))
    unknown_variants = [v for v in labels if v not in LM_VARIANTS]
    if unknown_variants:
        raise ValueError(f"unknown variant(s) {unknown_variants}; valid choices: {', '.join(LM_VARIANTS)}")
    shape = dataclasses.replace(LM_SHAPES[scale], **{k: preset.pop(k) for k in list(preset) if k in shape_fields})
    optimizer = OptimizerConfig("adam", lr=preset.pop("lr", 1e-3))
    base = LMRunConfig(shape=shape, optimizer=optimizer, **preset)
    return LMChapterSettings(scale=scale, base=base, seeds=seeds, variants={v: LM_VARIANTS[v] for v in labels})


#: The paper's projection-specific prediction: (projection, space, why) that should be continuous.
PROJECTION_PREDICTIONS = [
    ("q_proj", "input", "reads the residual stream, followed by the softmax"),
    ("k_proj", "input", "reads the residual stream, followed by the softmax"),
    ("gate_proj", "input", "reads the residual stream, followed by the MLP activation"),
    ("up_proj", "input", "reads the residual stream, multiplied by the activated gate"),
    ("o_proj", "output", "writes to the residual stream after attention"),
    ("down_proj", "output", "writes to the residual stream after the MLP nonlinearity"),
]


def projection_finals(table: pd.DataFrame, metric: str = "weight_cos", direction: int = 1) -> pd.DataFrame:
    """Per run, projection (``group``) and space: the layer-pair mean at the last step."""
    rows = table[(table["metric"] == metric) & (table["direction"] == direction)]
    rows = at_final_step(rows)
    return (rows.groupby(RUN_KEYS + ["group", "space"], observed=True)["value"].mean().reset_index())


def transformer_claims(table: pd.DataFrame, dims: dict[str, dict[str, int]], reference: str = "silu",
                       no_activation: str = "none", linear_attention: str = "silu, linear attention") -> pd.DataFrame:
    """Claims table of the transformer chapter, from its run table.

    ``dims`` gives each projection's input/output dimension (for the random baselines).
    """
    from ..metrics import random_abs_cos

    chapter = "transformer_projections"
    finals = projection_finals(table)

    def est(variant: str, projection: str, space: str) -> Estimate:
        frame = finals[(finals["condition"] == variant) & (finals["group"] == projection) & (finals["space"] == space)]
        return estimate(frame["value"])

    def baseline(projection: str, space: str) -> Estimate:
        return Estimate(random_abs_cos(dims[projection][space]), 0.0, 1)

    rows = []
    for projection, space, why in PROJECTION_PREDICTIONS:
        ours, base = est(reference, projection, space), baseline(projection, space)
        vector = "v1" if space == "input" else "u1"
        rows.append(claim_row(chapter, f"{projection} has {space}-space continuity ({why})",
                              f"{projection} {vector} |cos| ({reference})", "high", ours.mean, ours.std, ours.n,
                              base.mean, verdict_for_difference(ours, base)))
    for space in ("input", "output"):
        v = est(reference, "v_proj", space)
        others = ["q_proj", "k_proj", "gate_proj", "up_proj"] if space == "input" else ["o_proj", "down_proj"]
        lowest = min((est(reference, p, space) for p in others), key=lambda e: e.mean)
        vector = "v1" if space == "input" else "u1"
        rows.append(claim_row(chapter, f"V has low {space}-space continuity (no adjacent nonlinearity)",
                              f"v_proj {vector} |cos| below the lowest of {', '.join(others)}", "low",
                              v.mean, v.std, v.n, random_abs_cos(dims["v_proj"][space]),
                              verdict_for_difference(lowest, v), note=f"lowest other: {lowest}"))
    variants = set(table["condition"])
    if no_activation in variants:
        for projection in ("gate_proj", "up_proj"):
            with_act, without = est(reference, projection, "input"), est(no_activation, projection, "input")
            rows.append(claim_row(chapter, f"Removing the MLP activation lowers {projection} input continuity",
                                  f"{projection} v1: {reference} minus {no_activation}", "drops",
                                  with_act.mean - without.mean, math.nan, with_act.n,
                                  random_abs_cos(dims[projection]["input"]),
                                  verdict_for_difference(with_act, without),
                                  note=f"{reference} {with_act}, {no_activation} {without}"))
    if linear_attention in variants:
        for projection in ("q_proj", "k_proj"):
            soft, lin = est(reference, projection, "input"), est(linear_attention, projection, "input")
            rows.append(claim_row(chapter, f"(ours) Without the softmax, {projection} input continuity drops",
                                  f"{projection} v1: softmax minus linear attention", "implied, not tested",
                                  soft.mean - lin.mean, math.nan, soft.n, random_abs_cos(dims[projection]["input"]),
                                  verdict_for_difference(soft, lin), note=f"softmax {soft}, linear {lin}"))
    return pd.DataFrame(rows)


def plot_projection_bars(
    finals: pd.DataFrame, dims: dict[str, dict[str, int]], *, condition: str, ax: plt.Axes | None = None,
) -> plt.Axes:
    """v1 (input) and u1 (output) continuity per projection: bars (seed mean), dots (seeds),
    and a black tick at each space's own random baseline E|cos| (its dimension differs)."""
    from ..metrics import random_abs_cos

    ax = ax or plt.gca()
    frame = finals[finals["condition"] == condition]
    projections = list(dims)
    colours = sns.color_palette("colorblind", 2)
    width = 0.38
    for offset, (space, label, colour) in zip((-width / 2, width / 2), [("input", "input space (v1)", colours[0]),
                                                                          ("output", "output space (u1)", colours[1])]):
        for i, projection in enumerate(projections):
            values = frame[(frame["group"] == projection) & (frame["space"] == space)]["value"]
            x = i + offset
            ax.bar(x, values.mean(), width=width * 0.95, color=colour, alpha=0.8, label=label if i == 0 else None)
            ax.scatter([x] * len(values), values, color="black", s=12, zorder=3)
            ax.hlines(random_abs_cos(dims[projection][space]), x - width / 2, x + width / 2, color="black",
                      linewidth=2, label="random baseline (per space)" if i == 0 and space == "input" else None)
    ax.set_xticks(range(len(projections)), [p.replace("_proj", "") for p in projections])
    ax.set_ylabel("|cos|, mean over adjacent layer pairs")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize="small")
    return ax

"""Chapter "Projection-specific continuity in transformers": a Llama-style model trained on the
offline corpus, with MLP-activation and linear-attention ablations (``book/transformer_projections.ipynb``).

The compression chapter reuses this chapter's trained ``silu`` models through :func:`lm_chapter_settings`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython.display import Markdown

from .. import plotting
from ..book import claims as book_claims
from ..book.chapter import ClaimsBuilder, claim, configure_notebook, undefined_sentence, verdict_list
from ..book.figures import show_figure
from ..book.provenance import provenance_markdown
from ..config import LMRunConfig, OptimizerConfig, TransformerShape
from ..lm import run_lm_sweep
from ..metrics import random_abs_cos
from ..scales import apply_overrides, check_scale, parameter_errors
from ..statistics import Estimate, at_final_step, estimate, per_run, verdict_for_difference
from ..tables import RUN_KEYS
from ..transformer import PROJECTIONS, build_llama, parameter_count, projection_dims

NAME = "transformer_projections"
NOTEBOOK = f"book/{NAME}.ipynb"

#: The notebook's parameters, in the order of its ``parameters`` cell.
PARAMETERS: dict[str, str] = {
    "scale": "smoke | cpu | paper: the whole preset, see geocont.chapters.transformer_projections",
    "seeds": "an int n (seeds 0..n-1) or a list; None keeps the scale's default",
    "steps": "any of these overrides one setting of the preset; None keeps it",
    "variants": "a list of labels from geocont.chapters.transformer_projections.LM_VARIANTS",
    "corpus": "kjv (offline) | wikitext-103 (needs a network or a HF cache)",
    "n_layers": "transformer blocks",
    "d_model": "residual-stream width",
    "batch_size": "sequences per step",
    "lr": "Adam's learning rate",
}

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
    base: LMRunConfig
    seeds: tuple[int, ...]
    variants: dict[str, tuple[str, str]] = field(default_factory=lambda: dict(LM_VARIANTS))
    overrides: dict[str, Any] = field(default_factory=dict)

    def configs(self) -> dict[str, list[LMRunConfig]]:
        """``{variant label: [config per seed]}``."""
        out = {}
        for label, (activation, attention) in self.variants.items():
            shape = dataclasses.replace(self.base.shape, mlp_activation=activation, attention=attention)
            out[label] = [self.base.replace(shape=shape, seed=s) for s in self.seeds]
        return out


def lm_chapter_settings(scale: str, **overrides: Any) -> LMChapterSettings:
    """Settings of the transformer chapter at ``scale``, with optional overrides.

    Overrides may name any :class:`geocont.config.LMRunConfig` field, any
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
    return LMChapterSettings(scale=scale, base=base, seeds=seeds, variants={v: LM_VARIANTS[v] for v in labels},
                             overrides={k: v for k, v in overrides.items() if v is not None})


#: The paper's projection-specific prediction: (projection, space, why) that should be continuous.
PROJECTION_PREDICTIONS = [
    ("q_proj", "input", "reads the residual stream, followed by the softmax"),
    ("k_proj", "input", "reads the residual stream, followed by the softmax"),
    ("gate_proj", "input", "reads the residual stream, followed by the MLP activation"),
    ("up_proj", "input", "reads the residual stream, multiplied by the activated gate"),
    ("o_proj", "output", "writes to the residual stream after attention"),
    ("down_proj", "output", "writes to the residual stream after the MLP nonlinearity"),
]


def configure(scale: str = "smoke", **params: Any) -> LMChapterSettings:
    """The chapter's settings at ``scale`` with the notebook's ``params`` overriding the preset."""
    unknown = sorted(set(params) - set(PARAMETERS))
    with parameter_errors():
        if unknown:
            raise ValueError(f"unknown parameter(s) {', '.join(unknown)}; valid choices: {', '.join(PARAMETERS)}")
        return lm_chapter_settings(scale, **params)


def from_notebook(namespace: dict[str, Any]) -> LMChapterSettings:
    """:func:`configure` from the notebook's parameter variables (``globals()``); sets the figure theme."""
    return configure_notebook(namespace, PARAMETERS, configure)


def provenance(settings: LMChapterSettings) -> Markdown:
    base = settings.base
    shape = base.shape
    return Markdown(provenance_markdown(
        notebook=NOTEBOOK, scale=settings.scale, overrides=settings.overrides, seeds=settings.seeds,
        data=f"`{base.corpus}`, byte-level BPE tokenizer with {shape.vocab_size} tokens trained on its training split",
        model=f"transformers' LlamaForCausalLM: {shape.n_layers} layers, d = {shape.d_model}, {shape.n_heads} heads, "
              f"SwiGLU width {shape.ffn_dim}, {parameter_count(build_llama(shape)) / 1e6:.2f}M parameters; "
              f"variants: {', '.join(settings.variants)}",
        training=f"{base.steps} steps of {base.batch_size} × {shape.max_seq_len} tokens, {base.optimizer.label} "
                 f"(lr {base.optimizer.lr:g}); {base.n_snapshots} log-spaced snapshots",
    ))


def projection_finals(table: pd.DataFrame, metric: str = "weight_cos", direction: int = 1) -> pd.DataFrame:
    """Per run, projection (``group``) and space: the layer-pair mean at the last step."""
    rows = at_final_step(table[(table["metric"] == metric) & (table["direction"] == direction)])
    return rows.groupby(RUN_KEYS + ["group", "space"], observed=True)["value"].mean().reset_index()


@dataclass
class Results:
    """The run table of every variant and seed, its final per-projection values, and the projections' dimensions."""

    settings: LMChapterSettings
    table: pd.DataFrame
    finals: pd.DataFrame
    dims: dict[str, dict[str, int]]

    @property
    def variants(self) -> list[str]:
        return list(self.settings.variants)

    @property
    def reference(self) -> str:
        """The variant the per-projection figures show: the first one (``silu`` by default)."""
        return self.variants[0]


def run(settings: LMChapterSettings) -> Results:
    """Train (or load from the cache) every variant and seed."""
    table = run_lm_sweep(settings.configs())
    return Results(settings, table, projection_finals(table), projection_dims(settings.base.shape))


def trained_note(results: Results) -> Markdown:
    return Markdown(f"{len(results.variants)} variants × {len(results.settings.seeds)} seeds trained. "
                    + undefined_sentence(results.table))


def _space_title(space: str) -> str:
    return f"{space} space ({'v1' if space == 'input' else 'u1'})"


def _short(projection: str) -> str:
    return projection.replace("_proj", "")


def loss_figure(results: Results) -> None:
    """Training and validation loss of every variant over training."""
    table, variants = results.table, results.variants
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.5), sharey=True)
    for ax, metric in zip(axes, ["train_loss", "val_loss"]):
        sns.lineplot(data=table[table["metric"] == metric], x="step", y="value", hue="condition", hue_order=variants,
                     palette=plotting.palette(variants), errorbar="sd", marker="o", markersize=3.5, ax=ax,
                     legend=ax is axes[0])
        ax.set(xscale="symlog", xlabel="training step (symlog)", ylabel="cross-entropy (nats/token)",
               title="training minibatch loss" if metric == "train_loss" else "validation loss")
    plotting.figure_legend(fig, axes[0])
    val = at_final_step(per_run(table, "val_loss", "", 0))
    show_figure(fig, "lm-loss", "Loss during training (seed mean ± 1 sd). Final validation loss: "
                + "; ".join(f"{v} {estimate(val.loc[val.condition == v, 'value'])}" for v in variants)
                + f" nats/token (uniform guessing: {math.log(results.settings.base.shape.vocab_size):.2f}).")


#: Legend label of each space in the per-projection bars.
SPACE_LABELS = {"input": "input space (v1)", "output": "output space (u1)"}


def projection_bars_figure(results: Results) -> None:
    """v1 (input) and u1 (output) continuity per projection of the reference variant, with a black
    tick at each space's own random baseline E|cos| (its dimension differs)."""
    finals, dims, reference = results.finals, results.dims, results.reference
    frame = finals[finals["condition"] == reference]
    bars = frame.assign(space=frame["space"].map(SPACE_LABELS), group=frame["group"].map(_short))
    baselines = {(_short(p), SPACE_LABELS[s]): random_abs_cos(dims[p][s]) for p in dims for s in SPACE_LABELS}
    fig, ax = plt.subplots(figsize=(12, 4.8))
    plotting.grouped_bars(bars, x="group", hue="space", ax=ax, order=[_short(p) for p in dims],
                          hue_order=list(SPACE_LABELS.values()),
                          colours=dict(zip(SPACE_LABELS.values(), sns.color_palette("colorblind", 2))),
                          baselines=baselines, baseline_label="random baseline (per space)")
    ax.set(xlabel="", ylabel="|cos|, mean over adjacent layer pairs", ylim=(0, 1.02),
           title=f"variant `{reference}`, end of training")
    fig.tight_layout()
    lines = []
    for projection in PROJECTIONS:
        parts = [f"{vector} {estimate(frame[(frame.group == projection) & (frame.space == space)]['value'])}"
                 for space, vector in (("input", "v1"), ("output", "u1"))]
        lines.append(f"{projection}: " + ", ".join(parts))
    show_figure(fig, "lm-projection-bars", "Final adjacent-layer continuity per projection (bars: seed mean; dots: "
                "seeds; black ticks: each space's random baseline). " + "; ".join(lines) + ".")


def _reference_rows(results: Results) -> pd.DataFrame:
    table = results.table
    return table[(table.metric == "weight_cos") & (table.direction == 1) & (table.condition == results.reference)]


def depth_profile_figure(results: Results) -> None:
    """Each projection's final continuity per adjacent layer pair, in both spaces."""
    rows = at_final_step(_reference_rows(results))
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.5), sharey=True)
    for ax, space in zip(axes, ["input", "output"]):
        sns.lineplot(data=rows[rows.space == space], x="layer", y="value", hue="group", hue_order=list(PROJECTIONS),
                     errorbar="sd", marker="o", ax=ax, legend=ax is axes[0])
        ax.set(xlabel="adjacent layer pair (l, l+1)", ylabel="|cos|", ylim=(0, 1.02), title=_space_title(space))
        ax.set_xticks(sorted(rows.layer.unique()))
    plotting.figure_legend(fig, axes[0])
    show_figure(fig, "lm-depth-profile", f"Continuity of each projection through depth, per adjacent layer pair, at "
                f"the end of training (variant `{results.reference}`; seed mean ± 1 sd).")


def over_training_figure(results: Results) -> None:
    """Each projection's layer-mean continuity over training, in both spaces."""
    rows = _reference_rows(results)
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.5), sharey=True)
    for ax, space in zip(axes, ["input", "output"]):
        runs = rows[rows.space == space].groupby(["group", "seed", "step"], observed=True)["value"].mean().reset_index()
        sns.lineplot(data=runs, x="step", y="value", hue="group", hue_order=list(PROJECTIONS), errorbar="sd", ax=ax,
                     legend=ax is axes[0])
        ax.set(xscale="symlog", xlabel="training step (symlog)", ylabel="|cos|, mean over layer pairs", ylim=(0, 1.02),
               title=_space_title(space))
    plotting.figure_legend(fig, axes[0])
    show_figure(fig, "lm-over-training", f"Continuity of each projection over training (variant `{results.reference}`).")


def ablations_figure(results: Results) -> None:
    """Final continuity per projection and variant, in both spaces (bars: seed mean; lines: ±1 sd)."""
    finals, variants = results.finals, results.variants
    fig, axes = plt.subplots(1, 2, figsize=(15, 4.8), sharey=True)
    for ax, space in zip(axes, ["input", "output"]):
        sns.barplot(data=finals[finals.space == space], x="group", y="value", hue="condition",
                    order=list(PROJECTIONS), hue_order=variants, palette=plotting.palette(variants), errorbar="sd",
                    ax=ax, alpha=0.85)
        ax.set(xlabel="", ylabel="|cos|, mean over layer pairs", ylim=(0, 1.02), title=_space_title(space))
        ax.set_xticks(range(len(PROJECTIONS)), [_short(p) for p in PROJECTIONS])
    plotting.figure_legend(fig, axes[0])
    if axes[1].get_legend() is not None:
        axes[1].get_legend().remove()
    show_figure(fig, "lm-ablations", "Final continuity per projection and variant (bars: seed mean; lines: ±1 sd).")


#: Keys of the linear-attention claims (our direct test of the paper's Q/K claim).
SOFTMAX_KEYS = ("softmax-anchors-q", "softmax-anchors-k")


def transformer_claims(table: pd.DataFrame, dims: dict[str, dict[str, int]], reference: str = "silu",
                       no_activation: str = "none", linear_attention: str = "silu, linear attention") -> pd.DataFrame:
    """Claims table of the chapter, from its run table.

    ``dims`` gives each projection's input/output dimension (for the random baselines).
    """
    finals = projection_finals(table)
    out = ClaimsBuilder(NAME)

    def est(variant: str, projection: str, space: str) -> Estimate:
        frame = finals[(finals["condition"] == variant) & (finals["group"] == projection) & (finals["space"] == space)]
        return estimate(frame["value"])

    for projection, space, why in PROJECTION_PREDICTIONS:
        ours, base = est(reference, projection, space), Estimate(random_abs_cos(dims[projection][space]), 0.0, 1)
        vector = "v1" if space == "input" else "u1"
        out.add(f"{_short(projection)}-{space}-continuity", f"{projection} has {space}-space continuity ({why})",
                f"{projection} {vector} |cos| ({reference})", "high", ours, base.mean,
                verdict_for_difference(ours, base))
    for space in ("input", "output"):
        v = est(reference, "v_proj", space)
        others = ["q_proj", "k_proj", "gate_proj", "up_proj"] if space == "input" else ["o_proj", "down_proj"]
        lowest = min((est(reference, p, space) for p in others), key=lambda e: e.mean)
        vector = "v1" if space == "input" else "u1"
        out.add(f"v-low-{space}", f"V has low {space}-space continuity (no adjacent nonlinearity)",
                f"v_proj {vector} |cos| below the lowest of {', '.join(others)}", "low", v,
                random_abs_cos(dims["v_proj"][space]), verdict_for_difference(lowest, v),
                note=f"lowest other: {lowest}")
    variants = set(table["condition"])
    if no_activation in variants:
        for projection in ("gate_proj", "up_proj"):
            with_act, without = est(reference, projection, "input"), est(no_activation, projection, "input")
            out.add(f"activation-lowers-{_short(projection)}",
                    f"Removing the MLP activation lowers {projection} input continuity",
                    f"{projection} v1: {reference} minus {no_activation}", "drops", with_act.mean - without.mean,
                    random_abs_cos(dims[projection]["input"]), verdict_for_difference(with_act, without),
                    note=f"{reference} {with_act}, {no_activation} {without}", std=math.nan, n=with_act.n)
    if linear_attention in variants:
        for key, projection in zip(SOFTMAX_KEYS, ("q_proj", "k_proj")):
            soft, lin = est(reference, projection, "input"), est(linear_attention, projection, "input")
            out.add(key, f"(ours) Without the softmax, {projection} input continuity drops",
                    f"{projection} v1: softmax minus linear attention", "implied, not tested", soft.mean - lin.mean,
                    random_abs_cos(dims[projection]["input"]), verdict_for_difference(soft, lin),
                    note=f"softmax {soft}, linear {lin}", std=math.nan, n=soft.n)
    return out.table()


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table."""
    return transformer_claims(results.table, results.dims, reference=results.reference)


def verdict(results: Results, claims: pd.DataFrame) -> Markdown:
    settings = results.settings
    return Markdown(verdict_list(claims, f"At the `{settings.scale}` scale ({len(settings.seeds)} seeds, "
                                         f"{settings.base.steps} steps on `{settings.base.corpus}`):"))


def softmax_note(claims: pd.DataFrame) -> Markdown | None:
    """What the linear-attention ablation says when it does not support the softmax claim (else nothing)."""
    rows = [claim(claims, key) for key in SOFTMAX_KEYS if key in set(claims["key"])]
    if not rows or any(row["verdict"] == "reproduced" for row in rows):
        return None
    return Markdown(
        "**Q and K keep their input-space continuity without the softmax** (" + "; ".join(r["note"] for r in rows)
        + "). In this model, then, the softmax is not what anchors them. Two candidates this chapter does not test: "
        "Llama's RMSNorm has a learnable element-wise gain that fixes a coordinate frame of the residual stream that "
        "Q and K read from, and RoPE rotates fixed coordinate pairs of each head. The paper's own caveat applies: its "
        "Q/K evidence is indirect."
    )


def publish(settings: LMChapterSettings, claims: pd.DataFrame) -> None:
    """Publish the claims table for the book's closing chapter."""
    book_claims.publish(claims, chapter=NAME, scale=settings.scale, overrides=settings.overrides)

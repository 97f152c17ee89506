"""transformer_projections: what the chapter computes (settings, runs, events, claims); no figures, no matplotlib."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...analyzer import analyze
from ...book.chapter import Chapter, ClaimsBuilder, with_early
from ...config import LMRunConfig
from ...lm import run_lm_sweep
from ...metrics import random_abs_cos, vector_name
from ...pretrained import ModelNotAvailable
from ...statistics import (Estimate, at_final_step, change_over_last_per_run, estimate, holds_when,
                           verdict_for_difference)
from ...sweeps import predicted_wall_seconds
from ...tables import RUN_KEYS
from ...transformer import build_llama, parameter_count, projection_dims
from .. import lm_runs
from ..lm_runs import LM_VARIANTS, MAIN_VARIANTS, PROJECTION_PREDICTIONS, LMChapterSettings


#: The notebook's parameters, in the order of its ``parameters`` cell.
PARAMETERS: dict[str, str] = {
    "scale": "smoke | cpu | paper: the whole preset, see geocont.chapters.transformer_projections",
    "seeds": "seeds of silu and none: an int n (seeds 0..n-1) or a list; None keeps the scale's default",
    "steps": "any of these overrides one setting of the preset; None keeps it",
    "early_step": "the earlier horizon shown beside the settled values (a snapshot of every run)",
    "variants": "a list of labels from geocont.chapters.lm_runs.LM_VARIANTS",
    "other_seeds": "seeds of relu and linear attention (0 or [] runs none of them)",
    "depth_layers": "layers of the deeper silu model (same width)",
    "depth_seeds": "seeds of the deeper model (0 or [] runs none)",
    "corpus": "kjv (offline) | wikitext-103 (needs a network or a HF cache)",
    "n_layers": "transformer blocks",
    "d_model": "residual-stream width",
    "batch_size": "sequences per step",
    "lr": "Adam's learning rate",
    "eval_windows": "validation windows per snapshot",
    "pretrained": 'pretrained checkpoint to compare with: "smollm2-135m" (offline) or "none"',
    "precision": "fp32 | bf16-autocast (matrix products in bf16; weights, optimizer state and metrics stay fp32)",
}


#: Measured cost of one training step of the ``cpu`` shape (batch 16 x 128 tokens) at one torch
#: thread on this project's 2-core machine, by layer count, in seconds, the other core idle:
#: 4 layers 0.189 s (``python benchmarks/bench_lm_recording.py --steps 200``), 8 layers 0.338 s
#: (``--steps 120 --n-layers 8``). Recording (28 snapshots, each with the validation loss, 0.37 s
#: and 0.62 s per snapshot) adds 1.3-1.4% at the ``cpu`` schedule. In the chapter's sweep (2
#: workers) a 4-layer run took 12.5-13 min, 0.19 s per step with recording.
#: :func:`budget_note` predicts the chapter's cold time from them.
CPU_SECONDS_PER_STEP = {4: 0.189, 8: 0.338}


#: The book's time budget for this chapter at ``cpu``, cold, in minutes.
CPU_BUDGET_MINUTES = 40


#: The full design at ``cpu`` (the ``cpu`` preset runs all of it; :func:`budget_note` says what it
#: costs and what a cheaper re-run leaves out).
FULL_CPU_DESIGN = dict(seeds=(0, 1, 2), other_seeds=(0,), variants=tuple(LM_VARIANTS), depth_seeds=(0,))


#: A re-run that fits the budget: two seeds of ``silu`` and ``none``, no other variant, no deeper model.
BUDGET_CPU_DESIGN = dict(seeds=(0, 1), other_seeds=(), variants=MAIN_VARIANTS, depth_seeds=())


#: Analyse only this many layers of the pretrained checkpoint at ``smoke`` (all at the other scales).
_PRETRAINED_LAYERS = {"smoke": 6, "cpu": None, "paper": None}


def describe(settings: LMChapterSettings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    base = settings.base
    shape = base.shape
    runs = ", ".join(f"`{label}` × {len(configs)}" for label, configs in settings.configs().items())
    return dict(
        seeds=settings.seeds,
        data=f"`{base.corpus}`, byte-level BPE tokenizer with {shape.vocab_size} tokens trained on its training split",
        model=f"transformers' LlamaForCausalLM: {shape.n_layers} layers, d = {shape.d_model}, {shape.n_heads} heads, "
              f"SwiGLU width {shape.ffn_dim}, {parameter_count(build_llama(shape)) / 1e6:.2f}M parameters; "
              f"runs (label × seeds): {runs}",
        training=f"{base.steps} steps of {base.batch_size} × {shape.max_seq_len} tokens, {base.optimizer.label} "
                 f"(lr {base.optimizer.lr:g}, constant); {len(base.schedule())} snapshots ({base.n_snapshots} "
                 f"log-spaced, {base.n_late_snapshots} evenly spaced, and step {settings.early_step}), each with the validation "
                 f"loss on {base.eval_windows} windows",
    )


CHAPTER = Chapter("transformer_projections", PARAMETERS, lm_runs.lm_preset, lm_runs.build_settings, describe,
                  lm_runs.run_configs, scale_rows=lm_runs.scale_rows)


def _duration(config: LMRunConfig) -> float:
    """Predicted seconds of one ``cpu``-width run at one thread: :data:`CPU_SECONDS_PER_STEP`,
    interpolated linearly in the number of layers between the two measured depths."""
    (l4, t4), (l8, t8) = sorted(CPU_SECONDS_PER_STEP.items())
    return config.steps * (t4 + (t8 - t4) * (config.shape.n_layers - l4) / (l8 - l4))


def predicted_minutes(settings: LMChapterSettings, workers: int = 2) -> float:
    """Predicted cold wall time of the runs, in minutes, on ``workers`` one-thread workers: the
    longest-first schedule of the runs' predicted durations (:func:`_duration`), plus a minute for
    the tokenizer, the workers' start and the figures, and one for analysing the pretrained checkpoint."""
    durations = (_duration(c) for group in settings.configs().values() for c in group)
    return predicted_wall_seconds(durations, workers) / 60 + 1 + (1 if settings.pretrained else 0)


def projection_values(table: pd.DataFrame, metric: str = "weight_cos", direction: int = 1) -> pd.DataFrame:
    """Per run, projection (``group``), space and step: the mean over adjacent layer pairs."""
    rows = table[(table["metric"] == metric) & (table["direction"] == direction)]
    return rows.groupby(RUN_KEYS + ["group", "space", "step"], observed=True)["value"].mean().reset_index()


def projection_finals(table: pd.DataFrame, metric: str = "weight_cos", direction: int = 1) -> pd.DataFrame:
    """Per run, projection (``group``) and space: the layer-pair mean at the last step."""
    return at_final_step(projection_values(table, metric, direction))


@dataclass
class Results:
    """The run table of every variant and seed, its final per-projection values, the projections'
    dimensions, and the pretrained checkpoint's analyzer table (None where it was not analysed)."""

    settings: LMChapterSettings
    table: pd.DataFrame
    finals: pd.DataFrame
    dims: dict[str, dict[str, int]]
    pretrained: pd.DataFrame | None = None
    pretrained_status: str = ""

    @property
    def variants(self) -> list[str]:
        """The labels run, in order (the deeper model last)."""
        return list(dict.fromkeys(self.table["condition"]))

    @property
    def reference(self) -> str:
        """The variant every claim is judged on and the per-projection figures show (``silu`` in the presets)."""
        return self.settings.reference

    @property
    def early(self) -> pd.DataFrame:
        """The run table up to the early horizon (its last snapshot is ``early_step``)."""
        return self.table[self.table["step"] <= self.settings.early_step]

    @functools.cached_property
    def early_finals(self) -> pd.DataFrame:
        """Per-projection values at the early horizon (:func:`projection_finals` of :attr:`early`)."""
        return projection_finals(self.early)


def _pretrained_table(settings: LMChapterSettings) -> tuple[pd.DataFrame | None, str]:
    if settings.pretrained is None:
        return None, "no pretrained checkpoint was asked for"
    try:
        table = analyze(settings.pretrained, max_layers=_PRETRAINED_LAYERS[settings.scale], progress=False)
    except (ModelNotAvailable, FileNotFoundError) as error:
        return None, f"`{settings.pretrained}` is not installed here ({str(error).split('. ')[0]})"
    layers = int(table["layer"].max()) + 1
    return table, f"`{settings.pretrained}` ({layers} layers analysed, {table.attrs['parameters'] / 1e6:.0f}M parameters)"


def run(settings: LMChapterSettings) -> Results:
    """Train (or load from the cache) every variant and seed; analyse the pretrained checkpoint."""
    table = run_lm_sweep(settings.configs())
    pretrained, status = _pretrained_table(settings)
    return Results(settings, table, projection_finals(table), projection_dims(settings.base.shape), pretrained, status)


def _short(projection: str) -> str:
    return projection.replace("_proj", "")


def _estimate(values: pd.DataFrame, label: str, projection: str, space: str) -> Estimate:
    frame = values[(values["condition"] == label) & (values["group"] == projection) & (values["space"] == space)]
    return estimate(frame["value"])


def late_changes(table: pd.DataFrame) -> pd.DataFrame:
    """Per run, projection and space: the change of the layer-pair mean over the last third of training."""
    return change_over_last_per_run(projection_values(table), 1 / 3, keys=["group", "space"])


#: Keys of the linear-attention claims (our direct test of the paper's Q/K claim).
SOFTMAX_KEYS = ("softmax-anchors-q", "softmax-anchors-k")


def transformer_claims(table: pd.DataFrame, dims: dict[str, dict[str, int]], reference: str = lm_runs.REFERENCE,
                       no_activation: str | None = "none",
                       linear_attention: str | None = "silu, linear attention") -> pd.DataFrame:
    """Claims table of a run table, judged at each run's last step.

    ``dims`` gives each projection's input/output dimension (for the random baselines). The
    ablation claims are left out where their variant (``no_activation``, ``linear_attention``;
    None: never) was not run.
    """
    finals = projection_finals(table)
    out = ClaimsBuilder(CHAPTER.name)

    def est(variant: str, projection: str, space: str) -> Estimate:
        return _estimate(finals, variant, projection, space)

    for projection, space, why in PROJECTION_PREDICTIONS:
        ours, base = est(reference, projection, space), Estimate(random_abs_cos(dims[projection][space]), 0.0, 1)
        vector = vector_name(space)
        out.add(f"{_short(projection)}-{space}-continuity", f"{projection} has {space}-space continuity ({why})",
                f"{projection} {vector} |cos| ({reference})", "high", ours, base.mean,
                verdict_for_difference(ours, base))
    for space in ("input", "output"):
        v = est(reference, "v_proj", space)
        others = ["q_proj", "k_proj", "gate_proj", "up_proj"] if space == "input" else ["o_proj", "down_proj"]
        lowest = min((est(reference, p, space) for p in others), key=lambda e: e.mean)
        vector = vector_name(space)
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


#: The claim keys judged on one projection's continuity (for the late-change note).
_CLAIM_QUANTITY = {f"{_short(p)}-{s}-continuity": (p, s) for p, s, _ in PROJECTION_PREDICTIONS}


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table, judged at the last step, with the same claims judged at
    ``early_step`` in its ``early`` column (:func:`geocont.book.chapter.with_early`); each note adds
    when the claim holds (:func:`geocont.statistics.holds_when`) and, for a claim on one
    projection's continuity, its change over the last third of training."""
    table = transformer_claims(results.table, results.dims, reference=results.reference)
    early = transformer_claims(results.early, results.dims, reference=results.reference)
    table = with_early(table, early, results.settings.early_step)
    changes = late_changes(results.table)
    notes = []
    for row in table.itertuples():
        parts = [f"holds {holds_when(row.early_verdict, row.verdict)}"]
        if row.key in _CLAIM_QUANTITY:
            change = _estimate(changes, results.reference, *_CLAIM_QUANTITY[row.key])
            parts.append(f"change over the last third {change.mean:+.2f}" + (f" ± {change.std:.2f}" if change.n > 1 else
                                                                          " (1 seed)"))
        notes.append("; ".join(([row.note] if row.note else []) + parts))
    return table.assign(note=notes)

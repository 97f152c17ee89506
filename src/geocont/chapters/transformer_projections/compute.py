"""transformer_projections: what the chapter computes (settings, runs, events, claims); no figures, no matplotlib."""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...analyzer import analyze
from ...book.chapter import (Chapter, ClaimsBuilder, claim, concat_claims, has_claim, on_dataset, presets,
                             with_early)
from ...config import LMRunConfig
from ...lm import run_lm_sweep
from ...metrics import random_abs_cos, vector_name
from ...pretrained import ModelNotAvailable
from ...statistics import (DIFFERENCE_MARGIN, V_LOW_MARGIN, Estimate, Horizon, Settledness, at_final_step, at_step,
                           change_over_last_per_run, difference, estimate, holds_when, judging_horizon, known, per_run,
                           SETTLED_TOLERANCE, up_to_step, verdict_for_difference, verdict_v_low)
from ...sweeps import predicted_wall_seconds
from ...tables import RUN_KEYS, split_claim_key
from ...transformer import PROJECTIONS, build_llama, parameter_count, projection_dims
from .. import lm_runs
from ..common import short_projection
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
    "long_factor": "the longer silu run: this many times steps, first seed, read at steps too (0 or 1 runs none)",
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


#: The longer reference run per scale, in multiples of ``steps`` (the chapter's own preset; 0 or 1: none).
#: It asks whether Up and O were still rising at the chapter's horizon. ``paper``: none, since
#: 4 × 20,000 steps of the 34M model would more than double the chapter's device time (set 4 to run it).
LONG_FACTOR = {"smoke": 4, "cpu": 4, "paper": 1}


#: The full design at ``cpu`` (the ``cpu`` preset runs all of it; :func:`budget_note` says what it
#: costs and what a cheaper re-run leaves out).
FULL_CPU_DESIGN = dict(seeds=(0, 1, 2), other_seeds=(0,), variants=tuple(LM_VARIANTS), depth_seeds=(0,),
                       long_factor=LONG_FACTOR["cpu"])


#: A re-run that fits the budget: two seeds of ``silu`` and ``none``, no other variant, no deeper or longer model.
BUDGET_CPU_DESIGN = dict(seeds=(0, 1), other_seeds=(), variants=MAIN_VARIANTS, depth_seeds=(), long_factor=0)


#: Analyse only this many layers of the pretrained checkpoint at ``smoke`` (all at the other scales).
_PRETRAINED_LAYERS = {"smoke": 6, "cpu": None, "paper": None}


def describe(settings: LMChapterSettings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    base = settings.base
    shape = base.shape
    runs = ", ".join(f"`{label}` × {len(configs)}" for label, configs in settings.all_configs().items())
    long = "".join(f"; `{label}`: {c[0].steps} steps, also snapshotted at step {base.steps}"
                   for label, c in settings.long_configs().items())
    return dict(
        seeds=settings.seeds,
        data=f"`{base.corpus}`, byte-level BPE tokenizer with {shape.vocab_size} tokens trained on its training split",
        model=f"transformers' LlamaForCausalLM: {shape.n_layers} layers, d = {shape.d_model}, {shape.n_heads} heads, "
              f"SwiGLU width {shape.ffn_dim}, {parameter_count(build_llama(shape)) / 1e6:.2f}M parameters; "
              f"runs (label × seeds): {runs}",
        training=f"{base.steps} steps of {base.batch_size} × {shape.max_seq_len} tokens, {base.optimizer.label} "
                 f"(lr {base.optimizer.lr:g}, constant); {len(base.schedule())} snapshots ({base.n_snapshots} "
                 f"log-spaced, {base.n_late_snapshots} evenly spaced, and step {settings.early_step}), each with the validation "
                 f"loss on {base.eval_windows} windows{long}",
    )


CHAPTER = Chapter("transformer_projections", PARAMETERS,
                  presets(lm_runs.lm_preset, {scale: dict(long_factor=f) for scale, f in LONG_FACTOR.items()}),
                  lm_runs.build_settings, describe, lm_runs.run_configs, scale_rows=lm_runs.scale_rows)


def _duration(config: LMRunConfig) -> float:
    """Predicted seconds of one ``cpu``-width run at one thread: :data:`CPU_SECONDS_PER_STEP`,
    interpolated linearly in the number of layers between the two measured depths."""
    (l4, t4), (l8, t8) = sorted(CPU_SECONDS_PER_STEP.items())
    return config.steps * (t4 + (t8 - t4) * (config.shape.n_layers - l4) / (l8 - l4))


def predicted_minutes(settings: LMChapterSettings, workers: int = 2) -> float:
    """Predicted cold wall time of the runs, in minutes, on ``workers`` one-thread workers: the
    longest-first schedule of the runs' predicted durations (:func:`_duration`), plus a minute for
    the tokenizer, the workers' start and the figures, and one for analysing the pretrained checkpoint."""
    durations = (_duration(c) for c in lm_runs.run_configs(settings))
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
    dimensions, the pretrained checkpoint's analyzer table (None where it was not analysed), and the
    longer reference run's table (``long``; None where it was not run)."""

    settings: LMChapterSettings
    table: pd.DataFrame
    finals: pd.DataFrame
    dims: dict[str, dict[str, int]]
    pretrained: pd.DataFrame | None = None
    pretrained_status: str = ""
    long: pd.DataFrame | None = None

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
    """Train (or load from the cache) every variant and seed and the longer run (one sweep); analyse the
    pretrained checkpoint."""
    table = run_lm_sweep(settings.all_configs())
    is_long = table["condition"] == settings.long_label
    long = _observed(table[is_long]) if settings.long_configs() else None
    table = _observed(table[~is_long])
    pretrained, status = _pretrained_table(settings)
    return Results(settings, table, projection_finals(table), projection_dims(settings.base.shape), pretrained, status,
                   long)


def _observed(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without the run labels it no longer holds among its ``condition`` categories."""
    if isinstance(table["condition"].dtype, pd.CategoricalDtype):
        return table.assign(condition=table["condition"].cat.remove_unused_categories())
    return table


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

    reproduced: dict[str, list[tuple[str, Estimate]]] = {"input": [], "output": []}
    for projection, space, why in PROJECTION_PREDICTIONS:
        ours, base = est(reference, projection, space), known(random_abs_cos(dims[projection][space]))
        vector = vector_name(space)
        verdict = verdict_for_difference(ours, base)
        if verdict == "reproduced":
            reproduced[space].append((projection, ours))
        out.add(key=f"{short_projection(projection)}-{space}-continuity",
                claim=f"{projection} has {space}-space continuity ({why})",
                quantity=f"{projection} {vector} |cos| ({reference})", paper="high", ours=ours, baseline=base.mean,
                verdict=verdict)
    for space in ("input", "output"):
        v, random_level = est(reference, "v_proj", space), random_abs_cos(dims["v_proj"][space])
        names = ", ".join(name for name, _ in reproduced[space]) or "none"
        out.add(key=f"v-low-{space}", claim=f"V has low {space}-space continuity (no adjacent nonlinearity)",
                quantity=f"v_proj {vector_name(space)} |cos|: within {V_LOW_MARGIN:g} of random and below the "
                         f"reproduced projections of its space",
                paper="low", ours=v, baseline=random_level,
                verdict=verdict_v_low(v, random_level, [e for _, e in reproduced[space]]),
                note=f"projections of its space whose continuity is reproduced: {names}")
    variants = set(table["condition"])
    if no_activation in variants:
        for projection in ("gate_proj", "up_proj"):
            with_act, without = est(reference, projection, "input"), est(no_activation, projection, "input")
            out.add(key=f"activation-lowers-{short_projection(projection)}",
                    claim=f"Removing the MLP activation lowers {projection} input continuity",
                    quantity=f"{projection} v1: {reference} minus {no_activation}", paper="drops",
                    ours=difference(with_act, without), baseline=random_abs_cos(dims[projection]["input"]),
                    verdict=verdict_for_difference(with_act, without),
                    note=f"{reference} {with_act}, {no_activation} {without}")
    if linear_attention in variants:
        for key, projection in zip(SOFTMAX_KEYS, ("q_proj", "k_proj")):
            soft, lin = est(reference, projection, "input"), est(linear_attention, projection, "input")
            out.add(key=key, claim=f"(ours) Without the softmax, {projection} input continuity drops",
                    quantity=f"{projection} v1: softmax minus linear attention", paper="implied, not tested",
                    ours=difference(soft, lin), baseline=random_abs_cos(dims[projection]["input"]),
                    verdict=verdict_for_difference(soft, lin), note=f"softmax {soft}, linear {lin}")
    return out.table()


#: The claim keys judged on one projection's continuity, and V's two (for the late-change note, the
#: lost continuities and the pretrained comparison). The V keys used to be added by importing
#: :mod:`.present`, which the notebook does before its claims; they are listed here now.
_CLAIM_QUANTITY = {f"{short_projection(p)}-{s}-continuity": (p, s) for p, s, _ in PROJECTION_PREDICTIONS} | {
    "v-low-input": ("v_proj", "input"), "v-low-output": ("v_proj", "output")}


def _quantity_name(projection: str, space: str) -> str:
    return f"{projection} {space}"


def horizon(results: Results) -> Horizon:
    """Where the chapter's claims are judged (:func:`geocont.statistics.judging_horizon`): the first snapshot of the
    reference variant from the early horizon on at which every quantity a claim reads (each predicted projection's
    continuity and V's) has settled in every seed and no run's validation loss has risen above its minimum; else
    the budget (the last snapshot before the validation loss rose), with the quantities still moving named."""
    mine = results.table[results.table["condition"] == results.reference]
    values = projection_values(mine)
    quantities = {_quantity_name(p, s): values[(values["group"] == p) & (values["space"] == s)]
                  for p, s in _CLAIM_QUANTITY.values()}
    val_loss = per_run(mine, "val_loss")
    return judging_horizon(quantities, val_loss if len(val_loss) else None, sorted(values["step"].unique()),
                           not_before=results.settings.early_step)


def _changes_text(found: Settledness) -> str:
    seeds = ", ".join(f"{value:+.2f}" for value in found.changes)
    return f"change over the last third {found.trend.mean:+.2f} (per seed: {seeds})"


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table, judged at the :func:`horizon` (every variant at its step), with the same claims
    judged at ``early_step`` in its ``early`` column (:func:`geocont.book.chapter.with_early`; the longer run's
    claims have none). A claim on one projection's continuity whose quantity is still moving in some seed there is
    "not settled" (its verdict by the rules in the note); each note adds when the claim holds
    (:func:`geocont.statistics.holds_when`) and the quantity's change over the last third, seed by seed."""
    reference, dims = results.reference, results.dims
    judged = horizon(results)
    at_horizon = up_to_step(results.table, judged.step)
    table = pd.concat([transformer_claims(at_horizon, dims, reference=reference),
                       up_o_claims(at_horizon, dims, reference)], ignore_index=True)
    early = pd.concat([transformer_claims(results.early, dims, reference=reference),
                       up_o_claims(results.early, dims, reference)], ignore_index=True)
    table = concat_claims(with_early(table, early, results.settings.early_step), rising_claims(results))
    notes, verdicts = [], []
    for row in table.itertuples():
        parts, verdict = [], row.verdict
        if row.key in _CLAIM_QUANTITY:  # the keys name no dataset yet: on_dataset names it below
            found = judged.quantities[_quantity_name(*_CLAIM_QUANTITY[row.key])]
            if not found.settled:
                parts.append(f"not settled at step {judged.step:,}: by the rule {row.verdict}")
                verdict = "not settled"
            parts.append(_changes_text(found))
        if row.early_verdict:
            parts.insert(0, f"holds {holds_when(row.early_verdict, verdict)}")
        notes.append("; ".join(([row.note] if row.note else []) + parts))
        verdicts.append(verdict)
    return on_dataset(table.assign(note=notes, verdict=verdicts), results.settings.base.corpus)


# --- Findings: what the chapter's computed sentences say, as values. present.py words them from the
# templates in prose.md; every comparison, threshold and "which case applies" is decided here. ---


@dataclass(frozen=True)
class RunCount:
    """One run label and its number of seeds."""

    label: str
    seeds: int

    @property
    def number(self) -> str:
        """"one" seed or "several" (the variant of its wording)."""
        return "one" if self.seeds == 1 else "several"


def run_counts(settings: LMChapterSettings) -> tuple[RunCount, ...]:
    """The run labels of ``settings`` with their number of seeds, in order (the longer run last)."""
    return tuple(RunCount(label, len(configs)) for label, configs in settings.all_configs().items())


@dataclass(frozen=True)
class BudgetFinding:
    """What the chapter runs, and at ``cpu`` its predicted cold cost against the budget.

    ``costed``: the cost is predicted (the ``cpu`` scale only); ``over_budget``: the prediction is
    over :data:`CPU_BUDGET_MINUTES`, and then ``cheap_*`` and ``rerun_flags`` describe the re-run
    within it (:data:`BUDGET_CPU_DESIGN`); ``cut``: the labels of which this build leaves out seeds
    that the full design (:data:`FULL_CPU_DESIGN`, ``full_*``) runs; ``long_*``: the longer run (0 steps: none)."""

    scale: str
    steps: int
    runs: tuple[RunCount, ...]
    long_label: str = ""
    long_steps: int = 0
    long_seed: int = 0
    costed: bool = False
    minutes: float = math.nan
    n_runs: int = 0
    step_seconds_4: float = CPU_SECONDS_PER_STEP[4]
    step_seconds_8: float = CPU_SECONDS_PER_STEP[8]
    budget_minutes: int = CPU_BUDGET_MINUTES
    over_budget: bool = False
    full_runs: tuple[RunCount, ...] = ()
    full_minutes: float = math.nan
    cheap_runs: tuple[RunCount, ...] = ()
    cheap_minutes: float = math.nan
    cheap_seeds: int = 0
    rerun_flags: str = ""
    cut: tuple[str, ...] = ()


def budget_finding(settings: LMChapterSettings) -> BudgetFinding:
    """:class:`BudgetFinding` of ``settings``."""
    long = [c for configs in settings.long_configs().values() for c in configs]
    finding = BudgetFinding(settings.scale, settings.base.steps, run_counts(settings), settings.long_label,
                            long[0].steps if long else 0, long[0].seed if long else 0)
    if settings.scale != "cpu":
        return finding
    full = CHAPTER.configure(settings.scale, **{**settings.overrides, **FULL_CPU_DESIGN})
    cheap = CHAPTER.configure(settings.scale, **{**settings.overrides, **BUDGET_CPU_DESIGN})
    minutes = predicted_minutes(settings)
    flags = " ".join(f'-p {name} "{list(value)!r}"' if name == "variants" else
                     f"-p {name} {len(value) if isinstance(value, tuple) else value}"  # seed lists as counts
                     for name, value in BUDGET_CPU_DESIGN.items())
    cut = tuple(label for label, c in full.all_configs().items()
                if {x.seed for x in c} - {x.seed for x in settings.all_configs().get(label, [])})
    return dataclasses.replace(
        finding, costed=True, minutes=minutes, n_runs=sum(len(c) for c in settings.all_configs().values()),
        over_budget=minutes > CPU_BUDGET_MINUTES, full_runs=run_counts(full), full_minutes=predicted_minutes(full),
        cheap_runs=run_counts(cheap), cheap_minutes=predicted_minutes(cheap), cheap_seeds=len(cheap.seeds),
        rerun_flags=flags, cut=cut)


@dataclass(frozen=True)
class VariantLoss:
    """One run label's validation loss (seed mean ± sd) at the early horizon and at the end."""

    label: str
    early: Estimate
    final: Estimate


@dataclass(frozen=True)
class LossFinding:
    """Every run label's validation loss at ``early_step`` and at the end; ``uniform``: uniform guessing."""

    early_step: int
    variants: tuple[VariantLoss, ...]
    uniform: float


def loss_finding(results: Results) -> LossFinding:
    """:class:`LossFinding` of ``results``."""
    early = results.settings.early_step
    val = per_run(results.table, "val_loss", "", 0)
    return LossFinding(early, tuple(
        VariantLoss(v, estimate(at_step(val, early).query("condition == @v")["value"]),
                    estimate(at_final_step(val).query("condition == @v")["value"])) for v in results.variants),
        math.log(results.settings.base.shape.vocab_size))


def gap_values(table: pd.DataFrame) -> pd.DataFrame:
    """Per run, projection (``group``) and step: the relative gap (s1 - s2) / s1 of the weight
    matrix, mean over layers (``weight_gap``, direction 1). v1 and u1 are only as well defined as
    this gap: where it is small, a small change of the weights can swap the leading direction."""
    rows = table[(table["metric"] == "weight_gap") & (table["direction"] == 1)]
    return rows.groupby(RUN_KEYS + ["group", "step"], observed=True)["value"].mean().reset_index()


#: A continuity "moved" between the early horizon and the end when its seed mean changed by more than the
#: book's margin (:data:`geocont.statistics.DIFFERENCE_MARGIN`).


@dataclass(frozen=True)
class MovedContinuity:
    """A predicted continuity that moved by more than :data:`DIFFERENCE_MARGIN`: its seed mean and its
    projection's spectral gap (seed mean), at the early horizon and at the end."""

    projection: str
    space: str
    before: float
    after: float
    gap_before: float
    gap_after: float


@dataclass(frozen=True)
class GapFinding:
    """``case``: "moved" (``moved`` lists them) or "none-moved"."""

    case: str
    reference: str
    early_step: int
    end: int
    threshold: float
    moved: tuple[MovedContinuity, ...]


def gap_finding(results: Results) -> GapFinding:
    """For the reference variant: the predicted continuities that moved by more than :data:`DIFFERENCE_MARGIN`
    between the early horizon and the end, each beside its projection's spectral gap at both steps
    (an association across projections, not a test of cause)."""
    early_step, end = results.settings.early_step, results.settings.base.steps
    continuity, gaps = projection_values(results.table), gap_values(results.table)
    reference = results.reference
    continuity, gaps = continuity[continuity.condition == reference], gaps[gaps.condition == reference]
    moved = []
    for projection, space, _ in PROJECTION_PREDICTIONS:
        frame = continuity[(continuity.group == projection) & (continuity.space == space)]
        before, after = estimate(at_step(frame, early_step)["value"]), estimate(at_final_step(frame)["value"])
        if math.isnan(before.mean) or abs(after.mean - before.mean) <= DIFFERENCE_MARGIN:
            continue
        gap = gaps[gaps.group == projection]
        gap_before, gap_after = estimate(at_step(gap, early_step)["value"]), estimate(at_final_step(gap)["value"])
        moved.append(MovedContinuity(projection, space, before.mean, after.mean, gap_before.mean, gap_after.mean))
    return GapFinding("moved" if moved else "none-moved", reference, early_step, end, DIFFERENCE_MARGIN, tuple(moved))


@dataclass(frozen=True)
class ProjectionEstimates:
    """One projection's continuity (seed mean ± sd) in the input (v1) and the output (u1) space."""

    projection: str
    input: Estimate
    output: Estimate


def final_estimates(results: Results) -> tuple[ProjectionEstimates, ...]:
    """Every projection's final continuity in both spaces, for the reference variant."""
    return tuple(ProjectionEstimates(p, *(_estimate(results.finals, results.reference, p, s)
                                          for s in ("input", "output"))) for p in PROJECTIONS)


@dataclass(frozen=True)
class DepthProfileFinding:
    """The run labels the depth profile shows (the reference, and the deeper model where it ran);
    ``case``: "with-deeper" or "reference-only"."""

    case: str
    labels: tuple[str, ...]
    depth_label: str


def depth_profile_finding(results: Results) -> DepthProfileFinding:
    """:class:`DepthProfileFinding` of ``results``."""
    labels = tuple(v for v in results.variants if v in (results.reference, results.settings.depth_label))
    return DepthProfileFinding("with-deeper" if len(labels) > 1 else "reference-only", labels,
                               results.settings.depth_label)




def pretrained_estimate(results: Results, projection: str, space: str) -> Estimate:
    """Mean ± sd over the pretrained checkpoint's adjacent layer pairs (not over seeds)."""
    if results.pretrained is None:
        return Estimate(math.nan, math.nan, 0)
    rows = results.pretrained[results.pretrained["projection"] == projection]
    return estimate(rows["v1_cos" if space == "input" else "u1_cos"])


@dataclass(frozen=True)
class StillMoving:
    """A quantity a claim reads that moved by more than the tolerance over the last third in some seed: its
    projection, space, and the seeds' changes."""

    projection: str
    space: str
    change: Estimate
    per_seed: tuple[float, ...]


@dataclass(frozen=True)
class SettledFinding:
    """Where the claims are judged (:func:`horizon`): ``case`` "settled" (every quantity in every seed, at step
    ``end``, whose last third starts at ``start``), or "moving" (judged at the budget ``end``, with ``moving``);
    ``memorising_after``: the last snapshot before the validation loss rose (None where it did not)."""

    case: str
    reference: str
    start: int
    end: int
    budget: int
    tolerance: float
    moving: tuple[StillMoving, ...]
    memorising_after: int | None


def settled_finding(results: Results) -> SettledFinding:
    """Which quantities were still moving, seed by seed, where the claims are judged (reference variant)."""
    judged = horizon(results)
    names = {_quantity_name(p, s): (p, s) for p, s in _CLAIM_QUANTITY.values()}
    moving = tuple(StillMoving(*names[name], judged.quantities[name].trend, tuple(judged.quantities[name].changes))
                   for name in judged.moving())
    return SettledFinding("settled" if judged.settled else "moving", results.reference,
                          int(judged.step * 2 / 3), judged.step, results.settings.base.steps, SETTLED_TOLERANCE, moving,
                          judged.memorising_after)


@dataclass(frozen=True)
class HoldsFinding:
    """The claims' keys grouped by when they hold (:func:`geocont.statistics.holds_when`), in order
    of first appearance."""

    early_step: int
    end: int
    groups: tuple[tuple[str, tuple[str, ...]], ...]


def holds_finding(results: Results, claims: pd.DataFrame) -> HoldsFinding:
    """:class:`HoldsFinding` of a claims table with early verdicts (claims without one left out)."""
    groups: dict[str, list[str]] = {}
    for row in claims[claims["early_verdict"].fillna("") != ""].itertuples():
        groups.setdefault(holds_when(row.early_verdict, row.verdict), []).append(split_claim_key(row.key)[0])
    return HoldsFinding(results.settings.early_step, horizon(results).step,
                        tuple((when, tuple(keys)) for when, keys in groups.items()))


@dataclass(frozen=True)
class LostContinuity:
    """A predicted continuity that does not hold at the end: its value and verdict early and at the
    end (reference variant), and the pretrained checkpoint's (None where it was not analysed)."""

    projection: str
    space: str
    early: Estimate
    early_verdict: str
    final: Estimate
    verdict: str
    pretrained: Estimate | None

    @property
    def case(self) -> str:
        """"with-pretrained" where the pretrained checkpoint's value is known, else "alone"."""
        return "alone" if self.pretrained is None else "with-pretrained"


@dataclass(frozen=True)
class LostFinding:
    """``case``: "some-lost" (``lost`` lists them), "some-moving" (none lost, some still moving) or "all-kept"."""

    case: str
    reference: str
    early_step: int
    pretrained: str | None
    lost: tuple[LostContinuity, ...]


def lost_finding(results: Results, claims: pd.DataFrame) -> LostFinding:
    """The predicted continuities that do not hold where the claims are judged (lost, or never reached; a
    quantity still moving there is not settled, not lost), with their values there (:func:`horizon`)."""
    lost = []
    judged = projection_finals(up_to_step(results.table, horizon(results).step))
    for row in claims.itertuples():
        name = split_claim_key(row.key)[0]
        if (name not in _CLAIM_QUANTITY or name.startswith("v-low")
                or row.verdict in ("reproduced", "not settled")):
            continue
        projection, space = _CLAIM_QUANTITY[name]
        lost.append(LostContinuity(
            projection, space, _estimate(results.early_finals, results.reference, projection, space), row.early_verdict,
            _estimate(judged, results.reference, projection, space), row.verdict,
            None if results.pretrained is None else pretrained_estimate(results, projection, space)))
    moving = any(row.verdict == "not settled" for row in claims.itertuples()
                 if split_claim_key(row.key)[0] in _CLAIM_QUANTITY)
    case = "some-lost" if lost else "some-moving" if moving else "all-kept"
    return LostFinding(case, results.reference, results.settings.early_step, results.settings.pretrained, tuple(lost))


@dataclass(frozen=True)
class ClaimValue:
    """A claim's value as the claims table has it (mean, sd, n) and its verdict."""

    ours_mean: float
    ours_std: float
    n_seeds: int
    verdict: str


@dataclass(frozen=True)
class DepthComparison:
    """One claim judged on the reference variant (``shallow``) and on the deeper model (``deep``)."""

    key: str
    shallow: ClaimValue
    deep: ClaimValue

    @property
    def same(self) -> bool:
        return self.shallow.verdict == self.deep.verdict


@dataclass(frozen=True)
class DepthFinding:
    """Whether the deeper model changes the pattern. ``case``: "not-run", or "one-seed" / "several-seeds"
    (the deeper model's seeds); ``same`` and ``changed``: the claims whose verdict it keeps or changes."""

    case: str
    depth_label: str
    depth_layers: int
    reference: str
    n_layers: int
    steps: int
    same: tuple[DepthComparison, ...] = ()
    changed: tuple[DepthComparison, ...] = ()


def depth_finding(results: Results) -> DepthFinding:
    """The deeper model's verdicts beside the reference variant's, claim by claim."""
    settings = results.settings
    finding = DepthFinding("not-run", settings.depth_label, settings.depth_layers, results.reference,
                           settings.base.shape.n_layers, settings.base.steps)
    if settings.depth_label not in results.variants:
        return finding
    shallow = transformer_claims(results.table, results.dims, reference=results.reference, no_activation=None,
                                 linear_attention=None)
    deep = transformer_claims(results.table, results.dims, reference=settings.depth_label, no_activation=None,
                              linear_attention=None).set_index("key")

    def value(row: Any) -> ClaimValue:
        return ClaimValue(float(row.ours_mean), float(row.ours_std), int(row.n_seeds), row.verdict)

    comparisons = [DepthComparison(row.key, value(row), value(deep.loc[row.key])) for row in shallow.itertuples()]
    return dataclasses.replace(finding, case="one-seed" if len(settings.depth_seeds) == 1 else "several-seeds",
                               same=tuple(c for c in comparisons if c.same),
                               changed=tuple(c for c in comparisons if not c.same))


@dataclass(frozen=True)
class PretrainedComparison:
    """One projection's continuity in the space of its claim: ours at the end and at the early
    horizon (spread over seeds), and the pretrained checkpoint's (spread over its layer pairs)."""

    projection: str
    space: str
    final: Estimate
    early: Estimate
    pretrained: Estimate


@dataclass(frozen=True)
class PretrainedFinding:
    """``case``: "compared" or "not-analysed" (``status`` says why, or what was analysed)."""

    case: str
    status: str
    early_step: int
    comparisons: tuple[PretrainedComparison, ...] = ()


def pretrained_finding(results: Results) -> PretrainedFinding:
    """Our settled values beside the pretrained checkpoint's, for the predicted projections and V."""
    step = results.settings.early_step
    if results.pretrained is None:
        return PretrainedFinding("not-analysed", results.pretrained_status, step)
    return PretrainedFinding("compared", results.pretrained_status, step, tuple(
        PretrainedComparison(projection, space, _estimate(results.finals, results.reference, projection, space),
                             _estimate(results.early_finals, results.reference, projection, space),
                             pretrained_estimate(results, projection, space))
        for projection, space in dict.fromkeys(_CLAIM_QUANTITY.values())))


@dataclass(frozen=True)
class SoftmaxFinding:
    """What the linear-attention ablation says of the softmax claim. ``case``: "not-run" (no
    ablation claims), "supported" (one of them is reproduced) or "not-supported"; ``evidence``:
    each claim's estimates (the first part of its note)."""

    case: str
    evidence: tuple[str, ...] = ()


def softmax_finding(claims: pd.DataFrame) -> SoftmaxFinding:
    """:class:`SoftmaxFinding` of a claims table."""
    rows = [claim(claims, key) for key in SOFTMAX_KEYS if has_claim(claims, key)]
    if not rows:
        return SoftmaxFinding("not-run")
    if any(row["verdict"] == "reproduced" for row in rows):
        return SoftmaxFinding("supported")
    return SoftmaxFinding("not-supported", tuple(row["note"].split("; ")[0] for row in rows))


# --- The Up/O gap, tested: Up's v1 and O's u1 continuity at ``cpu`` fall short of the paper's. ---

#: The within-layer comparison of Up with Gate (they read the same input): the recorder's group of
#: ``cross_cos`` rows (direction 1, space input: v1, output: u1; one row per layer).
UP_GATE = "up~gate"

#: The Up/O gap's quantities, ``name: (metric, group, space, direction)``: adjacent-layer v1/u1 |cos|
#: (``weight_cos``), adjacent-layer σ²-weighted alignment (``weight_align``), and Up against Gate in the
#: same layer (``cross_cos``).
UP_O_QUANTITIES = {
    "up-v1": ("weight_cos", "up_proj", "input", 1),
    "up-align": ("weight_align", "up_proj", "input", 0),
    "up-gate-v1": ("cross_cos", UP_GATE, "input", 1),
    "up-gate-u1": ("cross_cos", UP_GATE, "output", 1),
    "o-u1": ("weight_cos", "o_proj", "output", 1),
    "o-align": ("weight_align", "o_proj", "output", 0),
}

#: The quantities the longer run follows: Up's and O's predicted continuity.
RISING = {"up-still-rising": "up-v1", "o-still-rising": "o-u1"}

#: The explanations of the Up/O gap and the claims each predicts to be reproduced, written down before
#: any of their numbers was read (the notebook states them too):
#:
#: * ``not-settled`` (the chapter's earlier, untested reading: the pretrained model is trained far
#:   longer): Up and O were still rising at the chapter's horizon, so the longer run (same seed) ends
#:   clearly above its own value there (``up-still-rising``, ``o-still-rising``);
#: * ``gate-shared`` (the paper's mechanism for Up, the product with the activated Gate): Up's
#:   continuity is carried by the direction it shares with Gate, so within a layer Up's v1 is Gate's v1
#:   well above random (``up-gate-shared-v1``), and Up's structure across layers lies beyond its own
#:   leading direction: its σ²-weighted alignment exceeds its v1 |cos| (``up-align-vs-v1``);
#: * ``spread``: Up and O are continuous, but over several singular directions rather than the leading
#:   one, so their σ²-weighted alignment exceeds their v1 / u1 |cos| (``up-align-vs-v1``, ``o-align-vs-v1``).
#:
#: The rule (:func:`explanation_case`): kept where every predicted claim is reproduced, dropped where
#: none is even partly reproduced, not tested where one could not be judged, else mixed.
GAP_EXPLANATIONS = {
    "not-settled": ("up-still-rising", "o-still-rising"),
    "gate-shared": ("up-gate-shared-v1", "up-align-vs-v1"),
    "spread": ("up-align-vs-v1", "o-align-vs-v1"),
}


def up_o_values(table: pd.DataFrame) -> pd.DataFrame:
    """Per run, step and Up/O quantity (column ``quantity``, :data:`UP_O_QUANTITIES`): the mean over
    layers (pairs); a quantity the table does not record has no rows."""
    frames = []
    for name, (metric, group, space, direction) in UP_O_QUANTITIES.items():
        rows = table[(table["metric"] == metric) & (table["group"] == group) & (table["space"] == space)
                     & (table["direction"] == direction)]
        values = rows.groupby(RUN_KEYS + ["step"], observed=True)["value"].mean().reset_index()
        frames.append(values.assign(quantity=name))
    return pd.concat(frames, ignore_index=True)


def up_o_baseline(name: str, dims: dict[str, dict[str, int]]) -> float:
    """A quantity's random level: E|cos| at its space's dimension (Up's side for Up~Gate), 0 for the
    σ²-weighted alignment (centred: near 0 for independent random matrices)."""
    metric, group, space, _ = UP_O_QUANTITIES[name]
    return 0.0 if metric == "weight_align" else random_abs_cos(dims["up_proj" if group == UP_GATE else group][space])


def cross_cos_recorded(table: pd.DataFrame) -> bool:
    """Whether the run table records Up against Gate in the same layer (tables cached before it do not)."""
    return bool((table["metric"] == "cross_cos").any())


def up_o_estimates(table: pd.DataFrame, reference: str) -> dict[str, Estimate]:
    """Every Up/O quantity at each run's last step, mean ± sd over the reference variant's seeds."""
    finals = at_final_step(up_o_values(table))
    finals = finals[finals["condition"] == reference]
    return {name: estimate(finals.loc[finals["quantity"] == name, "value"]) for name in UP_O_QUANTITIES}


def up_o_claims(table: pd.DataFrame, dims: dict[str, dict[str, int]], reference: str = lm_runs.REFERENCE) -> pd.DataFrame:
    """The Up/O claims a run table judges at its last step: Up against Gate in the same layer (v1 and
    u1, against random), and the σ²-weighted alignment beside v1 (Up) and u1 (O)."""
    est, out = up_o_estimates(table, reference), ClaimsBuilder(CHAPTER.name)
    missing = "" if cross_cos_recorded(table) else "cross_cos not recorded in these runs (their tables predate it)"
    for key, name, vector in (("up-gate-shared-v1", "up-gate-v1", "v1"), ("up-gate-shared-u1", "up-gate-u1", "u1")):
        base = up_o_baseline(name, dims)
        out.add(key=key, claim=f"(ours) Within a layer, Up's {vector} is Gate's {vector} (they read the same input)",
                quantity=f"|cos| of {vector}(up_proj_l), {vector}(gate_proj_l), mean over layers ({reference})",
                paper="implied (Up anchored by the gated product)", ours=est[name], baseline=base,
                verdict=verdict_for_difference(est[name], known(base)), note=missing)
    for key, projection, align, leading in (("up-align-vs-v1", "up_proj", "up-align", "up-v1"),
                                            ("o-align-vs-v1", "o_proj", "o-align", "o-u1")):
        space, vector = UP_O_QUANTITIES[leading][2], vector_name(UP_O_QUANTITIES[leading][2])
        out.add(key=key, claim=f"(ours) {projection}'s {space}-space continuity lies beyond its leading direction",
                quantity=f"{projection} σ²-weighted alignment ({space}) above its {vector} |cos| ({reference})",
                paper="not stated", ours=est[align], baseline=up_o_baseline(align, dims),
                verdict=verdict_for_difference(est[align], est[leading]),
                note=f"{vector} |cos| {est[leading]} (random {up_o_baseline(leading, dims):.3f}; the alignment's: 0)")
    return out.table()


@dataclass(frozen=True)
class StillRising:
    """One quantity of the longer run (one seed) at the chapter's horizon and at its own end, the reference
    run of the same seed at the horizon (the same weights: a check), and the verdict "rises"
    (:func:`geocont.statistics.verdict_for_difference`, end above horizon)."""

    key: str
    quantity: str
    at_horizon: Estimate
    at_end: Estimate
    reference: Estimate
    baseline: float
    verdict: str


@dataclass(frozen=True)
class LongRunFinding:
    """The longer reference run: its label, seed, the chapter's horizon and its own end, and Up's and O's
    continuity there (:data:`RISING`)."""

    label: str
    seed: int
    factor: int
    horizon: int
    end: int
    items: tuple[StillRising, ...]


def long_run_finding(results: Results) -> LongRunFinding | None:
    """Whether Up and O were still rising at the chapter's horizon, read off the longer run; None where
    it was not run."""
    settings = results.settings
    if results.long is None or not settings.long_configs():
        return None
    horizon, seed = settings.base.steps, settings.seeds[0]
    long = up_o_values(results.long)
    own = up_o_values(results.table)
    own = at_step(own[(own["condition"] == results.reference) & (own["seed"] == seed)], horizon)
    items = []
    for key, name in RISING.items():
        frame = long[long["quantity"] == name]
        at_horizon, at_end = estimate(at_step(frame, horizon)["value"]), estimate(at_final_step(frame)["value"])
        items.append(StillRising(key, name, at_horizon, at_end, estimate(own.loc[own["quantity"] == name, "value"]),
                                 up_o_baseline(name, results.dims), verdict_for_difference(at_end, at_horizon)))
    return LongRunFinding(settings.long_label, seed, settings.long_factor, horizon, int(long["step"].max()),
                          tuple(items))


def rising_claims(results: Results) -> pd.DataFrame:
    """``up-still-rising`` and ``o-still-rising`` from the longer run (:func:`long_run_finding`); none
    where it was not run. They have no early value."""
    finding, out = long_run_finding(results), ClaimsBuilder(CHAPTER.name)
    for item in finding.items if finding else ():
        projection, space = UP_O_QUANTITIES[item.quantity][1:3]
        out.add(key=item.key,
                claim=f"(ours) {projection}'s {space}-space continuity was still rising at step {finding.horizon:,}",
                quantity=f"{projection} {vector_name(space)} |cos| at step {finding.end:,} above step "
                         f"{finding.horizon:,} ({finding.label}, seed {finding.seed})",
                paper="not stated", ours=item.at_end, baseline=item.baseline, verdict=item.verdict,
                note=f"at step {finding.horizon:,}: {item.at_horizon}")
    return out.table()


def gap_claims(results: Results) -> pd.DataFrame:
    """The claims that test the Up/O gap's explanations, judged at the chapter's horizon."""
    return concat_claims(up_o_claims(results.table, results.dims, results.reference), rising_claims(results))


def explanation_case(verdicts: list[str]) -> str:
    """kept (every claim reproduced), dropped (none even partly), not-tested (one not judged), or mixed."""
    if "not tested" in verdicts:
        return "not-tested"
    if all(v == "reproduced" for v in verdicts):
        return "kept"
    return "dropped" if all(v == "not reproduced" for v in verdicts) else "mixed"


@dataclass(frozen=True)
class ExplanationVerdict:
    """One explanation of the Up/O gap (:data:`GAP_EXPLANATIONS`): its case and its claims' verdicts."""

    key: str
    case: str
    verdicts: tuple[tuple[str, str], ...]


def explanation_verdicts(claims: pd.DataFrame) -> tuple[ExplanationVerdict, ...]:
    """Each explanation of the Up/O gap, kept or dropped by the claims it predicts (a claim the table
    lacks, e.g. without the longer run, is not tested)."""
    out = []
    for key, predicted in GAP_EXPLANATIONS.items():
        verdicts = tuple((k, claim(claims, k)["verdict"] if has_claim(claims, k) else "not tested") for k in predicted)
        out.append(ExplanationVerdict(key, explanation_case([v for _, v in verdicts]), verdicts))
    return tuple(out)


@dataclass(frozen=True)
class UpOQuantity:
    """One Up/O quantity of the reference variant at the end and at the early horizon, and its random level."""

    name: str
    final: Estimate
    early: Estimate
    baseline: float


@dataclass(frozen=True)
class UpOFinding:
    """The Up/O quantities of the reference variant; ``up_gate`` is None where ``cross_cos`` was not recorded."""

    reference: str
    early_step: int
    end: int
    up_gate: tuple[UpOQuantity, ...] | None
    align: tuple[UpOQuantity, ...]


def up_o_finding(results: Results) -> UpOFinding:
    """:class:`UpOFinding` of ``results``."""
    final, early = up_o_estimates(results.table, results.reference), up_o_estimates(results.early, results.reference)

    def quantities(*names: str) -> tuple[UpOQuantity, ...]:
        return tuple(UpOQuantity(n, final[n], early[n], up_o_baseline(n, results.dims)) for n in names)

    up_gate = quantities("up-gate-v1", "up-gate-u1") if cross_cos_recorded(results.table) else None
    return UpOFinding(results.reference, results.settings.early_step, results.settings.base.steps, up_gate,
                      quantities("up-v1", "up-align", "o-u1", "o-align"))

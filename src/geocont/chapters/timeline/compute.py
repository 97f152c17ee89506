"""timeline: what the chapter computes (settings, runs, events, claims); no figures, no matplotlib."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ... import metrics
from ...book.chapter import Chapter, ClaimsBuilder, claim, has_claim, with_early
from ...config import MLPRunConfig
from ...mlp import CONDITIONS
from ...statistics import (DIFFERENCE_MARGIN, Estimate, at_final_step, difference, drift_window_mean, estimate,
                           estimate_at_step, known, per_run, rank_correlation, turn_rates, up_to_step,
                           verdict_for_correlation, verdict_for_difference, verdict_for_value)
from ...tables import RUN_KEYS, select
from ...training import run_sweep
from .. import mlp_runs
from ..common import slug
from ..mlp_runs import MLPChapterSettings


#: The conditions the chapter compares (the ``conditions`` parameter replaces them).
CONDITIONS_COMPARED = ("res-relu", "nores-relu", "res-none", "res-radial", "res-radial-tau")

#: The symmetric conditions whose late drift the claims compare with the reference (claim ``<condition>-late-drift``).
DRIFT_CONDITIONS = ("res-none", "res-radial", "res-radial-tau")


#: The condition without residual connections the step-0 claim compares the reference condition with.
NO_RESIDUAL = "nores-relu"


#: The chapter sweeps the initialisation scale over two orders of magnitude on the baseline
#: condition (``extra_init_scales``); that sweep is short (its events happen in the first few
#: hundred steps) and snapshots it finely (this many log-spaced snapshots per scale), recording
#: v1/u1 only (k = 1, which keeps it cheap).
INIT_SWEEP_SNAPSHOTS = {"smoke": 12, "cpu": 32, "paper": 48}


def describe(settings: MLPChapterSettings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    base = settings.base
    return dict(
        seeds=settings.seeds,
        data=mlp_runs.data_description(settings),
        model=f"residual MLP, {base.depth} hidden layers of width {base.width}; init scales "
              f"{', '.join(f'{s:g}' for s in (base.init_scale, *settings.extra_init_scales))}",
        training=mlp_runs.training_description(settings) + "; the optimizers below",
    )


CHAPTER = Chapter(
    name="timeline",
    parameters=mlp_runs.parameters("scale", "seeds", "steps", "conditions", "extra_init_scales", "width", "depth",
                                   "dataset", "lr", "n_snapshots", "precision"),
    presets=mlp_runs.mlp_presets({scale: dict(short_run=dict(n_snapshots=n, n_directions=1))
                                  for scale, n in INIT_SWEEP_SNAPSHOTS.items()},
                                 conditions=CONDITIONS_COMPARED, robustness_conditions=("res-relu",),
                                 extra_init_scales=(0.03, 0.1, 0.3, 3.0)),
    build=mlp_runs.build_settings,
    describe=describe,
    runs=lambda settings: [c for configs in sweep_configs(settings) for c in configs],
    scale_rows=lambda settings: [
        ("MLP timeline init sweep: snapshots (v1/u1 only)", str(settings.short_base.n_snapshots)),
        ("MLP timeline: init scales",
         ", ".join(f"{x:g}" for x in sorted((settings.base.init_scale, *settings.extra_init_scales)))),
    ],
)


#: The crossing: ||W(t) - W(0)|| / ||W(0)|| (layer mean) reaches this value.
CROSSING_LEVEL = 1.0


#: The update/initial-weight ratios compared, by event column: the paper does not say which
#: norm "||Delta W|| dominates ||W(0)||" means, so both the Frobenius norm (the whole
#: matrix) and the spectral norm (its largest singular value) are tested.
CROSSINGS = {"crossing_step": "rel_update", "spectral_crossing_step": "rel_update_spectral"}


#: Metrics the timeline chapter needs in every run table (older cached runs lack them).
TIMELINE_METRICS = ("rel_update_spectral", "turn", "co_rotation", "weight_cumgrad_cos")


#: Weight continuity "rises" only if it gains at least the book's margin (:data:`DIFFERENCE_MARGIN`) of |cos|
#: over training; below that the rise step would time noise, and is left undefined (NaN).


def _first_step_at_or_above(frame: pd.DataFrame, thresholds: pd.Series) -> pd.Series:
    """Per run (index = RUN_KEYS), the first snapshot step whose value reaches the run's threshold."""
    frame = frame.join(thresholds.rename("threshold"), on=RUN_KEYS)
    reached = frame[frame["value"] >= frame["threshold"]]
    first = reached.groupby(RUN_KEYS, observed=True)["step"].min()
    return first.reindex(thresholds.index).astype(float)


def transfer_events(table: pd.DataFrame, space: str = "input") -> pd.DataFrame:
    """One row per run: when the update overtakes the initial weights, and when continuity rises.

    * ``crossing_step``: first snapshot where the layer-mean ``||W(t) - W(0)||_F / ||W(0)||_F``
      reaches :data:`CROSSING_LEVEL` (NaN if it never does); ``spectral_crossing_step``: the
      same with spectral norms (NaN if the table has no ``rel_update_spectral``);
    * ``rise_step``: first snapshot where layer-mean weight v1 (``space``) continuity has
      covered half of its rise, ``initial + (final - initial) / 2``. It differs from "half
      its final value" only by the initial value (random level, about 0.05 at d = 256).
      NaN when continuity gained less than :data:`geocont.statistics.DIFFERENCE_MARGIN`;
    * ``rel_update_at_rise``: the layer-mean relative update at the rise step;
    * the initial, peak and final weight continuity, the peak's step, the step-0 gradient
      continuity, and the weight / cumulative-gradient alignment of each layer's leading
      vector at the peak and at the end (before and after a fall).

    Steps are snapshot steps, so they are resolved to the snapshot grid (log-spaced).
    """
    weight = per_run(table, "weight_cos", space, 1)
    keyed = weight.set_index(RUN_KEYS)
    initial = keyed[keyed["step"] == 0]["value"]
    final = at_final_step(weight).set_index(RUN_KEYS)["value"]
    update = per_run(table, "rel_update")
    crossing_threshold = pd.Series(CROSSING_LEVEL, index=final.index)
    grad = per_run(table, "grad_cos", space, 1)
    events = pd.DataFrame({
        column: _first_step_at_or_above(per_run(table, metric), crossing_threshold)
        for column, metric in CROSSINGS.items()
    })
    events = events.assign(**{
        "rise_step": _first_step_at_or_above(weight, initial + (final - initial) / 2),
        "weight_v1_initial": initial,
        "weight_v1_final": final,
        "grad_v1_step0": grad[grad["step"] == 0].set_index(RUN_KEYS)["value"],
        "rel_update_final": at_final_step(update).set_index(RUN_KEYS)["value"],
        "weight_cumgrad_final": at_final_step(per_run(table, "weight_cumgrad_cos", space, 1)).set_index(RUN_KEYS)["value"],
    })
    peak_rows = weight.loc[weight.groupby(RUN_KEYS, observed=True)["value"].idxmax()]
    peak_step = peak_rows.set_index(RUN_KEYS)["step"]
    alignment = per_run(table, "weight_cumgrad_cos", space, 1).join(peak_step.rename("peak_step"), on=RUN_KEYS)
    events["weight_v1_peak"] = peak_rows.set_index(RUN_KEYS)["value"]
    events["peak_step"] = peak_step
    events["weight_cumgrad_at_peak"] = (alignment[alignment["step"] == alignment["peak_step"]]
                                        .set_index(RUN_KEYS)["value"])
    events["rise"] = final - initial
    events.loc[events["rise"] < DIFFERENCE_MARGIN, "rise_step"] = math.nan
    at_rise = update.join(events["rise_step"], on=RUN_KEYS)
    events["rel_update_at_rise"] = at_rise[at_rise["step"] == at_rise["rise_step"]].set_index(RUN_KEYS)["value"]
    for crossing in CROSSINGS:
        events[_ratio_column(crossing)] = _log10_rise_over(events["rise_step"], events[crossing])
    return events.reset_index()


def _ratio_column(crossing: str) -> str:
    """``crossing_step`` -> ``log10_rise_over_crossing``, and likewise for the spectral one."""
    return "log10_rise_over_" + crossing.removesuffix("_step")


def _log10_rise_over(rise: pd.Series, crossing: pd.Series) -> pd.Series:
    """log10(rise / crossing) per run; -inf for a rise at step 0 or a rise without any
    crossing (it precedes the crossing without bound); NaN where there was no rise."""
    ratio = (rise / crossing).apply(lambda r: math.log10(r) if r > 0 else -math.inf)
    ratio[crossing.isna()] = -math.inf
    ratio[rise.isna()] = math.nan
    return ratio


#: The rise may precede the crossing by at most this factor (a third: 10**-0.48) and
#: still count as "after the update dominates", given the snapshot grid and the spread.
RISE_BEFORE_CROSSING_TOLERANCE_LOG10 = -0.48


def verdict_for_order(events: pd.DataFrame, crossing: str = "crossing_step") -> str:
    """Does weight continuity rise only once the update dominates (``crossing``: which
    norm, see :data:`CROSSINGS`), in every run?

    Runs whose continuity did not rise (``rise_step`` NaN) cannot tell and are left out.
    "reproduced" if in every other run the rise is no earlier than a third of the
    crossing step; "not reproduced" if in none (a run that rose but never crossed counts
    against); "partly" otherwise.
    """
    ratios = events[_ratio_column(crossing)].dropna()
    if ratios.empty:
        return "not tested"
    ok = ratios >= RISE_BEFORE_CROSSING_TOLERANCE_LOG10
    if ok.all():
        return "reproduced"
    return "not reproduced" if not ok.any() else "partly reproduced"


def _order_estimate(runs: pd.DataFrame, crossing: str = "crossing_step") -> tuple[Estimate, str]:
    """Mean ± sd of log10(rise / crossing) over runs that both rose and crossed, and a note
    on the runs left out of it."""
    ratios = runs[_ratio_column(crossing)]
    finite = ratios[ratios.apply(math.isfinite)]
    note = (f"crossing step {estimate(runs[crossing])}, rise step {estimate(runs['rise_step'])}, "
            f"‖ΔW‖/‖W(0)‖ at the rise {estimate(runs['rel_update_at_rise'])}; "
            f"{int(ratios.isna().sum())} of {len(runs)} runs without a rise, "
            f"{int((ratios == -math.inf).sum())} rose before any crossing")
    return estimate(finite), note


@dataclass
class Results:
    """The chapter's three sweeps (conditions, optimizers, init scales) and their transfer events."""

    settings: MLPChapterSettings
    table: pd.DataFrame
    optimizer_table: pd.DataFrame
    init_table: pd.DataFrame
    baseline: float
    events: pd.DataFrame
    optimizer_events: pd.DataFrame
    init_events: pd.DataFrame

    @property
    def order(self) -> list[str]:
        """The conditions in the book's fixed order."""
        return [c for c in CONDITIONS if c in self.settings.conditions]

    @property
    def reference(self) -> str:
        """The baseline condition of the optimizer and init-scale sweeps."""
        return self.settings.robustness_conditions[0]

    def of(self, condition: str, column: str) -> Estimate:
        """Mean ± sd over seeds of one events column for one condition."""
        return estimate(self.events.loc[self.events["condition"] == condition, column])


def sweep_configs(settings: MLPChapterSettings) -> tuple[list[MLPRunConfig], ...]:
    """The three sweeps: the conditions, the optimizers (robustness), the initialisation scales."""
    return settings.condition_configs(), settings.robustness_configs(), settings.init_configs()


def run(settings: MLPChapterSettings) -> Results:
    """Train (or load from the cache) the three sweeps; older cached runs without
    :data:`TIMELINE_METRICS` are re-run."""
    table, optimizer_table, init_table = (run_sweep(configs, require_metrics=TIMELINE_METRICS)
                                          for configs in sweep_configs(settings))
    return Results(settings=settings, table=table, optimizer_table=optimizer_table, init_table=init_table,
                   baseline=metrics.random_abs_cos(settings.base.width), events=transfer_events(table),
                   optimizer_events=transfer_events(optimizer_table), init_events=transfer_events(init_table))


#: Rotation drift is averaged over the steps after this fraction of training: it leaves out
#: the initial transient and covers the rise, the fall (if any) and the end.
DRIFT_WINDOW_START = 0.1


def drift(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per run, the input-space ``turn`` as a rate (degrees per 1,000 steps) or the
    ``co_rotation`` (signed cos), time-averaged over the drift window (:data:`DRIFT_WINDOW_START`)."""
    frame = turn_rates(table) if metric == "turn" else select(table, metric, "input", 1)
    return drift_window_mean(frame, DRIFT_WINDOW_START)


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table, judged at the end of training, with each claim's value after
    ``early_steps`` in the ``early`` column (the init sweep is that long already)."""
    early = results.settings.early_steps
    dataset = results.settings.base.dataset
    at_end = timeline_claims(results.table, results.init_table, results.optimizer_table, results.baseline,
                             results.reference, dataset=dataset)
    at_early = timeline_claims(up_to_step(results.table, early), results.init_table,
                               up_to_step(results.optimizer_table, early), results.baseline, results.reference,
                               dataset=dataset)
    return with_early(at_end, at_early, early)


#: The two norms of the crossing: (events column, name in the claims, part of the claim key).
_NORMS = (("crossing_step", "Frobenius", "frobenius"), ("spectral_crossing_step", "spectral", "spectral"))


def timeline_claims(conditions: pd.DataFrame, init_sweep: pd.DataFrame, optimizers: pd.DataFrame,
                    baseline: float, reference: str = "res-relu", no_residual: str = NO_RESIDUAL, *,
                    dataset: str) -> pd.DataFrame:
    """Claims table of the timeline chapter, from its three sweeps' run tables.

    ``conditions``: the chapter's conditions under the base optimizer; ``init_sweep``: the
    ``reference`` condition at several init scales; ``optimizers``: the ``reference`` condition
    under each robustness optimizer. The step-0 claim compares ``reference`` with
    ``no_residual``, its counterpart without residual connections.
    """
    events = transfer_events(conditions)
    random_level = known(baseline)
    out = ClaimsBuilder(CHAPTER.name, dataset=dataset)

    def of(condition: str, column: str) -> Estimate:
        return estimate(events[events["condition"] == condition][column])

    res, nores = of(reference, "grad_v1_step0"), of(no_residual, "grad_v1_step0")
    out.add(key="step0-gradient-coherence",
            claim="Gradient coherence across layers exists at initialisation, before any update",
            quantity=f"{reference} minus {no_residual} gradient v1 |cos| at step 0",
            paper="present at init (no number)", ours=difference(res, nores), baseline=baseline,
            verdict=verdict_for_difference(res, nores), note=f"{reference} {res}; {no_residual} {nores}")
    relu_events = events[events["condition"] == reference]
    for crossing, norm, key in _NORMS:
        order, note = _order_estimate(relu_events, crossing)
        out.add(key=f"order-{key}",
                claim="Weight continuity forms once the cumulative update dominates the initial weights",
                quantity=f"{reference} log10(rise step / crossing step), {norm} norm",
                paper="rise after ‖ΔW‖ > ‖W(0)‖", ours=order, baseline=math.nan,
                verdict=verdict_for_order(relu_events, crossing), note=note)
    aligned = of(reference, "weight_cumgrad_final")
    out.add(key="weight-cumgrad-alignment", claim="... and the weights align with the cumulative gradient",
            quantity=f"{reference} final |cos(v1(W), v1(ΣdL/dW))|", paper="aligned (no number)", ours=aligned,
            baseline=baseline, verdict=verdict_for_difference(aligned, random_level))
    sweep = transfer_events(init_sweep)
    never_crossed = int(sweep["crossing_step"].isna().sum())
    crossing_rank = sweep["crossing_step"].fillna(math.inf)  # never crossed = later than any crossing
    for values, label, key, left_out in (
            (crossing_rank, "crossing", "crossing", f"{never_crossed} runs never crossed (ranked last)"),
            (sweep["rise_step"], "continuity rise", "rise",
             f"{int(sweep['rise_step'].isna().sum())} runs without a rise (left out)")):
        correlation = rank_correlation(sweep["init_scale"], values)
        out.add(key=f"init-moves-{key}", claim=f"A smaller initialisation moves the {label} earlier",
                quantity=f"Spearman ρ(init scale, {label} step)", paper="earlier (no number)", ours=correlation.rho,
                baseline=math.nan, verdict=verdict_for_correlation(correlation, +1), note=f"{correlation}; {left_out}",
                n=correlation.n)
    for crossing, norm, key in _NORMS:
        together = rank_correlation(sweep[crossing].fillna(math.inf), sweep["rise_step"])
        out.add(key=f"init-rise-follows-{key}", claim="Across initialisations the rise follows the crossing",
                quantity=f"Spearman ρ(crossing step, rise step), {norm} norm", paper="follows (no number)",
                ours=together.rho, baseline=math.nan, verdict=verdict_for_correlation(together, +1),
                note=f"{together}; never crossed (ranked last): {int(sweep[crossing].isna().sum())}", n=together.n)
    turn = drift(conditions, "turn")
    relu_turn = estimate(turn[turn["condition"] == reference]["value"])
    for condition in DRIFT_CONDITIONS:
        if condition not in set(conditions["condition"]):
            continue
        rate = estimate(turn[turn["condition"] == condition]["value"])
        out.add(key=f"{condition}-late-drift", claim="Without symmetry breaking, v1 keeps drifting",
                quantity=f"{condition} minus {reference} v1 turn rate after {DRIFT_WINDOW_START:.0%} of training "
                         "(degrees per 1,000 steps)",
                paper="drift", ours=difference(rate, relu_turn), baseline=math.nan,
                verdict=verdict_for_difference(rate, relu_turn, margin=1.0),
                note=f"{condition} {rate}°; {reference} {relu_turn}°")
        decoupled = of(condition, "weight_cumgrad_final")
        out.add(key=f"{condition}-decoupled", claim="... which decouples the weights from the cumulative gradient",
                quantity=f"{reference} minus {condition} final weight/cum.-gradient v1 |cos|", paper="lower without",
                ours=difference(aligned, decoupled), baseline=baseline,
                verdict=verdict_for_difference(aligned, decoupled),
                note=f"{reference} {aligned}; {condition} {decoupled}")
    co = drift(conditions, "co_rotation")
    none_co = estimate(co[co["condition"] == "res-none"]["value"])
    out.add(key="linear-independent-rotation", claim="In a linear residual net each layer rotates independently",
            quantity=f"res-none co-rotation of adjacent v1 after {DRIFT_WINDOW_START:.0%} of training (signed cos)",
            paper="independent (≈ 0)", ours=none_co, baseline=baseline, verdict=verdict_for_value(none_co, 0.0))
    optimizer_events = transfer_events(optimizers)
    for optimizer in optimizer_events["optimizer"].unique():
        runs = optimizer_events[optimizer_events["optimizer"] == optimizer]
        for crossing, norm, key in _NORMS:
            order, note = _order_estimate(runs, crossing)
            out.add(key=f"optimizer-{slug(optimizer)}-order-{key}", claim="The order holds under other optimizers",
                    quantity=f"{optimizer}: log10(rise step / crossing step), {norm} norm", paper="holds", ours=order,
                    baseline=math.nan, verdict=verdict_for_order(runs, crossing),
                    note=f"step-0 gradient v1 {estimate(runs['grad_v1_step0'])}; {note}")
    return out.table()


# Findings: what the chapter's computed prose states, as values. ``present.py`` words each one from
# the templates in ``prose.md``; which case applies is decided here, never there.


@dataclass(frozen=True)
class RunSummary:
    """The run note: the random baseline at the width, how many runs the three sweeps hold (a run
    shared between sweeps counts once per sweep) and how many snapshots a run of the conditions has."""

    width: int
    baseline: float
    runs: int
    snapshots: int


def run_summary(results: Results) -> RunSummary:
    """The numbers of the run note."""
    runs = sum(frame.groupby(RUN_KEYS, observed=True).ngroups
               for frame in (results.table, results.optimizer_table, results.init_table))
    return RunSummary(width=results.settings.base.width, baseline=results.baseline, runs=runs,
                      snapshots=results.table["step"].nunique())


@dataclass(frozen=True)
class ConditionStepZero:
    """One condition's gradient v1 (input) and u1 (output) continuity at step 0, over seeds."""

    condition: str
    v1: Estimate
    u1: Estimate


@dataclass(frozen=True)
class StepZero:
    """Gradient continuity before any update.

    ``case``: "compared" when the condition without residuals (``no_residual``) ran, so the reading
    compares the reference condition with it; "no-control" when it did not (nothing to compare).
    """

    case: str
    reference: str
    no_residual: str
    reference_v1: Estimate
    no_residual_v1: Estimate
    baseline: float
    conditions: tuple[ConditionStepZero, ...]


def step_zero(results: Results) -> StepZero:
    """Step-0 gradient continuity: the reference against the no-residual control (from the events),
    and v1 / u1 per condition (from the run table)."""

    def at_start(space: str, condition: str) -> Estimate:
        return estimate_at_step(results.table, 0, "grad_cos", space, 1, condition=condition)

    return StepZero(
        case="compared" if NO_RESIDUAL in results.order else "no-control",
        reference=results.reference, no_residual=NO_RESIDUAL,
        reference_v1=results.of(results.reference, "grad_v1_step0"),
        no_residual_v1=results.of(NO_RESIDUAL, "grad_v1_step0"), baseline=results.baseline,
        conditions=tuple(ConditionStepZero(c, at_start("input", c), at_start("output", c)) for c in results.order))


@dataclass(frozen=True)
class EventStep:
    """One run's event step on the snapshot grid. ``case``: "at" (it happened, at ``step``) or
    "never" (it did not happen within training; ``step`` NaN)."""

    case: str
    step: float


def event_step(step: float) -> EventStep:
    """The :class:`EventStep` of a step of the events table (NaN: the event never happened)."""
    return EventStep("never" if math.isnan(step) else "at", float(step))


@dataclass(frozen=True)
class SeedEvents:
    """One run's three event steps: the Frobenius and the spectral crossing, and the rise."""

    crossing: EventStep
    spectral_crossing: EventStep
    rise: EventStep


@dataclass(frozen=True)
class TransferSummary:
    """One run group's transfer timeline (a condition, or the reference under one optimizer): each
    seed's events, and final values and the relative update at the rise over seeds."""

    label: str
    seeds: tuple[SeedEvents, ...]
    weight_v1_final: Estimate
    weight_cumgrad_final: Estimate
    rel_update_final: Estimate
    rel_update_at_rise: Estimate


def transfer_summary(runs: pd.DataFrame, label: str) -> TransferSummary:
    """The :class:`TransferSummary` of some rows of an events table (:func:`transfer_events`)."""
    seeds = tuple(SeedEvents(event_step(f), event_step(s), event_step(r))
                  for f, s, r in zip(runs["crossing_step"], runs["spectral_crossing_step"], runs["rise_step"]))
    return TransferSummary(label=label, seeds=seeds, weight_v1_final=estimate(runs["weight_v1_final"]),
                           weight_cumgrad_final=estimate(runs["weight_cumgrad_final"]),
                           rel_update_final=estimate(runs["rel_update_final"]),
                           rel_update_at_rise=estimate(runs["rel_update_at_rise"]))


def condition_summaries(results: Results) -> list[TransferSummary]:
    """One :class:`TransferSummary` per condition, in the book's order."""
    events = results.events
    return [transfer_summary(events[events["condition"] == c], c) for c in results.order]


def optimizer_summaries(results: Results) -> list[TransferSummary]:
    """One :class:`TransferSummary` per optimizer of the reference condition, in the sweep's order."""
    events = results.optimizer_events
    return [transfer_summary(events[events["optimizer"] == o], o) for o in events["optimizer"].unique()]


@dataclass(frozen=True)
class ConditionRise:
    """One condition's relative update at the rise, spectral crossing step and rise step, over seeds."""

    condition: str
    rel_update_at_rise: Estimate
    spectral_crossing_step: Estimate
    rise_step: Estimate


@dataclass(frozen=True)
class RiseAgainstPrediction:
    """Where the rise happens: the relative update at which the leading direction of W(0) + ΔW
    should switch to a low-rank update's, 2/√width (``predicted``), against each condition's."""

    width: int
    predicted: float
    conditions: tuple[ConditionRise, ...]


def rise_against_prediction(results: Results) -> RiseAgainstPrediction:
    """The numbers of the rise note."""
    width = results.settings.base.width
    return RiseAgainstPrediction(width=width, predicted=2 / math.sqrt(width), conditions=tuple(
        ConditionRise(c, results.of(c, "rel_update_at_rise"), results.of(c, "spectral_crossing_step"),
                      results.of(c, "rise_step")) for c in results.order))


@dataclass(frozen=True)
class WeightsFollow:
    """When the reference condition's weights follow its updates (the reading's second paragraph).

    ``case``: "never-crossed" when the Frobenius crossing never came within training in some run
    (``never_crossed`` of ``runs``), else "crossed" (at ``crossing_step``). The verdicts are those of
    the claims ``order-frobenius`` and ``order-spectral``.
    """

    case: str
    reference: str
    rise_step: Estimate
    rel_update_at_rise: Estimate
    crossing_step: Estimate
    spectral_crossing_step: Estimate
    never_crossed: int
    runs: int
    frobenius_verdict: str
    spectral_verdict: str


def weights_follow(results: Results, claims: pd.DataFrame) -> WeightsFollow:
    """The reference condition's rise, crossings and order verdicts."""
    ref = results.events[results.events["condition"] == results.reference]
    never = int(ref["crossing_step"].isna().sum())
    verdicts = {norm: claim(claims, f"order-{key}")["verdict"] for _, norm, key in _NORMS}
    return WeightsFollow(case="never-crossed" if never else "crossed", reference=results.reference,
                         rise_step=estimate(ref["rise_step"]), rel_update_at_rise=estimate(ref["rel_update_at_rise"]),
                         crossing_step=estimate(ref["crossing_step"]),
                         spectral_crossing_step=estimate(ref["spectral_crossing_step"]), never_crossed=never,
                         runs=len(ref), frobenius_verdict=verdicts["Frobenius"], spectral_verdict=verdicts["spectral"])


@dataclass(frozen=True)
class InitScaleSteps:
    """One init scale's crossing steps (Frobenius, spectral) and rise step, over seeds."""

    init_scale: float
    crossing_step: Estimate
    spectral_crossing_step: Estimate
    rise_step: Estimate


@dataclass(frozen=True)
class InitScaleEvents:
    """The init-scale sweep's events. ``case``: "some-never-crossed" when some runs' Frobenius
    crossing never came (``never_crossed``: their (init scale, seed); they cannot be drawn), else
    "all-crossed"."""

    case: str
    never_crossed: tuple[tuple[float, int], ...]
    scales: tuple[InitScaleSteps, ...]


def init_scale_events(results: Results) -> InitScaleEvents:
    """The runs of the init sweep that never crossed, and each init scale's event steps."""
    events = results.init_events
    never = tuple((float(r.init_scale), int(r.seed)) for r in events[events["crossing_step"].isna()].itertuples())
    scales = tuple(InitScaleSteps(float(i), estimate(g["crossing_step"]), estimate(g["spectral_crossing_step"]),
                                  estimate(g["rise_step"])) for i, g in events.groupby("init_scale"))
    return InitScaleEvents(case="some-never-crossed" if never else "all-crossed", never_crossed=never, scales=scales)


@dataclass(frozen=True)
class ConditionDrift:
    """One condition's v1 turn rate (degrees per 1,000 steps) and co-rotation, averaged over the
    drift window, and its weight / cumulative-gradient alignment at the peak of weight continuity
    and at the end, over seeds."""

    condition: str
    turn: Estimate
    co_rotation: Estimate
    cumgrad_at_peak: Estimate
    cumgrad_final: Estimate


@dataclass(frozen=True)
class RotationDrift:
    """Rotation drift per condition after ``window_start`` of training (:data:`DRIFT_WINDOW_START`)."""

    window_start: float
    conditions: tuple[ConditionDrift, ...]


def rotation_drift(results: Results) -> RotationDrift:
    """The numbers of the rotation figure's caption and of the reading's drift paragraph."""
    turn, co = drift(results.table, "turn"), drift(results.table, "co_rotation")

    def of(frame: pd.DataFrame, condition: str) -> Estimate:
        return estimate(frame[frame["condition"] == condition]["value"])

    return RotationDrift(window_start=DRIFT_WINDOW_START, conditions=tuple(
        ConditionDrift(c, of(turn, c), of(co, c), results.of(c, "weight_cumgrad_at_peak"),
                       results.of(c, "weight_cumgrad_final")) for c in results.order))




@dataclass(frozen=True)
class DriftVerdicts:
    """What the drift claims say together. ``case``: "not-faster" when no symmetric condition turns
    faster than the reference (every drift claim not reproduced), "faster" when every one does (every
    one reproduced), else "mixed". ``verdicts``: (condition, verdict) of each drift claim."""

    case: str
    verdicts: tuple[tuple[str, str], ...]


def drift_verdicts(claims: pd.DataFrame) -> DriftVerdicts:
    """The drift claims of :data:`DRIFT_CONDITIONS` that the claims table holds, and their common reading."""
    verdicts = tuple((c, claim(claims, f"{c}-late-drift")["verdict"]) for c in DRIFT_CONDITIONS
                     if has_claim(claims, f"{c}-late-drift"))
    if all(v == "not reproduced" for _, v in verdicts):
        case = "not-faster"
    elif all(v == "reproduced" for _, v in verdicts):
        case = "faster"
    else:
        case = "mixed"
    return DriftVerdicts(case=case, verdicts=verdicts)

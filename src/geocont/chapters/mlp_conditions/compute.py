"""mlp_conditions: what the chapter computes (settings, runs, events, claims; the radial activations' linearity from
:mod:`.radial`); no figures, no matplotlib."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ... import instability, metrics, paper
from ...book.chapter import Chapter, ClaimsBuilder, with_early
from ...book.prose import Prose
from ...mlp import CONDITIONS
from ...statistics import (
    DIFFERENCE_MARGIN,
    Estimate,
    Fall,
    difference,
    fall_from_peak,
    final_estimate,
    known,
    random_level_margin,
    up_to_step,
    verdict_at_random_level,
    verdict_for_difference,
    verdict_for_value,
    weakest,
)
from ...training import run_sweep
from .. import mlp_runs
from ..mlp_runs import MLPChapterSettings
from .radial import (  # noqa: F401 (the chapter's names, read from here)
    NEAR_LINEAR_SHARE,
    RADIAL_NEAR_IDENTITY_NORM,
    RadialLinearity,
    radial_linearity,
)

#: The conditions the chapter compares (the ``conditions`` parameter replaces them).
CONDITIONS_COMPARED = ("res-relu", "res-gelu", "res-silu", "nores-relu", "res-none", "res-radial", "res-radial-tau")

#: The control of the mean-direction hypothesis (after a ReLU every layer's input is non-negative, so its mean is a
#: large direction all examples share, and each layer's v1 may follow it): the same nets with the batch mean of the
#: activation's output removed inside the gradient (:class:`geocont.mlp.BatchCentredReLU`, whose docstring gives
#: the design and why a running mean outside the gradient could not serve), so that the block stays
#: ``act(W h + b)`` with one activation swapped.
MEAN_CONTROL_CONDITIONS = ("nores-relu-batch-centred", "res-relu-batch-centred")
#: The chapter's words (``prose.md``): its claims and its computed sentences.
PROSE = Prose.of(__package__)


def describe(settings: MLPChapterSettings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    base = settings.base
    return dict(
        seeds=settings.seeds,
        data=mlp_runs.data_description(settings)
        + "; data control: "
        + ", ".join(f"`{d}`" for d in settings.data_datasets),
        model=f"residual MLP, {base.depth} hidden layers of width {base.width}, init_scale {base.init_scale}",
        training=mlp_runs.training_description(settings),
    )


CHAPTER = Chapter(
    name="mlp_conditions",
    parameters=mlp_runs.parameters(
        "scale",
        "seeds",
        "steps",
        "conditions",
        "width",
        "depth",
        "dataset",
        "init_scale",
        "lr",
        "n_snapshots",
        "precision",
    ),
    presets=mlp_runs.mlp_presets(conditions=CONDITIONS_COMPARED, mean_control_conditions=MEAN_CONTROL_CONDITIONS),
    build=mlp_runs.build_settings,
    describe=describe,
    runs=mlp_runs.all_run_configs,
    scale_rows=mlp_runs.scale_rows,
)


@dataclass
class Results:
    """The chapter's run tables: the conditions, the optimizer, init-scale and data sweeps, the mean control."""

    settings: MLPChapterSettings
    table: pd.DataFrame
    robustness: pd.DataFrame
    init_table: pd.DataFrame
    #: the data control: ``{dataset: sweep table}`` of the data conditions, the chapter's own dataset first
    data: dict[str, pd.DataFrame]
    baseline: float
    empirical: dict[str, metrics.MeanSd]
    #: the mean-removal control (:data:`MEAN_CONTROL_CONDITIONS`); empty where it did not run
    mean_control: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)

    @property
    def order(self) -> list[str]:
        """The conditions in the book's fixed order."""
        return [c for c in CONDITIONS if c in self.settings.conditions]

    @property
    def headline(self) -> str:
        """The dataset whose verdicts are the chapter's (its own; :data:`geocont.chapters.mlp_runs.HEADLINE_DATASET_RULE`)."""
        return self.settings.base.dataset

    @property
    def random_margin(self) -> float:
        """The equivalence margin of "at the random level" at the hidden width (:func:`random_level_margin`)."""
        return random_level_margin(self.settings.base.width)


def run(settings: MLPChapterSettings) -> Results:
    """Train (or load from the cache) every run of the chapter."""
    base = settings.base
    mean_control = settings.mean_control_configs()
    return Results(
        settings=settings,
        table=run_sweep(settings.condition_configs()),
        robustness=run_sweep(settings.robustness_configs()),
        init_table=run_sweep(settings.init_configs()),
        data=mlp_runs.run_data_sweep(settings),
        mean_control=run_sweep(mean_control) if mean_control else pd.DataFrame(),
        baseline=metrics.random_abs_cos(base.width),
        empirical=metrics.random_matrix_baseline((base.width, base.width), base.depth, n_draws=5),
    )


def _until(results: Results, step: int | None) -> Results:
    """``results`` with every table cut at ``step`` (None: unchanged): the same runs read at an earlier snapshot."""
    if step is None:
        return results

    def cut(table: pd.DataFrame) -> pd.DataFrame:
        return up_to_step(table, step) if len(table) else table

    return dataclasses.replace(
        results,
        table=cut(results.table),
        robustness=cut(results.robustness),
        data={d: cut(t) for d, t in results.data.items()},
        mean_control=cut(results.mean_control),
    )


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table, judged at the end of training, each with its value after
    ``early_steps`` (the same runs read at that snapshot) in the ``early`` column."""
    early = results.settings.early_steps
    return with_early(condition_claims(results), condition_claims(_until(results, early)), early)


def condition_claims(results: Results) -> pd.DataFrame:
    """The claims of Conditions 1 and 2: those of the data conditions on every dataset of the data control (the
    chapter's own dataset is the verdict of record), the others on the chapter's own dataset."""
    out = ClaimsBuilder(CHAPTER.name, dataset=results.headline, prose=PROSE)
    for dataset, data in results.data.items():
        data_control_claims(results, out, dataset, data)
    output_space_claim(results, out)
    activation_claims(results, out)
    optimizer_claims(results, out)
    mean_direction_claims(results, out)
    return out.table()


def _final(
    results: Results,
    metric: str,
    space: str,
    condition: str,
    frame: pd.DataFrame | None = None,
    optimizer: str | None = None,
) -> Estimate:
    """``metric``'s final v1 / u1 value (direction 1) of ``condition`` over seeds, in ``frame`` (default: the
    conditions' table) under ``optimizer`` (default: the optimizer of the conditions' table)."""
    table = results.table
    return final_estimate(
        table if frame is None else frame,
        metric,
        space,
        1,
        condition=condition,
        optimizer=optimizer or table["optimizer"].iloc[0],
    )


def _at_random(results: Results, ours: Estimate) -> str:
    """Whether ``ours`` is at the random level (:func:`geocont.statistics.verdict_at_random_level`)."""
    return verdict_at_random_level(ours, results.baseline, results.random_margin)


def _nores_claims(results: Results, out: ClaimsBuilder, *, dataset: str, data: pd.DataFrame) -> None:
    """Condition 1 on one dataset: without residuals, gradient and weight v1 stay at the random level."""
    nores_grad = _final(results, "grad_cos", "input", "nores-relu", data)
    nores_weight = _final(results, "weight_cos", "input", "nores-relu", data)
    out.add(
        key="nores-gradient-v1",
        ours=nores_grad,
        baseline=results.baseline,
        verdict=_at_random(results, nores_grad),
        fill={"paper": paper.NORES_GRADIENT},
        dataset=dataset,
    )
    out.add(
        key="nores-weight-v1",
        ours=nores_weight,
        baseline=results.baseline,
        verdict=_at_random(results, nores_weight),
        fill={"gradient": nores_grad},
        dataset=dataset,
    )


def _linear_claims(results: Results, out: ClaimsBuilder, *, dataset: str, data: pd.DataFrame) -> None:
    """Condition 2 on one dataset: the linear residual net's high gradient and low weight v1, and its weight v1's
    fall from its peak."""
    none_grad = _final(results, "grad_cos", "input", "res-none", data)
    none_weight = _final(results, "weight_cos", "input", "res-none", data)
    out.add(
        key="linear-gradient-v1",
        ours=none_grad,
        baseline=results.baseline,
        verdict=verdict_for_value(none_grad, paper.LINEAR_GRADIENT_V1),
        fill={"paper": paper.LINEAR_GRADIENT_V1},
        dataset=dataset,
    )
    out.add(
        key="linear-weight-v1",
        ours=none_weight,
        baseline=results.baseline,
        verdict=verdict_for_value(none_weight, paper.LINEAR_WEIGHT_V1),
        fill={"paper": paper.LINEAR_WEIGHT_V1},
        dataset=dataset,
    )
    fall = fall_from_peak(data, condition="res-none")
    out.add(
        key="res-none-rise-then-collapse",
        template="rise-then-collapse",
        ours=fall.drop,
        baseline=results.baseline,
        verdict=fall.verdict,
        fill={"condition": "res-none", "peak": fall.peak, "final": fall.final},
        dataset=dataset,
    )


def data_control_claims(results: Results, out: ClaimsBuilder, dataset: str, data: pd.DataFrame) -> None:
    """Conditions 1 and 2 on one dataset of the data control (``data``, its run table): without residuals,
    gradient and weight v1 continuity stay at the random level; the linear residual net has high gradient
    continuity but low weight continuity, which first forms and then falls."""
    conditions = set(data["condition"])
    if "nores-relu" in conditions:
        _nores_claims(results, out, dataset=dataset, data=data)
    if "res-none" in conditions:
        _linear_claims(results, out, dataset=dataset, data=data)


def output_space_claim(results: Results, out: ClaimsBuilder) -> None:
    """Condition 1 in the output space: without residuals, gradient u1 continuity stays at the random level."""
    nores_grad_u1 = _final(results, "grad_cos", "output", "nores-relu")
    out.add(
        key="nores-gradient-u1",
        ours=nores_grad_u1,
        baseline=results.baseline,
        verdict=_at_random(results, nores_grad_u1),
        fill={"paper": paper.NORES_GRADIENT},
    )


def activation_claims(results: Results, out: ClaimsBuilder) -> None:
    """Condition 2 on the chapter's own dataset: the rotation-equivariant radial activation loses weight
    continuity (low at the end, after a rise), the element-wise activations keep it above the linear net's."""
    baseline, table = results.baseline, results.table
    none_weight = _final(results, "weight_cos", "input", "res-none")
    radial_weight = _final(results, "weight_cos", "input", "res-radial")
    out.add(
        key="radial-weight-v1",
        ours=radial_weight,
        baseline=baseline,
        verdict=verdict_for_value(radial_weight, paper.RADIAL_WEIGHT_V1),
        fill={"paper": paper.RADIAL_WEIGHT_V1},
    )
    for condition in ("res-relu", "res-gelu", "res-silu"):
        if condition not in set(table["condition"]):
            continue
        ours = _final(results, "weight_cos", "input", condition)
        out.add(
            key=f"{condition}-above-linear",
            template="above-linear",
            ours=difference(ours, none_weight),
            baseline=math.nan,  # a difference of two measured conditions: no random level in the verdict
            verdict=verdict_for_difference(ours, none_weight),
            fill={"condition": condition, "weight": ours, "linear": none_weight},
        )
    fall = fall_from_peak(table, condition="res-radial", optimizer=table["optimizer"].iloc[0])
    out.add(
        key="res-radial-rise-then-collapse",
        template="rise-then-collapse",
        ours=fall.drop,
        baseline=baseline,
        verdict=fall.verdict,
        fill={"condition": "res-radial", "peak": fall.peak, "final": fall.final},
    )


def optimizer_claims(results: Results, out: ClaimsBuilder) -> None:
    """Continuity and symmetry breaking under every optimizer of the robustness sweep: res-relu's weight v1 above
    the random level, and above res-none's, each judged by its weakest optimizer."""
    robustness, baseline = results.robustness, results.baseline
    optimizers = list(robustness["optimizer"].unique())
    random_level = known(baseline)
    relu = {o: _final(results, "weight_cos", "input", "res-relu", robustness, o) for o in optimizers}
    none = {o: _final(results, "weight_cos", "input", "res-none", robustness, o) for o in optimizers}
    details = "; ".join(
        PROSE.render("optimizer-finals-item", optimizer=o, relu=relu[o], none=none[o]) for o in optimizers
    )
    out.add(
        key="continuity-every-optimizer",
        ours=min(relu.values(), key=lambda e: e.mean),
        baseline=baseline,
        verdict=weakest(verdict_for_difference(relu[o], random_level) for o in optimizers),
        fill={"optimizers": details},
    )
    out.add(
        key="symmetry-breaking-every-optimizer",
        ours=min((difference(relu[o], none[o]) for o in optimizers), key=lambda e: e.mean),
        baseline=baseline,
        verdict=weakest(verdict_for_difference(relu[o], none[o]) for o in optimizers),
        fill={"optimizers": details},
    )


def mean_direction_claims(results: Results, out: ClaimsBuilder) -> None:
    """Our own claims (the paper makes none): does NoRes's weight v1 follow the mean of each layer's input, and
    what is left of NoRes's and res-relu's weight continuity when that mean is removed (:func:`mean_direction`)."""
    found = mean_direction(results)
    if found is None:
        return
    random_level = known(results.baseline)
    out.add(
        key="nores-v1-follows-input-mean",
        ours=found.follows["nores-relu"],
        baseline=results.baseline,
        verdict=verdict_for_difference(found.follows["nores-relu"], random_level),
        fill={"relu": found.follows["res-relu"]},
    )
    centred = found.weight[NORES_CENTRED]
    out.add(
        key="nores-centred-weight-v1",
        ours=centred,
        baseline=results.baseline,
        verdict=verdict_at_random_level(centred, results.baseline, results.random_margin),
        fill={
            "plain": found.weight["nores-relu"],
            "centred_loss": found.loss[NORES_CENTRED],
            "plain_loss": found.loss["nores-relu"],
        },
    )
    relu_centred = found.weight[RES_CENTRED]
    out.add(
        key="res-relu-centred-keeps",
        ours=difference(relu_centred, random_level),
        baseline=results.baseline,
        verdict=verdict_for_difference(relu_centred, random_level),
        fill={
            "plain": found.weight["res-relu"],
            "centred": relu_centred,
            "share": PROSE.choose(
                "centred-share", "undefined" if math.isnan(found.relu_share) else "measured", share=found.relu_share
            ),
            "centred_loss": found.loss[RES_CENTRED],
            "plain_loss": found.loss["res-relu"],
        },
    )


# ---------------------------------------------------------------------------------------------
# Findings: what the chapter's prose words (present.py), computed here
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetFall:
    """The linear net on one dataset of the data control: its weight v1 fall (the book's fall rule) and its
    training-set loss (memorised, or rising again: :class:`geocont.instability.LossCourse`)."""

    dataset: str
    fall: Fall
    loss: instability.LossCourse


@dataclass(frozen=True)
class DataControl:
    """On which datasets the linear net's weight continuity falls, and whether those are the ones whose
    training set is memorised or whose training became unstable. ``case``: "clean-fall" (a fall on a
    dataset neither memorised nor unstable), "confounded" (every fall comes with one of them), "no-fall"."""

    datasets: list[DatasetFall]
    case: str

    @property
    def falls(self) -> list[str]:
        return [d.dataset for d in self.datasets if d.fall.falls]

    @property
    def clean_falls(self) -> list[str]:
        return [d.dataset for d in self.datasets if d.fall.falls and not d.loss.memorised and not d.loss.rose]


def data_control(results: Results) -> DataControl | None:
    """The :class:`DataControl` finding (None where the data control did not run the linear net)."""
    datasets = []
    for dataset, table in results.data.items():
        one = table[table.condition == "res-none"]
        if one.empty:
            return None
        datasets.append(DatasetFall(dataset, fall_from_peak(one), instability.loss_course(one)))
    found = DataControl(datasets, "no-fall")
    case = "clean-fall" if found.clean_falls else "confounded" if found.falls else "no-fall"
    return DataControl(datasets, case)


@dataclass(frozen=True)
class OptimizerFinding:
    """Is Adam the symmetry breaker? Final weight v1 per (condition, optimizer), res-none's gradient v1 per
    optimizer; whether res-relu stays above the random level under every optimizer (``relu_everywhere``),
    the optimizers under which the linear net keeps clearly less than under the base one (``adam_pins``),
    and res-none under the base optimizer at each initialisation scale (short runs)."""

    base_optimizer: str
    weight: dict[tuple[str, str], Estimate]
    gradient: dict[str, Estimate]
    relu_everywhere: bool
    adam_pins: list[str]
    by_init: dict[float, Estimate]


def optimizer_finding(results: Results) -> OptimizerFinding | None:
    """The :class:`OptimizerFinding` (None where the optimizer sweep lacks res-relu or res-none)."""
    robustness, init_table = results.robustness, results.init_table
    optimizers = list(robustness["optimizer"].unique())
    base_optimizer = results.settings.base.optimizer.label
    random_level = known(results.baseline)

    def final(table: pd.DataFrame, metric: str, condition: str, **equal) -> Estimate:
        return final_estimate(table, metric, "input", 1, condition=condition, **equal)

    weight = {
        (c, o): final(robustness, "weight_cos", c, optimizer=o)
        for c in results.settings.robustness_conditions
        for o in optimizers
    }
    if ("res-none", base_optimizer) not in weight or ("res-relu", base_optimizer) not in weight:
        return None
    gradient = {o: final(robustness, "grad_cos", "res-none", optimizer=o) for o in optimizers}
    relu_everywhere = all(
        verdict_for_difference(weight[("res-relu", o)], random_level) == "reproduced" for o in optimizers
    )
    adam_pins = [
        o
        for o in optimizers
        if o != base_optimizer
        and verdict_for_difference(weight[("res-none", base_optimizer)], weight[("res-none", o)]) == "reproduced"
    ]
    by_init = {
        float(i): final(init_table, "weight_cos", "res-none", init_scale=i)
        for i in sorted(init_table["init_scale"].unique())
    }
    return OptimizerFinding(base_optimizer, weight, gradient, relu_everywhere, adam_pins, by_init)


@dataclass(frozen=True)
class MeanDirection:
    """The mean-direction hypothesis, measured (all final values, mean ± sd over seeds, the chapter's dataset):
    per condition, |cos(v1(W_l), mean input of layer l)| (``follows``), the share of each layer's input second
    moment that is its mean (``mean_share``), weight v1 continuity (``weight``, with the centred controls), the
    final training-set loss (``loss``: whether a control trains as its plain net does), and the share of
    res-relu's weight v1 above the random level that removing the mean takes away (``relu_share``)."""

    follows: dict[str, Estimate]
    mean_share: dict[str, Estimate]
    weight: dict[str, Estimate]
    loss: dict[str, Estimate]
    relu_share: float
    baseline: float

    @property
    def case(self) -> str:
        """ "explains" (NoRes's v1 follows its input mean above the random level, and removing the mean lowers its
        weight v1, each by the book's difference rule), "follows-only", "drops-only", "neither", or
        "control-diverged" (the centred NoRes net diverged in every seed: the removal says nothing)."""
        if not self.weight[NORES_CENTRED].n:
            return "control-diverged"
        follows = verdict_for_difference(self.follows["nores-relu"], known(self.baseline)) == "reproduced"
        drops = verdict_for_difference(self.weight["nores-relu"], self.weight[NORES_CENTRED]) == "reproduced"
        return "explains" if follows and drops else "follows-only" if follows else "drops-only" if drops else "neither"


#: The mean control of each condition of the mean-direction measurement.
NORES_CENTRED, RES_CENTRED = MEAN_CONTROL_CONDITIONS
MEAN_PAIRS = {"nores-relu": NORES_CENTRED, "res-relu": RES_CENTRED}


def mean_direction(results: Results) -> MeanDirection | None:
    """The :class:`MeanDirection` finding (None where the mean control did not run)."""
    control = results.mean_control
    if control.empty or not set(MEAN_PAIRS) <= set(results.table["condition"]):
        return None
    both = pd.concat([results.table[results.table["condition"].isin(list(MEAN_PAIRS))], control], ignore_index=True)
    conditions = [*MEAN_PAIRS, *MEAN_PAIRS.values()]
    follows = {c: final_estimate(both, "mean_input_cos", "input", 1, condition=c) for c in conditions}
    mean_share = {c: final_estimate(both, "mean_input_share", "", 0, condition=c) for c in conditions}
    weight = {c: final_estimate(both, "weight_cos", "input", 1, condition=c) for c in conditions}
    loss = {c: final_estimate(both, "train_set_loss", condition=c) for c in conditions}
    relu, centred = weight["res-relu"].mean, weight[RES_CENTRED].mean
    rise = relu - results.baseline
    share = (relu - centred) / rise if rise > DIFFERENCE_MARGIN else math.nan
    return MeanDirection(follows, mean_share, weight, loss, share, results.baseline)

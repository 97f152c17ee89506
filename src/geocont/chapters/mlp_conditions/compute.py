"""mlp_conditions: what the chapter computes (settings, runs, events, claims); no figures, no matplotlib."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ... import instability, metrics, paper
from ...book.chapter import Chapter, ClaimsBuilder, with_early
from ...mlp import CONDITIONS
from ...statistics import (Estimate, Fall, fall_from_peak, final_estimate, peak_and_final, up_to_step,
                           verdict_for_difference, verdict_for_value, weakest)
from ...training import run_sweep
from .. import mlp_runs
from ..mlp_runs import MLPChapterSettings


#: The conditions the chapter compares (the ``conditions`` parameter replaces them).
CONDITIONS_COMPARED = ("res-relu", "res-gelu", "res-silu", "nores-relu", "res-none", "res-radial", "res-radial-tau")


def describe(settings: MLPChapterSettings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    base = settings.base
    return dict(
        seeds=settings.seeds,
        data=mlp_runs.data_description(settings) + "; data control: " + ", ".join(f"`{d}`" for d in settings.data_datasets),
        model=f"residual MLP, {base.depth} hidden layers of width {base.width}, init_scale {base.init_scale}",
        training=mlp_runs.training_description(settings),
    )


CHAPTER = Chapter(
    name="mlp_conditions",
    parameters=mlp_runs.parameters("scale", "seeds", "steps", "conditions", "width", "depth", "dataset",
                                   "init_scale", "lr", "n_snapshots", "precision"),
    presets=mlp_runs.mlp_presets(conditions=CONDITIONS_COMPARED),
    build=mlp_runs.build_settings,
    describe=describe,
    runs=mlp_runs.all_run_configs,
    scale_rows=mlp_runs.scale_rows,
)


@dataclass
class Results:
    """The chapter's run tables: the conditions, the optimizer and the init-scale sweeps."""

    settings: MLPChapterSettings
    table: pd.DataFrame
    robustness: pd.DataFrame
    init_table: pd.DataFrame
    #: the data control: ``{dataset: sweep table}`` of the robustness conditions
    data: dict[str, pd.DataFrame]
    baseline: float
    empirical: dict[str, metrics.MeanSd]

    @property
    def order(self) -> list[str]:
        """The conditions in the book's fixed order."""
        return [c for c in CONDITIONS if c in self.settings.conditions]


def run(settings: MLPChapterSettings) -> Results:
    """Train (or load from the cache) every run of the chapter."""
    base = settings.base
    return Results(
        settings=settings,
        table=run_sweep(settings.condition_configs()),
        robustness=run_sweep(settings.robustness_configs()),
        init_table=run_sweep(settings.init_configs()),
        data=mlp_runs.run_data_sweep(settings),
        baseline=metrics.random_abs_cos(base.width),
        empirical=metrics.random_matrix_baseline((base.width, base.width), base.depth, n_draws=5),
    )


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table, judged at the end of training, each with its value after
    ``early_steps`` (the same runs read at that snapshot) in the ``early`` column."""
    early = results.settings.early_steps
    at_end = condition_claims(results.table, results.robustness, results.baseline)
    at_early = condition_claims(up_to_step(results.table, early), up_to_step(results.robustness, early),
                                results.baseline)
    return with_early(at_end, at_early, early)


def condition_claims(table: pd.DataFrame, robustness: pd.DataFrame, baseline: float) -> pd.DataFrame:
    """The claims of Conditions 1 and 2, from the condition sweep and the optimizer sweep."""
    base_optimizer = table["optimizer"].iloc[0]
    out = ClaimsBuilder(CHAPTER.name)

    def final(metric: str, space: str, condition: str, frame: pd.DataFrame = table,
              optimizer: str | None = None) -> Estimate:
        return final_estimate(frame, metric, space, 1, condition=condition, optimizer=optimizer or base_optimizer)

    for space, vector in (("input", "v1"), ("output", "u1")):
        nores_grad = final("grad_cos", space, "nores-relu")
        out.add(f"nores-gradient-{vector}", "Without residuals, gradient continuity falls to random level",
                f"NoRes gradient {vector} |cos|", f"~{paper.NORES_GRADIENT}", nores_grad, baseline,
                verdict_for_value(nores_grad, paper.NORES_GRADIENT))
    nores_weight = final("weight_cos", "input", "nores-relu")
    out.add("nores-weight-v1", "Without residuals, weight continuity never forms", "NoRes weight v1 |cos|",
            "random level", nores_weight, baseline, verdict_for_value(nores_weight, baseline))
    none_grad = final("grad_cos", "input", "res-none")
    out.add("linear-gradient-v1", "A linear residual net has high gradient continuity", "Res+None gradient v1 |cos|",
            f"{paper.LINEAR_GRADIENT_V1}", none_grad, baseline, verdict_for_value(none_grad, paper.LINEAR_GRADIENT_V1))
    none_weight = final("weight_cos", "input", "res-none")
    out.add("linear-weight-v1", "... but low weight continuity (rotation drift)", "Res+None weight v1 |cos|",
            f"{paper.LINEAR_WEIGHT_V1}", none_weight, baseline, verdict_for_value(none_weight, paper.LINEAR_WEIGHT_V1))
    radial_weight = final("weight_cos", "input", "res-radial")
    out.add("radial-weight-v1", "A rotation-equivariant nonlinearity fails too", "Res+Radial weight v1 |cos|",
            f"~{paper.RADIAL_WEIGHT_V1}", radial_weight, baseline,
            verdict_for_value(radial_weight, paper.RADIAL_WEIGHT_V1))
    for condition in ("res-relu", "res-gelu", "res-silu"):
        if condition not in set(table["condition"]):
            continue
        ours = final("weight_cos", "input", condition)
        out.add(f"{condition}-above-linear", "Element-wise activations keep weight continuity",
                f"{condition} minus Res+None weight v1", "higher (no number)", ours.mean - none_weight.mean,
                baseline, verdict_for_difference(ours, none_weight), note=f"{condition} {ours}; res-none {none_weight}",
                std=ours.std, n=ours.n)
    for condition in ("res-none", "res-radial"):
        peak, last = peak_and_final(table, "weight_cos", "input", 1, condition=condition, optimizer=base_optimizer)
        out.add(f"{condition}-rise-then-collapse", "Weight continuity first forms, then is lost to rotation drift",
                f"{condition} weight v1: peak minus final", "rise, then collapse", peak.mean - last.mean, baseline,
                verdict_for_difference(peak, last), note=f"peak {peak}, final {last}", n=peak.n)
    optimizers = list(robustness["optimizer"].unique())
    random_level = Estimate(baseline, 0.0, 1)
    relu = {o: final("weight_cos", "input", "res-relu", robustness, o) for o in optimizers}
    none = {o: final("weight_cos", "input", "res-none", robustness, o) for o in optimizers}
    details = "; ".join(f"{o}: res-relu {relu[o]}, res-none {none[o]}" for o in optimizers)
    out.add("continuity-every-optimizer",
            "Continuity is not an optimizer artefact (Adam, SGD, Adam in random per-layer frames)",
            "lowest res-relu weight v1 over optimizers", "present under every optimizer",
            min(e.mean for e in relu.values()), baseline,
            weakest(verdict_for_difference(relu[o], random_level) for o in optimizers), note=details, n=len(optimizers))
    out.add("symmetry-breaking-every-optimizer", "Symmetry breaking matters under every optimizer",
            "smallest (res-relu minus res-none) weight v1 over optimizers", "res-relu higher",
            min(relu[o].mean - none[o].mean for o in optimizers), baseline,
            weakest(verdict_for_difference(relu[o], none[o]) for o in optimizers), note=details, n=len(optimizers))
    return out.table()


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
    random_level = Estimate(results.baseline, 0.0, 1)

    def final(table: pd.DataFrame, metric: str, condition: str, **equal) -> Estimate:
        return final_estimate(table, metric, "input", 1, condition=condition, **equal)

    weight = {(c, o): final(robustness, "weight_cos", c, optimizer=o)
              for c in results.settings.robustness_conditions for o in optimizers}
    if ("res-none", base_optimizer) not in weight or ("res-relu", base_optimizer) not in weight:
        return None
    gradient = {o: final(robustness, "grad_cos", "res-none", optimizer=o) for o in optimizers}
    relu_everywhere = all(verdict_for_difference(weight[("res-relu", o)], random_level) == "reproduced"
                          for o in optimizers)
    adam_pins = [o for o in optimizers if o != base_optimizer and verdict_for_difference(
        weight[("res-none", base_optimizer)], weight[("res-none", o)]) == "reproduced"]
    by_init = {float(i): final(init_table, "weight_cos", "res-none", init_scale=i)
               for i in sorted(init_table["init_scale"].unique())}
    return OptimizerFinding(base_optimizer, weight, gradient, relu_everywhere, adam_pins, by_init)


#: sigma_rad(z) = z tanh(||z||) is within 1% of the identity for ||z|| above this (tanh(2.65) = 0.99).
RADIAL_NEAR_IDENTITY_NORM = 2.65

#: A radial activation is called linear in practice when at least this percentage of its pre-activations
#: lie where it is within 1% of the identity.
NEAR_LINEAR_SHARE = 90.0


@dataclass(frozen=True)
class RadialLinearity:
    """How nonlinear the two radial activations are at initialisation, on ``probe`` training images: the
    pre-activation norms of ``res-radial`` (median, 5th percentile) and the percentage of them where
    σ_rad is within 1% of the identity; ``res-radial-tau``'s τ over layers and the same percentage."""

    probe: int
    median: float
    low: float
    near_identity: float
    tau_min: float
    tau_max: float
    tau_near_identity: float

    @property
    def radial_is_linear(self) -> bool:
        return self.near_identity >= NEAR_LINEAR_SHARE


def radial_linearity(settings: MLPChapterSettings, n_probe: int = 512) -> RadialLinearity:
    """The :class:`RadialLinearity` of the chapter's model at initialisation (seed ``settings.seeds[0]``)."""
    import torch

    from ...data import load_image_data
    from ...mlp import ResidualMLP, preactivation_norms

    base = settings.base
    data = load_image_data(base.dataset, max_train=base.max_train)
    probe = data.x_train[:n_probe]

    def model(condition: str) -> ResidualMLP:
        torch.manual_seed(settings.seeds[0])
        return ResidualMLP(condition, in_features=data.n_features, width=base.width, depth=base.depth,
                           n_classes=data.n_classes, init_scale=base.init_scale)

    norms = preactivation_norms(model("res-radial"), probe)
    scaled = model("res-radial-tau")
    with torch.no_grad():
        scaled_norms = preactivation_norms(scaled, probe)  # its first forward pass fixes every layer's tau
    taus = torch.stack([block.activation.tau for block in scaled.blocks])
    return RadialLinearity(
        probe=len(probe), median=float(norms.median()), low=float(norms.quantile(0.05)),
        near_identity=float(100 * (norms > RADIAL_NEAR_IDENTITY_NORM).float().mean()),
        tau_min=float(taus.min()), tau_max=float(taus.max()),
        tau_near_identity=float(100 * (scaled_norms / taus[:, None] > RADIAL_NEAR_IDENTITY_NORM).float().mean()))

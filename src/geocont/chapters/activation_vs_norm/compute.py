"""activation_vs_norm: what the chapter computes (settings, runs, events, claims); no figures, no matplotlib."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ... import metrics
from ...book.chapter import Chapter, ClaimsBuilder, claim, has_claim, with_early
from ...book.prose import Prose
from ...statistics import Estimate, closer_to, difference, estimate, final_estimate, up_to_step, verdict_for_difference
from ...tables import RUN_KEYS, select
from ...training import run_sweep
from .. import mlp_runs
from ..mlp_runs import MLPChapterSettings

#: The conditions the chapter compares (the ``conditions`` parameter replaces them).
CONDITIONS_COMPARED = ("res-relu", "res-ln", "res-ln-relu", "res-none", "res-rms", "res-rms-relu")
#: The chapter's words (``prose.md``): its claims and its computed sentences.
PROSE = Prose.of(__package__)


def describe(settings: MLPChapterSettings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    base = settings.base
    return dict(
        seeds=settings.seeds,
        data=mlp_runs.data_description(settings),
        model=f"residual MLP, {base.depth} hidden layers of width {base.width}, init_scale {base.init_scale}; "
        f"conditions {', '.join(settings.conditions)}",
        training=mlp_runs.training_description(settings, init_sweep=False),
    )


CHAPTER = Chapter(
    name="activation_vs_norm",
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
        "n_directions",
        "precision",
    ),
    presets=mlp_runs.mlp_presets(conditions=CONDITIONS_COMPARED),
    build=mlp_runs.build_settings,
    describe=describe,
    runs=MLPChapterSettings.condition_configs,
)


def final_direction_profile(table: pd.DataFrame, metric: str = "weight_cos", space: str = "input") -> pd.DataFrame:
    """Continuity of the i-th singular direction at each run's last step, layer-pair mean.

    One row per run x direction (column ``direction``, 1 = leading), column ``value``.
    """
    rows = select(table, metric, space)
    last = rows.groupby(RUN_KEYS, observed=True)["step"].transform("max")
    rows = rows[rows["step"] == last]
    return rows.groupby(RUN_KEYS + ["direction"], observed=True)["value"].mean().reset_index()


def concentration(profile: pd.DataFrame) -> pd.DataFrame:
    """Per run: ``lead`` (direction 1), ``rest`` (mean of directions 2..k) and ``lead - rest``."""
    lead = profile[profile["direction"] == 1].set_index(RUN_KEYS)["value"]
    rest = profile[profile["direction"] > 1].groupby(RUN_KEYS, observed=True)["value"].mean()
    frame = pd.DataFrame({"lead": lead, "rest": rest})
    frame["concentration"] = frame["lead"] - frame["rest"]
    return frame.reset_index()


@dataclass
class Results:
    """The condition sweep's run table and the final direction profiles derived from it."""

    settings: MLPChapterSettings
    table: pd.DataFrame
    baseline: float
    profile_in: pd.DataFrame
    profile_out: pd.DataFrame
    #: per run: lead (v1), rest (v2..vk) and their difference, input space
    shape: pd.DataFrame

    @property
    def order(self) -> list[str]:
        """The conditions in the order they were configured."""
        return list(self.settings.conditions)

    def of_shape(self, column: str, condition: str) -> Estimate:
        return estimate(self.shape.loc[self.shape["condition"] == condition, column])


def run(settings: MLPChapterSettings) -> Results:
    """Train (or load from the cache) every condition x seed."""
    table = run_sweep(settings.condition_configs())
    profile_in = final_direction_profile(table, "weight_cos", "input")
    return Results(
        settings=settings,
        table=table,
        baseline=metrics.random_abs_cos(settings.base.width),
        profile_in=profile_in,
        profile_out=final_direction_profile(table, "weight_cos", "output"),
        shape=concentration(profile_in),
    )


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table, judged at the end of training, with each claim's value after
    ``early_steps`` (the same runs read at that snapshot) in the ``early`` column."""
    early = results.settings.early_steps
    dataset = results.settings.base.dataset
    return with_early(
        norm_claims(results.table, results.baseline, dataset=dataset),
        norm_claims(up_to_step(results.table, early), results.baseline, dataset=dataset),
        early,
    )


def _concentration_claims(
    out: ClaimsBuilder, *, shape: pd.DataFrame, baseline: float, k: int
) -> tuple[Estimate, Estimate, Estimate]:
    """Where continuity sits among v1..vk: the activation concentrates it in v1, LayerNorm spreads it over
    v2..vk; returns the concentration of res-relu, res-ln and res-ln-relu."""

    def per_condition(column: str, condition: str) -> Estimate:
        return estimate(shape.loc[shape["condition"] == condition, column])

    relu, ln, both = (per_condition("concentration", c) for c in ("res-relu", "res-ln", "res-ln-relu"))
    out.add(
        key="activation-concentrates-v1",
        ours=difference(relu, ln),
        baseline=math.nan,  # a difference of two measured conditions: no random level in the verdict
        verdict=verdict_for_difference(relu, ln),
        fill={"k": k, "relu": relu, "ln": ln},
    )
    ln_rest, relu_rest = per_condition("rest", "res-ln"), per_condition("rest", "res-relu")
    out.add(
        key="layernorm-spreads",
        ours=difference(ln_rest, relu_rest),
        baseline=math.nan,  # a difference of two measured conditions: no random level in the verdict
        verdict=verdict_for_difference(ln_rest, relu_rest),
        fill={"k": k, "ln": ln_rest, "relu": relu_rest},
    )
    return relu, ln, both


def _symmetry_claim(out: ClaimsBuilder, *, ln_align: Estimate, none_align: Estimate) -> None:
    """LayerNorm breaks the symmetry: its whole-spectrum alignment above the linear control's."""
    out.add(
        key="layernorm-breaks-symmetry",
        ours=difference(ln_align, none_align),
        baseline=math.nan,  # a difference of two measured conditions: no random level in the verdict
        verdict=verdict_for_difference(ln_align, none_align),
        fill={"ln": ln_align, "none": none_align},
    )


def _dominance_claim(
    out: ClaimsBuilder, *, concentrations: tuple[Estimate, Estimate, Estimate], baseline: float
) -> None:
    """With both, the activation's mode dominates: res-ln-relu's concentration nearer res-relu's than res-ln's."""
    relu, ln, both = concentrations
    out.add(
        key="activation-dominates",
        ours=both,
        baseline=baseline,
        verdict=closer_to(both, relu, ln),
        fill={"both": both, "relu": relu, "ln": ln},
    )


def _centring_claim(out: ClaimsBuilder, *, ln_align: Estimate, rms_align: Estimate, none_align: Estimate) -> None:
    """(ours) Centring, not rescaling, breaks the symmetry: LayerNorm's alignment above RMSNorm's."""
    out.add(
        key="centring-breaks-symmetry",
        ours=difference(ln_align, rms_align),
        baseline=math.nan,  # a difference of two measured conditions: no random level in the verdict
        verdict=verdict_for_difference(ln_align, rms_align),
        fill={"ln": ln_align, "rms": rms_align, "none": none_align},
    )


def norm_claims(table: pd.DataFrame, baseline: float, *, dataset: str) -> pd.DataFrame:
    """The claims of the chapter, from its run table (``res-rms`` adds our own centring claim)."""
    shape = concentration(final_direction_profile(table, "weight_cos", "input"))

    def align(condition: str) -> Estimate:
        return final_estimate(table, "weight_align", "input", 0, condition=condition)

    k = int(table.loc[table["metric"] == "weight_cos", "direction"].max())
    out = ClaimsBuilder(CHAPTER.name, dataset=dataset, prose=PROSE)
    concentrations = _concentration_claims(out, shape=shape, baseline=baseline, k=k)
    ln_align, none_align = align("res-ln"), align("res-none")
    _symmetry_claim(out, ln_align=ln_align, none_align=none_align)
    _dominance_claim(out, concentrations=concentrations, baseline=baseline)
    if "res-rms" in set(table["condition"]):
        _centring_claim(out, ln_align=ln_align, rms_align=align("res-rms"), none_align=none_align)
    return out.table()


# Findings: what the chapter's computed prose states, as values. ``present.py`` words each one from
# the templates in ``prose.md``; which case applies is decided here, never there.


RunSummary, run_summary = mlp_runs.RunSummary, mlp_runs.run_summary  # the run note, shared by the MLP chapters


@dataclass(frozen=True)
class ConditionShape:
    """One condition's final continuity, over seeds: of v1 (``lead``) and of v2..vk (``rest``, mean)
    from the direction profile, their difference (``concentration``); v1 continuity and the
    σ²-weighted alignment (input space) from the run table."""

    condition: str
    lead: Estimate
    rest: Estimate
    concentration: Estimate
    v1: Estimate
    alignment: Estimate


@dataclass(frozen=True)
class Shapes:
    """The numbers of the chapter's figure captions: ``k`` directions compared, the random level, and
    each condition's :class:`ConditionShape`."""

    k: int
    baseline: float
    conditions: tuple[ConditionShape, ...]


def condition_shapes(results: Results) -> Shapes:
    """Each condition's lead, rest, concentration, final v1 continuity and σ²-alignment."""
    table = results.table
    return Shapes(
        k=results.settings.base.n_directions,
        baseline=results.baseline,
        conditions=tuple(
            ConditionShape(
                c,
                results.of_shape("lead", c),
                results.of_shape("rest", c),
                results.of_shape("concentration", c),
                final_estimate(table, "weight_cos", "input", 1, condition=c),
                final_estimate(table, "weight_align", "input", 0, condition=c),
            )
            for c in results.order
        ),
    )


@dataclass(frozen=True)
class Centring:
    """What our centring claim (``centring-breaks-symmetry``) found.

    ``case``: "absent" when the claims hold no such claim (``res-rms`` did not run); "centring-breaks"
    when it is reproduced (LayerNorm's alignment above RMSNorm's); "like-layernorm" otherwise (RMSNorm,
    rotation-equivariant, is not below LayerNorm). ``alignment``: the claim's note, the σ²-alignment
    of res-ln, res-rms and res-none ("" when absent).
    """

    case: str
    alignment: str


def centring_finding(claims: pd.DataFrame) -> Centring:
    """The :class:`Centring` finding of a claims table (:func:`norm_claims`)."""
    if not has_claim(claims, "centring-breaks-symmetry"):
        return Centring(case="absent", alignment="")
    row = claim(claims, "centring-breaks-symmetry")
    return Centring(
        case="centring-breaks" if row["verdict"] == "reproduced" else "like-layernorm", alignment=row["note"]
    )

"""symmetry_dose: what the chapter computes (settings, runs, findings, claims); no figures, no matplotlib.

Two questions the paper leaves open, both the book's own (no reference runs them):

* **A dose of nonlinearity.** Residual nets with LeakyReLU of negative slope 0 (``res-relu``), 0.5, 0.9, 0.99
  and 1 (``res-none``, the linear net): how much symmetry breaking does weight continuity need, and is the
  change from slope 0 to slope 1 a sharp transition or a gradual one (:data:`TRANSITION_SHARE`)?
* **Radial, done properly.** The paper's ``res-radial`` and our ``res-radial-tau``, read at the *end* of
  training: do their pre-activations sit where the activation is the identity to within 1%
  (:data:`NEAR_LINEAR_SHARE`)? ``res-radial-track``, whose tau tracks the median pre-activation norm during
  training, is a radial net that stays nonlinear by construction: does it still lose weight continuity?

Every run is a run of the shared MLP presets (:mod:`geocont.chapters.mlp_runs`) with only the condition
changed, so ``res-relu``, ``res-none``, ``res-radial`` and ``res-radial-tau`` are the conditions chapter's runs
(one cache entry each) and the chapter trains only the three Leaky-ReLU nets and ``res-radial-track``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ... import metrics, paper
from ...book.chapter import Chapter, ClaimsBuilder, on_dataset, with_early
from ...book.prose import Prose
from ...mlp import LEAKY_SLOPES
from ...statistics import (
    Estimate,
    difference,
    estimate_at_step,
    final_estimate,
    final_per_run,
    known,
    up_to_step,
    verdict_for_difference,
    verdict_for_value,
)
from ...tables import select
from ...training import run_sweep
from .. import mlp_runs
from ..mlp_runs import NEAR_LINEAR_SHARE, MLPChapterSettings

#: The dose, slope 0 (ReLU) to slope 1 (the identity), in the order of the slopes: ``{negative slope: condition}``.
DOSE: dict[float, str] = dict(sorted(LEAKY_SLOPES.items()))
DOSE_CONDITIONS: tuple[str, ...] = tuple(DOSE.values())
#: The radial nets: the paper's x tanh(||x||), ours with tau fixed at initialisation, ours with tau tracked.
RADIAL_CONDITIONS = ("res-radial", "res-radial-tau", "res-radial-track")
#: Every condition the chapter trains, with the shared base config (the dose first, then the radial nets).
CONDITIONS_COMPARED = DOSE_CONDITIONS + RADIAL_CONDITIONS
#: The dose's two ends, which are the book's element-wise baseline and its linear net.
RELU, LINEAR = DOSE[0.0], DOSE[1.0]
TRACK = "res-radial-track"
#: The chapter's words (``prose.md``): its claims and its computed sentences.
PROSE = Prose.of(__package__)

#: The transition rule, stated before any run was read. With W(s) the final weight v1 continuity (seed mean)
#: at negative slope s and D = W(0) - W(1) the total drop, the transition is the shortest span of consecutive
#: intervals of the slope grid across which W drops by more than this share of D (of two equally short
#: spans, the one with the larger drop); it is **sharp** when that span is one interval of the grid, and
#: **gradual** otherwise. It is located only where the total drop is real (``dose-monotone`` reproduced by the
#: difference rule); else there is no transition to locate.
TRANSITION_SHARE = 0.5


def describe(settings: MLPChapterSettings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    base = settings.base
    slopes = ", ".join(f"{s:g} ({c})" for s, c in DOSE.items())
    return dict(
        seeds=settings.seeds,
        data=mlp_runs.data_description(settings),
        model=f"residual MLP, {base.depth} hidden layers of width {base.width}, init_scale {base.init_scale}; "
        f"Leaky-ReLU negative slopes {slopes}; radial nets {', '.join(RADIAL_CONDITIONS)}",
        training=mlp_runs.training_description(settings, init_sweep=False),
    )


def scale_rows(settings: MLPChapterSettings) -> list[tuple[str, str]]:
    """The chapter's rows of the methods page's table of the scales."""
    return [
        (
            "Symmetry dose: Leaky-ReLU negative slopes; radial nets (each × the MLP seeds)",
            f"{', '.join(f'{s:g}' for s in DOSE)}; {len(RADIAL_CONDITIONS)}",
        )
    ]


CHAPTER = Chapter(
    name="symmetry_dose",
    parameters=mlp_runs.parameters(
        "scale", "seeds", "steps", "width", "depth", "dataset", "init_scale", "lr", "n_snapshots", "precision"
    ),
    presets=mlp_runs.mlp_presets(conditions=CONDITIONS_COMPARED),
    build=mlp_runs.build_settings,
    describe=describe,
    runs=MLPChapterSettings.condition_configs,
    scale_rows=scale_rows,
)


@dataclass
class Results:
    """The chapter's one run table (every condition x seed, at the horizon) and the random level at its width."""

    settings: MLPChapterSettings
    table: pd.DataFrame
    baseline: float

    @property
    def order(self) -> list[str]:
        """The conditions in the order they were configured (the dose by slope, then the radial nets)."""
        return list(self.settings.conditions)


def run(settings: MLPChapterSettings) -> Results:
    """Train (or load from the cache) every condition x seed."""
    return Results(
        settings=settings,
        table=run_sweep(settings.condition_configs()),
        baseline=metrics.random_abs_cos(settings.base.width),
    )


# ---------------------------------------------------------------------------------------------
# Findings: what the claims judge and the prose words (present.py), computed here
# ---------------------------------------------------------------------------------------------


def random_level(baseline: float) -> Estimate:
    """The random level as an exact number, for :func:`verdict_for_difference` ("above random": a rise of more
    than the book's margin and two seed sds; a claim *at* the random level uses
    :func:`geocont.statistics.verdict_at_random_level` instead)."""
    return known(baseline)


@dataclass(frozen=True)
class DosePoint:
    """One slope of the dose: final weight and gradient v1 continuity (mean ± sd over seeds), and whether
    weight v1 is above the random level (:func:`verdict_for_difference` against :func:`random_level`)."""

    slope: float
    condition: str
    weight: Estimate
    gradient: Estimate
    above_random: str

    @property
    def symmetry_break(self) -> float:
        """1 - slope: how far the activation is from the identity on negative inputs."""
        return 1.0 - self.slope


@dataclass(frozen=True)
class Interval:
    """One interval of the slope grid and the fall of weight v1's seed mean across it (negative: a rise)."""

    low: float
    high: float
    drop: float


@dataclass(frozen=True)
class Transition:
    """Where weight v1 goes from its slope-0 to its slope-1 level (the rule: :data:`TRANSITION_SHARE`).

    ``case``: "sharp" (one interval of the grid holds more than the share of the total drop), "gradual" (the
    shortest span that does is longer), "no-drop" (the total drop is not reproduced by the difference rule, so
    there is nothing to locate) or "untested" (a slope of the grid has no value). ``low``/``high``: the slopes
    at the ends of the transition span, ``share`` the share of the total drop it holds (NaN where no span);
    ``largest_share``: the largest share one interval holds; ``largest_share_sd``: the sd over seeds of each seed's
    own share in that interval (its drop there over its total drop; NaN with fewer than two seeds)."""

    case: str
    total: float
    intervals: tuple[Interval, ...]
    low: float = math.nan
    high: float = math.nan
    share: float = math.nan
    largest_share: float = math.nan
    largest_share_sd: float = math.nan


def share_spread(
    per_seed: pd.DataFrame, interval: Interval, first: str, last: str, conditions: dict[float, str]
) -> float:
    """The sd over seeds of a seed's share of its own total drop (``first`` minus ``last``) that lies in ``interval``;
    ``per_seed``: final weight v1, one row per seed, one column per condition. NaN with fewer than two seeds."""
    shares = (
        (per_seed[conditions[interval.low]] - per_seed[conditions[interval.high]]) / (per_seed[first] - per_seed[last])
    ).dropna()
    return float(shares.std(ddof=1)) if len(shares) >= 2 else math.nan


def locate_transition(
    slopes: Sequence[float], weight: Sequence[float], drop_verdict: str, share: float = TRANSITION_SHARE
) -> Transition:
    """The :class:`Transition` of the seed means ``weight`` at ``slopes`` (ascending), whose total drop
    ``weight[0] - weight[-1]`` has the difference rule's verdict ``drop_verdict``."""
    intervals = tuple(Interval(a, b, wa - wb) for a, b, wa, wb in zip(slopes, slopes[1:], weight, weight[1:]))
    total = weight[0] - weight[-1] if len(weight) else math.nan
    if len(weight) < 2 or any(math.isnan(w) for w in weight):
        return Transition("untested", total, intervals)
    largest = max(i.drop for i in intervals) / total if total > 0 else math.nan
    if drop_verdict != "reproduced":
        return Transition("no-drop", total, intervals, largest_share=largest)
    for length in range(1, len(intervals) + 1):
        spans = [
            (sum(i.drop for i in intervals[start : start + length]), -start, start)
            for start in range(len(intervals) - length + 1)
        ]
        holding = [span for span in spans if span[0] > share * total]
        if holding:
            drop, _, start = max(holding)
            return Transition(
                "sharp" if length == 1 else "gradual",
                total,
                intervals,
                low=intervals[start].low,
                high=intervals[start + length - 1].high,
                share=drop / total,
                largest_share=largest,
            )
    raise AssertionError("the whole grid holds the whole drop")  # unreachable: total > share * total


@dataclass(frozen=True)
class Dose:
    """The dose of nonlinearity: each slope's :class:`DosePoint`, the random level, the difference rule's
    verdicts on the total drop (slope 0 above slope 1: ``drop_verdict``) and on the smallest break (slope 0.99
    above slope 1: ``small_break_verdict``), and the :class:`Transition`."""

    points: tuple[DosePoint, ...]
    baseline: float
    drop_verdict: str
    small_break_verdict: str
    transition: Transition

    def at(self, slope: float) -> DosePoint:
        return next(p for p in self.points if p.slope == slope)

    @property
    def smallest_break(self) -> DosePoint:
        """The slope nearest 1 below it (0.99: a 1% break)."""
        return self.points[-2]


def dose_finding(table: pd.DataFrame, baseline: float) -> Dose:
    """The :class:`Dose` of a run table (its conditions of :data:`DOSE`)."""
    random = random_level(baseline)
    points = []
    for slope, condition in DOSE.items():
        weight = final_estimate(table, "weight_cos", "input", 1, condition=condition)
        points.append(
            DosePoint(
                slope,
                condition,
                weight,
                final_estimate(table, "grad_cos", "input", 1, condition=condition),
                verdict_for_difference(weight, random),
            )
        )
    first, small, last = points[0], points[-2], points[-1]
    drop_verdict = verdict_for_difference(first.weight, last.weight)
    transition = locate_transition([p.slope for p in points], [p.weight.mean for p in points], drop_verdict)
    if transition.intervals and not math.isnan(transition.largest_share):
        finals = final_per_run(table[table["condition"].isin(list(DOSE.values()))], "weight_cos", "input", 1)
        per_seed = finals.pivot_table(index="seed", columns="condition", values="value", observed=True)
        largest = max(transition.intervals, key=lambda i: i.drop)
        if set(DOSE.values()) <= set(per_seed.columns):
            transition = dataclasses.replace(
                transition, largest_share_sd=share_spread(per_seed, largest, first.condition, last.condition, DOSE)
            )
    return Dose(
        points=tuple(points),
        baseline=baseline,
        drop_verdict=drop_verdict,
        small_break_verdict=verdict_for_difference(small.weight, last.weight),
        transition=transition,
    )


def percent(share: Estimate) -> Estimate:
    """A share (0..1) as a percentage."""
    return Estimate(100 * share.mean, 100 * share.std, share.n, share.n_diverged)


def near_linear_percent(table: pd.DataFrame) -> pd.DataFrame:
    """The ``near_linear_share`` rows of a run table, their value in percent (for the figure)."""
    rows = select(table, "near_linear_share", "", 0)
    return rows.assign(value=100 * rows["value"])


def linear_status(share: Estimate) -> str:
    """The rule (:data:`geocont.chapters.mlp_runs.NEAR_LINEAR_SHARE`), stated before any run was read: a radial
    net "ends linear" when the seed mean of its final near-linear share (layer mean, in percent) is at least the
    threshold. "linear", "nonlinear", or "unmeasured" where the share was not recorded."""
    if math.isnan(share.mean):
        return "unmeasured"
    return "linear" if share.mean >= NEAR_LINEAR_SHARE else "nonlinear"


@dataclass(frozen=True)
class RadialNet:
    """One radial net: the share of probe images (percent, layer mean, mean ± sd over seeds) at which its
    activation is within 1% of the identity, at initialisation and at the end; its final weight v1."""

    condition: str
    initial: Estimate
    final: Estimate
    weight: Estimate

    @property
    def status(self) -> str:
        """:func:`linear_status` of the final share."""
        return linear_status(self.final)


@dataclass(frozen=True)
class Radial:
    """The radial nets (:class:`RadialNet` per condition of :data:`RADIAL_CONDITIONS`), res-relu's and
    res-none's final weight v1, whether res-relu's is above the random level (``relu_above_random``, the
    difference rule against :func:`random_level`), and the tracking net's verdicts: against the paper's
    Res+Radial number (``track_value``) and below res-relu by the difference rule (``relu_above_track``).

    ``case``: "unmeasured" (the tracking net's share was not recorded), "track-linear" (it ends linear too, so
    no radial net here tests a nonlinearity that stays nonlinear), "no-contrast" (res-relu itself does not end
    above the random level, so there is no continuity to lose), else by ``relu_above_track``:
    "nonlinear-loses" (reproduced), "nonlinear-partly" (partly reproduced), "nonlinear-keeps" (not)."""

    nets: dict[str, RadialNet]
    relu: Estimate
    linear: Estimate
    relu_above_random: str
    track_value: str
    relu_above_track: str

    @property
    def track(self) -> RadialNet:
        return self.nets[TRACK]

    @property
    def case(self) -> str:
        status = self.track.status
        if status != "nonlinear":
            return "unmeasured" if status == "unmeasured" else "track-linear"
        if self.relu_above_random != "reproduced":
            return "no-contrast"
        return {"reproduced": "nonlinear-loses", "partly reproduced": "nonlinear-partly"}.get(
            self.relu_above_track, "nonlinear-keeps"
        )


def radial_finding(table: pd.DataFrame, baseline: float) -> Radial:
    """The :class:`Radial` finding of a run table (``baseline``: the random level)."""

    def final(condition: str) -> Estimate:
        return final_estimate(table, "weight_cos", "input", 1, condition=condition)

    nets = {
        c: RadialNet(
            c,
            percent(estimate_at_step(table, 0, "near_linear_share", "", 0, condition=c)),
            percent(final_estimate(table, "near_linear_share", "", 0, condition=c)),
            final(c),
        )
        for c in RADIAL_CONDITIONS
    }
    relu, track = final(RELU), nets[TRACK].weight
    return Radial(
        nets=nets,
        relu=relu,
        linear=final(LINEAR),
        relu_above_random=verdict_for_difference(relu, random_level(baseline)),
        track_value=verdict_for_value(track, paper.RADIAL_WEIGHT_V1),
        relu_above_track=verdict_for_difference(relu, track),
    )


# ---------------------------------------------------------------------------------------------
# Claims
# ---------------------------------------------------------------------------------------------


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table, judged at the end of training, with each claim's value after
    ``early_steps`` (the same runs read at that snapshot) in the ``early`` column."""
    early = results.settings.early_steps
    return on_dataset(
        with_early(
            dose_claims(results.table, results.baseline),
            dose_claims(up_to_step(results.table, early), results.baseline),
            early,
        ),
        results.settings.base.dataset,
    )


def _intervals_text(transition: Transition) -> str:
    return ", ".join(f"{i.low:g}→{i.high:g}: {i.drop:+.2f}" for i in transition.intervals)


def _linear_verdict(share: Estimate, expected: str) -> str:
    """ "reproduced" when the net's :func:`linear_status` is ``expected``, "not tested" where unmeasured."""
    status = linear_status(share)
    if status == "unmeasured":
        return "not tested"
    return "reproduced" if status == expected else "not reproduced"


#: The chapter's Res+Radial variant, shown but not counted: the paper's number for Res+Radial (~0.22) is judged in
#: mlp_conditions on the paper's Res+Radial (``radial-weight-v1``).
NOT_COUNTED = {
    "radial-track-weight-v1": "a variant of Res+Radial (res-radial-track); the paper's Res+Radial is judged in "
    "mlp_conditions",
}


def dose_claims(table: pd.DataFrame, baseline: float) -> pd.DataFrame:
    """The claims of the chapter, from its run table: the dose's three, the radial nets' five."""
    out = ClaimsBuilder(CHAPTER.name, prose=PROSE, not_counted=NOT_COUNTED)
    add_dose_claims(out, dose_finding(table, baseline), baseline)
    add_radial_claims(out, radial_finding(table, baseline), baseline)
    return out.table()


#: The verdict of ``dose-transition`` for each case of :class:`Transition`.
_TRANSITION_VERDICTS = {"sharp": "reproduced", "gradual": "not reproduced"}
#: The variant of the ``transition-where`` note for each case of :class:`Transition` (others: "unmeasured").
_TRANSITION_WHERE = {"sharp": "located", "gradual": "located", "no-drop": "no-drop"}


def add_dose_claims(out: ClaimsBuilder, dose: Dose, baseline: float) -> None:
    """The dose's three claims: weight v1 falls from slope 0 (ReLU) to slope 1 (linear), the fall is sharp (one
    interval of the grid holds most of it), and the smallest break keeps weight v1 above the linear net's."""
    relu, linear, small = dose.at(0.0), dose.at(1.0), dose.smallest_break
    out.add(
        key="dose-monotone",
        ours=difference(relu.weight, linear.weight),
        baseline=math.nan,  # a difference of two measured conditions: no random level in the verdict
        verdict=dose.drop_verdict,
        fill={"slopes": "; ".join(f"slope {p.slope:g} {p.weight}" for p in dose.points)},
    )
    found = dose.transition
    where = PROSE.choose(
        "transition-where",
        _TRANSITION_WHERE.get(found.case, "unmeasured"),
        low=found.low,
        high=found.high,
        share=found.share,
        total=found.total,
    )
    out.add(
        key="dose-transition",
        ours=found.largest_share,
        baseline=math.nan,
        verdict=_TRANSITION_VERDICTS.get(found.case, "not tested"),
        fill={"rule_share": TRANSITION_SHARE, "where": where, "intervals": _intervals_text(found)},
        std=found.largest_share_sd,
        n=min(p.weight.n for p in dose.points),
    )
    out.add(
        key="dose-099-breaks",
        ours=difference(small.weight, linear.weight),
        baseline=math.nan,  # a difference of two measured conditions: no random level in the verdict
        verdict=dose.small_break_verdict,
        fill={
            "symmetry_break": small.symmetry_break,
            "slope": small.slope,
            "weight": small.weight,
            "linear": linear.weight,
        },
    )


#: The radial nets' linearity claims: (key, condition, expected end).
_RADIAL_LINEARITY_CLAIMS = (
    ("radial-ends-linear", "res-radial", "linear"),
    ("radial-tau-ends-linear", "res-radial-tau", "linear"),
    ("radial-track-stays-nonlinear", TRACK, "nonlinear"),
)


def _radial_linearity_claims(out: ClaimsBuilder, radial: Radial) -> None:
    """Which radial nets end linear in practice (the paper's, tau fixed at initialisation) and which stays
    nonlinear (tau tracked): the share of probe images within 1% of the identity at the end."""
    for key, condition, expected in _RADIAL_LINEARITY_CLAIMS:
        net = radial.nets[condition]
        out.add(
            key=key,
            ours=net.final,
            baseline=math.nan,
            verdict=_linear_verdict(net.final, expected),
            fill={"condition": condition, "share": NEAR_LINEAR_SHARE, "initial": net.initial, "weight": net.weight},
        )


def _radial_track_claims(out: ClaimsBuilder, radial: Radial, baseline: float) -> None:
    """Whether the radial net that stays nonlinear (tau tracked) loses weight continuity where the element-wise
    activation keeps it."""
    track = radial.track
    out.add(
        key="radial-track-weight-v1",
        ours=track.weight,
        baseline=baseline,
        verdict=radial.track_value,
        fill={"condition": TRACK, "paper": paper.RADIAL_WEIGHT_V1, "final": track.final},
    )
    out.add(
        key="relu-above-radial-track",
        ours=difference(radial.relu, track.weight),
        baseline=math.nan,  # a difference of two measured conditions: no random level in the verdict
        verdict=radial.relu_above_track,
        fill={"condition": TRACK, "relu": radial.relu, "weight": track.weight},
    )


def add_radial_claims(out: ClaimsBuilder, radial: Radial, baseline: float) -> None:
    """The radial nets' five claims: which end linear in practice (the paper's, the one with tau fixed at
    initialisation) and which stays nonlinear (tau tracked), and whether the one that stays nonlinear loses weight
    continuity where the element-wise activation keeps it."""
    _radial_linearity_claims(out, radial)
    _radial_track_claims(out, radial, baseline)


RunSummary, run_summary = mlp_runs.RunSummary, mlp_runs.run_summary  # the run note, shared by the MLP chapters

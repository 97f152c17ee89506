"""The Up/O gap, tested: Up's v1 and O's u1 continuity fall short of the paper's at ``cpu``; its explanations,
the quantities and claims that test each, and which the claims keep."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ...book.chapter import ClaimsBuilder, claim, concat_claims, has_claim
from ...book.prose import Prose
from ...metrics import random_abs_cos, vector_name
from ...statistics import Estimate, at_final_step, at_step, difference, estimate, known, verdict_for_difference
from ...tables import RUN_KEYS
from .. import lm_runs
from .runs import Results
from .settings import CHAPTER

#: The chapter's words (``prose.md``): its claims and its computed sentences.
PROSE = Prose.of(__package__)
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


#: The quantities whose rise past a shorter horizon tests "the runs are too short": Up's and O's predicted continuity.
RISING = {"up-still-rising": "up-v1", "o-still-rising": "o-u1"}


#: The explanations of the Up/O gap and the claims each predicts to be reproduced, written down before
#: any of their numbers was read (the notebook states them too):
#:
#: * ``not-settled`` (the chapter's earlier, untested reading: the pretrained model is trained far
#:   longer): Up and O were still rising at a shorter horizon, so a run trained on past it ends clearly above
#:   its own value there (``up-still-rising``, ``o-still-rising``; :func:`rising_finding` says which runs);
#: * ``gate-shared`` (the paper's mechanism for Up, the product with the activated Gate): Up's
#:   continuity is carried by the direction it shares with Gate, so within a layer Up's v1 is Gate's v1
#:   well above random (``up-gate-shared-v1``), and Up's structure across layers lies beyond its own
#:   leading direction: its σ²-weighted alignment exceeds its v1 |cos| (``up-align-vs-v1``);
#: * ``spread``: Up and O are continuous, but over several singular directions rather than the leading
#:   one, so their σ²-weighted alignment exceeds their v1 / u1 |cos| (``up-align-vs-v1``, ``o-align-vs-v1``).
#:
#: The rule (:func:`explanation_case`): kept where every predicted claim is reproduced, dropped where
#: none is even partly reproduced, not tested where one could not be judged, undecided where one's quantity still
#: moves, else mixed.
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
        rows = table[
            (table["metric"] == metric)
            & (table["group"] == group)
            & (table["space"] == space)
            & (table["direction"] == direction)
        ]
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


def up_o_claims(
    table: pd.DataFrame, dims: dict[str, dict[str, int]], reference: str = lm_runs.REFERENCE
) -> pd.DataFrame:
    """The Up/O claims a run table judges at its last step: Up against Gate in the same layer (v1 and
    u1, against random), and the σ²-weighted alignment beside v1 (Up) and u1 (O)."""
    est, out = up_o_estimates(table, reference), ClaimsBuilder(CHAPTER.name, prose=PROSE)
    cross_cos = PROSE.choose("cross-cos-note", "recorded" if cross_cos_recorded(table) else "not-recorded")
    for key, name, vector in (("up-gate-shared-v1", "up-gate-v1", "v1"), ("up-gate-shared-u1", "up-gate-u1", "u1")):
        base = up_o_baseline(name, dims)
        out.add(
            key=key,
            template="up-gate-shared",
            ours=est[name],
            baseline=base,
            verdict=verdict_for_difference(est[name], known(base)),
            fill={"vector": vector, "reference": reference, "cross_cos": cross_cos},
        )
    for key, projection, align, leading in (
        ("up-align-vs-v1", "up_proj", "up-align", "up-v1"),
        ("o-align-vs-v1", "o_proj", "o-align", "o-u1"),
    ):
        space = UP_O_QUANTITIES[leading][2]
        # each quantity above its own random level (the alignment's is 0, the |cos|'s E|cos| at its dimension)
        align_excess = difference(est[align], known(up_o_baseline(align, dims)))
        leading_excess = difference(est[leading], known(up_o_baseline(leading, dims)))
        out.add(
            key=key,
            template="align-vs-leading",
            ours=difference(align_excess, leading_excess),
            baseline=math.nan,
            verdict=verdict_for_difference(align_excess, leading_excess),
            fill={
                "align": est[align],
                "projection": projection,
                "space": space,
                "vector": vector_name(space),
                "reference": reference,
                "leading": est[leading],
                "leading_base": up_o_baseline(leading, dims),
            },
        )
    return out.table()


@dataclass(frozen=True)
class StillRising:
    """One quantity at the shorter horizon and at the end, the verdict "rises"
    (:func:`geocont.statistics.verdict_for_difference`, end above the shorter horizon), and for a longer run the
    reference run of the same seed at that horizon (the same weights: a check; None for the runs themselves)."""

    key: str
    quantity: str
    at_horizon: Estimate
    at_end: Estimate
    reference: Estimate | None
    baseline: float
    verdict: str


@dataclass(frozen=True)
class RisingFinding:
    """Whether Up and O were still rising at a shorter horizon (:data:`RISING`), read off ``source``:
    "longer-run" (the longer reference run, one seed, from the chapter's horizon to its own end) or "same-runs"
    (the reference variant's own seeds, from the early horizon to the chapter's horizon). ``factor``: end over
    horizon."""

    source: str
    label: str
    seeds: tuple[int, ...]
    factor: int
    horizon: int
    end: int
    items: tuple[StillRising, ...]

    @property
    def runs(self) -> str:
        """The runs read, as the claims name them (``"silu, 4× steps, seed 0"``, ``"silu, 3 seeds"``)."""
        if len(self.seeds) == 1:
            return f"{self.label}, seed {self.seeds[0]}"
        return f"{self.label}, {len(self.seeds)} seeds"


def _rising_items(values: pd.DataFrame, *, horizon: int, dims, check: pd.DataFrame | None = None):
    """:class:`StillRising` of each :data:`RISING` quantity in ``values`` (per run and step), from ``horizon`` to
    the last step; ``check``: the reference run's values at ``horizon`` (a longer run's check), else None."""
    items = []
    for key, name in RISING.items():
        frame = values[values["quantity"] == name]
        at_horizon, at_end = estimate(at_step(frame, horizon)["value"]), estimate(at_final_step(frame)["value"])
        reference = None if check is None else estimate(check.loc[check["quantity"] == name, "value"])
        verdict = verdict_for_difference(at_end, at_horizon)
        items.append(StillRising(key, name, at_horizon, at_end, reference, up_o_baseline(name, dims), verdict))
    return tuple(items)


def rising_finding(results: Results) -> RisingFinding | None:
    """Whether Up and O were still rising at a shorter horizon: where the longer run was run, from the
    chapter's horizon to that run's end; else in the reference variant's own runs, from the early horizon to the
    chapter's horizon (None where the table has no run of the reference variant)."""
    settings = results.settings
    own = up_o_values(results.table)
    own = own[own["condition"] == results.reference]
    if results.long is not None and settings.long_configs():
        horizon, seed = settings.base.steps, settings.seeds[0]
        long = up_o_values(results.long)
        check = at_step(own[own["seed"] == seed], horizon)
        items = _rising_items(long, horizon=horizon, dims=results.dims, check=check)
        end = int(long["step"].max())
        return RisingFinding("longer-run", settings.long_label, (seed,), end // horizon, horizon, end, items)
    horizon, end = settings.early_step, settings.base.steps
    if own.empty:
        return None
    items = _rising_items(own, horizon=horizon, dims=results.dims)
    seeds = tuple(sorted(int(s) for s in own["seed"].unique()))
    return RisingFinding("same-runs", results.reference, seeds, end // horizon, horizon, end, items)


def rising_claims(results: Results) -> pd.DataFrame:
    """``up-still-rising`` and ``o-still-rising`` (:func:`rising_finding`); none where nothing reads them. They
    have no early value."""
    finding, out = rising_finding(results), ClaimsBuilder(CHAPTER.name, prose=PROSE)
    for item in finding.items if finding else ():
        projection, space = UP_O_QUANTITIES[item.quantity][1:3]
        out.add(
            key=item.key,
            template="still-rising",
            ours=item.at_end,
            baseline=item.baseline,
            verdict=item.verdict,
            fill={
                "projection": projection,
                "space": space,
                "vector": vector_name(space),
                "horizon": finding.horizon,
                "end": finding.end,
                "runs": finding.runs,
                "at_horizon": item.at_horizon,
            },
        )
    return out.table()


def gap_claims(results: Results) -> pd.DataFrame:
    """The claims that test the Up/O gap's explanations, judged at the chapter's horizon."""
    return concat_claims(up_o_claims(results.table, results.dims, results.reference), rising_claims(results))


def explanation_case(verdicts: list[str]) -> str:
    """kept (every claim reproduced), dropped (none even partly), not-tested (one not judged), not-settled (one's
    quantity still moves where it is judged, so the data cannot decide yet), or mixed."""
    if "not tested" in verdicts:
        return "not-tested"
    if "not settled" in verdicts:
        return "not-settled"
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
    return UpOFinding(
        results.reference,
        results.settings.early_step,
        results.settings.base.steps,
        up_gate,
        quantities("up-v1", "up-align", "o-u1", "o-align"),
    )

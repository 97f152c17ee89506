"""What the compression chapter's computed sentences state, as values (the findings). :mod:`.present` words
them from the templates in ``prose.md``; every comparison and "which case applies" is decided here."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ...book.chapter import claim
from ...layouts import PROJECTIONS
from ...statistics import Estimate, estimate
from .measurements import Results, grouping_penalty
from .settings import GUIDELINE
from .verdicts import sharing_key


@dataclass(frozen=True)
class EvaluationCounts:
    """What was evaluated: the models, the compressed configurations and the pruned models."""

    models: tuple[str, ...]
    configurations: int
    pruned: int


def evaluation_counts(results: Results) -> EvaluationCounts:
    """:class:`EvaluationCounts` of ``results``."""
    return EvaluationCounts(
        tuple(results.models), len(results.summary), results.pruning.groupby(["model", "seed", "layer"]).ngroups
    )


def scheme_counts(summary: pd.DataFrame) -> pd.DataFrame:
    """Per model, projection, budget and sharing scheme: the rank, the stored parameters and the dense ones."""
    keys = ["model", "projection", "budget"]
    return (
        summary.groupby([*keys, "sharing"], observed=True)
        .agg(rank=("rank", "first"), parameters=("parameters", "first"), dense=("dense_parameters", "first"))
        .reset_index()
    )


@dataclass(frozen=True)
class BudgetEquality:
    """In how many (model, projection, budget) cases input- and output-space sharing store exactly
    as many parameters. ``case``: "all-equal" or "some-differ"."""

    case: str
    equal: int
    cases: int


def budget_equality(results: Results) -> BudgetEquality:
    """:class:`BudgetEquality` of ``results``."""
    counts = scheme_counts(results.summary)
    equal = counts.pivot_table(index=["model", "projection", "budget"], columns="sharing", values="parameters").eval(
        "input == output"
    )
    return BudgetEquality("all-equal" if equal.all() else "some-differ", int(equal.sum()), len(equal))


def mean_loss_by_scheme(results: Results) -> pd.DataFrame:
    """Mean loss increase (over seeds) per model, projection and budget (rows) and sharing (columns)."""
    means = results.summary.groupby(["model", "projection", "budget", "sharing"], observed=True)["loss_increase"].mean()
    return means.unstack("sharing")


@dataclass(frozen=True)
class CheapestFinding:
    """The cheapest scheme (smallest mean loss increase) per model and projection (rows) and budget
    (columns), and how often each scheme is the cheapest over all rows, the most frequent first."""

    table: pd.DataFrame
    wins: tuple[tuple[str, int], ...]


def cheapest_finding(results: Results) -> CheapestFinding:
    """:class:`CheapestFinding` of ``results``."""
    best = mean_loss_by_scheme(results)
    choice = best.idxmin(axis=1).unstack("budget")
    choice = choice.loc[[(m, p) for m in results.models for p in results.projections if (m, p) in choice.index]]
    return CheapestFinding(choice, tuple(best.idxmin(axis=1).value_counts().items()))


@dataclass(frozen=True)
class ErrorLossFinding:
    """At the middle budget: reconstruction error and loss increase per model, projection (rows) and
    scheme (columns), and in how many rows the space with the smaller error also costs less loss."""

    budget: float
    table: pd.DataFrame
    agree: int
    rows: int


def error_loss_finding(results: Results) -> ErrorLossFinding:
    """:class:`ErrorLossFinding` of ``results``."""
    middle = results.settings.middle_budget
    table = results.summary[results.summary["budget"] == middle]
    errors = table.pivot_table(
        index=["model", "projection"], columns="sharing", values="relative_error", aggfunc="mean"
    )
    losses = table.pivot_table(index=["model", "projection"], columns="sharing", values="loss_increase", aggfunc="mean")
    both = pd.concat({"relative reconstruction error": errors, "loss increase (nats/token)": losses}, axis=1)
    agree = (errors["input"] < errors["output"]) == (losses["input"] < losses["output"])
    return ErrorLossFinding(middle, both, int(agree.sum()), len(agree))


def spread_case(summary: pd.DataFrame) -> str:
    """How a model's trade-off curves spread: "seeds" (several seeds: ±1 sd) or "one-model" (the dots are budgets)."""
    return "seeds" if summary["seed"].nunique() > 1 else "one-model"


@dataclass(frozen=True)
class ModelAdvantage:
    """One model's input-space advantage per projection (mean ± sd over budgets and seeds)."""

    model: str
    advantages: tuple[tuple[str, Estimate], ...]


def advantage_findings(results: Results) -> tuple[ModelAdvantage, ...]:
    """:class:`ModelAdvantage` of every model, for the chapter's projections."""
    out = []
    for model in results.models:
        adv = results.advantage[results.advantage["model"] == model]
        out.append(
            ModelAdvantage(
                model, tuple((p, estimate(adv.loc[adv.projection == p, "advantage"])) for p in results.projections)
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class GroupingFinding:
    """One model's grouping control: in how many projection × space cases distant groups reconstruct
    worse than adjacent ones, by how much on average and at most (% of the error), and for which of
    the projections with a guideline (``guided``) adjacency helps more in the paper's space."""

    model: str
    worse: int
    cases: int
    mean_percent: float
    max_percent: float
    agree: tuple[str, ...]
    guided: int


def grouping_findings(results: Results) -> tuple[GroupingFinding, ...]:
    """:class:`GroupingFinding` of every model."""
    out = []
    for model in results.models:
        frame = grouping_penalty(results.grouping[results.grouping["model"] == model])
        by_space = frame.groupby(["projection", "sharing"])["penalty"].mean()
        worse = int((by_space > 0).sum())
        by_space = by_space.unstack("sharing")
        guided = [p for p in by_space.index if GUIDELINE[p]]
        agree = tuple(p for p in guided if by_space.loc[p, GUIDELINE[p]] > by_space.loc[p].drop(GUIDELINE[p]).max())
        out.append(
            GroupingFinding(
                model,
                worse,
                frame.groupby(["projection", "sharing"]).ngroups,
                100 * frame["penalty"].mean(),
                100 * frame["penalty"].max(),
                agree,
                len(guided),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class GuidelineFinding:
    """One model, in short: the projections for which the paper's space was on average the cheaper
    one to share (``cheaper``) and the more expensive one (``dearer``), and how often each scheme was
    the cheapest over projections × budgets, the most frequent first."""

    model: str
    cheaper: tuple[str, ...]
    dearer: tuple[str, ...]
    cheapest: tuple[tuple[str, int], ...]


def guideline_findings(results: Results, claims: pd.DataFrame) -> tuple[GuidelineFinding, ...]:
    """:class:`GuidelineFinding` of every model, from its sharing claims' values (the signed advantage)."""
    best = mean_loss_by_scheme(results)
    guided = [p for p in PROJECTIONS if GUIDELINE[p] and p in results.projections]
    out = []
    for model in results.models:
        signed = {p: claim(claims, sharing_key(model, p))["ours_mean"] for p in guided}
        out.append(
            GuidelineFinding(
                model,
                tuple(p for p, v in signed.items() if v > 0),
                tuple(p for p, v in signed.items() if v < 0),
                tuple(best.loc[model].idxmin(axis=1).value_counts().items()),
            )
        )
    return tuple(out)

"""What the chapter measures: every model's sharing, pruning and grouping experiments run (or loaded from the
cache), and the summaries read from them (loss increases, the input-space advantage, paired differences,
block correlations)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ... import sweeps
from ...lm import lm_job
from ...sharing import (
    Subject,
    base_job,
    continuity_job,
    grouping_job,
    pretrained_subject,
    pruning_job,
    sharing_job,
    trained_subject,
)
from ...statistics import DepthCorrelation, depth_correlation
from .. import lm_runs
from .settings import OURS, CompressionSettings

#: Below this total (nats/token), both spaces' costs are negligible and their ratio is noise
#: (it is the order of the paired window standard error of our small models' loss increases).
NEGLIGIBLE_LOSS = 0.001


def sharing_summary(table: pd.DataFrame, by: Sequence[str] = ("model",)) -> pd.DataFrame:
    """Mean over windows per configuration: loss increase (and its window standard error),
    reconstruction error and parameter counts."""
    keys = [*by, "projection", "budget", "sharing"]
    grouped = table.groupby(keys, observed=True)
    summary = grouped.agg(
        loss_increase=("loss_increase", "mean"),
        nll=("nll", "mean"),
        base_nll=("base_nll", "mean"),
        relative_error=("relative_error", "first"),
        parameters=("parameters", "first"),
        dense_parameters=("dense_parameters", "first"),
        rank=("rank", "first"),
    )
    summary["loss_increase_se"] = grouped["loss_increase"].sem()
    summary["budget_used"] = summary["parameters"] / summary["dense_parameters"]
    return summary.reset_index()


def input_advantage(summary: pd.DataFrame, by: Sequence[str] = ("model",)) -> pd.DataFrame:
    """Per projection and budget: ``(dL_output - dL_input) / (|dL_output| + |dL_input|)``.

    +1: input-space sharing costs nothing next to output-space sharing; -1: the reverse;
    NaN where both loss increases together stay under :data:`NEGLIGIBLE_LOSS`. Also reports
    both increases and parameter counts.
    """
    keys = [*by, "projection", "budget"]
    wide = summary.pivot_table(
        index=keys, columns="sharing", values=["loss_increase", "parameters", "relative_error"], observed=True
    )
    wide.columns = [f"{a}_{b}" for a, b in wide.columns]
    wide = wide.reset_index()
    d_in, d_out = wide["loss_increase_input"], wide["loss_increase_output"]
    total = d_in.abs() + d_out.abs()
    wide["advantage"] = ((d_out - d_in) / total).where(total >= NEGLIGIBLE_LOSS)
    return wide


def paired_difference(table: pd.DataFrame, by: Sequence[str] = ("model", "seed")) -> pd.DataFrame:
    """Per projection and budget: ``dL_output - dL_input`` with its standard error over windows.

    Both schemes are evaluated on the same windows, so the per-window difference is paired;
    its standard error says whether the gap at one budget exceeds the text's sampling noise.
    """
    keys = [*by, "projection", "budget"]
    wide = table.pivot_table(index=[*keys, "window"], columns="sharing", values="nll", observed=True)
    difference = (wide["output"] - wide["input"]).rename("difference")
    grouped = difference.groupby(level=keys)
    return pd.DataFrame({"difference": grouped.mean(), "difference_se": grouped.sem()}).reset_index()


def grouping_penalty(grouping: pd.DataFrame) -> pd.DataFrame:
    """Per seed, projection and space: how much larger the reconstruction error is with
    distant instead of adjacent groups, relative to the adjacent error (0.05 = 5% larger)."""
    wide = grouping.pivot_table(
        index=["seed", "projection", "sharing"], columns="grouping", values="relative_error"
    ).reset_index()
    wide["penalty"] = wide["distant"] / wide["adjacent"] - 1
    return wide


def block_correlations(pruning: pd.DataFrame, n_boot: int) -> dict[str, DepthCorrelation]:
    """Per model: Spearman's rho between a block's pruning cost and its continuity across depth positions (seeds
    averaged per position), read with the dependence between neighbouring blocks
    (:func:`geocont.statistics.depth_correlation`: a circular block bootstrap, depth partialled out, and the edge
    blocks left out)."""
    correlations = {}
    for model, frame in pruning.groupby("model", sort=False):
        per_layer = frame.groupby(["seed", "layer"])[["loss_increase", "continuity"]].mean().reset_index()
        correlations[model] = depth_correlation(
            per_layer["loss_increase"], per_layer["continuity"], per_layer["layer"], n_boot
        )
    return correlations


@dataclass
class Results:
    """Everything the chapter shows: per-window tables, their summaries and the correlations."""

    settings: CompressionSettings
    sharing: pd.DataFrame  # per configuration x window (columns model, seed, projection, sharing, budget, ...)
    pruning: pd.DataFrame  # per layer x window (columns model, seed, layer, loss_increase, continuity)
    grouping: pd.DataFrame  # grouping_control (adjacent vs distant groups), with model and seed
    summary: pd.DataFrame  # sharing_summary over windows, by model and seed
    advantage: pd.DataFrame  # input_advantage, by model and seed
    paired: pd.DataFrame  # paired_difference, by model and seed
    correlations: dict[str, DepthCorrelation]

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(self.sharing["model"]))

    @property
    def projections(self) -> list[str]:
        return list(self.settings.projections)


def _subjects(
    settings: CompressionSettings,
) -> list[tuple[Subject, int, Sequence[int] | None, Sequence[int] | None, int]]:
    """(subject, seed (-1: pretrained), sharing layers, pruning layers, windows) of every model."""
    subjects = []
    if settings.pretrained is not None:
        subjects.append(
            (
                pretrained_subject(
                    settings.pretrained, settings.lm.base.corpus, settings.window_length, settings.device
                ),
                -1,
                settings.sharing_layers,
                settings.pruning_layers,
                settings.n_windows,
            )
        )
    for config in settings.lm_configs():
        subjects.append((trained_subject(config), config.seed, None, None, config.eval_windows))
    return subjects


def _prepare(settings: CompressionSettings, subjects: list, *, executor: str | None, progress: bool) -> None:
    """The first two sweeps: our models' training, then each model's base loss and layer continuity."""
    sweeps.run_jobs([lm_job(config, lm_runs.REFERENCE) for config in settings.lm_configs()], executor, progress)
    sweeps.run_jobs(
        [
            job
            for subject, _, _, _, n_windows in subjects
            for job in (base_job(subject, n_windows, settings.batch_size), continuity_job(subject))
        ],
        executor,
        progress,
    )


def _model_jobs(
    settings: CompressionSettings,
    *,
    subject: Subject,
    seed: int,
    sharing_layers: Sequence[int] | None,
    pruning_layers: Sequence[int] | None,
    n_windows: int,
) -> tuple[list[sweeps.Job], list[tuple[str, str, int]]]:
    """One model's jobs (the sharing of each projection, the pruning, the grouping control) and the
    (kind, model, seed) of each."""
    model = OURS if seed >= 0 else subject.label
    jobs = [
        sharing_job(
            subject,
            projection=projection,
            budgets=settings.budgets,
            group_size=settings.group_size,
            n_windows=n_windows,
            layers=sharing_layers,
            batch_size=settings.batch_size,
        )
        for projection in settings.projections
    ]
    jobs += [
        pruning_job(subject, n_windows=n_windows, layers=pruning_layers, batch_size=settings.batch_size),
        grouping_job(
            subject,
            projections=settings.projections,
            budget=settings.middle_budget,
            group_size=settings.group_size,
            layers=sharing_layers,
        ),
    ]
    placed = [("sharing", model, seed)] * len(settings.projections) + [
        ("pruning", model, seed),
        ("grouping", model, seed),
    ]
    return jobs, placed


def _experiment_tables(
    settings: CompressionSettings, subjects: list, *, executor: str | None, progress: bool
) -> dict[str, list[pd.DataFrame]]:
    """Every model's sharing, pruning and grouping tables, from one sweep, each marked with its model and seed."""
    jobs, placed = [], []  # placed: (kind, model, seed) of each job
    for subject, seed, sharing_layers, pruning_layers, n_windows in subjects:
        more, where = _model_jobs(
            settings,
            subject=subject,
            seed=seed,
            sharing_layers=sharing_layers,
            pruning_layers=pruning_layers,
            n_windows=n_windows,
        )
        jobs += more
        placed += where
    tables: dict[str, list[pd.DataFrame]] = {"sharing": [], "pruning": [], "grouping": []}
    for (kind, model, seed), table in zip(placed, sweeps.run_jobs(jobs, executor, progress)):
        tables[kind].append(table.assign(model=model, seed=seed))
    return tables


def run(settings: CompressionSettings, progress: bool = True, executor: str | None = None) -> Results:
    """Run (or load from the cache) every experiment of the chapter, independent ones in parallel.

    Three sweeps (:func:`geocont.sweeps.run_jobs`, ``executor`` as there): our models'
    training; each model's base loss and layer continuity (which every later experiment
    reads); then per model the sharing of each projection (all schemes and budgets), the
    pruning of every block and the grouping control. Each job loads its model in the worker
    that runs it, so the tables are the same under every executor.
    """
    warnings.filterwarnings("ignore", message=".*torch_dtype.*")  # transformers' GGUF loading
    subjects = _subjects(settings)
    _prepare(settings, subjects, executor=executor, progress=progress)
    tables = _experiment_tables(settings, subjects, executor=executor, progress=progress)
    sharing_table, pruning_table = (pd.concat(tables[kind], ignore_index=True) for kind in ("sharing", "pruning"))
    summary = sharing_summary(sharing_table, by=("model", "seed"))
    return Results(
        settings,
        sharing_table,
        pruning_table,
        pd.concat(tables["grouping"], ignore_index=True),
        summary,
        input_advantage(summary, by=("model", "seed")),
        paired_difference(sharing_table),
        block_correlations(pruning_table, settings.n_boot),
    )

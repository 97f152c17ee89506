"""Training the chapter's run set (:class:`Results`), with SGD's learning rate chosen by a short probe."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ... import metrics
from ...statistics import without_runs
from ...tables import RUN_KEYS, diverged_runs, select
from ...training import run_sweep
from .forks import forks_at
from .settings import SGD_LEARNING_RATES, Condition2Settings


def _diverged_seeds(table: pd.DataFrame) -> pd.DataFrame:
    rows = select(table, "diverged")
    return rows[["condition", "seed", "step"]]


@dataclass
class SGDChoice:
    """The SGD learning rate chosen on the headline dataset, and what each probed rate did."""

    lr: float | None
    #: per probed rate: how many probe runs diverged, of how many
    probes: dict[float, tuple[int, int]]


def choose_sgd_lr(settings: Condition2Settings, executor: str | None = None) -> tuple[SGDChoice, pd.DataFrame]:
    """Probe SGD's candidate rates from the largest down; the first with no diverged probe is chosen."""
    probes: dict[float, tuple[int, int]] = {}
    tables = []
    for lr in SGD_LEARNING_RATES:
        configs = settings.sgd_configs(lr, steps=settings.sgd_probe_steps)
        table = run_sweep(configs, executor=executor).assign(lr=lr)
        tables.append(table)
        bad = len(_diverged_seeds(table))
        probes[lr] = (bad, len(configs))
        if bad == 0:
            return SGDChoice(lr, probes), pd.concat(tables, ignore_index=True)
    return SGDChoice(None, probes), pd.concat(tables, ignore_index=True)


@dataclass
class Results:
    """The chapter's run tables."""

    settings: Condition2Settings
    #: ``{dataset: sweep table}`` of the comparison (Adam), the headline dataset first
    comparison: dict[str, pd.DataFrame]
    #: the linear net under Adam on the headline dataset, every seed
    linear_seeds: pd.DataFrame
    #: ``{intervention: sweep table}`` on the headline dataset; "adam" is the unchanged base run
    interventions: dict[str, pd.DataFrame]
    #: ``{drift test: sweep table}`` of the linear net on the headline dataset
    drift_tests: dict[str, pd.DataFrame]
    sgd_choice: SGDChoice
    #: SGD at the chosen rate (empty if none was stable)
    sgd: pd.DataFrame
    baseline: float
    #: ``{rate: sweep table}`` of the forks from the formed state (both conditions)
    forks: dict[float, pd.DataFrame] = field(default_factory=dict)


def run(settings: Condition2Settings, executor: str | None = None) -> Results:
    """Train (or load from the cache) every run: the long runs as one sweep, then the SGD probes and runs."""
    long_runs = settings.run_configs()
    run_sweep(long_runs, executor=executor)  # every long run at once: the executor keeps all workers busy
    comparison = {d: run_sweep(settings.comparison_configs(d), progress=False) for d in settings.datasets}
    interventions = {
        "adam": comparison[settings.headline][comparison[settings.headline]["condition"].isin(["res-none", "res-relu"])]
    }
    interventions.update(
        {name: run_sweep(settings.intervention_configs(name), progress=False) for name in settings.interventions}
    )
    choice, _ = choose_sgd_lr(settings, executor)
    sgd = run_sweep(settings.sgd_configs(choice.lr), executor=executor) if choice.lr is not None else pd.DataFrame()
    return Results(
        settings=settings,
        comparison=comparison,
        linear_seeds=run_sweep(settings.linear_seed_configs(), progress=False),
        interventions=interventions,
        sgd_choice=choice,
        sgd=sgd,
        drift_tests={
            name: run_sweep(settings.drift_test_configs(name), progress=False) for name in settings.drift_tests
        },
        forks={rate: run_sweep(forks_at(settings.fork_configs(), rate), progress=False) for rate in settings.forks},
        baseline=metrics.random_abs_cos(settings.base.width),
    )


def recorded(table: pd.DataFrame, *names: str) -> bool:
    """Whether ``table`` holds every metric of ``names`` (a table cached before a metric existed lacks it)."""
    present = set(table["metric"].astype(str).unique()) if len(table) else set()
    return all(name in present for name in names)


def finite_runs(frame: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (one row per run and step, :func:`geocont.statistics.per_run`) without the runs that diverged."""
    return without_runs(frame, diverged_runs(table)).sort_values(RUN_KEYS + ["step"])

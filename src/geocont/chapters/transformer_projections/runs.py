"""The chapter's runs: every variant and seed trained (or loaded from the cache), the pretrained checkpoint
analysed, and the per-projection values read from the run table."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import pandas as pd

from ...analyzer import analyze
from ...corpus_census import CENSUS_CORPORA, census_job
from ...lm import run_lm_sweep
from ...pretrained import ModelNotAvailable
from ...statistics import Estimate, at_final_step, change_over_last_per_run, estimate
from ...sweeps import run_job
from ...tables import RUN_KEYS
from ...transformer import projection_dims
from ..lm_runs import LMChapterSettings

#: Analyse only this many layers of the pretrained checkpoint at ``smoke`` (all at the other scales).
_PRETRAINED_LAYERS = {"smoke": 6, "cpu": None, "paper": None}


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
    dimensions, the pretrained checkpoint's analyzer table (None where it was not analysed), the longer reference
    run's table (``long``), the memorisation control's (``control``; each None where it was not run), and the
    census of each offline corpus the runs read (``census``: corpus -> :func:`geocont.corpus_census.census_table`)."""

    settings: LMChapterSettings
    table: pd.DataFrame
    finals: pd.DataFrame
    dims: dict[str, dict[str, int]]
    pretrained: pd.DataFrame | None = None
    pretrained_status: str = ""
    long: pd.DataFrame | None = None
    control: pd.DataFrame | None = None
    census: dict[str, pd.DataFrame] = field(default_factory=dict)

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


def run(settings: LMChapterSettings) -> Results:
    """Train (or load from the cache) every variant and seed, the longer run and the memorisation control (one
    sweep); analyse the pretrained checkpoint; count each offline corpus's tokens by source."""
    table = run_lm_sweep(settings.all_configs())
    is_long = table["condition"] == settings.long_label
    is_control = table["condition"] == settings.control_label
    long = _observed(table[is_long]) if settings.long_configs() else None
    control = _observed(table[is_control]) if settings.control_configs() else None
    table = _observed(table[~is_long & ~is_control])
    pretrained, status = _pretrained_table(settings)
    corpora = dict.fromkeys(c.corpus for configs in settings.all_configs().values() for c in configs)
    census = {
        corpus: run_job(census_job(corpus, settings.base.shape.vocab_size))
        for corpus in corpora
        if corpus in CENSUS_CORPORA
    }
    return Results(
        settings,
        table,
        projection_finals(table),
        projection_dims(settings.base.shape),
        pretrained,
        status,
        long=long,
        control=control,
        census=census,
    )


def _pretrained_table(settings: LMChapterSettings) -> tuple[pd.DataFrame | None, str]:
    """The pretrained checkpoint's analyzer table (None where none was asked for or it is not installed), and a
    line on what was analysed or why not."""
    if settings.pretrained is None:
        return None, "no pretrained checkpoint was asked for"
    try:
        table = analyze(settings.pretrained, max_layers=_PRETRAINED_LAYERS[settings.scale], progress=False)
    except (ModelNotAvailable, FileNotFoundError) as error:
        return None, f"`{settings.pretrained}` is not installed here ({str(error).split('. ')[0]})"
    layers = int(table["layer"].max()) + 1
    return (
        table,
        f"`{settings.pretrained}` ({layers} layers analysed, {table.attrs['parameters'] / 1e6:.0f}M parameters)",
    )


def _observed(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without the run labels it no longer holds among its ``condition`` categories."""
    if isinstance(table["condition"].dtype, pd.CategoricalDtype):
        return table.assign(condition=table["condition"].cat.remove_unused_categories())
    return table


def variant_estimate(values: pd.DataFrame, label: str, projection: str, space: str) -> Estimate:
    """Mean ± sd over the seeds of run label ``label`` of one projection's value in one space (``values``: one
    value per run, projection and space, e.g. :func:`projection_finals`)."""
    frame = values[(values["condition"] == label) & (values["group"] == projection) & (values["space"] == space)]
    return estimate(frame["value"])


def pretrained_estimate(results: Results, projection: str, space: str) -> Estimate:
    """Mean ± sd over the pretrained checkpoint's adjacent layer pairs (not over seeds)."""
    if results.pretrained is None:
        return Estimate(math.nan, math.nan, 0)
    rows = results.pretrained[results.pretrained["projection"] == projection]
    return estimate(rows["v1_cos" if space == "input" else "u1_cos"])


def late_changes(table: pd.DataFrame) -> pd.DataFrame:
    """Per run, projection and space: the change of the layer-pair mean over the last third of training."""
    return change_over_last_per_run(projection_values(table), 1 / 3, keys=["group", "space"])

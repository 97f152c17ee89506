"""The book's run set at one scale: every training run its chapters read, enumerated in one place.

A chapter lists its runs (``CHAPTER.run_configs(settings)``). One chapter also chooses runs from
the results of others: the Condition-2 chapter trains SGD at the largest learning rate whose probe
runs did not diverge (its ``choose_sgd_lr``), so those runs are known only once the probes are. They
are resolved here from the probes' tables where the cache or the store has them, never by training
(strict mode, :mod:`geocont.store`); until then they are *pending*, counted at their predicted time.

Used by ``python -m geocont.book store`` (what to train into the results store), ``store status``,
``verify``, the provenance block of every chapter (where its runs come from) and
``benchmarks/book_inventory.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import cache, store
from ..config import LMRunConfig, MLPRunConfig
from ..sweeps import Job

#: The chapters that read trained weights (through :func:`geocont.lm.trained_lm`), not only run tables:
#: their language-model runs keep ``model.safetensors`` in the results store; every other run's weights are
#: left out (tests/test_store.py checks this list against the chapters' code).
WEIGHTS_READ_BY = ("compression", "pretrained_continuity", "transformer_projections")

#: The chapters that compute analyses (:data:`geocont.store.ANALYSIS_KINDS`: weight sharing and pruning, the
#: checkpoint analyzer, a corpus's census) from trained or pretrained models and corpora: ``store`` captures them once every run such a chapter
#: reads is stored (:func:`geocont.book.results.capture_analyses`).
ANALYSES_READ_BY = ("compression", "pretrained_continuity", "transformer_projections")


@dataclass(frozen=True)
class BookRun:
    """One run of the book: its job (``cost``: predicted seconds), the chapters that read it, and whether
    the store keeps its trained weights."""

    job: Job
    chapters: tuple[str, ...]
    keep_weights: bool = False

    @property
    def kind(self) -> str:
        return self.job.kind

    @property
    def key(self) -> str:
        return cache.cache_key(self.job.kind, self.job.key_config())

    @property
    def name(self) -> str:
        """``kind/key``, as the store names entries."""
        return f"{self.kind}/{self.key}"

    @property
    def label(self) -> str:
        return self.job.label

    @property
    def seconds(self) -> float:
        return self.job.cost

    @property
    def optimizer(self) -> str:
        """The optimizer's name (``adam``, ``sgd``, ``adam-rotated``, ...); "" for a job that is no run
        configuration."""
        return getattr(getattr(self.job.argument, "optimizer", None), "name", "")


@dataclass
class RunSet:
    """The runs of the book at ``scale`` (each once, in the book's order), and the pending ones."""

    scale: str
    runs: list[BookRun] = field(default_factory=list)
    #: runs a chapter chooses from other runs' results that are not all available yet (their predicted
    #: time stands for the runs that will be chosen)
    pending: list[BookRun] = field(default_factory=list)
    #: ``{chapter: why its runs are pending}``
    pending_reason: dict[str, str] = field(default_factory=dict)
    #: every run of the whole book, whichever chapters ``runs`` was narrowed to (what calibrates predicted times)
    book_runs: list[BookRun] = field(default_factory=list)

    def of_chapter(self, chapter: str) -> list[BookRun]:
        return [run for run in self.runs if chapter in run.chapters]


def predicted_seconds(
    config: Any, mlp_step_seconds: float | None = None, lm_step_seconds: float | None = None
) -> float:
    """Predicted wall seconds of one run on one one-thread worker of this project's machine: an MLP run
    at :data:`geocont.chapters.mlp_runs.CPU_SECONDS_PER_MLP_STEP` per step (``adam-rotated`` costs more,
    :func:`geocont.chapters.mlp_runs.predicted_run_seconds`), a language-model run at the 4-layer
    transformer's measured seconds per step, in proportion to its layers."""
    from ..chapters.mlp_runs import CPU_SECONDS_PER_MLP_STEP, predicted_run_seconds

    if isinstance(config, MLPRunConfig):
        seconds = predicted_run_seconds(config)
        return seconds if mlp_step_seconds is None else seconds * mlp_step_seconds / CPU_SECONDS_PER_MLP_STEP
    from ..chapters.transformer_projections.compute import CPU_SECONDS_PER_STEP

    return config.steps * config.shape.n_layers / 4 * (lm_step_seconds or CPU_SECONDS_PER_STEP[4])


def job_of(config: Any) -> Job:
    """The sweep job of a run configuration, its ``cost`` its predicted seconds (:func:`predicted_seconds`)."""
    if isinstance(config, MLPRunConfig):
        from ..training import mlp_job

        job = mlp_job(config)
    elif isinstance(config, LMRunConfig):
        from ..lm import lm_job

        job = lm_job(config)
    else:
        raise TypeError(f"not a run configuration: {config!r}")
    return dataclasses.replace(job, cost=predicted_seconds(config))


def dependent_configs(name: str, settings: Any) -> tuple[list, list, str | None]:
    """The runs chapter ``name`` chooses from other runs' results: (resolved configs, pending configs,
    why pending). Only the Condition-2 chapter has such runs (SGD at the rate its probes choose); its own
    rule (``choose_sgd_lr``) decides, on tables read from the cache or the store, never trained here."""
    from ..chapters import chapter_module

    module = chapter_module(name)
    choose = getattr(module, "choose_sgd_lr", None)
    if choose is None or not hasattr(settings, "sgd_configs"):
        return [], [], None
    try:  # strict: found or RunMissing, never trained; the sweeps' progress bars go nowhere
        with store.environment(**{store.STORE_ONLY_ENV: "1"}), contextlib.redirect_stderr(io.StringIO()):
            choice, _ = choose(settings, executor="serial")
    except store.RunMissing:
        rates = module.SGD_LEARNING_RATES
        return (
            [],
            settings.sgd_configs(rates[-1]),
            (
                f"its SGD runs take the largest of the rates {list(rates)} "
                "whose probe runs do not diverge, and not every probe is "
                "trained yet"
            ),
        )
    return (settings.sgd_configs(choice.lr) if choice.lr is not None else []), [], None


def chapter_configs(name: str, settings: Any) -> tuple[list, list, str | None]:
    """Every run configuration of chapter ``name`` with ``settings``: (listed and resolved, pending, why)."""
    from ..chapters import chapter

    resolved, pending, reason = dependent_configs(name, settings)
    return chapter(name).run_configs(settings) + resolved, pending, reason


def chapter_runs(name: str, settings: Any) -> tuple[list[BookRun], list[BookRun]]:
    """The runs of one chapter (each once) and its pending runs, as :class:`BookRun`."""
    configs, pending, _ = chapter_configs(name, settings)
    return _unique(name, configs), _unique(name, pending)


def _unique(name: str, configs: Iterable[Any]) -> list[BookRun]:
    runs: dict[str, BookRun] = {}
    for config in configs:
        job = job_of(config)
        run = BookRun(job, (name,), keep_weights=isinstance(config, LMRunConfig) and name in WEIGHTS_READ_BY)
        runs.setdefault(run.name, run)
    return list(runs.values())


def book_run_set(scale: str, chapters: Iterable[str] | None = None) -> RunSet:
    """Every run of the book at ``scale`` (each chapter at its preset), once each, in the chapters' order; a
    run several chapters read names them all. ``chapters``: only the runs these chapters read (each still
    naming every chapter that reads it)."""
    from ..chapters import CHAPTER_MODULES, chapter, check_chapter_names

    if chapters is not None:
        check_chapter_names(chapters)
    result = RunSet(scale)
    found: dict[str, BookRun] = {}
    pending: dict[str, BookRun] = {}
    for name in CHAPTER_MODULES:
        settings = chapter(name).configure(scale)
        configs, waiting, reason = chapter_configs(name, settings)
        for run in _unique(name, configs):
            if run.name in found:
                earlier = found[run.name]
                found[run.name] = dataclasses.replace(
                    earlier, chapters=earlier.chapters + (name,), keep_weights=earlier.keep_weights or run.keep_weights
                )
            else:
                found[run.name] = run
        for run in _unique(name, waiting):
            pending.setdefault(run.name, run)
        if reason:
            result.pending_reason[name] = reason
    wanted = set(CHAPTER_MODULES if chapters is None else chapters)
    result.book_runs = list(found.values())
    result.runs = [run for run in found.values() if wanted & set(run.chapters)]
    result.pending = [run for key, run in pending.items() if key not in found and wanted & set(run.chapters)]
    result.pending_reason = {name: reason for name, reason in result.pending_reason.items() if name in wanted}
    return result

"""The commands of the results store (:mod:`geocont.store`) for the book's run set (:mod:`geocont.book.runs`).

* ``python -m geocont.book store --scale cpu [--minutes N] [--executor ...]`` (:func:`fill`): train the runs
  the store lacks into it, and capture the analyses the chapters compute;
* ``python -m geocont.book store status --scale cpu [--entries]`` (:func:`print_status`);
* ``python -m geocont.book verify --scale cpu [--sample default|all|KEY...]`` (:func:`verify`): retrain a
  sample and compare it with the store;
* ``python -m geocont.book check --scale cpu [--write-snapshot]`` (:func:`geocont.book.build.check`, which
  executes and renders; :func:`compare_claims` here).

docs/design.md ("The results store's commands") says what each does.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import cache, store
from ..preflight import check_run_configs
from ..scales import ParameterError
from ..sweeps import CannotTrain, SweepFailed, predicted_wall_seconds, resolve_executor, run_jobs
from .paths import Layout, repository_root
from .runs import ANALYSES_READ_BY, BookRun, RunSet, book_run_set

#: How ``store`` executes a chapter to capture its analyses: ``(repository root, notebook, parameters, layout)``
#: (:func:`geocont.book.build.execute`, passed in by the command).
ExecuteChapter = Callable[[Path, Path, dict, Layout], Any]

#: Where ``store`` trains (inside the store root, ignored by git): finished runs wait there until copied in.
STAGING_CACHE = ".staging-cache"
#: The committed claims tables the strict build is compared with (:func:`check`).
SNAPSHOT = "claims-snapshot"
#: ``<store>/analyses/<chapter>.json``: the analyses a chapter read when it was captured (:func:`capture_analyses`).
ANALYSES = "analyses"

#: The metrics the chapters' claims and figures read (tests/test_store.py checks each is named in the chapters'
#: code): ``verify`` prints the largest difference in each.
CLAIM_METRICS = (
    "weight_cos",
    "grad_cos",
    "cumgrad_cos",
    "weight_align",
    "weight_cumgrad_cos",
    "rel_update",
    "rel_update_spectral",
    "turn",
    "co_rotation",
    "weight_gap",
    "grad_norm",
    "test_acc",
    "train_set_loss",
    "train_loss",
    "val_loss",
    "trace_loss",
    "trace_weight_cos",
    "diverged",
)

#: On the platform a run was stored from (torch, CPU flags, threads) a retrained run's training must be
#: bit-identical (:data:`TRAINING_METRICS`), Adam or SGD; its measurements are expected bit-identical too, and
#: where they are not (the exact SVD fallback runs LAPACK kernels that the CPU model picks, which the flags do
#: not pin: measured, 1e-7 at step 0 on two AMD EPYC machines with the same flags) they are judged as below.
#: Elsewhere a run is not expected to repeat its numbers (an Adam run amplifies other kernels' rounding like a
#: change of seed), only to be another draw of its condition: each claim-bearing metric's final layer mean
#: within the two-sided Student-t prediction interval of its condition's stored seeds, the interval widened
#: (Bonferroni) so that a true new draw fails on any of the run's quantities with this probability. With three seeds the interval is wide (~70 sd for 50 quantities):
#: it catches gross changes, not subtle ones. Fixed before any retrained run was compared; where a NaN flag
#: (an undefined quantity, e.g. tied singular values) falls is printed, not judged (another draw puts its
#: flags elsewhere).
VERIFY_FALSE_ALARM = 0.01

#: The metrics the forward and backward passes give directly (losses, accuracy, gradient and update norms,
#: divergence), not a matrix decomposition: on the platform a run was stored from they must be bit-identical.
TRAINING_METRICS = (
    "train_loss",
    "train_set_loss",
    "trace_loss",
    "val_loss",
    "test_loss",
    "test_acc",
    "grad_norm",
    "rel_update",
    "diverged",
)

#: The columns that identify one value of a run table.
VALUE_INDEX = ["step", "group", "layer", "metric", "space", "direction"]


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def local_workers() -> int:
    """The workers of the default executor here (for predicted times)."""
    return _workers(None)


def _workers(executor: str | None) -> int:
    spec = resolve_executor(executor)
    return spec.workers if spec.name == "local" else 1 if spec.name == "serial" else max(1, os.cpu_count() or 1)


def _size(nbytes: float) -> str:
    return f"{nbytes / 1e6:.1f} MB" if nbytes >= 1e6 else f"{nbytes / 1e3:.0f} KB"


@dataclass
class BookStatus:
    """The book's run set at a scale checked against its store, and each analysing chapter's captured analyses
    (``analyses``: chapter -> the entry names it read, None where not captured; ``analysed_runs``: chapter -> its
    runs then, None where not recorded)."""

    run_set: RunSet
    store: store.StoreStatus
    analyses: dict[str, list[str] | None]
    analysed_runs: dict[str, list[str] | None] = dataclasses.field(default_factory=dict)

    @property
    def missing(self) -> list[BookRun]:
        missing = set(self.store.missing)
        return [run for run in self.run_set.runs if run.name in missing]

    @property
    def analyses_to_capture(self) -> list[str]:
        """The chapters whose analyses are not captured, whose captured analyses the store lacks, or which were
        captured on other runs than the chapter's runs now (its preset changed since, or the record predates it)."""
        return [
            chapter
            for chapter, names in self.analyses.items()
            if names is None or any(name not in self.store.entries for name in names) or self._stale(chapter)
        ]

    def _stale(self, chapter: str) -> bool:
        """Whether a run ``chapter`` reads now was not among its runs when its analyses were captured."""
        read = self.analysed_runs.get(chapter)
        return read is None or any(run.name not in read for run in self.run_set.runs if chapter in run.chapters)

    def ready_to_capture(self, chapter: str) -> bool:
        """Whether every run ``chapter`` reads is stored (and none is pending)."""
        return not any(chapter in run.chapters for run in self.missing + self.run_set.pending)

    @property
    def complete(self) -> bool:
        return self.store.complete and not self.run_set.pending and not self.analyses_to_capture

    def chapter_complete(self, chapter: str) -> bool:
        """Whether ``chapter`` reads the store and can be executed from it alone: every run it reads is stored
        (none pending) and its analyses, where it computes any, are captured."""
        reads = chapter in self.analyses or any(chapter in run.chapters for run in self.run_set.runs)
        return reads and self.ready_to_capture(chapter) and chapter not in self.analyses_to_capture

    @property
    def outside_book(self) -> list[str]:
        """The stored entries no run of the whole book and no captured analysis reads (left from an earlier
        design), whichever chapters the status is narrowed to."""
        read = {run.name for run in self.run_set.book_runs or self.run_set.runs}
        read |= {name for chapter in ANALYSES_READ_BY for name in captured_analyses(self.store.root, chapter) or ()}
        return sorted(set(self.store.entries) - read)

    def calibration(self) -> dict[str, float]:
        """Per run family (:func:`run_family`), the median of measured over predicted seconds of the whole book's
        stored runs (their ``wall_seconds``), whichever chapters the status is narrowed to: how far this machine's
        runs, as they were trained, stray from the model."""
        return dict(self._calibration)

    @functools.cached_property
    def _calibration(self) -> dict[str, float]:
        ratios: dict[str, list[float]] = {}
        for run in self.run_set.book_runs or self.run_set.runs:
            wall = self.store.entries.get(run.name, {}).get("provenance", {}).get("wall_seconds")
            if isinstance(wall, (int, float)) and run.seconds > 0:
                ratios.setdefault(run_family(run), []).append(wall / run.seconds)
                ratios.setdefault(run.kind, []).append(wall / run.seconds)
        return {family: float(np.median(values)) for family, values in ratios.items()}

    def seconds(self, run: BookRun) -> float:
        """``run``'s predicted seconds, scaled by its family's :meth:`calibration` where a run of it is stored
        (else by its kind's, else not at all)."""
        factors = self._calibration
        return run.seconds * factors.get(run_family(run), factors.get(run.kind, 1.0))


def run_family(run: BookRun) -> str:
    """Runs whose cost one step-time model predicts alike: ``mlp/<optimizer>`` or ``lm``."""
    return f"mlp/{run.optimizer}" if run.kind == "mlp" and run.optimizer else run.kind


def analyses_path(root: Path, chapter: str) -> Path:
    return root / ANALYSES / f"{chapter}.json"


def captured_analyses(root: Path, chapter: str) -> list[str] | None:
    """The analyses (``kind/key``) ``chapter`` read when it was captured, or None (not captured, or unreadable)."""
    try:
        return list(json.loads(analyses_path(root, chapter).read_text())["entries"])
    except (OSError, ValueError, KeyError):
        return None


def captured_runs(root: Path, chapter: str) -> list[str] | None:
    """The runs (``kind/key``) of ``chapter``'s run set when its analyses were captured, or None (not recorded)."""
    try:
        return list(json.loads(analyses_path(root, chapter).read_text())["runs"])
    except (OSError, ValueError, KeyError):
        return None


def _analysing(chapters: Sequence[str] | None) -> list[str]:
    return [name for name in ANALYSES_READ_BY if chapters is None or name in chapters]


def book_status(scale: str, verify_files: bool = True, chapters: Sequence[str] | None = None) -> BookStatus:
    """The book's run set at ``scale`` (``chapters``: of these alone), its analyses and its store's state (the
    pending runs resolved from the store)."""
    root = store.store_root(scale)
    with store.environment(**{store.STORE_ENV: str(root)}):
        store.check_revisions(root)
        run_set = book_run_set(scale, chapters)
    analyses = {name: captured_analyses(root, name) for name in _analysing(chapters)}
    analysed_runs = {name: captured_runs(root, name) for name in analyses}
    wanted = [run.name for run in run_set.runs] + [name for names in analyses.values() for name in names or ()]
    return BookStatus(run_set, store.status(root, wanted, verify_files=verify_files), analyses, analysed_runs)


def missing_summary(status: BookStatus, workers: int) -> str:
    """One line: how many runs are missing and pending, and their predicted time on ``workers`` workers, and the
    chapters whose analyses are still to capture."""
    missing, pending = status.missing, status.run_set.pending
    total = len(status.run_set.runs)
    calibration = status.calibration()
    seconds = predicted_wall_seconds([status.seconds(run) for run in missing + pending], workers)
    text = f"{len(missing)} of {total} runs missing"
    if pending:
        text += f", and {len(pending)} more pending (chosen from runs not all trained yet)"
    text += f"; predicted {_minutes(seconds)} of training on {workers} worker{'s' if workers > 1 else ''}"
    if calibration:
        text += (
            " (scaled by the stored runs' measured times: "
            + ", ".join(
                f"{family} x{factor:.2f}"
                for family, factor in sorted(calibration.items())
                if "/" in family or family == "lm"
            )
            + ")"
        )
    if status.analyses_to_capture:
        text += f"; the analyses of {', '.join(status.analyses_to_capture)} to capture (each chapter executed once)"
    return text


def print_status(
    scale: str,
    executor: str | None = None,
    out=sys.stdout,
    chapters: Sequence[str] | None = None,
    list_entries: bool = False,
) -> int:
    """``store status``: what the store holds and lacks (``list_entries``: every entry, one line each); 1 where
    it is refused (mixed revisions) or corrupt."""
    try:
        status = book_status(scale, chapters=chapters)
    except store.StoreError as error:
        print(f"error: {error}", file=out)
        return 1
    _print_holdings(status.store, out)
    if list_entries:
        _print_entries(status.store, out)
    _print_corrupt(status.store, scale, out)
    _print_what_the_book_lacks(status, out)
    print(
        (
            "complete: every run of the book is stored"
            if status.complete
            else f"incomplete: {missing_summary(status, _workers(executor))}: `python -m geocont.book store --scale {scale}`"
        ),
        file=out,
    )
    return 1 if status.store.corrupt or status.store.mixed else 0


def _print_holdings(st: store.StoreStatus, out) -> None:
    """The store's size, its entries per revision, where they were trained, and their training time."""
    mine = store.revision()
    print(f"results store {st.root}: {len(st.entries)} entries, {_size(st.bytes)}", file=out)
    for revision, names in st.revisions.items():
        same = revision[0] == mine["numerics_revision"]
        this_code = " (this code)" if revision[1] == mine["training_code_hash"] else ""
        print(
            f"  {store.revision_text(dict(numerics_revision=revision[0], training_code_hash=revision[1]))}: "
            f"{len(names)} entries{this_code}"
            + ("" if same else f" (NOT this code's numerics revision {mine['numerics_revision']})"),
            file=out,
        )
    for field in ("torch", "cpu_capability", "threads"):
        counts = Counter(str(entry.get("provenance", {}).get(field)) for entry in st.entries.values())
        if counts:
            print(f"  {field}: " + ", ".join(f"{value} ({n})" for value, n in counts.most_common()), file=out)
    walls = [entry.get("provenance", {}).get("wall_seconds") for entry in st.entries.values()]
    known = [w for w in walls if isinstance(w, (int, float))]
    if known:
        print(f"  training time of the stored runs: {_minutes(sum(known))} on one worker", file=out)


def _print_entries(st: store.StoreStatus, out) -> None:
    """One line per entry: its name, label, chapters, size, value precision and where and how long it trained."""
    for name, entry in st.entries.items():
        where = entry.get("provenance", {})
        print(
            f"  entry: {name}  {entry.get('label', '')}  [{', '.join(entry.get('chapters', []))}]  "
            f"{_size(sum(entry.get('sizes', {}).values()))}, {entry.get('values')}, trained in "
            f"{where.get('wall_seconds')} s on {where.get('cpu_capability')} ({where.get('host')}, "
            f"{where.get('finished')})",
            file=out,
        )


def _print_corrupt(st: store.StoreStatus, scale: str, out) -> None:
    for name, why in st.corrupt.items():
        print(
            f"  corrupt: {name}: {why}; `python -m geocont.book store --scale {scale}` retrains it where the book "
            f"reads it (else remove it: `rm -r {st.root / name}`)",
            file=out,
        )


def _print_what_the_book_lacks(status: BookStatus, out) -> None:
    """The entries outside the book's run set, the missing runs (the 30 longest), the pending ones, and the
    analyses captured or still to capture."""
    outside = status.outside_book
    if outside:
        print(
            f"  {len(outside)} entries are not in the book's run set (trained ahead for a design no preset reads yet, or left from an earlier one; `store status --entries` gives their labels): "
            + ", ".join(outside[:10])
            + (" ..." if len(outside) > 10 else ""),
            file=out,
        )
    missing = status.missing
    for run in sorted(missing, key=lambda r: -r.seconds)[:30]:
        print(
            f"  missing: {run.name}  {run.label}  [{', '.join(run.chapters)}]  ~{_minutes(status.seconds(run))}",
            file=out,
        )
    if len(missing) > 30:
        print(f"  ... and {len(missing) - 30} more missing runs", file=out)
    for chapter, reason in status.run_set.pending_reason.items():
        count = sum(chapter in run.chapters for run in status.run_set.pending)
        print(f"  pending: {count} runs of {chapter}: {reason}", file=out)
    for chapter, names in status.analyses.items():
        if chapter not in status.analyses_to_capture:
            print(f"  analyses of {chapter}: {len(names or ())} captured", file=out)
        else:
            print(
                f"  analyses of {chapter}: to capture by executing it once"
                + ("" if status.ready_to_capture(chapter) else ", after the runs it reads are stored"),
                file=out,
            )


# --------------------------------------------------------------------------- fill


def staging_cache(root: Path) -> Path:
    """The run cache ``store`` trains into: one per numerics revision, so that a run left there by code of
    another revision is never taken for this code's (it stays, unused)."""
    return root / STAGING_CACHE / f"revision-{store.NUMERICS_REVISION}"


def _adoptable(run: BookRun) -> bool:
    """Whether the current run cache holds the run, trained at this code's numerics revision, with its
    provenance (the code hash that trained it recorded)."""
    provenance = (cache.manifest(run.kind, run.job.key_config()) or {}).get("run") or {}
    return (
        provenance.get("numerics_revision") == store.NUMERICS_REVISION
        and provenance.get("training_code_hash") is not None
    )


def copy_from_cache(
    root: Path,
    kind: str,
    config: dict[str, Any],
    *,
    label: str = "",
    chapters: Iterable[str] = (),
    keep_artifacts: Iterable[str] = (),
) -> store.Written:
    """Write the run cache's entry of the key into the store at ``root`` (:func:`geocont.store.write_entry`) with
    the provenance the cache recorded where the run was computed; its artifacts in ``keep_artifacts`` are copied,
    its others listed as dropped. One-line :class:`geocont.store.StoreError` where the cache has no whole entry."""
    key = cache.cache_key(kind, config)
    table = cache.load(kind, config, warn=False, include_store=False)
    manifest = cache.manifest(kind, config)
    if table is None or manifest is None:
        raise store.StoreError(
            f"run {kind}/{key} ({label}) has no readable entry in the run cache {cache.cache_root()}"
        )
    artifacts, keep = {}, set(keep_artifacts)
    for name in sorted(keep):
        path = cache.artifact_path(kind, config, name, include_store=False)
        if path is None:
            raise store.StoreError(f"run {kind}/{key} ({label}) has no readable {name} in the run cache")
        artifacts[name] = path
    dropped = sorted(set(manifest.get("files", {})) - {cache.TABLE} - keep)
    return store.write_entry(
        root,
        kind,
        config,
        table,
        manifest.get("run") or {},
        artifacts=artifacts,
        dropped=dropped,
        label=label,
        chapters=chapters,
    )


def _write(root: Path, run: BookRun) -> store.Written:
    keep = ()
    if run.keep_weights:
        from ..lm import MODEL_ARTIFACT

        keep = (MODEL_ARTIFACT,)
    return copy_from_cache(
        root, run.kind, run.job.key_config(), label=run.label, chapters=run.chapters, keep_artifacts=keep
    )


def fill(
    scale: str,
    minutes: float | None = None,
    executor: str | None = None,
    out=sys.stdout,
    chapters: Sequence[str] | None = None,
    execute_chapter: ExecuteChapter | None = None,
) -> int:
    """``store``: train the runs of the book at ``scale`` that its store lacks into the store, longest first,
    copying in the runs a run cache already holds (:class:`_Filling`; ``minutes``: none starts after that), then
    capture the analyses of each chapter whose runs are all stored by executing it with ``execute_chapter`` (the
    book build's ``execute``; None: no analysis is captured); 0 when nothing failed. docs/design.md ("The results
    store") describes the staging cache."""
    root = store.store_root(scale)
    _refuse_another_numerics_revision(root)
    store.record_scale(root, scale)
    filling = _Filling(root, minutes=minutes, out=out)
    filling.store_missing_runs(scale, chapters=chapters, executor=executor)
    if not filling.failures:
        filling.failures += capture_ready_analyses(
            root, scale, chapters=chapters, execute_chapter=execute_chapter, deadline=filling.deadline, out=out
        )
    _print_fill_summary(root, scale, chapters=chapters, executor=executor, added=filling.stored, out=out)
    return 1 if filling.failures else 0


def _refuse_another_numerics_revision(root: Path) -> None:
    """A one-line :class:`geocont.store.StoreError` where the store at ``root`` mixes numerics revisions or holds
    another revision than this code's: runs trained now would mix them."""
    store.check_revisions(root)  # a store of another revision is refused there, as when its entries are served


class _Filling:
    """One ``store`` command's filling of the store at ``root``: runs are trained into the staging cache
    (:func:`staging_cache`) and copied into the store as they land, and none starts after ``minutes`` (its
    ``deadline``); ``stored`` counts them, ``failures`` says what could not be trained or stored."""

    def __init__(self, root: Path, *, minutes: float | None, out):
        self.root, self.minutes, self.out = root, minutes, out
        self.deadline = time.time() + 60 * minutes if minutes else None
        self.staging = staging_cache(root)
        self.user_cache = str(cache.cache_root())
        self.failures: list[str] = []
        self.stored = 0
        #: set at the first run that could not be written: no further run starts (its work would be lost too)
        self.halted = False

    def start_by(self) -> float:
        """When the last run may start: now where a write has failed, else the deadline (never where there is none)."""
        if self.halted:
            return 0.0
        return math.inf if self.deadline is None else self.deadline

    def store_missing_runs(self, scale: str, *, chapters: Sequence[str] | None, executor: str | None) -> None:
        """Copy in what a run cache holds, train the rest (until the deadline), and repeat while runs land (a
        pending run becomes known once the runs it is chosen from are stored)."""
        timing = book_status(scale, verify_files=False, chapters=chapters)
        while True:
            before = self.stored
            missing = self._copy_cached_runs(scale, chapters)
            if missing and not self.halted and (self.deadline is None or time.time() < self.deadline):
                self._train(missing, timing=timing, executor=executor)
            if self.stored == before:  # nothing new: done, out of time, or every remaining run failed
                return

    def _in_staging(self):
        """The environment in which runs are looked up and trained: the staging cache over this store."""
        return store.environment(GEOCONT_CACHE_DIR=str(self.staging), **{store.STORE_ENV: str(self.root)})

    def _copy_cached_runs(self, scale: str, chapters: Sequence[str] | None) -> list[BookRun]:
        """Copy into the store every missing (or corrupt) run that the staging cache, then the user's run cache,
        holds trained by this code (:func:`_adoptable`); the runs still missing."""
        with self._in_staging():
            run_set = book_run_set(scale, chapters)
            corrupt = store.status(self.root).corrupt
            for run in run_set.runs:
                if run.name in corrupt:
                    print(
                        f"replacing the corrupt entry {run.name} ({run.label}: {corrupt[run.name]})",
                        file=self.out,
                        flush=True,
                    )
            missing = [
                run
                for run in run_set.runs
                if run.name in corrupt
                or not (store.entry_folder(self.root, run.kind, run.job.key_config()) / store.ENTRY).exists()
            ]
            missing = [run for run in missing if not (_adoptable(run) and self.put(run, "the staging cache"))]
        with store.environment(GEOCONT_CACHE_DIR=self.user_cache):
            return [run for run in missing if not (_adoptable(run) and self.put(run, "your run cache"))]

    def _train(self, missing: list[BookRun], *, timing: BookStatus, executor: str | None) -> None:
        """Train ``missing`` into the staging cache, each run copied into the store as it lands."""
        by_name = {run.name: run for run in missing}
        with self._in_staging():
            check_run_configs([run.job.argument for run in missing], executor)  # data, corpus, cache: one line
        predicted = predicted_wall_seconds([timing.seconds(run) for run in missing], _workers(executor))
        print(
            f"training {len(missing)} runs into {self.root} (predicted {_minutes(predicted)})"
            + (f"; none starts after {self.minutes:g} min" if self.minutes else ""),
            file=self.out,
            flush=True,
        )
        with self._in_staging():
            try:
                run_jobs(
                    [run.job for run in missing],
                    executor,
                    deadline=self.start_by,
                    on_result=lambda job, _: self.put(
                        by_name[store.entry_name(job.kind, job.key_config())], "this slice"
                    ),
                )
            except SweepFailed as error:
                self.failures.append(str(error))
                print(error, file=self.out, flush=True)
            except CannotTrain as error:
                raise store.StoreError(str(error)) from None

    def put(self, run: BookRun, source: str) -> bool:
        """Copy ``run`` from the current run cache into the store; whether it was stored (a failure is recorded)."""
        try:
            written = _write(self.root, run)
        except (store.StoreError, OSError) as error:
            self.failures.append(f"{run.name} ({run.label}): {error}")
            print(f"could not store {run.name} ({run.label}): {error}", file=self.out, flush=True)
            if not self.halted:
                self.halted = True
                print(f"stopping: no further run starts ({_write_problem(self.root, self.staging)})", file=self.out)
            return False
        self.stored += 1
        print(
            f"stored {run.name} ({run.label}, from {source}): {_size(sum(written.sizes.values()))}",
            file=self.out,
            flush=True,
        )
        return True


#: Below this many free bytes on the disk of the store or its staging cache, a failed write is put down to the disk.
LOW_DISK_BYTES = 100 * 2**20


def _write_problem(*folders: Path) -> str:
    """What most likely made a write fail, in a few words: a disk nearly full (with its free bytes), else the OS
    error of writing a probe file, else "see the failure above"."""
    import shutil
    import tempfile

    for folder in folders:
        existing = folder
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        try:
            free = shutil.disk_usage(existing).free
        except OSError:
            continue
        if free < LOW_DISK_BYTES:
            return f"the disk holding {existing} has {free / 2**20:.0f} MB free: No space left on device"
        try:
            with tempfile.NamedTemporaryFile(dir=existing, prefix=".geocont-probe-") as probe:
                probe.write(b"\0" * 4096)
                probe.flush()
        except OSError as error:
            return f"{existing}: {error.strerror or error}"
    return "see the failure above"


def capture_ready_analyses(
    root: Path,
    scale: str,
    *,
    chapters: Sequence[str] | None,
    execute_chapter: ExecuteChapter | None,
    deadline: float | None,
    out=sys.stdout,
) -> list[str]:
    """Capture the analyses of every chapter whose runs are all stored but whose analyses are not
    (:func:`capture_analyses`), none after ``deadline``, none without ``execute_chapter``; what failed, one line
    each."""
    failures = []
    status = book_status(scale, verify_files=False, chapters=chapters)
    for chapter in status.analyses_to_capture:
        if (
            execute_chapter is not None
            and status.ready_to_capture(chapter)
            and (deadline is None or time.time() < deadline)
        ):
            try:
                capture_analyses(root, scale, chapter=chapter, execute_chapter=execute_chapter, out=out)
            except (store.StoreError, OSError, RuntimeError) as error:  # papermill's failures are RuntimeErrors
                failures.append(f"the analyses of {chapter}: {error}")
                print(
                    f"could not capture the analyses of {chapter}: {str(error).splitlines()[0]}", file=out, flush=True
                )
    return failures


def _print_fill_summary(
    root: Path, scale: str, *, chapters: Sequence[str] | None, executor: str | None, added: int, out
) -> None:
    """How many of the book's runs the store now holds, how many were ``added``, and what is still to do."""
    status = book_status(scale, verify_files=False, chapters=chapters)
    wanted = len(status.run_set.runs)
    print(
        f"results store {root}: {wanted - len(status.missing)} of {wanted} runs stored"
        + (f" (of the chapters {', '.join(chapters)})" if chapters else "")
        + f"; {len(status.store.entries)} entries in all ({_size(status.store.bytes)}); {added} added now",
        file=out,
    )
    if not status.complete:
        print(
            f"still to do: {missing_summary(status, _workers(executor))}; continue with "
            f"`python -m geocont.book store --scale {scale} [--minutes N]` (`store status` lists the runs)",
            file=out,
        )


def capture_analyses(
    root: Path, scale: str, chapter: str, execute_chapter: ExecuteChapter, out=sys.stdout
) -> list[str]:
    """Execute ``chapter`` once at ``scale`` with ``execute_chapter(repository root, notebook, parameters,
    layout)`` (its runs read from the store, nothing trained), logging every entry
    it reads (``GEOCONT_READ_LOG``); copy each analysis among them (:data:`geocont.store.ANALYSIS_KINDS`) that the
    store lacks into it from the staging cache, and write ``<store>/analyses/<chapter>.json`` listing them all.
    Returns their names."""

    staging = staging_cache(root)
    started = time.perf_counter()
    print(f"capturing the analyses of {chapter}: executing it once at {scale}", file=out, flush=True)
    with tempfile.TemporaryDirectory(prefix="geocont-capture-") as scratch:
        log = Path(scratch) / "reads.log"
        log.touch()
        with store.environment(
            GEOCONT_CACHE_DIR=str(staging),
            **{store.STORE_ENV: str(root), store.STORE_ONLY_ENV: "", cache.READ_LOG_ENV: str(log)},
        ):
            execute_chapter(
                repository_root(), Path("book") / f"{chapter}.ipynb", {"scale": scale}, Layout(Path(scratch))
            )
        read = list(dict.fromkeys(log.read_text().split()))
    names = [name for name in read if name.split("/")[0] in store.ANALYSIS_KINDS]
    with store.environment(**{store.STORE_ENV: str(root)}):
        runs = sorted(run.name for run in book_run_set(scale, [chapter]).runs)
    with store.environment(GEOCONT_CACHE_DIR=str(staging)):
        for name in names:
            kind, key = name.split("/")
            if (root / kind / key / store.ENTRY).exists():
                continue
            config = cache.entry_config(kind, key)
            if config is None:
                raise store.StoreError(
                    f"analysis {name} of {chapter} was read, but not from the staging cache "
                    f"{staging}: it cannot be copied into the store"
                )
            copy_from_cache(root, kind, config, label=f"analysis of {chapter}", chapters=(chapter,))
    path = analyses_path(root, chapter)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = dict(
        chapter=chapter,
        scale=scale,
        entries=names,
        runs=runs,
        wall_seconds=round(time.perf_counter() - started, 1),
        **store.revision(),
    )
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(record, indent=1) + "\n")
    partial.replace(path)
    print(f"captured {len(names)} analyses of {chapter} in {_minutes(record['wall_seconds'])}", file=out, flush=True)
    return names


# --------------------------------------------------------------------------- prune


def prune(scale: str, *, dry_run: bool = False, out=sys.stdout) -> int:
    """``store prune``: remove the stored entries that no run of the book and no captured analysis reads (left from
    an earlier design, :attr:`BookStatus.outside_book`); ``dry_run``: only list them. Refused (1) while a chapter's
    analyses are still to capture, since an entry they will read would look unused."""
    status = book_status(scale, verify_files=False)
    if status.analyses_to_capture:
        print(
            f"error: the analyses of {', '.join(status.analyses_to_capture)} are to capture first "
            f"(`python -m geocont.book store --scale {scale}`): an entry they read would look unused",
            file=out,
        )
        return 1
    names, total = status.outside_book, 0
    for name in names:
        entry = status.store.entries.get(name, {})
        size = sum(f.stat().st_size for f in (status.store.root / name).rglob("*") if f.is_file())
        total += size
        print(f"  {'to remove' if dry_run else 'removed'}: {name}  {entry.get('label', '')}  {_size(size)}", file=out)
        if not dry_run:
            shutil.rmtree(status.store.root / name)
    verb = "would free" if dry_run else "freed"
    print(f"{len(names)} entries outside the book's run set; {verb} {_size(total)}", file=out)
    if names and not dry_run:
        print(f"commit the removal: git add -A {status.store.root}", file=out)
    return 0


# --------------------------------------------------------------------------- verify


def differences(stored: pd.DataFrame, fresh: pd.DataFrame, float32: bool) -> pd.DataFrame:
    """Per metric, the largest absolute difference between two tables of one run where both values are finite
    (``fresh`` rounded to float32 first where the store holds float32), how many values differ in being NaN or
    infinite, and how many values only one table has."""

    def values(table: pd.DataFrame, dtype) -> pd.DataFrame:
        keys = table[VALUE_INDEX].astype({c: str for c in ("group", "metric", "space")})
        return keys.assign(value=table["value"].to_numpy().astype(dtype).astype(np.float64))

    both = values(stored, np.float64).merge(
        values(fresh, np.float32 if float32 else np.float64),
        on=VALUE_INDEX,
        how="outer",
        suffixes=("_stored", "_fresh"),
        indicator=True,
    )
    rows = []
    for metric, group in both.groupby("metric", sort=True):
        matched = group[group["_merge"] == "both"]
        s, f = matched["value_stored"].to_numpy(), matched["value_fresh"].to_numpy()
        finite = np.isfinite(s) & np.isfinite(f)
        same_flag = (np.isnan(s) & np.isnan(f)) | (s == f)
        rows.append(
            dict(
                metric=metric,
                max_abs_diff=float(np.max(np.abs(s[finite] - f[finite]))) if finite.any() else 0.0,
                flag_mismatches=int(np.sum(~finite & ~same_flag)),
                unmatched=int((group["_merge"] != "both").sum()),
            )
        )
    return pd.DataFrame(rows, columns=["metric", "max_abs_diff", "flag_mismatches", "unmatched"])


def unchanged(differences_table: pd.DataFrame) -> bool:
    """Whether a :func:`differences` table (or some of its rows) shows no difference at all: no value apart, no NaN
    flag moved, no value in one table only."""
    return bool((differences_table[["max_abs_diff", "flag_mismatches", "unmatched"]] == 0).all(axis=None))


def default_sample(run_set: RunSet, stored: Iterable[str]) -> list[BookRun]:
    """One SGD and one Adam run (each the first of its chapter's listed runs in the store) per MLP chapter, and
    the cheapest stored language-model run among those with stored seeds to judge it by: about 20 minutes on
    two workers at ``cpu``."""
    stored = set(stored)
    chosen: dict[str, BookRun] = {}
    chapters = list(dict.fromkeys(chapter for run in run_set.runs for chapter in run.chapters))
    for chapter in chapters:
        runs = [run for run in run_set.of_chapter(chapter) if run.name in stored and run.kind == "mlp"]
        for optimizer in ("sgd", "adam"):
            pick = next((run for run in runs if run.optimizer == optimizer and run.name not in chosen), None)
            if pick is not None:
                chosen[pick.name] = pick
    lms = [run for run in run_set.runs if run.kind == "lm" and run.name in stored]
    if lms:
        lm = min(lms, key=lambda run: (len(seed_siblings(run_set, run, stored)) < 2, run.seconds))
        chosen[lm.name] = lm
    return list(chosen.values())


def choose_sample(run_set: RunSet, stored: Iterable[str], sample: Sequence[str]) -> list[BookRun]:
    """The runs ``verify`` retrains: ``default`` (:func:`default_sample`), ``all`` stored runs, or the runs whose
    ``kind/key`` or key starts with each given text (at least 6 characters); one-line ParameterError otherwise."""
    stored = set(stored)
    if list(sample) in ([], ["default"]):
        return default_sample(run_set, stored)
    runs = [run for run in run_set.runs if run.name in stored]
    if list(sample) == ["all"]:
        return runs
    chosen: dict[str, BookRun] = {}
    for text in sample:
        matches = [run for run in runs if len(text) >= 6 and (run.key.startswith(text) or run.name.startswith(text))]
        if len(matches) != 1:
            raise ParameterError(
                f"--sample {text!r} matches {len(matches)} stored runs; give default, all, or a key "
                "(kind/key or at least 6 characters of one) that `store status` lists"
            )
        chosen[matches[0].name] = matches[0]
    return list(chosen.values())


def final_means(table: pd.DataFrame) -> pd.Series:
    """Per claim-bearing quantity (``metric, group, space, direction``), its mean over layers at the last step it
    was measured; NaN where a layer's value is not finite there."""
    claim = table[table["metric"].astype(str).isin(CLAIM_METRICS)]
    claim = claim.astype({column: str for column in ("metric", "group", "space")})
    keys = ["metric", "group", "space", "direction"]
    last = claim[claim["step"] == claim.groupby(keys)["step"].transform("max")]
    values = last.assign(value=last["value"].where(np.isfinite(last["value"]))).groupby(keys)["value"]
    return values.mean().where(values.count() == values.size())


def seed_siblings(run_set: RunSet, run: BookRun, stored: Iterable[str]) -> list[BookRun]:
    """The stored runs of ``run``'s condition: its configuration but for the seed (``run`` among them)."""

    def without_seed(one: BookRun) -> dict[str, Any]:
        return {name: value for name, value in one.job.key_config().items() if name != "seed"}

    stored, mine = set(stored), without_seed(run)
    return [one for one in run_set.runs if one.kind == run.kind and one.name in stored and without_seed(one) == mine]


def seed_finals(root: Path, siblings: Sequence[BookRun]) -> pd.DataFrame:
    """The final layer means (:func:`final_means`) of the stored seeds ``siblings``: a quantity per row, a seed
    per column."""
    means = []
    for run in siblings:
        folder = store.entry_folder(root, run.kind, run.job.key_config())
        table = store.read_table(folder, store.read_entry(folder) or {})
        if table is not None:
            means.append(final_means(table))
    return pd.concat(means, axis=1) if means else pd.DataFrame()


def another_seed_test(
    seeds: pd.DataFrame, fresh: pd.DataFrame, false_alarm: float = VERIFY_FALSE_ALARM
) -> pd.DataFrame:
    """Per claim-bearing quantity that at least two seeds and ``fresh`` have, how far ``fresh``'s final layer
    mean lies from the seeds' mean in prediction sds (``z`` = |x - mean| / (s sqrt(1 + 1/n)); inf where the seeds
    agree exactly and ``fresh`` does not), and the ``limit`` a new draw exceeds on any quantity with probability
    ``false_alarm`` (Student t, n - 1 degrees of freedom, Bonferroni over the quantities)."""
    from scipy import stats

    x = final_means(fresh).reindex(seeds.index) if len(seeds) else pd.Series(dtype=float)
    n = seeds.count(axis=1) if len(seeds) else pd.Series(dtype=float)
    judged = (n >= 2) & x.notna()
    if not judged.any():
        return pd.DataFrame(columns=["z", "limit", "seeds"])
    seeds, x, n = seeds[judged], x[judged], n[judged]
    deviation = (x - seeds.mean(axis=1)).abs()
    scale = seeds.std(axis=1, ddof=1) * np.sqrt(1 + 1 / n)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (deviation / scale).where(deviation > 0, 0.0)
    limit = stats.t.ppf(1 - false_alarm / (2 * len(x)), n - 1)
    return pd.DataFrame({"z": z, "limit": limit, "seeds": n})


def verify(
    scale: str,
    sample: Sequence[str] = ("default",),
    executor: str | None = None,
    out=sys.stdout,
    chapters: Sequence[str] | None = None,
    threads: int | None = None,
) -> int:
    """``verify``: retrain ``sample`` (:func:`choose_sample`) with no store and an empty cache (``threads``:
    with that many torch threads per run, as another machine's kernels would), and print per run the largest
    difference from its store entry in every claim-bearing metric (:data:`CLAIM_METRICS`) and its verdict
    (:func:`judge_retrained`). 0 when no judged run fails."""
    status = book_status(scale, verify_files=False, chapters=chapters)
    chosen = choose_sample(status.run_set, status.store.entries, sample)
    if not chosen:
        print(f"nothing to verify: the store {status.store.root} holds none of the sampled runs", file=out)
        return 0
    if threads is not None and executor is None:  # one thread per core
        executor = f"local:{max(1, (os.cpu_count() or 1) // threads)}"
    check_run_configs([run.job.argument for run in chosen], executor)  # data, corpus: one line before retraining
    seconds = predicted_wall_seconds([status.seconds(run) for run in chosen], _workers(executor))
    print(
        f"verifying {len(chosen)} stored runs by retraining them"
        + (f" with {threads} threads each" if threads else "")
        + f" (predicted {_minutes(seconds)})",
        file=out,
        flush=True,
    )
    fresh_tables, manifests = _retrain(chosen, executor, threads)
    failed = 0
    for run, fresh, manifest in zip(chosen, fresh_tables, manifests):
        failed += not _verify_run(status, run, fresh=fresh, manifest=manifest, out=out)
    return 1 if failed else 0


def _retrain(
    chosen: Sequence[BookRun], executor: str | None, threads: int | None
) -> tuple[list[pd.DataFrame], list[dict[str, Any] | None]]:
    """The tables of ``chosen`` trained afresh (no store, an empty temporary cache, ``threads`` per run where
    given), and the manifest each run's cache entry recorded (where and how it was trained)."""
    with (
        tempfile.TemporaryDirectory(prefix="geocont-verify-") as scratch,
        store.environment(
            GEOCONT_CACHE_DIR=scratch,
            GEOCONT_RUN_THREADS=str(threads) if threads else os.environ.get("GEOCONT_RUN_THREADS"),
            **{store.STORE_ENV: store.STORE_OFF, store.STORE_ONLY_ENV: None},
        ),
    ):
        fresh_tables = run_jobs([run.job for run in chosen], executor)
        manifests = [cache.manifest(run.kind, run.job.key_config()) for run in chosen]  # keys with these threads
    return fresh_tables, manifests


def _verify_run(status: BookStatus, run: BookRun, *, fresh: pd.DataFrame, manifest: dict[str, Any] | None, out) -> bool:
    """Print how the retrained ``run`` compares with its store entry; whether it passes."""
    root = status.store.root
    folder = store.entry_folder(root, run.kind, run.job.key_config())
    entry = store.read_entry(folder) or {}
    stored = store.read_table(folder, entry)
    if stored is None:
        print(f"{run.name} ({run.label}): the store entry cannot be read", file=out)
        return False
    table = differences(stored, fresh, float32=entry.get("values") == "float32")
    mine = (manifest or {}).get("run", {})
    where = entry.get("provenance", {})
    siblings = seed_siblings(status.run_set, run, status.store.entries)
    test = another_seed_test(seed_finals(root, siblings), fresh)
    verdict, ok = judge_retrained(table, test, same_platform=store.same_platform(where, mine), seeds=len(siblings))
    print(
        f"{run.name} ({run.label}; {run.optimizer}; stored on {where.get('cpu_capability')}/torch "
        f"{where.get('torch')}/{where.get('threads')} thread(s), retrained on {mine.get('cpu_capability')}/"
        f"torch {mine.get('torch')}/{mine.get('threads')} thread(s)): {verdict}",
        file=out,
    )
    _print_differences(table, test, out)
    return ok


def judge_retrained(table: pd.DataFrame, test: pd.DataFrame, *, same_platform: bool, seeds: int) -> tuple[str, bool]:
    """The verdict on a retrained run and whether it passes, from its :func:`differences` ``table`` and its
    :func:`another_seed_test` against the ``seeds`` stored seeds of its condition. A run retrained on the torch,
    CPU flags and threads it was stored from (``same_platform``) must train bit-identically
    (:data:`TRAINING_METRICS`); where its measurements differ, and anywhere else, it must look like another seed
    of its condition (:data:`VERIFY_FALSE_ALARM`), and is not judged where fewer than two seeds are stored."""
    if unchanged(table):
        return ("bit-identical" if same_platform else "identical (on other kernels)"), True
    if same_platform and not unchanged(table[table["metric"].isin(TRAINING_METRICS)]):
        return (
            "DIFFERS (a run retrained on the torch, CPU flags and threads it was stored from must "
            "train bit-identically)"
        ), False
    prefix = (
        "training bit-identical, measurements not (the exact SVD's LAPACK kernels follow the CPU model, "
        "which the flags do not pin); "
        if same_platform
        else ""
    )
    if not len(test):
        return prefix + f"not judged: {seeds} seed of its condition stored, none to judge it by", True
    ok = bool((test["z"] <= test["limit"]).all())
    worst = test.loc[(test["z"] / test["limit"]).idxmax()]
    return prefix + (
        f"{'like' if ok else 'NOT LIKE'} another seed of its {seeds} stored: final "
        f"claim means at most {worst['z']:.2g} prediction sd from theirs (limit "
        f"{worst['limit']:.2g}, {len(test)} quantities, false alarm {VERIFY_FALSE_ALARM:g})"
    ), ok


def _print_differences(table: pd.DataFrame, test: pd.DataFrame, out) -> None:
    """Per claim-bearing metric, the largest difference (and how far the final mean lies from the seeds'); the
    largest of the other metrics."""
    by_metric = test["z"].groupby(level="metric").max() if len(test) else pd.Series(dtype=float)
    claim = table[table["metric"].isin(CLAIM_METRICS)]
    for row in claim.itertuples():
        extra = "".join(
            [
                f", {row.flag_mismatches} NaN/inf flags differ" if row.flag_mismatches else "",
                f", {row.unmatched} values in one table only" if row.unmatched else "",
            ]
        )
        units = by_metric.get(row.metric, np.nan)
        seeds = f"; final mean {units:.2g} prediction sd from the seeds'" if not np.isnan(units) else ""
        print(f"    {row.metric:22s} max |diff| {row.max_abs_diff:.3g}{seeds}{extra}", file=out)
    others = table[~table["metric"].isin(CLAIM_METRICS)]
    if len(others):
        print(f"    {'(other metrics)':22s} max |diff| {others['max_abs_diff'].max():.3g}", file=out)


# --------------------------------------------------------------------------- check


#: How far a number of a claims table may move from the committed snapshot and still count as the same:
#: ``|a - b| <= CLAIM_TOLERANCE * max(1, |a|, |b|)``. Far above cross-platform float noise (measured: a claim
#: computed from the same weights at 1 and 2 torch threads moved by 2.6e-7, on an Intel Xeon against the AMD EPYC
#: snapshot by 2.6e-7, relative 7e-6) and far below the book's rounding (three decimals: 5e-4).
CLAIM_TOLERANCE = 1e-5

#: A number inside a text field of a claims table (a note such as "diag(g) W 0.840 ± 0.021").
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def snapshot_problem(snapshot: Path, chapters: Sequence[str], writing: bool) -> str | None:
    """Why the claims snapshot ``snapshot`` cannot be read (a file of ``chapters`` that is not a claims table) or,
    ``writing``, cannot be written, in one line naming the file and the fix; None where it can. Checked before any
    chapter is executed."""
    for chapter in chapters:
        path = snapshot / f"{chapter}.json"
        if not path.exists():
            continue
        try:
            payload = json.loads(path.read_text())
            if not isinstance(payload, dict) or not isinstance(payload.get("claims"), list):
                raise ValueError("not a claims table (a JSON object with a list of claims)")
        except (OSError, ValueError) as error:
            return (
                f"the claims snapshot {path} is unreadable ({error}); restore it (`git checkout {path}`) or "
                "rewrite it with `python -m geocont.book check --write-snapshot`"
            )
    if writing:
        folder = snapshot if snapshot.exists() else snapshot.parent
        if not os.access(folder, os.W_OK) or any(
            (snapshot / f"{chapter}.json").exists() and not os.access(snapshot / f"{chapter}.json", os.W_OK)
            for chapter in chapters
        ):
            return f"the claims snapshot {snapshot} cannot be written (read-only); make it writable first"
    return None


def _records(path: Path) -> dict[str, Any]:
    payload = json.loads(path.read_text())
    claims = {str(row.get("key")): row for row in payload.get("claims", [])}  # a key names its dataset
    return {"scale": payload.get("scale"), "overrides": payload.get("overrides"), "claims": claims}


def close_numbers(a: float, b: float, tolerance: float = CLAIM_TOLERANCE) -> bool:
    """Whether two numbers of a claims table are the same within ``tolerance`` (NaN equals NaN)."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= tolerance * max(1.0, abs(a), abs(b))


def _last_place(text: str) -> float:
    """One unit in the last printed digit of a number as written (``0.840`` -> 0.001, ``12`` -> 1)."""
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals)


def _same_text(a: str, b: str, tolerance: float) -> bool:
    """Whether two texts are equal but for the numbers they print, each within ``tolerance`` or one unit of its
    last printed digit (a value within float noise of a rounding boundary may print either way)."""
    if a == b:
        return True
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return False
    return all(
        close_numbers(float(x), float(y), tolerance)
        or abs(float(x) - float(y)) <= 1.0001 * max(_last_place(x), _last_place(y))
        for x, y in zip(_NUMBER.findall(a), _NUMBER.findall(b))
    )


def same_value(a: Any, b: Any, tolerance: float = CLAIM_TOLERANCE) -> bool:
    """Whether two field values of a claims table agree: floats within ``tolerance`` (:func:`close_numbers`), texts
    but for their printed numbers (:func:`_same_text`), everything else (verdicts, seed counts, keys, flags,
    integers, None) exactly."""
    if isinstance(a, float) and isinstance(b, float):
        return close_numbers(a, b, tolerance)
    if isinstance(a, str) and isinstance(b, str):
        return _same_text(a, b, tolerance)
    return type(a) is type(b) and a == b


def compare_claims(
    published: Path, snapshot: Path, chapters: Sequence[str] | None = None, tolerance: float = CLAIM_TOLERANCE
) -> list[str]:
    """Every difference between the claims tables published in ``published`` and those in ``snapshot`` (of
    ``chapters`` alone, where given), one line each, starting with the chapter's name: a chapter or claim only one
    side has, a field whose value differs (:func:`same_value`); [] when they agree."""
    lines = []
    names = sorted({p.name for p in published.glob("*.json")} | {p.name for p in snapshot.glob("*.json")})
    if chapters is not None:
        names = [f"{chapter}.json" for chapter in chapters]
    for name in names:
        chapter = name[: -len(".json")]
        if not (snapshot / name).exists():
            lines.append(f"{chapter}: published, but not in the snapshot")
            continue
        if not (published / name).exists():
            lines.append(f"{chapter}: in the snapshot, but not published")
            continue
        new, old = _records(published / name), _records(snapshot / name)
        for field in ("scale", "overrides"):
            if new[field] != old[field]:
                lines.append(f"{chapter}: {field}: snapshot {old[field]!r} -> now {new[field]!r}")
        for key in sorted(set(new["claims"]) | set(old["claims"])):
            if key not in old["claims"]:
                lines.append(f"{chapter}: claim {key}: new")
            elif key not in new["claims"]:
                lines.append(f"{chapter}: claim {key}: gone")
            else:
                a, b = old["claims"][key], new["claims"][key]
                for column in sorted(set(a) | set(b)):
                    if not same_value(a.get(column), b.get(column), tolerance):
                        lines.append(
                            f"{chapter}: claim {key}: {column}: snapshot {a.get(column)!r} -> now {b.get(column)!r}"
                        )
    return lines


def moved_summary(lines: Sequence[str]) -> str:
    """The chapters and claims that :func:`compare_claims`' ``lines`` name, and no others:
    ``condition2 (claims a@x, b@x); timeline (scale)``."""
    moved: dict[str, list[str]] = {}
    for line in lines:
        chapter, _, rest = line.partition(": ")
        what = rest.split(": ")[0].removeprefix("claim ")
        names = moved.setdefault(chapter, [])
        if what not in names:
            names.append(what)
    return "; ".join(f"{chapter} ({', '.join(names)})" for chapter, names in moved.items())

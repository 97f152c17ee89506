"""One entry point for sweeps of independent cached runs, and the executors that run them.

A sweep is a list of :class:`Job` (a cache ``kind``, the run's configuration, a top-level picklable function that
computes its table). :func:`run_jobs` loads what the cache (or the results store) holds and runs the rest,
each key once, under an executor: ``serial``, ``local[:N]`` (worker processes) or ``ray[:ADDRESS]``; the
``executor`` argument, else ``$GEOCONT_EXECUTOR``, else ``local``. Every run computes with
``$GEOCONT_RUN_THREADS`` torch threads (default 1), so that its table is the same under every executor.
docs/design.md ("Sweeps and executors") gives the executors, determinism, strict mode, slices and failures.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

import pandas as pd
from tqdm import tqdm

from . import cache, ray_probe, store
from .validity import cut_exploded

EXECUTORS = ("serial", "local", "local:N", "ray", "ray:ADDRESS")
#: The environment variable that chooses the executor when no ``executor`` argument is given.
EXECUTOR_ENV = "GEOCONT_EXECUTOR"


class SweepFailed(RuntimeError):
    """Some runs of a sweep failed; ``failures`` holds ``(label, config, error)`` for each."""

    def __init__(self, failures: Sequence[tuple[str, dict[str, Any], str]], total: int, cached: int | None = None):
        self.failures = list(failures)
        others = total - len(failures)
        if others == 0:
            state = "no other run"
        elif cached is None or cached == others:
            state = f"the other {others} {'is' if others == 1 else 'are'} cached"
        elif cached == 0:
            state = f"the other {others} finished but none could be cached"
        else:
            state = f"{cached} of the other {others} are cached"
        lines = [f"{len(failures)} of {total} runs failed ({state}):"]
        lines += [
            f"  - {label}: {error.strip().splitlines()[-1] if error.strip() else error} | config {config}"
            for label, config, error in failures
        ]
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class Job:
    """One independent cached run.

    ``compute(argument)`` returns the run's table, or a :class:`geocont.cache.Computed`
    with artifacts (e.g. a model's weights) to store beside it. ``compute`` must be a
    top-level function and ``argument`` picklable, so that the job can be sent to another
    process or machine. ``device`` (``cpu``, ``cuda``, ``auto``) decides the resources
    asked of Ray; ``label`` names the run in progress and failure messages. ``cost`` is a
    relative estimate of its run time: the local executor starts the costliest runs first, so
    that a long run does not start last and leave the other workers idle.
    """

    kind: str
    config: dict[str, Any]
    compute: Callable[[Any], Any]
    argument: Any = None
    label: str = ""
    device: str = "cpu"
    require_metrics: tuple[str, ...] = ()
    require_artifacts: tuple[str, ...] = ()
    cost: float = 1.0
    #: checked once before the job is trained (never where it is served from the cache or the store): returns why it
    #: must not be trained here, in one line, or None (e.g. :func:`geocont.corpus_files.corpus_problem`)
    before_training: Callable[[], str | None] | None = None

    def key_config(self) -> dict[str, Any]:
        """The configuration the cache keys on: ``config``, plus the thread count unless it is 1 and the
        numerics revision unless it is 1 (:data:`geocont.cache.NUMERICS_REVISION`)."""
        threads = run_threads()
        key = self.config if threads == 1 else {**self.config, "torch_threads": threads}
        return key if cache.NUMERICS_REVISION == 1 else {**key, "numerics": cache.NUMERICS_REVISION}

    def load(self, warn: bool = True) -> pd.DataFrame | None:
        """The job's cached table, or None (see :func:`geocont.cache.load`)."""
        return cache.load(
            self.kind, self.key_config(), self.require_metrics, require_artifacts=self.require_artifacts, warn=warn
        )


def run_threads() -> int:
    """Torch threads of every run: ``$GEOCONT_RUN_THREADS``, default 1."""
    value = os.environ.get("GEOCONT_RUN_THREADS", "1")
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"GEOCONT_RUN_THREADS must be a positive integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class ExecutorSpec:
    """A parsed executor choice: ``name`` (serial, local, ray), local ``workers``, Ray ``address``."""

    name: str
    workers: int = 1
    address: str | None = None


def resolve_executor(executor: str | None = None) -> ExecutorSpec:
    """Parse ``executor`` (else ``$GEOCONT_EXECUTOR``, else ``local``); one-line error if invalid."""
    text = (executor if executor is not None else os.environ.get(EXECUTOR_ENV, "")).strip() or "local"
    name, _, option = text.partition(":")
    threads = run_threads()
    if name == "serial" and not option:
        return ExecutorSpec("serial")
    if name == "local":
        if not option:
            return ExecutorSpec("local", max(1, (os.cpu_count() or 1) // threads))
        if option.isdigit() and int(option) >= 1:
            return ExecutorSpec("local", int(option))
        if option.isdigit():
            raise ValueError(f"executor {text!r}: the number of local workers must be >= 1")
    if name == "ray":
        return ExecutorSpec("ray", address=option or os.environ.get("GEOCONT_RAY_ADDRESS") or None)
    raise ValueError(f"unknown executor {text!r}; valid choices: {', '.join(EXECUTORS)}")


def executor_description(executor: str | None = None) -> str:
    """One line saying how runs execute, e.g. ``local: 2 worker processes x 1 torch thread``."""
    spec = resolve_executor(executor)
    threads = run_threads()
    per_run = f"{threads} torch thread{'s' if threads > 1 else ''}"
    if spec.name == "serial":
        return f"serial: 1 process x {per_run}"
    if spec.name == "local":
        return f"local: {spec.workers} worker process{'es' if spec.workers > 1 else ''} x {per_run}"
    where = f"cluster at {spec.address}" if spec.address else f"a local Ray on {os.cpu_count()} CPUs"
    return f"ray: {where}, {per_run} per run"


# --------------------------------------------------------------------------- what a worker does


@dataclass
class Outcome:
    """What a worker reports: an ``error`` (the traceback), or success, with the ``table``
    only when the cache could not keep it (otherwise the driver loads the entry); and the
    ``warnings`` the run raised, which the driver raises again (they would be lost in a worker)."""

    table: pd.DataFrame | None = None
    error: str | None = None
    warnings: tuple[str, ...] = ()


def pin_threads(threads: int) -> None:
    """Fix the torch (and OpenMP/MKL) thread count of this process."""
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[variable] = str(threads)
    import torch

    torch.set_num_threads(threads)


@contextlib.contextmanager
def pinned_threads(threads: int | None = None) -> Iterator[None]:
    """Run the body at ``threads`` (default :func:`run_threads`) torch threads, then restore."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads or run_threads())
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def execute(job: Job, threads: int, environment: dict[str, str] | None = None) -> Outcome:
    """Run one job under ``threads`` torch threads.

    Used by every executor: in worker processes and Ray tasks, which first take the
    driver's ``GEOCONT_*`` ``environment`` (its cache directory as an absolute path above
    all), and for ``serial`` in this process (``environment=None``; the caller's thread
    count is restored afterwards).
    """
    if environment is not None:  # a worker kept from an earlier sweep takes this sweep's settings
        for name in [name for name in os.environ if name.startswith("GEOCONT_") and name not in environment]:
            del os.environ[name]
        os.environ.update(environment)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with pinned_threads(threads):
                table, stored = cache.ensure(
                    job.kind,
                    job.key_config(),
                    lambda: job.compute(job.argument),
                    job.require_metrics,
                    require_artifacts=job.require_artifacts,
                    warn=False,
                    announce=False,
                )  # the driver said both already
            outcome = Outcome(table=None if stored else table)
        except Exception:  # noqa: BLE001 - reported with the job's configuration by the driver
            outcome = Outcome(error=traceback.format_exc())
    outcome.warnings = tuple(dict.fromkeys(str(w.message) for w in caught))
    return outcome


def geocont_environment() -> dict[str, str]:
    """The ``GEOCONT_*`` variables a worker needs to compute as this process would, with the
    cache directory made absolute (a Ray worker runs in another directory)."""
    environment = {name: value for name, value in os.environ.items() if name.startswith("GEOCONT_")}
    environment["GEOCONT_CACHE_DIR"] = str(cache.cache_root().absolute())
    return environment


def _set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Ask Linux to send ``sig`` to this process when its parent exits (``prctl(PR_SET_PDEATHSIG)``);
    False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(1, int(sig), 0, 0, 0) == 0  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return False


def _exit_when_gone(pid: int, poll: float = 1.0) -> None:
    """Block until process ``pid`` has exited (a pidfd where the kernel has one, else polling),
    then end this process at once."""
    try:
        descriptor = os.pidfd_open(pid)
    except (AttributeError, OSError):
        descriptor = None
    if descriptor is not None:
        import select

        select.select([descriptor], [], [])  # readable once the process has exited
    else:
        while cache.pid_alive(pid):
            time.sleep(poll)
    os._exit(1)


def _init_worker(threads: int, environment: dict[str, str], driver: int | None = None) -> None:
    """A local worker: the driver's environment when the pool started (a forkserver's is older), pinned threads.

    Workers ignore Ctrl-C (SIGINT): an interrupt is the driver's to handle, which ends the pool. Without
    this, a Jupyter kernel's shutdown (papermill, nbval) prints a KeyboardInterrupt traceback per idle worker.
    Workers never outlive the driver (process ``driver``): a thread watches it and ends the worker when it
    is gone (killed with SIGKILL included), and the worker is killed with its parent, the forkserver
    (which itself exits once the driver and its workers are gone).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _set_parent_death_signal()
    if driver is not None:
        if not cache.pid_alive(driver):
            os._exit(1)
        threading.Thread(target=_exit_when_gone, args=(driver,), daemon=True, name="driver-watch").start()
    os.environ.clear()
    os.environ.update(environment)
    pin_threads(threads)


def _pool_context() -> multiprocessing.context.BaseContext:
    """forkserver where the platform has it, with torch and geocont imported once in the server, so
    that a new pool starts in a fraction of a second; spawn elsewhere. Never fork: the driver may
    already run torch threads."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["geocont.training"])
        return context
    return multiprocessing.get_context("spawn")


# --------------------------------------------------------------------------- executors


def _past(deadline: float | Callable[[], float | None] | None) -> bool:
    """Whether ``deadline`` (a ``time.time()`` value, or a callable giving one: a sweep's caller may move it, e.g.
    to stop at a failure) has passed."""
    if callable(deadline):
        deadline = deadline()
    return deadline is not None and time.time() >= deadline


def _serial(
    jobs: list[Job], threads: int, report: Callable[[int, Outcome], None], deadline: float | None = None
) -> None:
    for index in sorted(range(len(jobs)), key=lambda i: -jobs[i].cost) if deadline is not None else range(len(jobs)):
        if _past(deadline):
            return
        report(index, execute(jobs[index], threads))


#: Local worker pools by (workers, threads), kept between sweeps so that workers keep their
#: imports and loaded datasets (a chapter runs several sweeps); :func:`shutdown` ends them.
_POOLS: dict[tuple[int, int], concurrent.futures.ProcessPoolExecutor] = {}


def _pool(workers: int, threads: int) -> concurrent.futures.ProcessPoolExecutor:
    key = (workers, threads)
    if key not in _POOLS:
        _POOLS[key] = concurrent.futures.ProcessPoolExecutor(
            max_workers=workers,
            mp_context=_pool_context(),
            initializer=_init_worker,
            initargs=(threads, dict(os.environ), os.getpid()),
        )
    return _POOLS[key]


def _drop_pool(workers: int, threads: int) -> None:
    pool = _POOLS.pop((workers, threads), None)
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


def _local(
    jobs: list[Job],
    workers: int,
    threads: int,
    environment: dict[str, str],
    report: Callable[[int, Outcome], None],
    deadline: float | None = None,
) -> None:
    """A process pool (:func:`_pool_context`, kept for later sweeps) with at most ``workers`` runs in flight.

    If a worker dies (killed, out of memory) the pool breaks: the runs in flight are
    reported as failed and a fresh pool takes the rest. If the sweep itself stops (an
    interrupt) the pool is shut down with it.
    """
    queue = sorted(range(len(jobs)), key=lambda index: -jobs[index].cost)  # longest first, else in order
    while queue:
        pool = _pool(workers, threads)
        in_flight: dict[concurrent.futures.Future, int] = {}
        broken = False
        try:
            while in_flight or (queue and not broken):
                if _past(deadline):
                    queue.clear()  # no run starts after the deadline; those in flight finish
                    if not in_flight:
                        break
                while queue and not broken and len(in_flight) < workers:
                    index = queue.pop(0)
                    in_flight[pool.submit(execute, jobs[index], threads, environment)] = index
                done, _ = concurrent.futures.wait(in_flight, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    index = in_flight.pop(future)
                    try:
                        outcome = future.result()
                    except BrokenProcessPool:
                        broken = True
                        outcome = _dead_worker_outcome()
                    report(index, outcome)
        except BaseException:
            _drop_pool(workers, threads)
            raise
        if broken:
            _drop_pool(workers, threads)


def _dead_worker_outcome() -> Outcome:
    """The failure of a run whose worker process died: at start, for a script without a main guard, or while
    the run was in flight."""
    script = unguarded_main_script()
    return Outcome(
        error=(
            f"the worker process died at start: the script {script} has no "
            '`if __name__ == "__main__":` guard, so each worker process re-runs it (and its '
            "sweep) when it imports it; put the script's code under that guard"
        )
        if script
        else ("the worker process died while this run was in flight (killed, or out of memory?)")
    )


def unguarded_main_script() -> str | None:
    """The path of the running script if it has no top-level ``if __name__ == "__main__":`` test
    (its workers re-run it on import), else None (a guarded script, a notebook, ``-c`` or ``-m``)."""
    import ast

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path or getattr(
        getattr(main, "__spec__", None), "name", None
    ):  # -m module: guarded or not, not ours to parse
        return None
    try:
        tree = ast.parse(open(path, encoding="utf-8").read())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test):
            return None
    return path


def _ensure_ray(address: str | None):
    import ray

    if not ray.is_initialized():
        if address:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    return ray


def _ray(
    jobs: list[Job],
    address: str | None,
    threads: int,
    environment: dict[str, str],
    report: Callable[[int, Outcome], None],
    deadline: float | None = None,
) -> None:
    """Ray tasks, one per run; Ray's scheduler decides how many run at once.

    Connects to the cluster at ``address`` or starts a local Ray once per process (kept
    for later sweeps; :func:`shutdown` stops it). With a ``deadline``, runs are submitted
    longest first, no more at once than the cluster's CPUs hold, and none after the deadline.
    """
    ray = _ensure_ray(address)
    resources = ray.cluster_resources()
    has_gpus = resources.get("GPU", 0) > 0
    remote = ray.remote(execute)
    pending = {}
    queue = list(range(len(jobs)))
    window = len(jobs)
    if deadline is not None:
        queue.sort(key=lambda index: -jobs[index].cost)
        window = max(1, int(resources.get("CPU", 1) // threads))

    def submit() -> None:
        while queue and len(pending) < window and not _past(deadline):
            index = queue.pop(0)
            job = jobs[index]
            gpu = job.device == "cuda" or (job.device == "auto" and has_gpus)
            options = dict(num_cpus=threads, num_gpus=1 if gpu else 0, max_retries=0)
            pending[remote.options(**options).remote(job, threads, environment)] = index

    submit()
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        for reference in ready:
            index = pending.pop(reference)
            try:
                outcome = ray.get(reference)
            except Exception as error:  # noqa: BLE001 - a dead worker or node, reported with the run
                outcome = Outcome(error=f"the Ray task failed: {type(error).__name__}: {error}")
            report(index, outcome)
        submit()


def shutdown() -> None:
    """End the local worker pools and stop (or disconnect from) the Ray of earlier sweeps, if any."""
    for workers, threads in list(_POOLS):
        _drop_pool(workers, threads)
    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        sys.modules["ray"].shutdown()


# --------------------------------------------------------------------------- the entry point


def run_jobs(
    jobs: Iterable[Job],
    executor: str | None = None,
    progress: bool = True,
    *,
    deadline: float | None = None,
    on_result: Callable[[Job, pd.DataFrame], None] | None = None,
) -> list[pd.DataFrame]:
    """The table of every job, in order: from the cache (or the results store), or computed by ``executor``.

    The executor is validated before any work. Cached runs are loaded in this process
    without starting any worker; the rest go to the executor, deduplicated by cache key.
    In strict mode (:func:`geocont.store.strict`) a training run among the rest is a one-line
    :class:`geocont.store.RunMissing` here, before any run starts.
    One progress bar advances as runs finish; a failed run is reported as soon as it
    fails (with its configuration) and :class:`SweepFailed` is raised after the others.

    Every table is returned as claims read it (:func:`geocont.validity.cut_exploded`: an exploded run ends at its
    event); ``on_result`` sees the table as trained. ``deadline`` (a ``time.time()`` value): no run starts after it, the runs are started longest
    first, and the table of a run not started is None. ``on_result(job, table)`` is called in
    this process as each computed run lands (it must not raise).
    """
    jobs = list(jobs)
    _refuse_inside_a_worker_import()
    spec = _usable_executor(executor)
    threads = run_threads()
    cache.clean_stale({job.kind for job in jobs})
    sweep = _Sweep(jobs, on_result)
    _forbid_training_in_strict_mode(sweep.pending)
    refuse_untrainable(sweep.pending)
    announce_claims(sweep.pending)
    with sweep.progress_bar(progress):
        _execute(spec, sweep.pending, threads=threads, report=sweep.report, deadline=deadline)
    if sweep.failures:
        raise SweepFailed(sweep.failures, len(sweep.pending), sweep.cached)
    return [None if table is None else cut_exploded(table) for table in sweep.tables]


def _refuse_inside_a_worker_import() -> None:
    """A sweep started while a worker process imports the main script (which has no ``__main__`` guard) is an error."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError(
            "a sweep was started while a worker process imported the main script: put the script's "
            'code under `if __name__ == "__main__":`'
        )


def _usable_executor(executor: str | None) -> ExecutorSpec:
    """The executor's spec; a Ray cluster that does not answer is a one-line ``ValueError`` within seconds, not a
    hang."""
    spec = resolve_executor(executor)
    if spec.name == "ray" and spec.address:
        problem = executor_problem(f"ray:{spec.address}")
        if problem:
            raise ValueError(problem)
    return spec


class CannotTrain(RuntimeError):
    """A run that must not be trained here (its inputs differ from what its key stands for): one line, before any
    run starts."""


def refuse_untrainable(pending: Sequence[Job]) -> None:
    """Raise :class:`CannotTrain` with the first problem any pending job's ``before_training`` check reports (each
    distinct check run once)."""
    seen = set()
    for job in pending:
        check = job.before_training
        if check is None or check in seen:
            continue
        seen.add(check)
        problem = check()
        if problem:
            raise CannotTrain(problem)


def _forbid_training_in_strict_mode(pending: Sequence[Job]) -> None:
    """In strict mode, a training run among ``pending`` is :class:`geocont.store.RunMissing` (naming the first)."""
    trained = [job for job in pending if job.kind in store.STRICT_KINDS]
    if trained:
        store.forbid_training(
            trained[0].kind,
            trained[0].key_config(),
            label=trained[0].label,
            more=len(trained) - 1,
            cache_dir=cache.cache_root(),
        )


def _execute(
    spec: ExecutorSpec, jobs: list[Job], *, threads: int, report: Callable[[int, Outcome], None], deadline: float | None
) -> None:
    """Run ``jobs`` under the executor ``spec``, calling ``report(position, outcome)`` as each finishes."""
    if not jobs:
        return
    if spec.name == "serial":
        _serial(jobs, threads=threads, report=report, deadline=deadline)
    elif spec.name == "local":
        _local(
            jobs,
            workers=spec.workers,
            threads=threads,
            environment=geocont_environment(),
            report=report,
            deadline=deadline,
        )
    else:
        _ray(
            jobs,
            address=spec.address,
            threads=threads,
            environment=geocont_environment(),
            report=report,
            deadline=deadline,
        )


class _Sweep:
    """One sweep's bookkeeping: every job's table (loaded from the cache, or landed since), the runs still to
    compute (one per cache key), the failures, how many computed runs the cache now holds, and the progress bar."""

    def __init__(self, jobs: list[Job], on_result: Callable[[Job, pd.DataFrame], None] | None):
        self.jobs, self.on_result = jobs, on_result
        self.tables: list[pd.DataFrame | None] = [job.load() for job in jobs]
        #: cache key -> the positions of the jobs with that key whose table is still to compute
        self.todo: dict[str, list[int]] = {}
        for index, job in enumerate(jobs):
            if self.tables[index] is None:
                self.todo.setdefault(cache.cache_key(job.kind, job.key_config()), []).append(index)
        #: the runs to compute: the first job of each key in ``todo``
        self.pending = [jobs[indices[0]] for indices in self.todo.values()]
        self.failures: list[tuple[str, dict[str, Any], str]] = []
        self.cached = 0
        self.bar: tqdm | None = None

    @contextlib.contextmanager
    def progress_bar(self, progress: bool) -> Iterator[None]:
        """One bar over every job of the sweep, the cached ones counted done from the start."""
        done = len(self.jobs) - sum(map(len, self.todo.values()))
        self.bar = tqdm(total=len(self.jobs), initial=done, desc="runs", disable=not progress)
        try:
            yield
        finally:
            self.bar.close()

    def report(self, position: int, outcome: Outcome) -> None:
        """Take the outcome of ``pending[position]``: raise its warnings here, record its table or its failure."""
        job = self.pending[position]
        indices = self.todo[cache.cache_key(job.kind, job.key_config())]
        for message in outcome.warnings:
            warnings.warn(f"{job.label}: {message}", stacklevel=3)
        if outcome.error is not None:
            self.failures.append((job.label, job.config, outcome.error))
            tqdm.write(f"run failed: {job.label} | config {job.config}\n{outcome.error}")
        else:
            self._land(job, outcome, indices)
        self.bar.set_postfix_str(job.label, refresh=False)
        self.bar.update(len(indices))

    def _land(self, job: Job, outcome: Outcome, indices: list[int]) -> None:
        """A run that succeeded: its table (from the worker, else from the cache entry it wrote) for every job of its
        key."""
        table = outcome.table if outcome.table is not None else job.load()
        if outcome.table is None and table is not None:
            self.cached += 1
        if table is None:
            self.failures.append(
                (
                    job.label,
                    job.config,
                    (
                        f"a worker stored the entry but this process cannot read it under {cache.cache_root()}: "
                        "is GEOCONT_CACHE_DIR on storage shared by every node?"
                    ),
                )
            )
        for index in indices:
            self.tables[index] = table
        if table is not None and self.on_result is not None:
            self.on_result(job, table)


def announce_claims(jobs: Sequence[Job]) -> list[str]:
    """Say on stderr, once per holder, which of ``jobs`` another live process has claimed (its workers will
    wait for it: :func:`geocont.cache.claim`) and for how long; the lines said."""
    held: dict[tuple[Any, Any], list[tuple[Job, dict[str, Any]]]] = {}
    for job in jobs:
        holder = cache.claim_holder(job.kind, job.key_config())
        if holder is not None and (holder.get("host"), holder.get("pid")) != (socket.gethostname(), os.getpid()):
            held.setdefault((holder.get("host"), holder.get("pid")), []).append((job, holder))
    lines = []
    for runs in held.values():
        labels = ", ".join(job.label or job.kind for job, _ in runs[:3]) + (", ..." if len(runs) > 3 else "")
        lines.append(
            f"{len(runs)} run{'s' if len(runs) > 1 else ''} of this sweep ({labels}) "
            f"{'are' if len(runs) > 1 else 'is'} computed by {cache.holder_text(runs[0][1])}"
        )
    for line in lines:
        tqdm.write(line, file=sys.stderr)
    return lines


def run_job(job: Job, progress: bool = True) -> pd.DataFrame:
    """One job in this process (the cached single-run functions, e.g. ``run_mlp``), its table as claims read it
    (:func:`geocont.validity.cut_exploded`).

    Same thread count and cache key as in a sweep; ``progress`` is the job's own concern
    (its ``compute`` decides whether to show a bar). Exceptions propagate unchanged.
    """
    table = job.load()
    if table is not None:
        return cut_exploded(table)
    store.forbid_training(job.kind, job.key_config(), job.label, cache_dir=cache.cache_root())
    refuse_untrainable([job])
    with pinned_threads():
        return cut_exploded(
            cache.cached(
                job.kind,
                job.key_config(),
                lambda: job.compute(job.argument),
                job.require_metrics,
                require_artifacts=job.require_artifacts,
            )
        )


def predicted_wall_seconds(durations: Iterable[float], workers: int) -> float:
    """Wall seconds of a sweep whose runs take ``durations`` seconds each on ``workers`` workers that each
    take the next run as soon as they are free, longest run first (the makespan of that schedule)."""
    loads = [0.0] * max(1, workers)
    for seconds in sorted(durations, reverse=True):
        loads[loads.index(min(loads))] += seconds
    return max(loads)


def tidy_sweep_table(tables: Sequence[pd.DataFrame], columns: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Concatenate run tables, each with its run-key ``columns`` added; label columns as categories."""
    combined = pd.concat([table.assign(**extra) for table, extra in zip(tables, columns)], ignore_index=True)
    for column in ("condition", "optimizer", "group", "metric", "space"):
        if column in combined:
            combined[column] = combined[column].astype("category")
    return combined


def executor_problem(executor: str | None = None) -> str | None:
    """Why the executor (``executor``, else ``GEOCONT_EXECUTOR``) or ``GEOCONT_RUN_THREADS`` cannot
    work, or None; a Ray cluster address must answer within seconds (:func:`geocont.ray_probe.cluster_problem`)."""
    try:
        spec = resolve_executor(executor)
    except ValueError as error:
        source = "" if executor is not None else f" (from {EXECUTOR_ENV})" if os.environ.get(EXECUTOR_ENV) else ""
        return f"{error}{source}"
    if spec.name != "ray":
        return None
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        return "executor ray needs Ray: `pip install -e .[cluster]`"
    if spec.address and spec.address != "auto":
        return ray_probe.cluster_problem(spec.address)
    return None

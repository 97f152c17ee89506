"""What produced a chapter: scale, data, seeds, hardware, executor, code version, where its runs came from
(the results store, the user's run cache, or trained now), re-run command."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shlex
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .. import cache, store
from ..sweeps import executor_description

#: Where a run comes from, in the words of the provenance block.
SOURCES = {"store": "from the results store", "cache": "from your run cache", "trained": "trained now"}


def hardware() -> str:
    """CPU model and cores, or the GPU, in one line."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    threads = torch.get_num_threads()
    text = f"{cpu}, {os.cpu_count()} cores, {threads} torch thread{'s' if threads != 1 else ''}"
    if torch.cuda.is_available():
        text += f"; GPU: {torch.cuda.get_device_name(0)}"
    return text


def code_version() -> str:
    """``git describe`` of the working tree (with ``-dirty`` if it has changes), if available."""
    try:
        return subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        from .. import __version__

        return f"geocont {__version__}"


@dataclass(frozen=True)
class RunSource:
    """Where one run of a chapter comes from (``source``: a key of :data:`SOURCES`) and, where it was trained
    before, the provenance it was recorded with (:func:`geocont.store.run_provenance`; empty where unknown)."""

    name: str
    label: str
    source: str
    provenance: Mapping[str, Any]


def run_sources(runs: Iterable[Any]) -> list[RunSource]:
    """Each run configuration's :class:`RunSource`, looked up now: in the user's run cache, else in the results
    store, else it will be trained."""
    from ..config import MLPRunConfig

    sources = {}
    for config in runs:
        if isinstance(config, MLPRunConfig):
            from ..training import mlp_job

            job = mlp_job(config)
        else:
            from ..lm import lm_job

            job = lm_job(config)
        key = job.key_config()
        if cache.has_entry(job.kind, key, include_store=False):
            source, provenance = "cache", (cache.manifest(job.kind, key) or {}).get("run") or {}
        elif store.has(job.kind, key):
            source, provenance = "store", store.provenance_of(job.kind, key) or {}
        else:
            source, provenance = "trained", {}
        name = store.entry_name(job.kind, key)
        sources.setdefault(name, RunSource(name, job.label, source, provenance))
    return list(sources.values())


@dataclass(frozen=True)
class MeasuredCost:
    """What a chapter's runs took where they were trained: the summed wall seconds of the runs that recorded
    them, in worker-minutes, and how many of the runs did."""

    worker_minutes: float
    measured: int
    runs: int


def measured_cost(sources: list[RunSource]) -> MeasuredCost:
    """The :class:`MeasuredCost` of the runs of ``sources`` (their recorded ``wall_seconds``)."""
    seconds = [run.provenance["wall_seconds"] for run in sources if run.provenance.get("wall_seconds") is not None]
    return MeasuredCost(sum(seconds) / 60, len(seconds), len(sources))


def trained_on(sources: list[RunSource]) -> str:
    """Where the runs were trained: per CPU model and torch kernel capability the number of runs, their torch
    threads, and the worker-minutes they took (their recorded wall seconds, summed); runs to be trained now and
    runs without a record are counted apart."""
    machines: dict[str, list[Mapping[str, Any]]] = {}
    for run in sources:
        if run.provenance:
            where = (
                run.provenance.get("device")
                if run.provenance.get("device", "cpu") != "cpu"
                else (f"{run.provenance.get('cpu_model', 'unknown CPU')} ({run.provenance.get('cpu_capability', '?')})")
            )
            machines.setdefault(where, []).append(run.provenance)
    parts = []
    for where, records in sorted(machines.items(), key=lambda item: -len(item[1])):
        threads = sorted({record.get("threads") for record in records if record.get("threads")})
        seconds = [record["wall_seconds"] for record in records if record.get("wall_seconds") is not None]
        parts.append(
            f"{where}: {len(records)} run{'s' if len(records) != 1 else ''}"
            + (f", {'/'.join(map(str, threads))} torch thread{'s' if threads != [1] else ''} each" if threads else "")
            + (f", {sum(seconds) / 60:,.0f} worker-minutes measured" if seconds else "")
        )
    now = sum(run.source == "trained" for run in sources)
    unknown = sum(run.source != "trained" and not run.provenance for run in sources)
    if now:
        parts.append(f"{now} to be trained on this machine")
    if unknown:
        parts.append(f"{unknown} without a record of where")
    return "; ".join(parts) or "no run"


def _store_text() -> str:
    roots = store.store_roots()
    if not roots:
        return "no results store is read" + (
            f" (`{store.STORE_ENV}={store.STORE_OFF}`)" if store.store_setting() == store.STORE_OFF else ""
        )
    checkout = store.checkout_root()
    texts = []
    for root in roots:
        shown = root.relative_to(checkout) if checkout and root.is_relative_to(checkout) else root
        revisions = store.revisions(root)
        held = (
            "; ".join(
                store.revision_text(dict(numerics_revision=r[0], training_code_hash=r[1]))
                + ("" if r[0] == cache.NUMERICS_REVISION else " (not this code's numerics revision)")
                for r in revisions
            )
            or "empty"
        )
        texts.append(f"`{shown}` ({held})")
    return "results store " + ", ".join(texts)


def runs_markdown(sources: list[RunSource]) -> tuple[str, str]:
    """The provenance row "runs" (how many runs came from where) and, where they came from more than one
    place, a collapsed list naming each run that did not come from the results store."""
    counts = {source: sum(run.source == source for run in sources) for source in SOURCES}
    row = (
        f"{len(sources)} listed, as looked up when the chapter started (runs it chooses from their results "
        "while it runs are not counted): "
        + ", ".join(f"{counts[source]} {words}" for source, words in SOURCES.items())
        + f"; {_store_text()}"
    )
    if counts["store"] == 0 or counts["store"] == len(sources):
        return row, ""
    lines = "\n".join(f"- `{run.name}` {run.label}: {SOURCES[run.source]}" for run in sources if run.source != "store")
    return row, (
        f"````{{admonition}} The runs that did not come from the results store\n:class: dropdown\n\n{lines}\n````\n\n"
    )


def rerun_commands(notebook: str, scale: str, overrides: dict | None = None) -> list[str]:
    """The commands that re-run one chapter with these parameters (and rebuild the book)."""
    params = " ".join(f"-p {k} {shlex.quote(str(v))}" for k, v in {"scale": scale, **(overrides or {})}.items())
    return [
        "# once, from the repository root: install, then activate the environment",
        "make setup && . .venv/bin/activate",
        "# execute this chapter with these parameters, then rebuild the book",
        f"python -m geocont.book run {notebook} {params}",
    ]


def rerun_box(notebook: str, scale: str, overrides: dict | None = None) -> str:
    """The "Re-run this chapter" admonition (MyST) with the exact commands."""
    commands = "\n".join(rerun_commands(notebook, scale, overrides))
    return (
        "````{admonition} Re-run this chapter\n:class: tip\n\n"
        f"```bash\n{commands}\n```\n\n"
        "Any parameter of the chapter's first cell can be overridden with another `-p name value`; "
        "`-p scale smoke` runs it in about a minute. Training results are cached by their full "
        "configuration, so an unchanged re-run trains nothing.\n````\n"
    )


def provenance_markdown(
    *,
    notebook: str,
    scale: str,
    data: str,
    seeds,
    model: str,
    training: str,
    overrides: dict | None = None,
    runs: Iterable[Any] | None = None,
) -> str:
    """A Markdown block stating what produced the chapter (with ``runs``, the chapter's run configurations:
    where they came from, :func:`run_sources`), then the "Re-run this chapter" box."""
    seeds = list(seeds)
    changed = ", ".join(f"{k}={v}" for k, v in (overrides or {}).items()) or "none"
    sources = run_sources(runs) if runs is not None else []
    runs_row, runs_list = runs_markdown(sources) if sources else ("", "")
    return (
        f"| | |\n|---|---|\n"
        f"| scale | `{scale}` (parameter overrides: {changed}) |\n"
        f"| data | {data} |\n"
        f"| seeds | {len(seeds)}: {', '.join(map(str, seeds))} |\n"
        f"| model | {model} |\n"
        f"| training | {training} |\n"
        + (f"| runs | {runs_row} |\n" if runs_row else "")
        + (f"| trained on | {trained_on(sources)} |\n" if sources else "")
        + f"| rendered on | {hardware()} |\n"
        f"| executor | {executor_description()} (`--executor` of `python -m geocont.book`, or `$GEOCONT_EXECUTOR`) |\n"
        f"| software | torch {torch.__version__}, code {code_version()} |\n"
        f"| executed | {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M UTC} |\n\n"
        + runs_list
        + rerun_box(notebook, scale, overrides)
    )

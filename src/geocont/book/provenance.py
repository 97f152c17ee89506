"""What produced a chapter: scale, data, seeds, hardware, executor, code version, where its runs came from
(the results store, the user's run cache, or trained now), re-run command."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shlex
import subprocess
from pathlib import Path
from typing import Any, Iterable

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
            ["git", "describe", "--always", "--dirty"], capture_output=True, text=True, check=True,
            cwd=Path(__file__).resolve().parent,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        from .. import __version__

        return f"geocont {__version__}"


def run_sources(runs: Iterable[Any]) -> list[tuple[str, str, str]]:
    """``(kind/key, label, source)`` of each run configuration (source: a key of :data:`SOURCES`), looked up
    now: in the user's run cache, else in the results store, else it will be trained."""
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
        source = ("cache" if cache.has_entry(job.kind, key, include_store=False)
                  else "store" if store.has(job.kind, key) else "trained")
        sources.setdefault(store.entry_name(job.kind, key), (store.entry_name(job.kind, key), job.label, source))
    return list(sources.values())


def _store_text() -> str:
    roots = store.store_roots()
    if not roots:
        return "no results store is read" + (f" (`{store.STORE_ENV}={store.STORE_OFF}`)"
                                             if store.store_setting() == store.STORE_OFF else "")
    checkout = store.checkout_root()
    texts = []
    for root in roots:
        shown = root.relative_to(checkout) if checkout and root.is_relative_to(checkout) else root
        revisions = store.revisions(root)
        held = "; ".join(store.revision_text(dict(numerics_revision=r[0], training_code_hash=r[1]))
                         + ("" if r[0] == cache.NUMERICS_REVISION else " (not this code's numerics revision)")
                         for r in revisions) or "empty"
        texts.append(f"`{shown}` ({held})")
    return "results store " + ", ".join(texts)


def runs_markdown(sources: list[tuple[str, str, str]]) -> tuple[str, str]:
    """The provenance row "runs" (how many runs came from where) and, where they came from more than one
    place, a collapsed list naming each run that did not come from the results store."""
    counts = {source: sum(s == source for _, _, s in sources) for source in SOURCES}
    row = (f"{len(sources)} listed, as looked up when the chapter started (runs it chooses from their results "
           "while it runs are not counted): "
           + ", ".join(f"{counts[source]} {words}" for source, words in SOURCES.items())
           + f"; {_store_text()}")
    if counts["store"] == 0 or counts["store"] == len(sources):
        return row, ""
    lines = "\n".join(f"- `{name}` {label}: {SOURCES[source]}" for name, label, source in sources if source != "store")
    return row, (f"````{{admonition}} The runs that did not come from the results store\n:class: dropdown\n\n"
                 f"{lines}\n````\n\n")


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


def provenance_markdown(*, notebook: str, scale: str, data: str, seeds, model: str, training: str,
                        overrides: dict | None = None, runs: Iterable[Any] | None = None) -> str:
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
        + (f"| runs | {runs_row} |\n" if runs_row else "") +
        f"| hardware | {hardware()} |\n"
        f"| executor | {executor_description()} (`--executor` of `python -m geocont.book`, or `$GEOCONT_EXECUTOR`) |\n"
        f"| software | torch {torch.__version__}, code {code_version()} |\n"
        f"| executed | {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M UTC} |\n\n"
        + runs_list + rerun_box(notebook, scale, overrides)
    )

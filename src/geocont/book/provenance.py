"""What produced a chapter: scale, data, seeds, hardware, executor, code version, re-run command."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shlex
import subprocess
from pathlib import Path

import torch

from ..sweeps import executor_description


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
                        overrides: dict | None = None) -> str:
    """A Markdown block stating what produced the chapter, then the "Re-run this chapter" box."""
    seeds = list(seeds)
    changed = ", ".join(f"{k}={v}" for k, v in (overrides or {}).items()) or "none"
    return (
        f"| | |\n|---|---|\n"
        f"| scale | `{scale}` (parameter overrides: {changed}) |\n"
        f"| data | {data} |\n"
        f"| seeds | {len(seeds)}: {', '.join(map(str, seeds))} |\n"
        f"| model | {model} |\n"
        f"| training | {training} |\n"
        f"| hardware | {hardware()} |\n"
        f"| executor | {executor_description()} (`--executor` of `python -m geocont.book`, or `$GEOCONT_EXECUTOR`) |\n"
        f"| software | torch {torch.__version__}, code {code_version()} |\n"
        f"| executed | {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M UTC} |\n\n"
        + rerun_box(notebook, scale, overrides)
    )

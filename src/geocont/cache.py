"""Results cached by their full configuration, so unchanged re-runs cost no training.

Each entry lives in ``<cache>/<kind>/<key>/`` with ``config.json`` (what produced it),
``table.parquet`` and optional artifacts (e.g. a trained model's ``model.safetensors``). The key hashes the kind, :data:`SCHEMA_VERSION` and the whole
configuration. Entries are written to a temporary folder and renamed into place, so an
interrupted run leaves no half-written entry; an unreadable entry is discarded and
recomputed, never half-read.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pandas as pd

#: Bump when the meaning or layout of cached tables changes; old entries are then ignored.
SCHEMA_VERSION = 1


def cache_root() -> Path:
    """``$GEOCONT_CACHE_DIR``, or ``~/.cache/geocont/runs``."""
    return Path(os.environ.get("GEOCONT_CACHE_DIR", Path.home() / ".cache" / "geocont" / "runs"))


def cache_key(kind: str, config: dict[str, Any]) -> str:
    """Stable hash of ``kind``, the schema version and the configuration."""
    payload = json.dumps({"kind": kind, "schema": SCHEMA_VERSION, "config": config}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def entry_path(kind: str, config: dict[str, Any]) -> Path:
    return cache_root() / kind / cache_key(kind, config)


def load(kind: str, config: dict[str, Any], require_metrics: Iterable[str] = ()) -> pd.DataFrame | None:
    """The cached table for this configuration, or None (a corrupt entry is removed).

    An entry recorded before one of ``require_metrics`` existed is stale for the caller
    that needs it: None is returned (with a warning), and the caller recomputes it.
    """
    path = entry_path(kind, config)
    table_file = path / "table.parquet"
    if not table_file.exists():
        return None
    try:
        table = pd.read_parquet(table_file)
    except Exception as error:  # noqa: BLE001 - any unreadable entry is recomputed
        warnings.warn(f"discarding unreadable cache entry {path} ({error}); recomputing", stacklevel=2)
        shutil.rmtree(path, ignore_errors=True)
        return None
    required = set(require_metrics)
    missing = sorted(required - set(table["metric"].unique())) if required else []
    if missing:
        warnings.warn(f"cache entry {path} predates the metric(s) {', '.join(missing)}; recomputing", stacklevel=2)
        return None
    return table


def artifact_path(kind: str, config: dict[str, Any], name: str) -> Path | None:
    """Path of an artifact stored with an entry, or None if the entry or the artifact is missing."""
    path = entry_path(kind, config) / name
    return path if path.exists() and (path.parent / "table.parquet").exists() else None


def store(
    kind: str,
    config: dict[str, Any],
    table: pd.DataFrame,
    artifacts: Mapping[str, Callable[[Path], None]] | None = None,
) -> Path:
    """Write an entry atomically (temporary folder, then rename).

    ``artifacts`` maps a file name to a function that writes that file at the given path
    (e.g. ``{"model.safetensors": lambda p: save_file(state, p)}``).
    """
    path = entry_path(kind, config)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
    try:
        (staging / "config.json").write_text(
            json.dumps({"kind": kind, "schema": SCHEMA_VERSION, "config": config}, indent=2, default=str)
        )
        table.to_parquet(staging / "table.parquet")
        for name, write in (artifacts or {}).items():
            write(staging / name)
        if path.exists():
            shutil.rmtree(path)
        staging.rename(path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path


def cached(kind: str, config: dict[str, Any], compute: Callable[[], pd.DataFrame],
           require_metrics: Iterable[str] = ()) -> pd.DataFrame:
    """Load the table for ``config`` (holding ``require_metrics``) or compute and store it."""
    table = load(kind, config, require_metrics)
    if table is None:
        table = compute()
        store(kind, config, table)
    return table

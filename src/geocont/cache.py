"""Results cached by their full configuration, so unchanged re-runs cost no training.

One entry per key (:func:`geocont.keys.cache_key`): ``<cache>/<kind>/<key>/`` holds a ``CURRENT`` pointer to an
immutable version (``table.parquet``, artifacts, ``config.json``), and a ``CLAIM`` while a process computes the
key. :func:`cached` loads the entry, or claims the key, computes it and saves it (:func:`save`). The workers of a sweep
(:mod:`geocont.sweeps`) meet here, on one machine or over shared storage, so every step is safe under concurrent
writers and readers. Where the cache has no entry, :func:`load` falls back to the read-only results store
(:mod:`geocont.store`). docs/design.md ("The run cache") gives the design: atomic saves, readers, claims,
leftovers, the read log, shared storage.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import shutil
import socket
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from . import store
from .folders import path_encoding_problem

# the schema, the numerics revision and the key, shared with the results store (re-exported here)
from .keys import NUMERICS_REVISION, SCHEMA_VERSION, cache_key  # noqa: F401
from .tables import current_metric_names

#: A superseded version younger than this is left in place (another writer may be about to point to it).
GRACE_SECONDS = 120.0
#: A staging folder or claim whose owner cannot be checked and that is older than this is abandoned.
STALE_SECONDS = 600.0
#: How often a claim's holder refreshes the claim's mtime.
HEARTBEAT_SECONDS = 10.0

TABLE = "table.parquet"
MANIFEST = "config.json"
POINTER = "CURRENT"
CLAIM = "CLAIM"


@dataclass
class Computed:
    """What a computation may return instead of a bare table: the table and its artifacts.

    ``artifacts`` maps a file name to a function that writes that file at the given path
    (e.g. ``{"model.safetensors": lambda p: save_file(state, p)}``).
    """

    table: pd.DataFrame
    artifacts: Mapping[str, Callable[[Path], None]] = field(default_factory=dict)


def cache_root() -> Path:
    """``$GEOCONT_CACHE_DIR``, or ``~/.cache/geocont/runs`` (where it is unset or empty)."""
    return Path(os.environ.get("GEOCONT_CACHE_DIR") or Path.home() / ".cache" / "geocont" / "runs")


def cache_root_problem() -> str | None:
    """Why :func:`cache_root` cannot hold the cache at all (it, or a folder it would be created in, is a file), or
    None. A cache that exists but cannot be written is no problem here: its stores warn and the results are still
    returned."""
    root = cache_root()
    source = "GEOCONT_CACHE_DIR" if os.environ.get("GEOCONT_CACHE_DIR") else "the default run cache"
    problem = path_encoding_problem(root, f"the run cache ({source})", "GEOCONT_CACHE_DIR")
    if problem:
        return problem
    existing = root
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.is_dir():
        return None
    where = "is a file" if existing == root else f"lies under {existing}, which is a file"
    return (
        f"the run cache {root} ({source}) {where}, not a folder: every run would be trained again and not "
        "cached; point GEOCONT_CACHE_DIR at a folder"
    )


READ_LOG_ENV = "GEOCONT_READ_LOG"


def log_read(kind: str, config: dict[str, Any]) -> None:
    """Append ``kind/key`` to ``$GEOCONT_READ_LOG`` where it is set (one short write: lines of concurrent
    workers do not interleave)."""
    path = os.environ.get(READ_LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{kind}/{cache_key(kind, config)}\n")


def has_entry(kind: str, config: dict[str, Any], include_store: bool = True) -> bool:
    """Whether the key has an entry (its pointer exists; nothing is read or checked), in the cache or
    (``include_store``) the results store."""
    if _current(key_path(kind, config)) is not None:
        return True
    return include_store and store.has(kind, config)


def manifest(kind: str, config: dict[str, Any]) -> dict[str, Any] | None:
    """The manifest (``config.json``) of the key's current version in the cache, or None."""
    folder = key_path(kind, config)
    version = _current(folder)
    if version is None:
        return None
    try:
        return _read_manifest(folder, version)
    except (OSError, ValueError):
        return None


def entry_config(kind: str, key: str) -> dict[str, Any] | None:
    """The configuration of the cache's current entry ``kind/key`` (from its manifest), or None."""
    folder = cache_root() / kind / key
    version = _current(folder)
    try:
        return _read_manifest(folder, version)["config"] if version else None
    except (OSError, ValueError, KeyError):
        return None


def key_path(kind: str, config: dict[str, Any]) -> Path:
    """The folder holding every version, the pointer and the claim of one key."""
    return cache_root() / kind / cache_key(kind, config)


def entry_path(kind: str, config: dict[str, Any]) -> Path:
    """Folder of the current version of the entry (``table.parquet``, ``config.json``, artifacts),
    or the key's folder when nothing is stored."""
    folder = key_path(kind, config)
    version = _current(folder)
    return folder / version if version else folder


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _current(folder: Path) -> str | None:
    try:
        name = (folder / POINTER).read_text().strip()
    except OSError:
        return None
    return name or None


def _remove(path: Path) -> None:
    """Remove a file or a folder tree, ignoring what is already gone."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def _discard(folder: Path, version: str, reason: str) -> None:
    """Move one corrupt version aside and remove it (never the pointer: a newer version may be arriving)."""
    warnings.warn(f"discarding unreadable cache entry {folder / version} ({reason}); recomputing", stacklevel=3)
    aside = folder / f".discarded-{uuid.uuid4().hex}"
    try:
        os.rename(folder / version, aside)
    except OSError:
        return  # already replaced or removed by someone else
    shutil.rmtree(aside, ignore_errors=True)


def _read_manifest(folder: Path, version: str) -> dict[str, Any]:
    return json.loads((folder / version / MANIFEST).read_text())


def load(
    kind: str,
    config: dict[str, Any],
    require_metrics: Iterable[str] = (),
    *,
    require_artifacts: Iterable[str] = (),
    warn: bool = True,
    include_store: bool = True,
) -> pd.DataFrame | None:
    """The cached table for this configuration, else (``include_store``) the results store's, or None.

    The table's checksum is verified; a corrupt version is discarded (with a warning) and
    None returned. An entry recorded before one of ``require_metrics`` existed, or without
    one of ``require_artifacts``, is stale for the caller that needs it: None is returned
    (with a warning unless ``warn=False``), and the caller recomputes it. The store is read
    only where the cache gives no table (:func:`geocont.store.lookup`).
    """
    require_metrics, require_artifacts = tuple(require_metrics), tuple(require_artifacts)
    table = _load_cached(kind, config, require_metrics, require_artifacts, warn)
    if table is None and include_store:
        table = store.lookup(kind, config, require_metrics, require_artifacts)
    if table is not None:
        log_read(kind, config)
    return table


def _load_cached(
    kind: str, config: dict[str, Any], require_metrics: tuple[str, ...], require_artifacts: tuple[str, ...], warn: bool
) -> pd.DataFrame | None:
    """:func:`load` from the cache alone."""
    folder = key_path(kind, config)
    for _ in range(10):  # a concurrent replacement can remove a version under us; follow the pointer again
        version = _current(folder)
        if version is None:
            return None
        try:
            manifest = _read_manifest(folder, version)
            data = (folder / version / TABLE).read_bytes()
        except FileNotFoundError:
            continue
        except OSError as error:  # e.g. no permission: the entry may be fine, so it is left alone
            warnings.warn(f"cannot read the cache entry {folder / version} ({error}); recomputing", stacklevel=2)
            return None
        except ValueError as error:  # a manifest that is not JSON
            _discard(folder, version, str(error))
            return None
        expected = manifest.get("files", {}).get(TABLE)
        if _sha256(data) != expected:
            _discard(folder, version, f"checksum mismatch of {TABLE}")
            return None
        try:
            table = pd.read_parquet(io.BytesIO(data))
        except Exception as error:  # noqa: BLE001 - bytes that match their checksum but do not parse
            _discard(folder, version, str(error))
            return None
        if "metric" in table:
            table = current_metric_names(table)
        required = set(require_metrics)
        missing = sorted(required - set(table["metric"].unique())) if required else []
        if missing:
            if warn:
                warnings.warn(
                    f"cache entry {folder / version} predates the metric(s) {', '.join(missing)}; recomputing",
                    stacklevel=2,
                )
            return None
        absent = sorted(set(require_artifacts) - set(manifest["files"]))
        if absent:
            if warn:
                warnings.warn(f"cache entry {folder / version} has no {', '.join(absent)}; recomputing", stacklevel=2)
            return None
        return table
    return None


def artifact_path(kind: str, config: dict[str, Any], name: str, include_store: bool = True) -> Path | None:
    """Path of an artifact stored with an entry, after checking its sha256, or None if the
    entry or the artifact is missing (a corrupt one is discarded with a warning). Where the cache
    has none, the results store's (``include_store``, :func:`geocont.store.artifact`)."""
    path = _cached_artifact(kind, config, name)
    if path is not None or not include_store:
        return path
    return store.artifact(kind, config, name)


def _cached_artifact(kind: str, config: dict[str, Any], name: str) -> Path | None:
    folder = key_path(kind, config)
    version = _current(folder)
    if version is None:
        return None
    try:
        expected = _read_manifest(folder, version).get("files", {}).get(name)
        if expected is None:
            return None
        path = folder / version / name
        actual = _file_sha256(path)
    except FileNotFoundError:
        return None
    except OSError as error:  # e.g. no permission: left alone
        warnings.warn(f"cannot read {folder / version / name} ({error})", stacklevel=2)
        return None
    except ValueError as error:
        _discard(folder, version, str(error))
        return None
    if actual != expected:
        _discard(folder, version, f"checksum mismatch of {name}")
        return None
    return path


def _owner() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "time": time.time(), "start": process_start(os.getpid())}


_BOOT_TIME: list[float] = []


def process_start(pid: int) -> float | None:
    """When process ``pid`` of this host started, in seconds since the epoch (Linux ``/proc``), or None where
    that cannot be read. Two readings of one process agree to well under a second."""
    try:
        if not _BOOT_TIME:
            _BOOT_TIME.append(
                next(
                    float(line.split()[1])
                    for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime ")
                )
            )
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat[stat.rindex(")") + 2 :].split()[19])  # field 22, starttime: clock ticks after boot
        return _BOOT_TIME[0] + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def owner_gone(owner: Mapping[str, Any]) -> bool:
    """Whether the process named by an owner record of this host (a claim, a staging folder) is gone: no
    process has its pid, or the process that has it started after the record's process did (its ``start``) or,
    for a record without one, after the record was written (``time``): the pid was reused by another program,
    which never removes the record."""
    pid = int(owner["pid"])
    if not pid_alive(pid):
        return True
    started = process_start(pid)
    if started is None:
        return False
    recorded = owner.get("start")
    if isinstance(recorded, (int, float)):
        return abs(started - recorded) > 1.0
    written = owner.get("time")
    return isinstance(written, (int, float)) and started > written + 1.0


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _abandoned(owner_file: Path, fallback: Path) -> bool:
    """Whether a staging folder belongs to a process that is gone.

    Same host: the owner's PID is checked. Another host (or no readable owner): the
    file's age is compared with :data:`STALE_SECONDS`.
    """
    try:
        owner = json.loads(owner_file.read_text())
        if owner.get("host") == socket.gethostname():
            return owner_gone(owner)
        age = time.time() - owner_file.stat().st_mtime
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        try:
            age = time.time() - fallback.stat().st_mtime
        except OSError:
            return False
    return age > STALE_SECONDS


def _claim_stale(path: Path) -> bool:
    """Whether the claim at ``path`` can be broken: its owner is unnamed (no pid and host: a claim
    is always created with them, so this one was left half-written), gone (same host, :func:`owner_gone`:
    a pid now held by another program included), or its heartbeat is older than :data:`STALE_SECONDS`.
    False if the claim vanished meanwhile."""
    try:
        text = path.read_text()
        mtime = path.stat().st_mtime
    except OSError:
        return False
    try:
        owner = json.loads(text)
        host, _ = owner["host"], int(owner["pid"])
        if host == socket.gethostname() and owner_gone(owner):
            return True
    except (ValueError, KeyError, TypeError, AttributeError):
        return True
    return time.time() - mtime > STALE_SECONDS


def claim_holder(kind: str, config: dict[str, Any]) -> dict[str, Any] | None:
    """The owner of the key's claim where a live process holds it (one a waiter would wait for), with
    ``heartbeat_age`` (seconds since its last heartbeat) added; None where there is no such claim."""
    path = key_path(kind, config) / CLAIM
    if not path.exists() or _claim_stale(path):
        return None
    owner = _claim_owner(path)
    try:
        return {**owner, "heartbeat_age": max(0.0, time.time() - path.stat().st_mtime)} if owner else None
    except OSError:
        return None


def holder_text(owner: Mapping[str, Any]) -> str:
    """Who holds a claim and how long a waiter waits for it, in words (:func:`claim_holder`'s record)."""
    here = owner.get("host") == socket.gethostname()
    who = f"pid {owner.get('pid')} on {'this host' if here else 'host ' + str(owner.get('host'))}"
    since = owner.get("time")
    age = f", claimed {time.time() - since:.0f} s ago" if isinstance(since, (int, float)) else ""
    left = max(0.0, STALE_SECONDS - owner.get("heartbeat_age", 0.0))
    return (
        f"{who}{age}, heartbeat {owner.get('heartbeat_age', 0.0):.0f} s ago; waiting until it stores the run, "
        f"or takes it over once the heartbeat has stopped for {STALE_SECONDS:.0f} s (in {left:.0f} s if it "
        "has stopped now)"
    )


def _clean_key(folder: Path) -> None:
    """Remove what killed processes left in one key's folder, and superseded versions past their grace."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    current = _current(folder)
    now = time.time()
    for name in names:
        path = folder / name
        try:
            if name.startswith(".staging-"):
                if _abandoned(path / "owner.json", path):
                    shutil.rmtree(path, ignore_errors=True)
            elif name.startswith(".discarded-"):
                _remove(path)
            elif name.startswith(".claim-"):
                if now - path.stat().st_mtime > GRACE_SECONDS:
                    path.unlink(missing_ok=True)
            elif name.startswith(f".{POINTER}-"):
                if now - path.stat().st_mtime > GRACE_SECONDS:
                    path.unlink(missing_ok=True)
            elif name not in (POINTER, CLAIM) and name != current and current is not None:
                if path.is_dir() and now - path.stat().st_mtime > GRACE_SECONDS:
                    aside = folder / f".discarded-{uuid.uuid4().hex}"
                    os.rename(path, aside)
                    shutil.rmtree(aside, ignore_errors=True)
        except OSError:
            continue  # another process got there first


def clean_stale(kinds: Iterable[str] | None = None) -> None:
    """Remove leftovers of killed processes in every entry of ``kinds`` (default: all kinds)."""
    root = cache_root()
    try:
        chosen = list(kinds) if kinds is not None else [p.name for p in root.iterdir() if p.is_dir()]
    except OSError:
        return
    for kind in chosen:
        try:
            folders = [p for p in (root / kind).iterdir() if p.is_dir()]
        except OSError:
            continue
        for folder in folders:
            _clean_key(folder)


def save(
    kind: str,
    config: dict[str, Any],
    table: pd.DataFrame,
    artifacts: Mapping[str, Callable[[Path], None]] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> Path | None:
    """Publish a new version of the entry atomically; the folder of that version, or None.

    ``artifacts`` maps a file name to a function that writes that file at the given path
    (e.g. ``{"model.safetensors": lambda p: save_file(state, p)}``); ``provenance`` (where and
    by which code the run was computed, :func:`geocont.store.run_provenance`) goes into the
    manifest as ``run``. Concurrent stores of
    one key all succeed; the last to switch the pointer wins. A store that fails (read-only
    or full disk, a failing artifact writer) warns, leaves nothing behind and returns None.
    """
    folder = key_path(kind, config)
    version = f"{time.time_ns():020d}-{uuid.uuid4().hex[:12]}"
    staging = folder / f".staging-{version}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _clean_key(folder)
        staging.mkdir()
        _write_version(staging, kind=kind, config=config, table=table, artifacts=artifacts, provenance=provenance)
        os.rename(staging, folder / version)
        _point_to(folder, version)
    except Exception as error:  # noqa: BLE001 - the computed table must survive any storage failure
        shutil.rmtree(staging, ignore_errors=True)
        warnings.warn(
            f"could not store the cache entry {folder} ({type(error).__name__}: {error}); "
            "the result is returned but not cached",
            stacklevel=2,
        )
        return None
    _clean_key(folder)
    return folder / version


def _write_version(
    staging: Path,
    *,
    kind: str,
    config: dict[str, Any],
    table: pd.DataFrame,
    artifacts: Mapping[str, Callable[[Path], None]] | None,
    provenance: Mapping[str, Any] | None,
) -> None:
    """Write a version's files into ``staging``: the table, the artifacts and the manifest (with the
    files' checksums), marked as being written (``owner.json``) until they are all there."""
    (staging / "owner.json").write_text(json.dumps(_owner()))
    table.to_parquet(staging / TABLE)
    for name, write in (artifacts or {}).items():
        write(staging / name)
    files = {name: _file_sha256(staging / name) for name in [TABLE, *(artifacts or {})]}
    (staging / MANIFEST).write_text(
        json.dumps(
            {
                "kind": kind,
                "schema": SCHEMA_VERSION,
                "config": config,
                "files": files,
                "written_by": _owner(),
                **({"run": dict(provenance)} if provenance else {}),
            },
            indent=2,
            default=str,
        )
    )
    (staging / "owner.json").unlink()


def _point_to(folder: Path, version: str) -> None:
    """Switch the key's pointer to ``version`` atomically (written aside, then renamed over it)."""
    pointer = folder / f".{POINTER}-{version}"
    pointer.write_text(version + "\n")
    os.replace(pointer, folder / POINTER)


def _claim_owner(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


#: Errors of ``os.link`` on file systems without hard links (some FUSE and SMB mounts).
_NO_HARD_LINKS = (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS)


def _create_claim_exclusive(path: Path, owner: dict[str, Any]) -> bool | None:
    """:func:`_create_claim` without hard links: ``O_EXCL``, then the owner; a claim whose owner
    cannot be written is removed again. A reader may see it ownerless for an instant, and break it:
    the cost is a duplicated computation."""
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    except OSError:
        return None
    try:
        with os.fdopen(descriptor, "w") as handle:
            json.dump(owner, handle)
    except OSError:
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    return True


def _create_claim(folder: Path, path: Path, owner: dict[str, Any]) -> bool | None:
    """Create the claim ``path`` holding ``owner``, whole or not at all: True if created, False if
    another claim exists, None if it cannot be written (an unwritable or full cache)."""
    private = folder / f".claim-{owner['token']}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(private, "w") as handle:
            json.dump(owner, handle)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(private, path)
        except OSError as error:
            if error.errno not in _NO_HARD_LINKS:
                raise
            return _create_claim_exclusive(path, owner)
        return True
    except FileExistsError:
        return False
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            private.unlink()


@contextlib.contextmanager
def claim(kind: str, config: dict[str, Any], poll: float = 0.2, announce: bool = True) -> Iterator[bool]:
    """Hold the key's claim while the body runs; wait while another live process holds it.

    Yields True when the claim is held, False when it cannot be created at all (an
    unwritable or full cache: the body then runs unclaimed, and its store will warn). The
    claim is removed when the body ends, however it ends. ``announce``: say once, on stderr, which
    holder it waits for and for how long (a sweep's driver says it for its workers, which pass False).
    """
    folder = key_path(kind, config)
    token = uuid.uuid4().hex
    created = _wait_for_claim(kind, config, folder=folder, token=token, poll=poll, announce=announce)
    if created is None:
        yield False
        return
    with _held(folder / CLAIM, token):
        yield True


def _wait_for_claim(
    kind: str, config: dict[str, Any], *, folder: Path, token: str, poll: float, announce: bool
) -> bool | None:
    """Create the claim in the key's ``folder`` under ``token``, waiting while a live process holds it and
    discarding a stale one; True once created, None if it cannot be created at all. ``announce``: say once,
    on stderr, which holder it waits for."""
    path = folder / CLAIM
    while True:
        created = _create_claim(folder, path, {**_owner(), "token": token})
        if created is not False:
            return created
        if _claim_stale(path):
            with contextlib.suppress(OSError):
                os.rename(path, folder / f".discarded-{uuid.uuid4().hex}")
            continue
        if announce:
            holder = claim_holder(kind, config)
            if holder is not None:
                print(
                    f"waiting for the {kind} run {folder.name}, computed by {holder_text(holder)}",
                    file=sys.stderr,
                    flush=True,
                )
                announce = False
        time.sleep(poll)
        poll = min(2.0, poll * 1.5)


@contextlib.contextmanager
def _held(path: Path, token: str) -> Iterator[None]:
    """Touch the claim at ``path`` every :data:`HEARTBEAT_SECONDS` from a thread while the body runs; then
    stop and remove the claim if it is still the one created under ``token``."""
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(HEARTBEAT_SECONDS):
            with contextlib.suppress(OSError):
                os.utime(path)

    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    try:
        yield
    finally:
        stop.set()
        beat.join()
        _release_claim(path, token)


def _release_claim(path: Path, token: str) -> None:
    """Remove the claim at ``path`` if it is still the one created under ``token``."""
    owner = _claim_owner(path)
    if owner is not None and owner.get("token") == token:
        with contextlib.suppress(OSError):
            path.unlink()


def ensure(
    kind: str,
    config: dict[str, Any],
    compute: Callable[[], pd.DataFrame | Computed],
    require_metrics: Iterable[str] = (),
    *,
    require_artifacts: Iterable[str] = (),
    warn: bool = True,
    announce: bool = True,
) -> tuple[pd.DataFrame, bool]:
    """:func:`cached`, also saying whether the table is now in the cache (False: its store failed).

    ``warn=False``: no warning about a stale entry (the caller has warned already); ``announce=False``: no
    line about a claim it waits for (:func:`claim`; the caller has said it). In strict mode
    (:func:`geocont.store.forbid_training`) a run of a stored kind is never computed. The entry records
    the computation's wall seconds and provenance (:func:`geocont.store.run_provenance`).
    """
    require_metrics, require_artifacts = tuple(require_metrics), tuple(require_artifacts)
    table = load(kind, config, require_metrics, require_artifacts=require_artifacts, warn=warn)
    if table is not None:
        return table, True
    with claim(kind, config, announce=announce):
        table = load(kind, config, require_metrics, require_artifacts=require_artifacts, warn=False)
        if table is not None:  # another process computed it while we waited for the claim
            return table, True
        store.forbid_training(kind, config, cache_dir=cache_root())
        started = time.perf_counter()
        result = compute()
        wall_seconds = time.perf_counter() - started
        computed = result if isinstance(result, Computed) else Computed(result)
        stored = (
            save(
                kind,
                config,
                computed.table,
                artifacts=computed.artifacts,
                provenance=store.run_provenance(wall_seconds),
            )
            is not None
        )
        log_read(kind, config)
        return computed.table, stored


def cached(
    kind: str,
    config: dict[str, Any],
    compute: Callable[[], pd.DataFrame | Computed],
    require_metrics: Iterable[str] = (),
    *,
    require_artifacts: Iterable[str] = (),
) -> pd.DataFrame:
    """Load the table for ``config`` (holding ``require_metrics`` and ``require_artifacts``), or
    claim the key, compute and store it.

    ``compute`` returns the table, or a :class:`Computed` with artifacts to store beside it.
    While another process holds the key's claim this waits, then loads that process's entry.
    """
    return ensure(kind, config, compute, require_metrics, require_artifacts=require_artifacts)[0]

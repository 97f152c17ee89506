"""The results store: finished runs committed with the repository, read after the user's run cache.

One entry per run of a scale's book, ``<root>/<kind>/<key>/`` (``results/<scale>`` of the checkout, or
``$GEOCONT_STORE``): ``entry.json``, ``table.parquet`` and, where a chapter reads them, the trained weights,
keyed exactly as the run cache keys the run. Nothing writes to it but ``python -m geocont.book store``
(:func:`write_entry`); :func:`lookup` (called by :func:`geocont.cache.load` after the cache misses) reads an
entry only after its checksum matches. This module reads no cache. docs/design.md ("The results store") gives
the layout, the lookup, the revisions and the environment variables.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import io
import json
import os
import platform
import shutil
import time
import tokenize
import uuid
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .keys import NUMERICS_REVISION, SCHEMA_VERSION, cache_key
from .tables import current_metric_names

STORE_ENV = "GEOCONT_STORE"
STORE_ONLY_ENV = "GEOCONT_STORE_ONLY"
CHAPTER_ENV = "GEOCONT_CHAPTER"
#: ``GEOCONT_STORE`` set to this reads no store at all.
STORE_OFF = "off"

#: The cache kinds of training runs: the book's run set (:func:`geocont.book.runs.book_run_set`) lists them, and
#: ``python -m geocont.book store`` trains them into the store.
STORED_KINDS = ("mlp", "lm")

#: The cache kinds of analyses of trained and pretrained models and of corpora (weight sharing and pruning, the
#: checkpoint analyzer, a corpus's census of tokens by source): no run set lists them; ``store`` captures the ones a chapter reads by executing it once
#: (:func:`geocont.book.results.capture_analyses`), so that the book renders without computing them.
ANALYSIS_KINDS = ("sharing", "pretrained", "census")

#: The kinds strict mode never computes.
STRICT_KINDS = STORED_KINDS + ANALYSIS_KINDS

#: The folder of the checkout that holds one store per scale (``results/cpu``, ...).
RESULTS = "results"
ENTRY = "entry.json"
TABLE = "table.parquet"
#: Bump when the layout of a store entry changes.
STORE_FORMAT = 1
#: zstd level of the stored tables (19: about 1 % smaller than level 3 on a run table, written once).
ZSTD_LEVEL = 19

#: The source files (under ``src/geocont``) that determine the numbers a run produces for a given
#: configuration: models, data, optimizers, the training loop, the recorder and its metrics, the table
#: format. Their hash is each entry's provenance (which code trained it), not its identity. Not: the cache and the executors (:mod:`geocont.sweeps`: the thread count they set is in the
#: key and the provenance), nor error messages (:mod:`geocont.extras`). tests/test_store.py checks that
#: this is every module the training code imports.
TRAINING_CODE = (
    "balance.py",
    "channel.py",
    "config.py",
    "corpora.py",
    "corpus_files.py",
    "data.py",
    "dataset_names.py",
    "kjv.py",
    "layouts.py",
    "lm.py",
    "metrics.py",
    "mlp.py",
    "optimizers.py",
    "pod_text.py",
    "recorder.py",
    "rst_text.py",
    "tables.py",
    "text.py",
    "training.py",
    "transformer.py",
)

#: The /proc/cpuinfo flags that decide which kernels torch runs (two machines that differ in one may
#: give an Adam run different last digits).
SIMD_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)


class StoreError(RuntimeError):
    """The store cannot be used as it is (mixed revisions, a write that would mix them); one line."""


class RunMissing(RuntimeError):
    """Strict mode: a run is in neither the run cache nor the results store; one line."""


# --------------------------------------------------------------------------- where the store is


def is_checkout(folder: Path) -> bool:
    """Whether ``folder`` is a geocont repository checkout (``pyproject.toml``, ``_toc.yml`` and ``src/geocont``)."""
    return all((folder / name).exists() for name in ("pyproject.toml", "_toc.yml", "src/geocont"))


def checkout_root() -> Path | None:
    """The geocont checkout the working directory lies in (the book being built: an editable install shared by
    two clones reads the store of the clone it is run in), else the checkout this package was imported from, or
    None (an installed package run outside any checkout)."""
    try:
        here = Path.cwd().resolve()
    except OSError:  # a working directory that was removed
        here = None
    for folder in (here, *here.parents) if here is not None else ():
        if is_checkout(folder):
            return folder
    root = Path(__file__).resolve().parents[2]
    return root if is_checkout(root) else None


def store_setting() -> str:
    return os.environ.get(STORE_ENV, "").strip()


def store_roots() -> list[Path]:
    """Every store root a lookup reads: ``$GEOCONT_STORE`` (none if ``off``), else each ``results/<scale>``
    folder of the checkout."""
    setting = store_setting()
    if setting == STORE_OFF:
        return []
    if setting:
        return [Path(setting)]
    checkout = checkout_root()
    if checkout is None or not (checkout / RESULTS).is_dir():
        return []
    return sorted(path for path in (checkout / RESULTS).iterdir() if path.is_dir() and not path.name.startswith("."))


def store_root(scale: str) -> Path:
    """The store of ``scale``'s book, as written by ``python -m geocont.book store``: ``$GEOCONT_STORE``, else
    ``results/<scale>`` of the checkout. One-line :class:`StoreError` where there is none."""
    setting = store_setting()
    if setting == STORE_OFF:
        raise StoreError(f"{STORE_ENV}=off: no results store is used; unset it to use results/{scale}")
    if setting:
        root = Path(setting)
        held = store_scale(root)
        if held is not None and held != scale:
            raise StoreError(
                f"the results store {root} ({STORE_ENV}) holds the {held} scale's runs, not {scale}'s: point "
                f"{STORE_ENV} at a store of scale {scale} (or unset it to use results/{scale}); nothing was done"
            )
        return root
    checkout = checkout_root()
    if checkout is None:
        raise StoreError(
            f"geocont is not imported from a repository checkout, so there is no results/{scale}; "
            f"set {STORE_ENV} to a store folder"
        )
    return checkout / RESULTS / scale


#: The file in a store's root that records the scale of its runs (written by ``store`` where it is missing).
SCALE_FILE = "scale.json"


def store_scale(root: Path) -> str | None:
    """The scale whose runs a store holds: its :data:`SCALE_FILE`, else the name of a checkout's ``results/<scale>``
    folder, else None (a new store). A scale file that cannot be read is a one-line :class:`StoreError`."""
    from .scales import SCALES

    marker = root / SCALE_FILE
    if marker.exists():
        try:
            held = json.loads(marker.read_text())["scale"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise StoreError(f"the store's scale file {marker} cannot be read ({error}); remove it or fix it") from None
        return str(held)
    return root.name if root.parent.name == RESULTS and root.name in SCALES else None


def record_scale(root: Path, scale: str) -> None:
    """Write the store's :data:`SCALE_FILE` where it has none (``store`` does, before it trains)."""
    marker = root / SCALE_FILE
    if not marker.exists():
        root.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"scale": scale}) + "\n")


#: The spellings of ``GEOCONT_STORE_ONLY`` (any case) that turn strict mode off and on.
FALSE_WORDS = ("", "0", "false", "no", "off")
TRUE_WORDS = ("1", "true", "yes", "on")


def strict() -> bool:
    """Whether strict mode is on (``GEOCONT_STORE_ONLY`` one of :data:`TRUE_WORDS`); one-line :class:`StoreError`
    for a value in neither :data:`TRUE_WORDS` nor :data:`FALSE_WORDS`."""
    value = os.environ.get(STORE_ONLY_ENV, "").strip().lower()
    if value in FALSE_WORDS:
        return False
    if value in TRUE_WORDS:
        return True
    raise StoreError(
        f"{STORE_ONLY_ENV}={os.environ[STORE_ONLY_ENV]!r} is neither true ({', '.join(TRUE_WORDS)}) nor "
        f"false ({', '.join(repr(word) if not word else word for word in FALSE_WORDS)})"
    )


def store_folder_problem(root: Path, write: bool = False) -> str | None:
    """Why the store at ``root`` cannot be read (``$GEOCONT_STORE`` naming a folder that does not exist: it would
    read as an empty store) or, with ``write``, written (a real probe: a read-only mount is caught too); None
    where it can. A store to write need not exist yet: the nearest folder above it must then be writable."""
    from .folders import path_encoding_problem

    problem = path_encoding_problem(root, "the results store", STORE_ENV)
    if problem:
        return problem
    if not write:
        if store_setting() not in ("", STORE_OFF) and not root.is_dir():
            return (
                f"{STORE_ENV}={store_setting()} names no folder"
                + (" (it is a file)" if root.exists() else "")
                + ": point it at a results store, or unset it to "
                "use the checkout's results/<scale>"
            )
        return None
    from .folders import write_probe

    existing, why = write_probe(root)
    if why == "not a folder":
        return f"the results store {root} cannot be created: {existing} is a file, not a folder"
    if why is not None:
        return (
            f"the results store {root} cannot be written ({why} in {existing}): nothing "
            f"trained would be kept; make it writable, or set {STORE_ENV} to a writable folder"
        )
    return None


@contextlib.contextmanager
def environment(**values: str | None) -> Iterator[None]:
    """Set (or, with None, remove) environment variables for the body, then restore them."""
    saved = {name: os.environ.get(name) for name in values}
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# --------------------------------------------------------------------------- provenance


def _source_tokens(path: Path) -> Iterator[str]:
    """The tokens of a Python file without its comments, blank lines and docstrings: what a hash of the
    code should change with (a comment or docstring edit changes no number)."""
    source = path.read_text()
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings.add((first.value.lineno, first.value.col_offset))
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER):
            continue
        if token.type == tokenize.STRING and token.start in docstrings:
            continue
        yield (
            tokenize.tok_name[token.type]
            if token.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
            else token.string
        )


@functools.lru_cache(maxsize=1)
def training_code_hash() -> str:
    """sha256 over the code of :data:`TRAINING_CODE` (comments, blank lines and docstrings left out)."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for name in TRAINING_CODE:
        digest.update(name.encode() + b"\0" + "\x1f".join(_source_tokens(package / name)).encode() + b"\0")
    return digest.hexdigest()


def revision() -> dict[str, Any]:
    """This code's training-code revision: :data:`geocont.keys.NUMERICS_REVISION` and :func:`training_code_hash`."""
    return {"numerics_revision": NUMERICS_REVISION, "training_code_hash": training_code_hash()}


def revision_text(entry_revision: Mapping[str, Any]) -> str:
    """``revision 1, code 3fa2c9d1e0b4``."""
    code = str(entry_revision.get("training_code_hash") or "unrecorded")[:12]
    return f"revision {entry_revision.get('numerics_revision', '?')}, code {code}"


@functools.lru_cache(maxsize=1)
def cpu_description() -> dict[str, Any]:
    """The CPU model, its family/model/stepping numbers (``cpu_id``: a virtual machine often names only "AMD
    EPYC", and two CPUs with the same flags may run different LAPACK kernels), torch's kernel capability (e.g.
    ``AVX512``) and the :data:`SIMD_FLAGS` it has."""
    import torch

    model, flags, ids = platform.processor() or platform.machine(), set(), {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = (part.strip() for part in line.partition(":"))
            if name == "model name" and model in ("", platform.machine(), platform.processor()):
                model = value
            elif name in ("cpu family", "model", "stepping") and name not in ids:
                ids[name] = value
            elif name == "flags":
                flags = set(value.split())
    capability = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", lambda: "unknown")()
    return {
        "cpu_model": model,
        "cpu_id": " ".join(f"{name.split()[-1]} {value}" for name, value in ids.items()),
        "cpu_capability": capability,
        "cpu_flags": [f for f in SIMD_FLAGS if f in flags],
    }


def run_provenance(wall_seconds: float | None) -> dict[str, Any]:
    """What a run's numbers depend on besides its configuration, recorded where it was computed: the
    training-code revision, torch, the CPU, the torch thread count, and the run's wall seconds."""
    import torch

    return {
        **revision(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        **cpu_description(),
        "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "wall_seconds": None if wall_seconds is None else round(float(wall_seconds), 3),
        "host": platform.node(),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def same_platform(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two provenance records name the same torch and CPU kernels (bit-identical SGD expected)."""
    return all(a.get(name) == b.get(name) for name in ("torch", "cpu_capability", "cpu_flags", "threads"))


# --------------------------------------------------------------------------- thinning


def float32_safe(values: np.ndarray) -> bool:
    """Whether float64 ``values`` survive a float32 round trip: every NaN and +-inf where it was, every
    finite value finite, zero exactly where it was zero, and within float32 rounding (relative 2**-24)."""
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = values.astype(np.float32).astype(np.float64)
    finite = np.isfinite(values)
    if not (
        np.array_equal(np.isnan(values), np.isnan(rounded))
        and np.array_equal(finite, np.isfinite(rounded))
        and np.array_equal(values[~finite & ~np.isnan(values)], rounded[~finite & ~np.isnan(rounded)])
        and np.array_equal(values[finite] == 0, rounded[finite] == 0)
    ):
        return False
    nonzero = finite & (values != 0)
    small = np.abs(values[nonzero]) < np.finfo(np.float32).tiny  # subnormal in float32: precision lost
    return not small.any() and bool(
        np.all(np.abs(rounded[nonzero] - values[nonzero]) <= 2.0**-24 * np.abs(values[nonzero]))
    )


def thin_table(table: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The table as stored, and the dtype of its values: float32 where :func:`float32_safe` (every value
    the chapters read then survives within float32 rounding), else float64 unchanged. No metric is
    dropped: the metrics no chapter names (``grad_gap``, ``cumgrad_gap``, ``test_loss``) are 5 % of a run's
    bytes (measured on a smoke run), too little to risk a reader that finds them indirectly."""
    if "value" in table and table["value"].dtype == np.float64 and float32_safe(table["value"].to_numpy()):
        return table.assign(value=table["value"].astype(np.float32)), "float32"
    return table, str(table["value"].dtype) if "value" in table else "none"


def _table_bytes(table: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    table.reset_index(drop=True).to_parquet(buffer, compression="zstd", compression_level=ZSTD_LEVEL, index=False)
    return buffer.getvalue()


# --------------------------------------------------------------------------- reading


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def entry_folder(root: Path, kind: str, config: Mapping[str, Any]) -> Path:
    return root / kind / cache_key(kind, dict(config))


def entry_problem(folder: Path, entry: Any) -> str | None:
    """Why ``entry`` (an ``entry.json`` as read) cannot be the entry of ``folder``, or None: not a JSON object,
    its fields of the wrong type, or a kind, key or configuration that is not its folder's (an entry copied into
    another entry's folder would serve that run's table)."""
    if not isinstance(entry, dict):
        return f"has an {ENTRY} holding a JSON {type(entry).__name__}, not an object"
    wrong = [
        name
        for name, kind in (("config", dict), ("files", dict), ("provenance", dict))
        if not isinstance(entry.get(name, {}), kind)
    ]
    if wrong:
        return f"has an {ENTRY} whose {', '.join(wrong)} is not an object"
    named = f"{entry.get('kind')}/{entry.get('key')}"
    if named != f"{folder.parent.name}/{folder.name}":
        return f"has an {ENTRY} naming the run {named}, not its folder's"
    key = cache_key(folder.parent.name, dict(entry.get("config", {})))
    if key != folder.name:
        return f"has an {ENTRY} whose config is another run's (key {key}), not its folder's"
    return None


def _load_entry(folder: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(``entry.json``, None) of a sound entry, (None, why) of an unusable one (:func:`entry_problem`), (None, None)
    where the folder holds no entry."""
    try:
        entry = json.loads((folder / ENTRY).read_text())
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as error:
        return None, f"has an unreadable {ENTRY} ({error})"
    problem = entry_problem(folder, entry)
    return (None, problem) if problem else (entry, None)


def read_entry(folder: Path) -> dict[str, Any] | None:
    """An entry's ``entry.json``, or None where the folder holds no entry or an unusable one (reported, like a
    checksum failure: :func:`entry_problem`)."""
    entry, problem = _load_entry(folder)
    if problem:
        _report(folder, problem)
    return entry


def _entry_folders(root: Path) -> Iterator[Path]:
    if not root.is_dir():
        return
    for kind in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        yield from sorted(p for p in kind.iterdir() if p.is_dir() and not p.name.startswith("."))


def entries(root: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every sound entry of a store root: (folder, its ``entry.json``), by kind and key; an unusable one is left
    out (:func:`bad_entries` names them)."""
    for folder in _entry_folders(root):
        entry, _ = _load_entry(folder)
        if entry is not None:
            yield folder, entry


def bad_entries(root: Path) -> dict[str, str]:
    """``{kind/key: why}`` of every entry of a store root whose ``entry.json`` is unusable (:func:`entry_problem`)."""
    found = {}
    for folder in _entry_folders(root):
        _, problem = _load_entry(folder)
        if problem:
            found[f"{folder.parent.name}/{folder.name}"] = problem
    return found


def _revision_of(entry: Mapping[str, Any]) -> tuple[Any, Any]:
    provenance = entry.get("provenance", {})
    return provenance.get("numerics_revision"), provenance.get("training_code_hash")


def revisions(root: Path) -> dict[tuple[Any, Any], list[str]]:
    """``{(numerics revision, training-code hash): [kind/key, ...]}`` over the store's entries (the code hash is
    provenance: one numerics revision may hold several)."""
    groups: dict[tuple[Any, Any], list[str]] = {}
    for folder, entry in entries(root):
        groups.setdefault(_revision_of(entry), []).append(f"{folder.parent.name}/{folder.name}")
    return groups


def numerics_revisions(groups: Mapping[tuple[Any, Any], list[str]]) -> dict[Any, list[str]]:
    """:func:`revisions`' groups merged by numerics revision alone: what decides whether a store is one science."""
    merged: dict[Any, list[str]] = {}
    for (numerics, _), names in groups.items():
        merged.setdefault(numerics, []).extend(names)
    return merged


def mixed_revisions_message(root: Path, groups: Mapping[tuple[Any, Any], list[str]]) -> str:
    """One line naming the entries of every numerics revision but the largest (and counting those)."""
    ordered = sorted(numerics_revisions(groups).items(), key=lambda item: -len(item[1]))
    parts = [
        f"numerics revision {numerics}: {len(keys)} entries" + (f" ({', '.join(keys)})" if index else "")
        for index, (numerics, keys) in enumerate(ordered)
    ]
    return (
        f"the results store {root} mixes numerics revisions, so its runs are not one version of the "
        f"science: {'; '.join(parts)}; retrain the minority with `python -m geocont.book store` after moving "
        "them aside, or remove them"
    )


_CHECKED: set[Path] = set()


def check_revisions(root: Path) -> None:
    """Refuse (:class:`StoreError`) a store whose entries mix numerics revisions, or hold another revision than this
    code's (entries of one revision trained by different code are one science: the golden runs, :mod:`geocont.golden`,
    hold the code to it); checked once per process and root, before any entry is served, in strict mode too."""
    if root in _CHECKED:
        return
    groups = revisions(root)
    held = numerics_revisions(groups)
    if len(held) > 1:
        raise StoreError(mixed_revisions_message(root, groups))
    if held and set(held) != {NUMERICS_REVISION}:
        raise StoreError(other_revision_message(root, held))
    _CHECKED.add(root)


def other_revision_message(root: Path, held: Mapping[Any, list[str]]) -> str:
    """One line: the store at ``root`` holds another numerics revision than this code's, so it is not read."""
    return (
        f"the store {root} holds runs of numerics revision {', '.join(map(str, held))}, but this code is "
        f"revision {NUMERICS_REVISION}: its runs are not this code's science; restore that code, or move the store "
        "aside and retrain it"
    )


#: Why the last lookup of a key found no usable store entry (a corrupt one), for strict mode's message.
_PROBLEMS: dict[str, str] = {}


def _find(kind: str, config: Mapping[str, Any]) -> tuple[Path, dict[str, Any]] | None:
    for root in store_roots():
        folder = entry_folder(root, kind, config)
        entry = read_entry(folder)
        if entry is not None:
            check_revisions(root)
            return folder, entry
    return None


def provenance_of(kind: str, config: Mapping[str, Any]) -> dict[str, Any] | None:
    """Where and by which code the stored run was trained (:func:`run_provenance`), or None where no store holds
    it."""
    found = _find(kind, config)
    return None if found is None else dict(found[1].get("provenance") or {})


def has(kind: str, config: Mapping[str, Any]) -> bool:
    """Whether a store holds an entry for the key (nothing is read but its ``entry.json``)."""
    return _find(kind, config) is not None


def _report(folder: Path, reason: str) -> None:
    _PROBLEMS[folder.name] = f"{folder} {reason}"
    warnings.warn(
        f"results store entry {folder} {reason}: not read (the run is computed as if it were absent; "
        "restore the entry with `git checkout` or retrain it with `python -m geocont.book store`)",
        stacklevel=3,
    )


def lookup(
    kind: str, config: Mapping[str, Any], require_metrics: Iterable[str] = (), require_artifacts: Iterable[str] = ()
) -> pd.DataFrame | None:
    """The stored table of the key (values as float64, the dtype training gives), or None.

    The table's sha256 is checked before it is parsed; a mismatch is reported and nothing of the entry
    is read. ``require_metrics`` as in :func:`geocont.cache.load`; an artifact in ``require_artifacts``
    is satisfied by one stored, or by one the entry lists as dropped (no chapter reads it: the table is
    still this run's; :func:`artifact` then has nothing to give)."""
    found = _find(kind, config)
    if found is None:
        return None
    folder, entry = found
    table = read_table(folder, entry)
    if table is None:
        return None
    if "metric" in table and set(require_metrics) - set(table["metric"].unique()):
        return None
    held = set(entry.get("files", {})) | set(entry.get("dropped_artifacts", []))
    if set(require_artifacts) - held:
        return None
    return table


def read_table(folder: Path, entry: Mapping[str, Any]) -> pd.DataFrame | None:
    """The table of the entry in ``folder`` (values as float64), after its sha256 matched ``entry``; None,
    reported, where it cannot be read or fails the check (nothing of it is parsed)."""
    try:
        data = (folder / TABLE).read_bytes()
    except OSError as error:
        _report(folder, f"cannot be read ({error})")
        return None
    if hashlib.sha256(data).hexdigest() != entry.get("files", {}).get(TABLE):
        _report(folder, f"fails its checksum ({TABLE})")
        return None
    table = pd.read_parquet(io.BytesIO(data))
    if "value" in table and table["value"].dtype != np.float64:
        table["value"] = table["value"].astype(np.float64)
    return current_metric_names(table) if "metric" in table else table


def artifact(kind: str, config: Mapping[str, Any], name: str) -> Path | None:
    """The path of a stored artifact after its sha256 matched, or None (absent, dropped, or reported corrupt)."""
    found = _find(kind, config)
    if found is None:
        return None
    folder, entry = found
    expected = entry.get("files", {}).get(name)
    if expected is None:
        return None
    try:
        actual = _sha256_file(folder / name)
    except OSError as error:
        _report(folder, f"cannot be read ({error})")
        return None
    if actual != expected:
        _report(folder, f"fails its checksum ({name})")
        return None
    return folder / name


def missing_message(
    kind: str, config: Mapping[str, Any], label: str = "", more: int = 0, cache_dir: Path | str | None = None
) -> str:
    """Strict mode's one line for a run found nowhere: its key, label, chapter, and where it was looked for
    (``cache_dir``: the run cache's folder)."""
    key = cache_key(kind, dict(config))
    chapter = os.environ.get(CHAPTER_ENV)
    roots = ", ".join(map(str, store_roots())) or f"none ({STORE_ENV}={store_setting() or 'unset'})"
    problem = f"; {_PROBLEMS[key]}" if key in _PROBLEMS else ""
    what, whats, action = (
        ("analysis", "analyses", "computing it") if kind in ANALYSIS_KINDS else ("run", "runs", "training")
    )
    return (
        f"{what} {kind}/{key}"
        + (f" ({label})" if label else "")
        + (f" of chapter {chapter}" if chapter else "")
        + (f" and {more} more {whats if more > 1 else what}" if more else "")
        + f" in neither the run cache{f' ({cache_dir})' if cache_dir else ''} nor the results store ({roots}){problem}; "
        f"{STORE_ONLY_ENV}=1 forbids {action}: add it with `python -m geocont.book store --scale SCALE`"
    )


def forbid_training(
    kind: str, config: Mapping[str, Any], label: str = "", more: int = 0, cache_dir: Path | str | None = None
) -> None:
    """In strict mode, raise :class:`RunMissing` for a run or analysis of a :data:`STRICT_KINDS` kind about to
    be computed."""
    if strict() and kind in STRICT_KINDS:
        raise RunMissing(missing_message(kind, config, label, more, cache_dir))


# --------------------------------------------------------------------------- writing


@dataclass
class Written:
    """What :func:`write_entry` wrote: the folder, each file's bytes, the values' dtype."""

    folder: Path
    sizes: dict[str, int] = field(default_factory=dict)
    values: str = ""


def write_entry(
    root: Path,
    kind: str,
    config: Mapping[str, Any],
    table: pd.DataFrame,
    provenance: Mapping[str, Any],
    *,
    artifacts: Mapping[str, Path] | None = None,
    dropped: Iterable[str] = (),
    label: str = "",
    chapters: Iterable[str] = (),
) -> Written:
    """Write one run into the store at ``root``: its table (thinned, :func:`thin_table`), the files of
    ``artifacts`` (name -> a path to copy), the names of the artifacts left out (``dropped``), and the
    ``provenance`` recorded where the run was computed (:func:`run_provenance`). The entry appears whole or
    not at all. Raises :class:`StoreError` (one line) for a run without provenance, or of another numerics
    revision than the store's entries (another code hash of the same revision is accepted)."""
    config = dict(config)
    key = cache_key(kind, config)
    _check_storable(root, kind=kind, key=key, label=label, provenance=provenance)
    thinned, values = thin_table(table)
    staging = root / kind / f".staging-{key}-{uuid.uuid4().hex[:8]}"
    target = root / kind / key
    staging.mkdir(parents=True)
    try:
        (staging / TABLE).write_bytes(_table_bytes(thinned))
        for name, source in (artifacts or {}).items():
            shutil.copyfile(source, staging / name)
        entry = _entry_record(
            staging,
            kind=kind,
            key=key,
            config=config,
            values=values,
            files=[TABLE, *(artifacts or {})],
            dropped=dropped,
            label=label,
            chapters=chapters,
            provenance=provenance,
        )
        (staging / ENTRY).write_text(json.dumps(entry, indent=1, sort_keys=True, default=str) + "\n")
        _move_into_place(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _CHECKED.discard(root)
    return Written(target, dict(entry["sizes"]), values)


def _check_storable(root: Path, *, kind: str, key: str, label: str, provenance: Mapping[str, Any]) -> None:
    """Raise :class:`StoreError` for a run without provenance, or of another numerics revision than the
    entries of the store at ``root``."""
    if not provenance or provenance.get("training_code_hash") is None:
        raise StoreError(
            f"run {kind}/{key} ({label}) was cached without provenance (before it was recorded): retrain it to store it"
        )
    held = set(numerics_revisions(revisions(root)))
    if held and held != {provenance.get("numerics_revision")}:
        raise StoreError(
            f"run {kind}/{key} ({label}) was trained at numerics revision "
            f"{provenance.get('numerics_revision')}, but the store {root} holds revision "
            f"{', '.join(map(str, sorted(held, key=str)))}: adding it would mix revisions"
        )


def _entry_record(
    staging: Path,
    *,
    kind: str,
    key: str,
    config: dict[str, Any],
    values: str,
    files: list[str],
    dropped: Iterable[str],
    label: str,
    chapters: Iterable[str],
    provenance: Mapping[str, Any],
) -> dict[str, Any]:
    """The contents of an entry's ``entry.json``, with the checksum and size of each of ``files`` as staged."""
    return {
        "format": STORE_FORMAT,
        "kind": kind,
        "key": key,
        "schema": SCHEMA_VERSION,
        "label": label,
        "chapters": sorted(set(chapters)),
        "config": config,
        "values": values,
        "files": {name: _sha256_file(staging / name) for name in files},
        "sizes": {name: (staging / name).stat().st_size for name in files},
        "dropped_artifacts": sorted(dropped),
        "provenance": dict(provenance),
    }


def _move_into_place(staging: Path, target: Path) -> None:
    """Rename the staged entry to ``target``; an entry already there is renamed aside first, then removed."""
    if target.exists():
        aside = target.parent / f".replaced-{target.name}-{uuid.uuid4().hex[:8]}"
        os.rename(target, aside)
        os.rename(staging, target)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.rename(staging, target)


# --------------------------------------------------------------------------- status


@dataclass
class StoreStatus:
    """A store root checked against the keys it should hold (:func:`status`)."""

    root: Path
    #: ``{kind/key: entry.json}`` of every entry
    entries: dict[str, dict[str, Any]]
    #: wanted ``kind/key`` not in the store, or corrupt there
    missing: list[str]
    #: entries not among the wanted keys (left from an earlier run set)
    extra: list[str]
    #: ``kind/key -> why`` for entries whose ``entry.json`` is unusable or whose files are absent or fail their checksum
    corrupt: dict[str, str]
    #: ``{(numerics revision, code hash): [kind/key]}``
    revisions: dict[tuple[Any, Any], list[str]]
    #: the size of every file of every entry, in bytes
    bytes: int

    @property
    def mixed(self) -> bool:
        """Whether the entries mix numerics revisions (several code hashes of one revision do not)."""
        return len(numerics_revisions(self.revisions)) > 1

    @property
    def current_numerics(self) -> bool:
        """Whether every entry is of this code's numerics revision (:data:`geocont.keys.NUMERICS_REVISION`)."""
        return set(numerics_revisions(self.revisions)) <= {NUMERICS_REVISION}

    @property
    def complete(self) -> bool:
        return not self.missing and not self.corrupt and not self.mixed and bool(self.entries)


def status(root: Path, wanted: Iterable[str] = (), verify_files: bool = True) -> StoreStatus:
    """The entries of the store at ``root``, which of ``wanted`` (``kind/key``) it lacks or holds besides,
    its revisions, and (``verify_files``) the entries whose files fail their sha256."""
    found = {f"{folder.parent.name}/{folder.name}": (folder, entry) for folder, entry in entries(root)}
    corrupt: dict[str, str] = bad_entries(root)
    total = 0
    for name, (folder, entry) in found.items():
        for file, expected in entry.get("files", {}).items():
            path = folder / file
            if not path.exists():
                corrupt[name] = f"{file} is missing"
                continue
            total += path.stat().st_size
            if verify_files and _sha256_file(path) != expected:
                corrupt[name] = f"{file} fails its checksum"
    wanted = list(dict.fromkeys(wanted))
    wanted_set = set(wanted)
    groups: dict[tuple[Any, Any], list[str]] = {}
    for name, (_, entry) in found.items():
        groups.setdefault(_revision_of(entry), []).append(name)
    return StoreStatus(
        root=root,
        entries={name: entry for name, (_, entry) in found.items()},
        missing=[name for name in wanted if name not in found or name in corrupt],
        extra=sorted(set(found) - wanted_set) if wanted_set else [],
        corrupt=corrupt,
        revisions=groups,
        bytes=total,
    )


def entry_name(kind: str, config: Mapping[str, Any]) -> str:
    """``kind/key`` of a run."""
    return f"{kind}/{cache_key(kind, dict(config))}"

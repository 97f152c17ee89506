"""The run cache under concurrent writers and readers, failing storage, killed processes and corruption.

Helper processes are forked (the cache needs no torch in them), so each case takes a
few seconds at most.
"""

import json
import multiprocessing
import os
import signal
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest

from geocont import cache

FORK = multiprocessing.get_context("fork")
CONFIG = {"run": "concurrency", "seed": 0}


def table_of(value: float, rows: int = 200) -> pd.DataFrame:
    return pd.DataFrame({"metric": ["m"] * rows, "step": range(rows), "value": [value + i for i in range(rows)]})


def versions(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def _store_in_a_loop(value: float, seconds: float, report: Path) -> None:
    stores = failures = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                stored = cache.save("mlp", CONFIG, table_of(value))
            except Exception:  # noqa: BLE001 - counted: a store must never raise
                stored = None
        stores += 1
        failures += stored is None or bool(caught)
    report.write_text(json.dumps({"stores": stores, "failures": failures}))


@pytest.mark.slow
def test_concurrent_stores_of_one_key_never_fail_and_a_reader_never_discards(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "GRACE_SECONDS", 0.3)  # superseded versions are collected while the reader reads
    cache.save("mlp", CONFIG, table_of(0.0))
    valid = [table_of(v) for v in (0.0, 1.0, 2.0)]
    writers = [FORK.Process(target=_store_in_a_loop, args=(v, 2.5, tmp_path / f"w{v}.json")) for v in (1.0, 2.0)]
    for writer in writers:
        writer.start()
    reads = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a discarded entry would warn
        while any(w.is_alive() for w in writers):
            table = cache.load("mlp", CONFIG)
            assert table is not None and any(table.equals(t) for t in valid)
            reads += 1
    for writer in writers:
        writer.join()
        assert writer.exitcode == 0
    reports = [json.loads((tmp_path / f"w{v}.json").read_text()) for v in (1.0, 2.0)]
    assert all(r["failures"] == 0 for r in reports) and all(r["stores"] > 20 for r in reports), reports
    assert reads > 20
    time.sleep(0.4)
    cache.save("mlp", CONFIG, table_of(3.0))  # collects what the loop left within the grace period
    folder = cache.key_path("mlp", CONFIG)
    assert versions(folder) == [cache.entry_path("mlp", CONFIG).name]
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]
    pd.testing.assert_frame_equal(cache.load("mlp", CONFIG), table_of(3.0))


def _compute_once(log: Path, result: Path) -> None:
    def compute() -> pd.DataFrame:
        with open(log, "a") as handle:
            handle.write(f"{os.getpid()}\n")
        time.sleep(1.0)
        return table_of(7.0)

    result.write_bytes(cache.cached("mlp", CONFIG, compute).to_json().encode())


@pytest.mark.slow
def test_two_processes_asking_for_one_key_compute_it_once(tmp_path):
    log = tmp_path / "computed.log"
    workers = [FORK.Process(target=_compute_once, args=(log, tmp_path / f"r{i}")) for i in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
        assert worker.exitcode == 0
    assert len(log.read_text().splitlines()) == 1
    assert (tmp_path / "r0").read_bytes() == (tmp_path / "r1").read_bytes() == table_of(7.0).to_json().encode()
    assert not (cache.key_path("mlp", CONFIG) / cache.CLAIM).exists()


@pytest.mark.slow
def test_a_claim_left_by_a_dead_process_or_a_silent_host_is_broken(tmp_path):
    dead = FORK.Process(target=time.sleep, args=(0,))
    dead.start()
    dead.join()
    folder = cache.key_path("mlp", CONFIG)
    folder.mkdir(parents=True)
    claim = folder / cache.CLAIM
    claim.write_text(json.dumps({"host": __import__("socket").gethostname(), "pid": dead.pid, "token": "x"}))
    start = time.monotonic()
    assert cache.cached("mlp", CONFIG, lambda: table_of(1.0)).equals(table_of(1.0))
    # broken at once, not after waiting out the stale timeout (the bound leaves room for a loaded machine)
    assert time.monotonic() - start < cache.STALE_SECONDS / 10 and not claim.exists()

    other = {**CONFIG, "seed": 1}
    folder = cache.key_path("mlp", other)
    folder.mkdir(parents=True)
    claim = folder / cache.CLAIM
    claim.write_text(json.dumps({"host": "another-node", "pid": 1, "token": "x"}))
    old = time.time() - cache.STALE_SECONDS - 1
    os.utime(claim, (old, old))  # its heartbeat stopped long ago
    assert cache.cached("mlp", other, lambda: table_of(2.0)).equals(table_of(2.0))


def test_an_unwritable_cache_still_returns_the_result_with_a_warning(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(blocker / "cache"))
    with pytest.warns(UserWarning, match="could not store"):
        table = cache.cached("mlp", CONFIG, lambda: table_of(5.0))
    pd.testing.assert_frame_equal(table, table_of(5.0))
    assert cache.load("mlp", CONFIG) is None


def test_a_full_disk_during_a_store_warns_and_leaves_nothing_behind(monkeypatch):
    def disk_full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", disk_full)
    with pytest.warns(UserWarning, match="No space left"):
        table = cache.cached("mlp", CONFIG, lambda: table_of(5.0))
    pd.testing.assert_frame_equal(table, table_of(5.0))
    folder = cache.key_path("mlp", CONFIG)
    assert [p.name for p in folder.iterdir()] == []  # no staging, no claim


def _store_and_hang(ready: Path) -> None:
    def hang(path: Path) -> None:
        ready.write_text("writing")
        time.sleep(60)

    cache.save("mlp", CONFIG, table_of(1.0), artifacts={"model.safetensors": hang})


@pytest.mark.slow
def test_a_killed_store_leaves_no_entry_and_its_staging_is_cleaned(tmp_path):
    ready = tmp_path / "ready"
    writer = FORK.Process(target=_store_and_hang, args=(ready,))
    writer.start()
    while not ready.exists():
        time.sleep(0.02)
    os.kill(writer.pid, signal.SIGKILL)
    writer.join()
    folder = cache.key_path("mlp", CONFIG)
    staging = [p for p in folder.iterdir() if p.name.startswith(".staging-")]
    assert len(staging) == 1 and cache.load("mlp", CONFIG) is None
    cache.clean_stale()
    assert not staging[0].exists()

    writer = FORK.Process(target=_store_and_hang, args=(ready,))  # and the next store of the key cleans too
    ready.unlink()
    writer.start()
    while not ready.exists():
        time.sleep(0.02)
    os.kill(writer.pid, signal.SIGKILL)
    writer.join()
    cache.save("mlp", CONFIG, table_of(2.0))
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]
    pd.testing.assert_frame_equal(cache.load("mlp", CONFIG), table_of(2.0))


def test_a_flipped_byte_is_detected_and_the_run_recomputed():
    cache.save("mlp", CONFIG, table_of(1.0), artifacts={"weights.bin": lambda p: p.write_bytes(bytes(1000))})
    entry = cache.entry_path("mlp", CONFIG)
    weights = cache.artifact_path("mlp", CONFIG, "weights.bin")
    assert weights == entry / "weights.bin"
    parquet = entry / "table.parquet"
    data = bytearray(parquet.read_bytes())
    data[len(data) // 3] ^= 0x01
    parquet.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="checksum mismatch of table.parquet"):
        assert cache.load("mlp", CONFIG) is None
    assert cache.cached("mlp", CONFIG, lambda: table_of(1.0)).equals(table_of(1.0))

    cache.save("mlp", CONFIG, table_of(1.0), artifacts={"weights.bin": lambda p: p.write_bytes(bytes(1000))})
    weights = cache.artifact_path("mlp", CONFIG, "weights.bin")
    weights.write_bytes(b"\x01" + bytes(999))
    with pytest.warns(UserWarning, match="checksum mismatch of weights.bin"):
        assert cache.artifact_path("mlp", CONFIG, "weights.bin") is None
    assert cache.load("mlp", CONFIG) is None  # the whole version went, so the run is recomputed


def test_an_entry_without_a_required_artifact_is_a_miss():
    cache.save("lm", CONFIG, table_of(1.0))
    assert cache.load("lm", CONFIG) is not None
    with pytest.warns(UserWarning, match="has no model.safetensors"):
        assert cache.load("lm", CONFIG, require_artifacts=["model.safetensors"]) is None
    with pytest.warns(UserWarning, match="has no model.safetensors"):
        table = cache.cached(
            "lm",
            CONFIG,
            lambda: cache.Computed(table_of(1.0), {"model.safetensors": lambda p: p.write_bytes(b"weights")}),
            require_artifacts=["model.safetensors"],
        )
    assert table.equals(table_of(1.0))
    assert cache.artifact_path("lm", CONFIG, "model.safetensors").read_bytes() == b"weights"


def test_a_table_recorded_under_a_former_metric_name_is_read_under_the_current_one(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path))
    former = pd.DataFrame({"metric": pd.Categorical(["v1_turn", "co_rotation"]), "value": [1.0, 2.0]})
    cache.save("mlp", CONFIG, former)
    table = cache.load("mlp", CONFIG, require_metrics=("turn",))
    assert table is not None and list(table["metric"]) == ["turn", "co_rotation"]

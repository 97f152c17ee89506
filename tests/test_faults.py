"""Faults leave nothing behind: claims on a full disk, orphaned workers, scripts without a main guard."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

import geocont
from geocont import cache, sweeps

SRC = str(Path(geocont.__file__).resolve().parents[1])  # the geocont under test, for subprocesses


def _table_of(value: float) -> pd.DataFrame:
    return pd.DataFrame({"metric": ["m"], "value": [value]})


def _fail(value: float) -> pd.DataFrame:
    raise RuntimeError(f"failed on purpose ({value})")


def _claims_left(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name == cache.CLAIM or p.name.startswith(".claim-")]


def _big_table(value: float) -> pd.DataFrame:
    return pd.DataFrame({"value": [value] * 1024, "noise": range(1024)})  # about 8 kB: more than the 4 kB left


@pytest.mark.slow
def test_a_full_disk_leaves_no_claim_and_a_rerun_after_freeing_space_caches_at_once(full_tmpfs, monkeypatch):
    mount, filler = full_tmpfs
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(mount / "cache"))
    jobs = [sweeps.Job("demo", {"value": v}, _big_table, v, label=f"run {v}") for v in (1.0, 2.0)]
    start = time.monotonic()
    try:
        with pytest.warns(UserWarning, match="could not store"):
            tables = sweeps.run_jobs(jobs, executor="local:2", progress=False)
        assert [t["value"].iloc[0] for t in tables] == [1.0, 2.0]  # the results came back, uncached
    except sweeps.SweepFailed as failed:  # a run may fail on the full disk; it must not say the others are cached
        assert "are cached" not in str(failed).splitlines()[0], str(failed)
    assert time.monotonic() - start < 120
    assert _claims_left(mount) == []  # no claim, and no half-written one, is left behind
    assert all(job.load() is None for job in jobs)
    filler.unlink()
    start = time.monotonic()
    tables = sweeps.run_jobs(jobs, executor="serial", progress=False)
    assert time.monotonic() - start < 30  # no stale claim is left to wait for: the rerun starts at once
    assert all(job.load() is not None for job in jobs) and _claims_left(mount) == []


def test_an_ownerless_claim_is_broken_at_once(tmp_path):
    config = {"value": 1.0}
    folder = cache.key_path("demo", config)
    folder.mkdir(parents=True)
    (folder / cache.CLAIM).write_text("")  # a claim that names no owner (a full disk can stop its write)
    start = time.monotonic()
    table, stored = cache.ensure("demo", config, lambda: _table_of(1.0))
    assert time.monotonic() - start < 5 and stored and table["value"].item() == 1.0
    assert not (folder / cache.CLAIM).exists()


def test_a_live_owners_claim_is_waited_for_and_a_claim_always_names_its_owner(tmp_path):
    config = {"value": 2.0}
    with cache.claim("demo", config) as held:
        assert held
        owner = json.loads((cache.key_path("demo", config) / cache.CLAIM).read_text())
        assert owner["pid"] == os.getpid() and owner["host"] and owner["time"] > 0
        assert not cache._claim_stale(cache.key_path("demo", config) / cache.CLAIM)
    assert not (cache.key_path("demo", config) / cache.CLAIM).exists()


def test_a_claim_that_cannot_be_written_is_not_created(tmp_path, monkeypatch):
    config = {"value": 3.0}

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache.os, "fsync", no_space)
    with cache.claim("demo", config) as held:
        assert held is False
    assert _claims_left(cache.cache_root()) == []


def test_a_failed_store_releases_the_claim(tmp_path, monkeypatch):
    config = {"value": 4.0}

    def failing_store(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache.pd.DataFrame, "to_parquet", failing_store)
    with pytest.warns(UserWarning, match="could not store"):
        table, stored = cache.ensure("demo", config, lambda: _table_of(4.0))
    assert not stored and table["value"].item() == 4.0
    assert _claims_left(cache.cache_root()) == []


def test_sweep_failed_says_how_many_of_the_others_are_cached(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(blocker / "cache"))  # nothing can be stored
    jobs = [
        sweeps.Job("demo", {"value": 1.0}, _table_of, 1.0, label="good"),
        sweeps.Job("demo", {"value": 2.0}, _fail, 2.0, label="bad"),
    ]
    with pytest.warns(UserWarning), pytest.raises(sweeps.SweepFailed) as failed:
        sweeps.run_jobs(jobs, executor="serial", progress=False)
    first = str(failed.value).splitlines()[0]
    assert first == "1 of 2 runs failed (the other 1 finished but none could be cached):"
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path / "fine"))
    with pytest.raises(sweeps.SweepFailed, match=r"1 of 2 runs failed \(the other 1 is cached\)"):
        sweeps.run_jobs(jobs, executor="serial", progress=False)


DRIVER = textwrap.dedent("""
    import os, sys, time
    import pandas as pd
    from geocont import sweeps

    def slow(value):
        time.sleep(600)
        return pd.DataFrame({"value": [value]})

    if __name__ == "__main__":
        jobs = [sweeps.Job("demo", {"value": float(v)}, slow, float(v)) for v in range(2)]
        print("driver", os.getpid(), flush=True)
        sweeps.run_jobs(jobs, executor="local:2", progress=False)
""")


def _children_of(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc), and processes re-parented from it, by their parent chain."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == pid:
                found.append(int(entry.name))
    return found + [grand for child in found for grand in _children_of(child)]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_workers_and_the_forkserver_exit_when_the_driver_is_killed(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    environment = {**os.environ, "PYTHONPATH": SRC, "GEOCONT_CACHE_DIR": str(tmp_path / "cache")}
    driver = subprocess.Popen([sys.executable, str(script)], env=environment, stdout=subprocess.PIPE, text=True)
    helpers: list[int] = []
    try:
        assert driver.stdout.readline().startswith("driver")
        deadline = time.monotonic() + 180  # a loaded 2-core machine can take over a minute to fork both
        while len(_children_of(driver.pid)) < 3 and time.monotonic() < deadline:  # forkserver + 2 workers
            time.sleep(0.2)
        helpers = _children_of(driver.pid)
        workers = [p for p in helpers if "forkserver" not in Path(f"/proc/{p}/cmdline").read_text()]
        assert len(helpers) >= 3 and workers, helpers
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in helpers) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in helpers if _alive(p)]
        assert left == [], f"processes left after the driver was killed: {left}"
    finally:  # what a failing test leaves behind is ended here, by its process id
        for pid in [driver.pid, *helpers, *_children_of(driver.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


UNGUARDED = textwrap.dedent("""
    import pandas as pd
    from geocont import sweeps

    def value_table(value):
        return pd.DataFrame({"value": [value]})

    jobs = [sweeps.Job("demo", {"value": 1.0}, value_table, 1.0, label="one")]
    sweeps.run_jobs(jobs, executor="local:1", progress=False)
""")


@pytest.mark.slow
def test_a_script_without_a_main_guard_is_told_the_cause(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    environment = {**os.environ, "PYTHONPATH": SRC, "GEOCONT_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, str(script)], env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert f'the script {script} has no `if __name__ == "__main__":` guard' in done.stderr


def test_a_sweep_on_an_unreachable_ray_address_stops_within_seconds():
    pytest.importorskip("ray")
    jobs = [sweeps.Job("demo", {"value": 1.0}, _table_of, 1.0)]
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"^cannot reach the Ray cluster at 256.0.0.1:1 within 3 s"):
        sweeps.run_jobs(jobs, executor="ray:256.0.0.1:1", progress=False)
    assert time.monotonic() - start < 10

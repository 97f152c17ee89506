"""Sweeps give the same tables under every executor; failures are reported and the rest cached."""

import pandas as pd
import pytest
import torch

from geocont import sweeps
from geocont.config import MLPRunConfig, OptimizerConfig
from geocont.training import mlp_job, run_sweep

TINY = MLPRunConfig(
    dataset="mnist-subset", max_train=256, width=8, depth=3, epochs=2, batch_size=64, n_snapshots=3, n_directions=2
)
CONFIGS = [TINY.replace(condition="res-relu"), TINY.replace(condition="nores-relu", seed=1)]
EXPLODING = TINY.replace(optimizer=OptimizerConfig("sgd", lr=0.9, momentum=0.99), init_scale=30.0)
#: A run that raises in the worker: CUDA asked for on a machine without a GPU.
FAILING = TINY.replace(device="cuda")


@pytest.fixture
def serial_table(tmp_path, monkeypatch):
    """The sweep run one after another in this process, at 2 torch threads outside the runs."""
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path / "serial"))
    previous = torch.get_num_threads()
    torch.set_num_threads(2)  # the runs themselves use GEOCONT_RUN_THREADS (1) whatever the caller's setting
    try:
        table = run_sweep(CONFIGS, progress=False, executor="serial")
    finally:
        torch.set_num_threads(previous)
    return table


def in_fresh_cache(monkeypatch, tmp_path, name):
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path / name))


def test_executor_choice_is_validated_before_any_work(tmp_path, monkeypatch):
    in_fresh_cache(monkeypatch, tmp_path, "never")
    with pytest.raises(ValueError, match="valid choices: serial, local, local:N, ray, ray:ADDRESS"):
        run_sweep(CONFIGS, progress=False, executor="threads")
    monkeypatch.setenv("GEOCONT_EXECUTOR", "local:0")
    with pytest.raises(ValueError, match="executor 'local:0': the number of local workers must be >= 1"):
        run_sweep(CONFIGS, progress=False)
    assert not (tmp_path / "never").exists()
    monkeypatch.setenv("GEOCONT_EXECUTOR", "local:3")
    assert sweeps.executor_description() == "local: 3 worker processes x 1 torch thread"
    assert sweeps.executor_description("serial") == "serial: 1 process x 1 torch thread"
    monkeypatch.setenv("GEOCONT_RAY_ADDRESS", "head:6379")
    assert sweeps.executor_description("ray") == "ray: cluster at head:6379, 1 torch thread per run"
    monkeypatch.setenv("GEOCONT_RUN_THREADS", "two")
    with pytest.raises(ValueError, match="GEOCONT_RUN_THREADS"):
        sweeps.executor_description()


@pytest.mark.slow
def test_local_workers_give_the_serial_tables_exactly(serial_table, tmp_path, monkeypatch):
    in_fresh_cache(monkeypatch, tmp_path, "local")
    local = run_sweep(CONFIGS, progress=False, executor="local:2")
    pd.testing.assert_frame_equal(local, serial_table, check_exact=True)
    for config in CONFIGS:  # the workers wrote the entries; a run in the cache is not recomputed
        assert mlp_job(config).load() is not None
    pd.testing.assert_frame_equal(run_sweep(CONFIGS, progress=False, executor="serial"), serial_table, check_exact=True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the failing run asks for CUDA, which this machine has")
@pytest.mark.slow
def test_a_failing_run_is_reported_with_its_configuration_and_the_others_are_cached(tmp_path, monkeypatch, capsys):
    in_fresh_cache(monkeypatch, tmp_path, "failing")
    with pytest.raises(sweeps.SweepFailed, match=r"1 of 3 runs failed") as failed:
        run_sweep([CONFIGS[0], FAILING, CONFIGS[1]], progress=False, executor="local:2")
    ((label, config, error),) = failed.value.failures
    assert config == FAILING.to_dict() and "seed=0" in label and "no CUDA GPU" in error
    assert "'device': 'cuda'" in str(failed.value)
    assert "run failed:" in capsys.readouterr().out  # reported as it happened, before the sweep ended
    assert all(mlp_job(c).load() is not None for c in CONFIGS) and mlp_job(FAILING).load() is None


def test_a_diverged_run_is_an_outcome_cached_with_the_others(tmp_path, monkeypatch):
    in_fresh_cache(monkeypatch, tmp_path, "diverged")
    table = run_sweep([CONFIGS[0], EXPLODING], progress=False, executor="local:2")
    diverged = table[table["metric"] == "diverged"]
    assert len(diverged) == 1 and diverged["init_scale"].iloc[0] == 30.0 and diverged["step"].iloc[0] >= 1
    assert mlp_job(EXPLODING).load() is not None


@pytest.mark.slow
def test_an_unwritable_cache_still_gives_the_tables_from_workers(serial_table, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(blocker / "cache"))
    with pytest.warns(UserWarning, match="could not store"):  # raised in the workers, reported here
        table = run_sweep(CONFIGS, progress=False, executor="local:2")
    pd.testing.assert_frame_equal(table, serial_table, check_exact=True)


@pytest.mark.slow
def test_a_local_ray_cluster_gives_the_serial_tables_exactly(serial_table, tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    cached_dir = tmp_path / "serial"
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(cached_dir))
    pd.testing.assert_frame_equal(run_sweep(CONFIGS, progress=False, executor="ray"), serial_table)
    assert not ray.is_initialized()  # everything was cached: no cluster started
    in_fresh_cache(monkeypatch, tmp_path, "ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:  # a diverged run is an outcome under Ray too
        with_diverged = run_sweep([EXPLODING, *CONFIGS], progress=False, executor="ray")
    finally:
        ray.shutdown()
    assert set(with_diverged.loc[with_diverged["metric"] == "diverged", "init_scale"]) == {30.0}
    table = run_sweep(CONFIGS, progress=False, executor="ray")  # what the Ray workers cached
    assert not ray.is_initialized()
    pd.testing.assert_frame_equal(table, serial_table, check_exact=True)


def _table_of(value: float) -> pd.DataFrame:
    return pd.DataFrame({"metric": ["m"], "value": [value]})


def _die(value: float) -> pd.DataFrame:
    import os

    os._exit(1)  # as the out-of-memory killer would end the worker


@pytest.mark.slow
def test_a_worker_that_dies_is_reported_and_the_other_runs_finish(tmp_path, monkeypatch):
    in_fresh_cache(monkeypatch, tmp_path, "dying")
    jobs = [
        sweeps.Job("demo", {"value": 1.0}, _table_of, 1.0, label="good"),
        sweeps.Job("demo", {"value": 2.0}, _die, 2.0, label="dies"),
        sweeps.Job("demo", {"value": 3.0}, _table_of, 3.0, label="also good"),
    ]
    with pytest.raises(sweeps.SweepFailed, match="dies: the worker process died") as failed:
        sweeps.run_jobs(jobs, executor="local:1", progress=False)
    assert [label for label, _, _ in failed.value.failures] == ["dies"]
    assert [jobs[i].load()["value"].item() for i in (0, 2)] == [1.0, 3.0]
    assert sweeps.run_jobs([jobs[0], jobs[0]], executor="serial", progress=False)[1]["value"].item() == 1.0


def _started_at(value: float) -> pd.DataFrame:
    import time

    return pd.DataFrame({"value": [value], "started": [time.time()]})


@pytest.mark.slow
def test_the_local_executor_starts_the_costliest_runs_first_and_returns_tables_in_order(tmp_path, monkeypatch):
    in_fresh_cache(monkeypatch, tmp_path, "order")
    jobs = [
        sweeps.Job("demo", {"value": v}, _started_at, v, label=str(v), cost=c)
        for v, c in ((1.0, 1.0), (2.0, 8.0), (3.0, 1.0), (4.0, 3.0))
    ]
    tables = sweeps.run_jobs(jobs, executor="local:1", progress=False)
    assert [t["value"].item() for t in tables] == [1.0, 2.0, 3.0, 4.0]  # in the jobs' order
    started = [t["started"].item() for t in tables]
    assert sorted(range(4), key=started.__getitem__) == [1, 3, 0, 2]  # costliest first, ties in order


def test_runs_cached_by_code_of_other_numerics_are_not_read(serial_table, tmp_path, monkeypatch):
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path / "serial"))
    job = mlp_job(CONFIGS[0])
    assert job.load() is not None and "numerics" not in job.key_config()
    monkeypatch.setattr(sweeps.cache, "NUMERICS_REVISION", 2)
    assert job.key_config()["numerics"] == 2 and job.load() is None


@pytest.mark.parametrize(
    "durations, workers, expected",
    [
        ([3.0, 3.0], 2, 3.0),  # one run each
        ([4.0, 3.0, 3.0, 2.0], 2, 6.0),  # longest first: 4+2 and 3+3
        ([5.0, 1.0, 1.0, 1.0], 2, 5.0),  # the longest run alone bounds the sweep
        ([1.0, 2.0, 3.0], 1, 6.0),  # one worker: the sum
        ([], 2, 0.0),
    ],
)
def test_a_sweeps_predicted_wall_time_is_the_longest_first_schedules_makespan(durations, workers, expected):
    assert sweeps.predicted_wall_seconds(durations, workers) == pytest.approx(expected)

"""The training loop, the recorder's table, determinism and the run cache."""

import math

import pandas as pd
import pytest
import torch

from geocont import cache
from geocont.config import MLPRunConfig, OptimizerConfig
from geocont.recorder import ContinuityRecorder, log_spaced_steps
from geocont.tables import METRICS, RUN_COLUMNS, rows_to_frame, select
from geocont.training import TrainingDiverged, run_mlp, run_sweep, train_mlp

TINY = MLPRunConfig(dataset="mnist-subset", max_train=256, width=16, depth=4, epochs=2,
                    batch_size=64, n_snapshots=4, n_directions=3)


def test_log_spaced_schedule():
    steps = log_spaced_steps(1000, 8)
    assert steps[0] == 0 and steps[-1] == 1000 and steps == sorted(set(steps))
    assert 6 <= len(steps) <= 9
    assert log_spaced_steps(0, 5) == [0]
    with pytest.raises(ValueError):
        log_spaced_steps(10, 1)


def test_run_table_is_tidy_and_complete():
    table = train_mlp(TINY, progress=False)
    assert list(table.columns) == RUN_COLUMNS
    # val_loss and cross_cos (its up~gate pairs) are the LM's; the trace and divergence rows appear only
    # where asked for or met
    assert set(table["metric"].unique()) == set(METRICS) - {"val_loss", "cross_cos", "trace_loss", "trace_weight_cos",
                                                             "diverged"}
    steps = sorted(table["step"].unique())
    assert steps[0] == 0 and steps[-1] == 2 * (256 // 64)
    weight_v = select(table, "weight_cos", "input")
    assert set(weight_v["direction"]) == {1, 2, 3} and set(weight_v["layer"]) == {0, 1, 2}
    assert weight_v["value"].between(0, 1 + 1e-6).all()
    assert select(table, "rel_update").query("step == 0")["value"].abs().max() == 0
    assert (select(table, "rel_update").query(f"step == {steps[-1]}")["value"] > 0).all()
    # one row per step x layer x metric x space x direction
    assert not table.duplicated(["step", "group", "layer", "metric", "space", "direction"]).any()


def test_same_seed_same_numbers_and_different_seed_differs():
    a = train_mlp(TINY, progress=False)
    b = train_mlp(TINY, progress=False)
    pd.testing.assert_frame_equal(a, b)
    c = train_mlp(TINY.replace(seed=1), progress=False)
    assert not a["value"].equals(c["value"])


def test_cumulative_gradient_is_the_running_sum():
    torch.manual_seed(0)
    layers = [torch.nn.Parameter(torch.randn(6, 6)) for _ in range(3)]
    recorder = ContinuityRecorder({"g": layers}, schedule=[2], n_directions=2)
    grads = []
    for step in range(3):
        for p in layers:
            p.grad = torch.randn(6, 6)
        grads.append(torch.stack([p.grad.clone() for p in layers]))
        recorder.observe(step)
    assert torch.allclose(recorder._cumulative["g"], sum(grads))
    with pytest.raises(ValueError, match="at least two"):
        ContinuityRecorder({"g": layers[:1]}, [0])


def test_cache_reuses_and_survives_corruption(isolated_cache):
    first = run_mlp(TINY, progress=False)
    entry = cache.entry_path("mlp", TINY.to_dict())
    assert (entry / "table.parquet").exists() and (entry / "config.json").exists()
    stamp = (entry / "table.parquet").stat().st_mtime_ns
    pd.testing.assert_frame_equal(run_mlp(TINY, progress=False), first)
    assert (entry / "table.parquet").stat().st_mtime_ns == stamp  # loaded, not retrained
    (entry / "table.parquet").write_bytes(b"truncated")
    with pytest.warns(UserWarning, match="unreadable cache entry"):
        again = run_mlp(TINY, progress=False)
    pd.testing.assert_frame_equal(again, first)
    assert cache.cache_key("mlp", TINY.to_dict()) != cache.cache_key("mlp", TINY.replace(seed=1).to_dict())


def test_cached_run_without_a_needed_metric_is_recomputed(isolated_cache):
    fresh = run_mlp(TINY, progress=False)
    old_style = fresh[fresh["metric"] != "rel_update_spectral"]  # as recorded before that metric existed
    cache.store("mlp", TINY.to_dict(), old_style)
    pd.testing.assert_frame_equal(run_mlp(TINY, progress=False), old_style)  # a chapter that does not need it
    with pytest.warns(UserWarning, match="predates the metric"):
        again = run_mlp(TINY, progress=False, require_metrics=["rel_update_spectral"])
    pd.testing.assert_frame_equal(again, fresh)
    # the spectral relative update ||W(t) - W(0)||_2 / ||W(0)||_2 is 0 at step 0 and never negative
    spectral = select(fresh, "rel_update_spectral")
    assert spectral.query("step == 0")["value"].abs().max() == 0 and (spectral["value"] >= 0).all()


def test_sweep_adds_configuration_columns():
    configs = [TINY.replace(condition=c) for c in ("res-relu", "nores-relu")]
    table = run_sweep(configs, progress=False, executor="serial")
    for config in configs:  # each run's own table, with its configuration columns added
        rows = table[table["condition"] == config.condition].drop(columns=["condition", "optimizer", "init_scale", "seed"])
        expected = run_mlp(config, progress=False)
        pd.testing.assert_frame_equal(rows.reset_index(drop=True), expected, check_categorical=False)
        assert set(table.loc[table["condition"] == config.condition, "seed"]) == {config.seed}
    assert len(table) == sum(len(run_mlp(config, progress=False)) for config in configs)


def test_divergence_is_an_outcome_recorded_with_its_step():
    exploding = TINY.replace(optimizer=OptimizerConfig("sgd", lr=0.9, momentum=0.99), init_scale=30.0)
    table = train_mlp(exploding, progress=False)
    diverged = select(table, "diverged")
    assert len(diverged) == 1 and math.isfinite(diverged["value"].iloc[0])
    step = int(diverged["step"].iloc[0])
    assert table["step"].max() == step and (table.loc[table.metric != "diverged", "step"] < step).all()
    with pytest.raises(TrainingDiverged, match="at step"):  # without a recorder there is no table to hold it
        train_mlp(exploding, progress=False, record=False)


def test_schedule_clipping_and_adamw_change_training_and_the_cache_key():
    base = TINY.replace(steps=12)
    assert base.to_dict() == MLPRunConfig(**{**base.__dict__}).to_dict()
    assert "lr_schedule" not in base.to_dict() and "grad_clip" not in base.to_dict()
    reference = select(train_mlp(base, progress=False), "weight_cos", "input", 1)["value"].to_numpy()
    for changed in (base.replace(lr_schedule="cosine"), base.replace(grad_clip=0.01),
                    base.replace(optimizer=OptimizerConfig("adamw", weight_decay=0.5))):
        assert changed.to_dict() != base.to_dict()
        values = select(train_mlp(changed, progress=False), "weight_cos", "input", 1)["value"].to_numpy()
        assert values[0] == reference[0] and not (values == reference).all()  # same start, other path
    with pytest.raises(ValueError, match="lr_schedule"):
        base.replace(lr_schedule="linear")
    with pytest.raises(ValueError, match="grad_clip"):
        base.replace(grad_clip=0.0)


def test_dense_trace_records_loss_every_step_count_and_continuity_at_its_stride():
    from geocont.recorder import TRACE_CONTINUITY_STRIDE

    table = train_mlp(TINY.replace(steps=20, trace_every=2), progress=False)
    loss_steps = sorted(select(table, "trace_loss")["step"])
    assert loss_steps == list(range(0, 21, 2))
    cos = select(table, "trace_weight_cos", "input", 1)
    assert sorted(cos["step"].unique()) == list(range(0, 21, 2 * TRACE_CONTINUITY_STRIDE))
    assert cos.groupby("step").size().eq(TINY.depth - 1).all() and cos["value"].between(0, 1).all()


def test_recorder_measures_how_far_each_layer_turned():
    d = 16
    v = torch.zeros(d)
    v[0] = 1.0
    u = torch.zeros(d)
    u[1] = 1.0
    spectrum = torch.diag(torch.linspace(0.5, 0.01, d))  # a small spectrum besides the leading spike...
    spectrum[:3, :3] = 0  # ...away from the coordinates the spike uses
    layers = [torch.nn.Parameter(10 * torch.outer(u, v) + spectrum) for _ in range(3)]
    recorder = ContinuityRecorder({"g": layers}, schedule=[0, 1], n_directions=1)
    for p in layers:
        p.grad = torch.randn(d, d)
    recorder.observe(0)
    angle = 30.0
    turned_v = torch.zeros(d)
    turned_v[0], turned_v[2] = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    with torch.no_grad():
        layers[1].copy_(10 * torch.outer(u, turned_v) + spectrum)  # only layer 1's v1 turns
    recorder.observe(1)
    table = rows_to_frame(recorder.rows)
    turns = select(table, "turn", "input").sort_values("layer")["value"].tolist()
    assert turns == pytest.approx([0.0, angle, 0.0], abs=0.5)
    assert select(table, "turn", "output")["value"].max() == pytest.approx(0.0, abs=0.5)  # u1 did not move
    assert select(table, "turn").query("step == 0").empty  # nothing to compare with at the first snapshot
    assert select(table, "co_rotation", "input")["value"].isna().all()  # layers 0 and 2 did not turn


def test_steps_override_epochs_and_the_schedule_adds_late_and_named_snapshots():
    config = TINY.replace(steps=30, n_snapshots=4, n_late_snapshots=3, snapshot_steps=[7])
    assert config.snapshot_steps == (7,)
    table = train_mlp(config, progress=False)
    steps = sorted(int(s) for s in table["step"].unique())
    assert steps[-1] == 30  # not epochs x batches (8)
    assert {0, 7, 10, 20, 30} <= set(steps)  # late every 10 steps
    with pytest.raises(ValueError, match=r"snapshot_steps \[7, 500\] must lie within the 30 training steps"):
        TINY.replace(steps=30, snapshot_steps=[7, 500])  # beyond the run: refused, not dropped silently
    with pytest.raises(ValueError, match="snapshot_steps"):
        TINY.replace(snapshot_steps=[-1])
    with pytest.raises(ValueError, match="n_late_snapshots"):
        TINY.replace(n_late_snapshots=-1)


def test_snapshots_record_training_set_metrics_and_gradient_norms():
    table = train_mlp(TINY, progress=False)
    loss = select(table, "train_set_loss")
    accuracy = select(table, "train_set_acc")
    assert len(loss) == len(accuracy) == table["step"].nunique()
    assert loss["value"].iloc[-1] < loss["value"].iloc[0] and accuracy["value"].between(0, 1).all()
    norms = select(table, "grad_norm")
    assert set(norms["layer"]) == set(range(TINY.depth)) and (norms["value"] > 0).all()


def test_a_finite_loss_with_an_overflowing_gradient_is_recorded_as_diverged():
    wild = MLPRunConfig(dataset="mnist-subset", max_train=256, width=8, depth=2, steps=12, batch_size=64,
                        n_snapshots=4, n_directions=2, optimizer=OptimizerConfig("sgd", lr=100.0, momentum=0.9))
    table = train_mlp(wild, progress=False)
    diverged = select(table, "diverged")
    assert len(diverged) == 1 and math.isfinite(diverged["value"].iloc[0])


@pytest.mark.parametrize("callers", [False, True])
def test_training_flushes_subnormals_and_restores_the_callers_setting(callers):
    from geocont.training import flush_denormal_enabled, train_with_recording

    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush subnormal floats")
    weight = torch.nn.Parameter(torch.ones(2))
    seen = []

    def compute_loss(step):
        seen.append(flush_denormal_enabled())
        return (weight ** 2).sum()

    try:
        torch.set_flush_denormal(callers)
        assert flush_denormal_enabled() is callers  # the probe reads what was set
        train_with_recording(compute_loss=compute_loss, optimizer=torch.optim.SGD([weight], lr=0.1), recorder=None,
                             total_steps=2, progress=False)
        assert seen == [True] * 3 and flush_denormal_enabled() is callers
        with pytest.raises(TrainingDiverged):  # restored on the way out of an error too
            train_with_recording(compute_loss=lambda step: torch.tensor(math.nan, requires_grad=True),
                                 optimizer=torch.optim.SGD([weight], lr=0.1), recorder=None, total_steps=2,
                                 progress=False)
        assert flush_denormal_enabled() is callers
    finally:
        torch.set_flush_denormal(False)

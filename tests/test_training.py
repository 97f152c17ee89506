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

TINY = MLPRunConfig(
    dataset="mnist-subset", max_train=256, width=16, depth=4, epochs=2, batch_size=64, n_snapshots=4, n_directions=3
)


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
    # where asked for or met, and near_linear_share in radial conditions only
    assert set(table["metric"].unique()) == set(METRICS) - {
        "val_loss",
        "cross_cos",
        "trace_loss",
        "trace_weight_cos",
        "diverged",
        "exploded",
        "near_linear_share",
        "pair_balance_motion",
        "unit_balance_motion",
    }
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
    cache.save("mlp", TINY.to_dict(), old_style)
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
        rows = table[table["condition"] == config.condition].drop(
            columns=["condition", "optimizer", "init_scale", "seed"]
        )
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
    for changed in (
        base.replace(lr_schedule="cosine"),
        base.replace(grad_clip=0.01),
        base.replace(optimizer=OptimizerConfig("adamw", weight_decay=0.5)),
    ):
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
    wild = MLPRunConfig(
        dataset="mnist-subset",
        max_train=256,
        width=8,
        depth=2,
        steps=12,
        batch_size=64,
        n_snapshots=4,
        n_directions=2,
        optimizer=OptimizerConfig("sgd", lr=100.0, momentum=0.9),
    )
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
        return (weight**2).sum()

    try:
        torch.set_flush_denormal(callers)
        assert flush_denormal_enabled() is callers  # the probe reads what was set
        train_with_recording(
            compute_loss=compute_loss,
            optimizer=torch.optim.SGD([weight], lr=0.1),
            recorder=None,
            total_steps=2,
            progress=False,
        )
        assert seen == [True] * 3 and flush_denormal_enabled() is callers
        with pytest.raises(TrainingDiverged):  # restored on the way out of an error too
            train_with_recording(
                compute_loss=lambda step: torch.tensor(math.nan, requires_grad=True),
                optimizer=torch.optim.SGD([weight], lr=0.1),
                recorder=None,
                total_steps=2,
                progress=False,
            )
        assert flush_denormal_enabled() is callers
    finally:
        torch.set_flush_denormal(False)


def test_the_step_schedule_switches_the_learning_rate_at_half_the_horizon():
    from geocont.training import lr_factor_for, step_factor, train_with_recording

    assert [step_factor(10, 0.1)(s) for s in range(10)] == [1.0] * 5 + [0.1] * 5
    assert [step_factor(7, 3.0)(s) for s in range(7)] == [1.0] * 3 + [3.0] * 4  # half = 7 // 2 = 3
    for lr, factor in ((1e-3, 0.1), (3e-4, 10 / 3)):  # "1e-3 then x0.1" and its mirror
        config = MLPRunConfig(optimizer=OptimizerConfig(lr=lr), lr_schedule="step", lr_step_factor=factor)
        weight = torch.nn.Parameter(torch.ones(2))
        optimizer = torch.optim.Adam([weight], lr=config.optimizer.lr)
        used = []
        optimizer.register_step_pre_hook(lambda opt, args, kwargs: used.append(opt.param_groups[0]["lr"]))  # noqa: B023
        train_with_recording(
            compute_loss=lambda step: (weight**2).sum(),  # noqa: B023
            optimizer=optimizer,
            recorder=None,
            total_steps=10,
            progress=False,
            lr_factor=lr_factor_for(config, 10),
        )
        # the updates after steps 0..4 at lr, those after steps 5..9 at lr * factor, exactly
        assert used == [lr] * 5 + [lr * factor] * 5
    assert lr_factor_for(MLPRunConfig(), 10) is None


def test_a_step_run_follows_the_constant_run_until_the_switch():
    base = TINY.replace(steps=12, snapshot_steps=[6, 7])
    stepped = base.replace(lr_schedule="step", lr_step_factor=0.1)
    assert stepped.to_dict() != base.to_dict()
    a = select(train_mlp(base, progress=False), "weight_cos", "input", 1).set_index(["step", "layer"])["value"]
    b = select(train_mlp(stepped, progress=False), "weight_cos", "input", 1).set_index(["step", "layer"])["value"]
    assert a.loc[:6].equals(b.loc[:6])  # the snapshot at step 6 has seen updates after steps 0..5: 0..5 at lr
    assert not a.loc[7].equals(b.loc[7])  # the update after step 6 was the first at lr x 0.1


PROBE_METRICS = [
    "mean_input_cos",
    "mean_input_share",
    "mean_input_pair_cos",
    "logit_change",
    "product_change",
    "near_linear_share",
]


@pytest.mark.parametrize("condition", ["res-relu", "res-relu-batch-centred", "res-radial-track"])
def test_the_probe_changes_nothing_in_training(condition):
    config = TINY.replace(condition=condition, steps=10, n_snapshots=5)
    probed = train_mlp(config, progress=False)
    rng_after_probed = torch.get_rng_state()
    plain = train_mlp(config, progress=False, probe=False)
    assert torch.equal(torch.get_rng_state(), rng_after_probed)  # no global random draws
    assert not plain["metric"].isin(PROBE_METRICS).any()
    rest = probed[~probed["metric"].isin(PROBE_METRICS)].reset_index(drop=True)
    pd.testing.assert_frame_equal(rest, plain, check_categorical=False)  # bit-identical training numbers
    steps = sorted(plain["step"].unique())
    cos = select(probed, "mean_input_cos", "input", 1, group="hidden")
    assert sorted(cos["step"].unique()) == steps and set(cos["layer"]) == set(range(TINY.depth))
    assert cos["value"].between(0, 1 + 1e-6).all()
    pairs = select(probed, "mean_input_pair_cos", "input", 1, group="hidden")
    assert len(pairs) == len(steps) * (TINY.depth - 1) and pairs["value"].between(0, 1 + 1e-9).all()
    share = select(probed, "mean_input_share", group="hidden")
    assert len(share) == len(steps) * TINY.depth and share["value"].between(0, 1 + 1e-12).all()
    for metric in ("logit_change", "product_change"):
        change = select(probed, metric, group="model")
        assert sorted(change["step"]) == steps[1:] and (change["value"] > 0).all()  # no row at the first snapshot
    near = select(probed, "near_linear_share", group="hidden")
    assert (len(near) == len(steps) * TINY.depth) == (condition == "res-radial-track")


def test_probe_values_on_a_model_with_known_answers():
    from geocont.mlp import ResidualMLP
    from geocont.training import MLPProbe

    d = 8
    model = ResidualMLP("res-none", in_features=d, width=d, depth=2, n_classes=3)
    x = torch.randn(32, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    x = (x - x.mean(0)).float()  # the probe batch's mean is 0 ...
    c = torch.zeros(d)
    c[0], c[1] = 3.0, 4.0  # ... so the first block's input, x + c, has mean c
    with torch.no_grad():
        model.embed.weight.copy_(torch.eye(d))
        model.embed.bias.copy_(c)
        for block in model.blocks:
            block.linear.weight.zero_()
            block.linear.bias.zero_()
    recorder = ContinuityRecorder({"hidden": model.hidden_weights()}, [0, 1], n_directions=1)
    probe = MLPProbe(model, x, recorder)
    probe(0)
    table = rows_to_frame(recorder.rows)
    assert select(table, "mean_input_cos", "input", 1)["value"].isna().all()  # W = 0 defines no v1
    share = select(table, "mean_input_share").set_index("layer")["value"]
    assert share[0] == pytest.approx(25.0 / (25.0 + float((x.double() ** 2).sum(1).mean())), rel=1e-6)
    assert select(table, "logit_change").empty and select(table, "product_change").empty
    a, spread = 0.5, torch.diag(torch.linspace(0.1, 0.01, d))  # a small spectrum besides the spike...
    spread[:3, :3] = 0  # ...away from the coordinates the spike and the means use
    with torch.no_grad():
        # W_0: v1 along the mean c of its input; W_1: v1 orthogonal to the mean (I + W_0) c of its input
        model.blocks[0].linear.weight.copy_(a * torch.outer(torch.eye(d)[2], c / 5) + spread)
        mean_1 = c + model.blocks[0].linear.weight @ c
        orthogonal = torch.zeros(d)
        orthogonal[0], orthogonal[1] = -mean_1[1], mean_1[0]
        orthogonal[2:] = 0
        assert float(orthogonal @ mean_1) == pytest.approx(0, abs=1e-6)
        model.blocks[1].linear.weight.copy_(5 * torch.outer(torch.eye(d)[3], orthogonal / orthogonal.norm()))
        model.head.weight.mul_(2)  # with the hidden map changed too: logits compared below by hand
    before = model.head.weight / 2
    recorder.rows.clear()
    probe(1)
    table = rows_to_frame(recorder.rows)
    cos = select(table, "mean_input_cos", "input", 1).set_index("layer")["value"]
    assert cos[0] == pytest.approx(1.0, abs=1e-5) and cos[1] == pytest.approx(0.0, abs=1e-5)
    with torch.no_grad():
        h = x + c
        h0 = h
        for block in model.blocks:
            h = h + block.linear(h)
        old_logits = h0 @ before.T + model.head.bias  # at the first probe both W_l were 0
        new_logits = h @ model.head.weight.T + model.head.bias
        eye = torch.eye(d, dtype=torch.float64)
        product = (eye + model.blocks[1].linear.weight.double()) @ (eye + model.blocks[0].linear.weight.double())
    expected_logits = float((new_logits - old_logits).norm() / old_logits.norm())
    assert float(select(table, "logit_change")["value"].iloc[0]) == pytest.approx(expected_logits, rel=1e-5)
    expected_product = float((product - eye).norm() / eye.norm())
    assert float(select(table, "product_change")["value"].iloc[0]) == pytest.approx(expected_product, rel=1e-12)
    assert select(table, "near_linear_share").empty  # not a radial condition


def test_the_probe_measures_on_the_first_training_examples_in_eval_mode(monkeypatch):
    from geocont import training

    seen = []
    original = training.MLPProbe.__call__

    def spy(self, step):
        seen.append((step, len(self.x), self.model.training))
        original(self, step)
        assert self.model.training  # back in training mode

    monkeypatch.setattr(training.MLPProbe, "__call__", spy)
    train_mlp(TINY.replace(steps=4, n_snapshots=3), progress=False)
    assert seen == [(step, min(training.PROBE_EXAMPLES, 256), True) for step in (0, 1, 4)]


@pytest.mark.parametrize("condition", ["res-none", "res-relu"])
def test_the_balances_are_recorded_on_request_and_change_nothing_else(condition):
    config = TINY.replace(condition=condition, steps=12, n_snapshots=4)
    plain = train_mlp(config, progress=False)
    balanced = train_mlp(config.replace(record_balance=True), progress=False)
    extra = balanced["metric"].isin(["pair_balance_motion", "unit_balance_motion"])
    pd.testing.assert_frame_equal(balanced[~extra].reset_index(drop=True), plain, check_categorical=False)
    pairs = select(balanced, "pair_balance_motion", "", 0, group="hidden")
    assert sorted(pairs["layer"].unique()) == list(range(TINY.depth - 1))
    assert (pairs.loc[pairs["step"] == 0, "value"] == 0).all() and (pairs.loc[pairs["step"] > 0, "value"] > 0).all()
    unit = balanced[balanced["metric"] == "unit_balance_motion"]
    assert unit.loc[unit["step"] == 0, "value"].item() == 0 and (unit.loc[unit["step"] > 0, "value"] > 0).all()


def test_the_step_schedule_switches_where_it_is_told():
    from geocont.training import step_factor

    half, early = step_factor(100, 0.1), step_factor(100, 0.1, at=15)
    assert [half(s) for s in (49, 50)] == [1.0, 0.1] and [early(s) for s in (14, 15)] == [1.0, 0.1]

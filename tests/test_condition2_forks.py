"""The forks from the formed state (geocont.chapters.condition2.forks): their runs, and the readings of drift's
predictions on tables built to say yes or no."""

import pandas as pd
import pytest

from geocont.chapters.condition2 import compute, forks
from geocont.tables import MODEL_LAYER, RUN_COLUMNS

STEPS = 1000
SWITCH = forks.fork_switch(STEPS)


def test_the_forks_share_the_base_run_to_the_switch_and_snapshot_the_equal_distance_steps():
    settings = compute.CHAPTER.configure("cpu")
    configs = forks.fork_configs(settings.base, settings.seeds)
    assert len(configs) == len(forks.FORK_CONDITIONS) * len(forks.FORK_RATES) * len(settings.seeds)
    assert forks.fork_switch(settings.base.steps) == 147
    for rate in forks.FORK_RATES:
        mine = forks.forks_at(configs, rate)
        assert len(mine) == 2 * len(settings.seeds)
        assert {c.lr_switch_step for c in mine} == {147} and all(c.record_balance for c in mine)
        equal = forks.equal_distance_step(rate, settings.base.steps)
        assert equal == settings.base.steps or equal in mine[0].snapshot_steps
        assert (equal - 147) * rate == pytest.approx((settings.base.steps - 147) * min(forks.FORK_RATES), rel=1e-3)
    assert {c.optimizer.lr for c in configs} == {settings.base.optimizer.lr}  # the same run up to the switch


def _fork_table(
    rate: float, none_loss_per_unit_lr: float, relu_fall: float, balance_per_unit_lr: float
) -> pd.DataFrame:
    """Both conditions of one fork, 2 seeds, 2 layer pairs: res-none's weight v1 falls by ``none_loss_per_unit_lr``
    per unit of summed lr after the switch (from 0.8, floored at 0.1), res-relu's by ``relu_fall`` over the run;
    res-none's pair balance grows by ``balance_per_unit_lr`` per unit of summed lr."""
    rows = []
    steps = sorted({0, SWITCH, forks.equal_distance_step(rate, STEPS), *range(SWITCH, STEPS + 1, 50), STEPS})
    for seed, jitter in ((0, -0.01), (1, 0.01)):
        for step in steps:
            distance = max(0, step - SWITCH) * rate
            none = max(0.1, 0.8 - none_loss_per_unit_lr * distance) + jitter
            relu = 0.9 - relu_fall * max(0, step - SWITCH) / (STEPS - SWITCH) + jitter
            balance = balance_per_unit_lr * distance + 0.01 * step / STEPS
            for condition, value in (("res-none", none), ("res-relu", relu)):
                keys = dict(condition=condition, optimizer="adam", init_scale=1.0, seed=seed)
                for layer in (0, 1):
                    rows.append(
                        dict(
                            step=step,
                            group="hidden",
                            layer=layer,
                            metric="weight_cos",
                            space="input",
                            direction=1,
                            value=value - 0.02 * layer * distance,
                            **keys,
                        )
                    )
                    rows.append(
                        dict(
                            step=step,
                            group="hidden",
                            layer=layer,
                            metric="pair_balance_motion",
                            space="",
                            direction=0,
                            value=balance * (1 + layer),
                            **keys,
                        )
                    )
                rows.append(
                    dict(
                        step=step,
                        group="model",
                        layer=MODEL_LAYER,
                        metric="unit_balance_motion",
                        space="",
                        direction=0,
                        value=0.01 * step / STEPS,
                        **keys,
                    )
                )
    return pd.DataFrame(rows)[RUN_COLUMNS + ["condition", "optimizer", "init_scale", "seed"]]


def test_a_fall_set_by_the_summed_rate_reads_for_drift_everywhere():
    tables = {
        rate: _fork_table(rate, none_loss_per_unit_lr=0.6, relu_fall=0.0, balance_per_unit_lr=0.5)
        for rate in forks.FORK_RATES
    }
    found = forks.fork_findings(tables, STEPS)
    assert found.equal_distance_verdict() == "reproduced"
    assert found.fall_grows_with_rate()[1] == "reproduced"
    assert found.relu_holds()[1] == "reproduced"
    assert found.balance_grows_with_rate()[1] == "reproduced"
    assert found.balance_fall_verdict() == "reproduced"
    assert set(forks.fork_readings(found).values()) == {"for"}


def test_a_fall_set_by_the_steps_and_a_falling_baseline_read_against_drift():
    # the same fall per step at every rate: per unit of summed rate the small rate falls 20x faster
    tables = {
        rate: _fork_table(rate, none_loss_per_unit_lr=0.6e-3 / rate, relu_fall=0.5, balance_per_unit_lr=0.0)
        for rate in forks.FORK_RATES
    }
    found = forks.fork_findings(tables, STEPS)
    assert found.equal_distance_verdict() == "not reproduced"
    assert found.fall_grows_with_rate()[1] == "not reproduced"
    assert found.relu_holds()[1] == "not reproduced"
    assert found.balance_grows_with_rate()[1] == "not reproduced"
    readings = forks.fork_readings(found)
    assert readings["forks at equal summed rate"] == readings["res-relu holds at every rate"] == "against"


def test_without_forks_there_are_no_findings_and_no_readings():
    assert forks.fork_findings({}, STEPS) is None and forks.fork_readings(None) == {}
    assert forks.fork_findings({1e-3: pd.DataFrame()}, STEPS) is None


def test_every_tallied_fork_and_balance_test_can_read_both_for_and_against_drift():
    """The two synthetic worlds above: every test the drift tally counts reads "for" in one and "against" in the
    other (a test that could only ever read one way would decide nothing)."""
    worlds = [
        dict(none_loss_per_unit_lr=0.6, relu_fall=0.0, balance_per_unit_lr=0.5),
        dict(none_loss_per_unit_lr=0.6e-3, relu_fall=0.5, balance_per_unit_lr=0.0),
    ]
    readings = []
    for world in worlds:
        scale = world["none_loss_per_unit_lr"]
        tables = {
            rate: _fork_table(rate, **{**world, "none_loss_per_unit_lr": scale / (rate if scale < 0.1 else 1)})
            for rate in forks.FORK_RATES
        }
        found = forks.fork_findings(tables, STEPS)
        readings.append({**forks.fork_readings(found), **forks.balance_readings(found)})
    for test in readings[0]:
        if test == "balance moves where continuity falls":  # a zero balance has no rank correlation: not tested
            assert readings[0][test] == "for"
            continue
        assert {readings[0][test], readings[1][test]} == {"for", "against"}, test


def test_the_fork_fall_margin_is_the_books_margin_lost_after_the_switch():
    assert forks.fall_rate_margin(STEPS) == pytest.approx(1000 * 0.10 / (STEPS - forks.fork_switch(STEPS)))

"""The run-validity rule (geocont.validity): trained, exploded at step k, or diverged; no claim reads past k."""

import math

import numpy as np
import pandas as pd
import pytest

from geocont.statistics import estimate_at_step, fall_from_peak, final_estimate, per_run, settledness
from geocont.tables import EXPLODED, diverged_runs, make_row, rows_to_frame
from geocont.validity import cut_exploded, cut_sweep, explosion_step, run_status


def run(losses, v1, *, seed=0, condition="res-none"):
    """A run table: a dense trace of ``losses`` (every 10 steps) and a weight_cos snapshot every 10 steps."""
    rows = []
    for i, (loss, value) in enumerate(zip(losses, v1)):
        rows.append(make_row(10 * i, "model", -1, "trace_loss", "", 0, loss))
        rows.append(make_row(10 * i, "hidden", 0, "weight_cos", "input", 1, value))
    return rows_to_frame(rows).assign(condition=condition, optimizer="adam", init_scale=1.0, seed=seed)


STEADY = [2.0, 1.0, 0.6, 0.5, 0.45, 0.42, 0.41, 0.40]
SPIKE_RECOVERED = [2.0, 1.0, 0.6, 0.5, 80.0, 0.45, 0.42, 0.40]
EXPLODES = [2.0, 1.0, 0.6, 0.5, 0.45, 9.0, 300.0, 1e5]


def test_the_rule_tells_trained_exploded_and_recovered_apart():
    steps = np.arange(8) * 10
    assert explosion_step(steps, np.array(STEADY)) is None
    assert explosion_step(steps, np.array(SPIKE_RECOVERED)) is None  # a spike the run recovers from
    assert explosion_step(steps, np.array(EXPLODES)) == 50
    # a dip back under the event's threshold is a recovery; the explosion is the later event that stays up
    assert explosion_step(steps, np.array([2.0, 0.5, 9.0, 1.0, 0.5, 50.0, 60.0, 70.0])) == 50


def test_a_memorised_run_needs_the_floor_to_explode():
    steps = np.arange(6) * 10
    assert explosion_step(steps, np.array([1.0, 1e-4, 1e-5, 1e-5, 5e-4, 8e-3])) is None  # under MEMORISED_LOSS
    assert explosion_step(steps, np.array([1.0, 1e-4, 1e-5, 1e-5, 5e-2, 8e-2])) == 40


def test_an_exploded_run_is_cut_at_its_event_and_marked():
    table = cut_exploded(run(EXPLODES, [0.1, 0.3, 0.6, 0.8, 0.9, 0.5, 0.2, 0.1]))
    assert table["step"].max() == 50
    marker = table[table["metric"] == EXPLODED]
    assert marker["step"].tolist() == [50] and marker["value"].tolist() == [1e5]
    assert run_status(table) == ("exploded", 50)
    assert cut_exploded(table).equals(table)  # idempotent
    failed = diverged_runs(table)
    assert failed[["seed", "step", "status"]].values.tolist() == [[0, 50, "exploded"]]


def test_no_claim_reads_an_exploded_run_past_its_event():
    """Two runs that trained and one that exploded after its v1 fell: the end-of-run claims leave it out and name it,
    claims at a step before the event read it."""
    trained = [run(STEADY, [0.1, 0.3, 0.6, 0.8, 0.85, 0.85, 0.85, 0.85], seed=s) for s in (1, 2)]
    exploded = run(EXPLODES, [0.1, 0.3, 0.6, 0.8, 0.9, 0.5, 0.2, 0.1], seed=0)
    table = cut_sweep(pd.concat([exploded, *trained], ignore_index=True))
    final = final_estimate(table, "weight_cos", "input", 1)
    assert (final.n, final.n_diverged, final.mean) == (2, 1, pytest.approx(0.85))
    assert "res-none seed 0 exploded at step 50" in final.diverged_text
    early = estimate_at_step(table, 30, "weight_cos", "input", 1)
    assert (early.n, early.mean) == (3, pytest.approx(0.8))
    fall = fall_from_peak(table)
    assert fall.final.n == 2 and fall.peak.n == 2 and not fall.falls
    assert per_run(table, "weight_cos", "input", 1)["step"].max() == 70
    assert table[(table["seed"] == 0) & (table["metric"] == "weight_cos")]["step"].max() == 40
    moving = settledness(per_run(table[table["seed"] != 0], "weight_cos", "input", 1))
    assert moving.settled


def test_a_diverged_run_keeps_its_own_row_and_status():
    rows = run(STEADY[:4], [0.1, 0.2, 0.3, 0.4])
    diverged = pd.concat(
        [rows, rows_to_frame([make_row(35, "model", -1, "diverged", "", 0, 0.5)]).assign(**rows.iloc[0, 7:].to_dict())]
    )
    assert run_status(diverged) == ("diverged", 35)
    assert cut_exploded(diverged) is diverged
    assert diverged_runs(diverged)["status"].tolist() == ["diverged"]
    assert not math.isnan(final_estimate(cut_sweep(run(STEADY, STEADY)), "weight_cos", "input", 1).mean)

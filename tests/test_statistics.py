"""Aggregation (two-stage: layers, then seeds) and the verdict rules, on synthetic tables."""

import math

import pandas as pd
import pytest

from helpers import synthetic, timeline_run

from geocont import statistics
from geocont.tables import make_row, rows_to_frame



def test_final_estimate_is_mean_over_layers_then_seeds():
    table = synthetic({("a", 0): [0.8, 0.1], ("a", 1): [0.6, 0.1]})
    est = statistics.final_estimate(table, "weight_cos", "input", 1, condition="a")
    assert est.mean == pytest.approx(0.705) and est.n == 2
    assert est.std == pytest.approx(math.sqrt(0.02))
    start = statistics.estimate_at_step(table, 0, "weight_cos", "input", 1, condition="a")
    assert start.mean == pytest.approx(0.055)


def test_verdict_rules():
    E = statistics.Estimate
    assert statistics.verdict_for_value(E(0.95, 0.01, 3), 0.93) == "reproduced"
    assert statistics.verdict_for_value(E(0.40, 0.01, 3), 0.22) == "partly reproduced"
    assert statistics.verdict_for_value(E(0.75, 0.01, 3), 0.22) == "not reproduced"
    assert statistics.verdict_for_difference(E(0.9, 0.01, 3), E(0.5, 0.01, 3)) == "reproduced"
    assert statistics.verdict_for_difference(E(0.9, 0.3, 3), E(0.5, 0.3, 3)) == "partly reproduced"  # noisy
    assert statistics.verdict_for_difference(E(0.46, 0.02, 3), E(0.45, 0.02, 3)) == "not reproduced"  # no difference
    assert statistics.verdict_for_difference(E(0.4, 0.01, 3), E(0.5, 0.01, 3)) == "not reproduced"
    assert statistics.closer_to(E(0.7, 0, 3), E(0.8, 0, 3), E(0.1, 0, 3)) == "reproduced"
    assert statistics.closer_to(E(0.2, 0, 3), E(0.8, 0, 3), E(0.1, 0, 3)) == "not reproduced"
    assert statistics.closer_to(E(0.50, 0.05, 3), E(0.71, 0.02, 3), E(0.30, 0.06, 3)) == "inconclusive"  # midway
    assert statistics.verdict_for_value(E(math.nan, math.nan, 0), 0.5) == "not tested"
    assert str(E(0.5, 0.1, 3)) == "0.50 ± 0.10" and str(E(0.5, math.nan, 1)) == "0.50 (1 seed)"


def test_rank_correlation_and_its_verdict():
    x = pd.Series([0.03, 0.1, 0.3, 1.0, 3.0] * 3)
    increasing = statistics.rank_correlation(x, x * 10 + pd.Series(range(15)) * 1e-3)
    assert increasing.rho > 0.95 and increasing.low > 0.9  # (ties in x keep rho just below 1)
    assert statistics.verdict_for_correlation(increasing, +1) == "reproduced"
    assert statistics.verdict_for_correlation(increasing, -1) == "not reproduced"
    noise = statistics.rank_correlation(x, pd.Series([5, 1, 4, 2, 3, 2, 5, 1, 3, 4, 1, 3, 2, 5, 4]))
    assert noise.low < 0 < noise.high and statistics.verdict_for_correlation(noise, +1) != "reproduced"
    assert math.isnan(statistics.rank_correlation(x[:2], x[:2]).rho)  # too few pairs




def test_undefined_pairs_are_counted_and_left_out_of_the_means():
    from geocont.book.chapter import undefined_sentence

    table = synthetic({("res-relu", 0): [0.9]})
    assert "4 pair values" in undefined_sentence(table)  # it renders the count
    table.loc[table.index[-1], "value"] = math.nan  # the last step's pair 1: flagged
    counts = statistics.undefined_pairs(table)
    assert counts[["undefined", "pairs"]].values.tolist() == [[1, 4]]
    assert statistics.final_estimate(table, "weight_cos", "input", 1).mean == pytest.approx(0.90)  # pair 0 only
    assert undefined_sentence(table).startswith("1 of 4 pair values compared a singular direction that is undefined")


def test_change_over_last_third_and_when_a_claim_holds():
    rows = [dict(condition="a", optimizer="adam", init_scale=1.0, seed=seed, step=step, group=g, space="input",
                 value=v + seed * 0.01)
            for seed in (0, 1) for g in ("q", "k") for step, v in ((0, 0.1), (400, 0.5), (2000, 0.3), (3000, 0.2))]
    frame = pd.DataFrame(rows)
    change = statistics.change_over_last_per_run(frame, 1 / 3, keys=["group"])
    assert set(change["start"]) == {2000}  # the last snapshot at or before 2/3 of 3000 steps
    assert change["value"].tolist() == pytest.approx([-0.1] * 4)
    assert not statistics.settled(statistics.estimate(change["value"]))
    assert statistics.settled(statistics.Estimate(0.03, 0.01, 2))
    assert statistics.at_step(frame, 1000)["step"].unique().tolist() == [400]
    assert statistics.holds_when("reproduced", "reproduced") == "throughout"
    assert statistics.holds_when("reproduced", "partly reproduced") == "only early"
    assert statistics.holds_when("not reproduced", "reproduced") == "only late"
    assert statistics.holds_when("not reproduced", "not reproduced") == "at neither"
    assert statistics.holds_when("not tested", "reproduced") == "not tested"


def test_up_to_step_and_change_over_last_third():
    table = timeline_run("a", 0, 1.0, [0, 1, 2, 3, 4, 5], [0.1, 0.5, 0.9, 0.6, 0.3, 0.3])  # steps 0, 1, 3, 10, 30, 100
    assert sorted(statistics.up_to_step(table, 10)["step"].unique()) == [0, 1, 3, 10]
    # the last third starts after step 66: the value at step 30 (0.3) to the end (0.3)
    assert statistics.change_over_last(table, "weight_cos", "input", 1).mean == pytest.approx(0.0)
    # over the last 95%: from step 3 (0.9) to the end
    assert statistics.change_over_last(table, "weight_cos", "input", 1, fraction=0.95).mean == pytest.approx(-0.6)
    early = statistics.up_to_step(table, 10)
    assert statistics.final_estimate(early, "weight_cos", "input", 1).mean == pytest.approx(0.6)


def test_turn_rates_divide_by_the_snapshot_interval_and_the_window_mean_weights_by_it():
    rows = []
    for step, turn in ((10, 1.0), (30, 4.0), (100, 7.0)):
        rows.append(make_row(step, "hidden", 0, "turn", "input", 1, turn))
    rows.append(make_row(0, "hidden", 0, "weight_cos", "input", 1, 0.1))
    table = rows_to_frame(rows).assign(condition="a", optimizer="adam", init_scale=1.0, seed=0)
    rates = statistics.turn_rates(table).sort_values("step")
    assert list(rates["value"]) == pytest.approx([100.0, 200.0, 100.0])  # degrees per 1,000 steps
    window = statistics.drift_window_mean(rates, start_fraction=0.1)  # steps after 10: 30 and 100
    assert window["value"].iloc[0] == pytest.approx((200 * 20 + 100 * 70) / 90)

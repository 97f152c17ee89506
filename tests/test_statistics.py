"""Aggregation (two-stage: layers, then seeds) and the verdict rules, on synthetic tables."""

import math

import numpy as np
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
    rows = [
        dict(
            condition="a",
            optimizer="adam",
            init_scale=1.0,
            seed=seed,
            step=step,
            group=g,
            space="input",
            value=v + seed * 0.01,
        )
        for seed in (0, 1)
        for g in ("q", "k")
        for step, v in ((0, 0.1), (400, 0.5), (2000, 0.3), (3000, 0.2))
    ]
    frame = pd.DataFrame(rows)
    change = statistics.change_over_last_per_run(frame, 1 / 3, keys=["group"])
    assert set(change["start"]) == {2000}  # the first snapshot at or after 2/3 of 3000 steps
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
    # the last third starts at step 67: it holds only the last snapshot, so no movement can be measured
    assert math.isnan(statistics.change_over_last(table, "weight_cos", "input", 1).mean)
    # over the last 95%: from step 10 (0.6), the first snapshot at or after step 5, to the end
    assert statistics.change_over_last(table, "weight_cos", "input", 1, fraction=0.95).mean == pytest.approx(-0.3)
    early = statistics.up_to_step(table, 10)
    assert statistics.final_estimate(early, "weight_cos", "input", 1).mean == pytest.approx(0.6)


def test_turn_rates_divide_by_the_snapshot_interval_and_the_window_mean_weights_by_it():
    rows = []
    for step, turn in ((10, 1.0), (30, 4.0), (100, 7.0)):
        rows.append(make_row(step, "hidden", 0, "turn", "input", 1, turn))
    for step in (0, 10, 30, 100):  # the snapshots
        rows.append(make_row(step, "hidden", 0, "weight_cos", "input", 1, 0.1))
    for step in range(0, 101, 20):  # dense-trace points between them: not snapshots
        rows.append(make_row(step, "model", -1, "trace_loss", "", 0, 1.0))
    table = rows_to_frame(rows).assign(condition="a", optimizer="adam", init_scale=1.0, seed=0)
    rates = statistics.turn_rates(table).sort_values("step")
    assert list(rates["value"]) == pytest.approx([100.0, 200.0, 100.0])  # degrees per 1,000 steps
    window = statistics.drift_window_mean(rates, start_fraction=0.1)  # steps after 10: 30 and 100
    assert window["value"].iloc[0] == pytest.approx((200 * 20 + 100 * 70) / 90)


# ---------------------------------------------------------------------------------------------
# The verdict rules that cannot pass for the wrong reason (docs/design.md, "Verdict rules")
# ---------------------------------------------------------------------------------------------


def test_the_random_levels_spread_is_that_of_a_pair_mean_of_random_abs_cos():
    import numpy as np

    # large d: per pair sqrt((1 - 2/pi) / d); over n pairs, divided by sqrt(n)
    assert statistics.random_level_sd(4096, 1) == pytest.approx(math.sqrt((1 - 2 / math.pi) / 4096), rel=1e-3)
    assert statistics.random_level_sd(256, 4) == pytest.approx(statistics.random_level_sd(256, 1) / 2)
    assert statistics.random_level_sd(8, 1) == pytest.approx(0.200758, abs=1e-6)  # exact: sqrt(1/8 - E|cos|^2)
    rng = np.random.default_rng(0)  # a chain of 4 random unit vectors in 32 dims: 3 adjacent pairs
    chains = rng.standard_normal((20000, 4, 32))
    chains /= np.linalg.norm(chains, axis=-1, keepdims=True)
    pair_means = np.abs((chains[:, :-1] * chains[:, 1:]).sum(-1)).mean(-1)
    assert pair_means.std() == pytest.approx(statistics.random_level_sd(32, 3), rel=0.03)
    with pytest.raises(ValueError, match="n_pairs"):
        statistics.random_level_sd(32, 0)


def test_the_random_level_is_an_equivalence_test_whose_every_verdict_can_come_out():
    E = statistics.Estimate
    baseline, margin = 0.0499, statistics.random_level_margin(256)
    assert margin == pytest.approx(statistics.random_level_sd(256, 1)) and 0.03 < margin < 0.04
    # the interval: mean +- t(0.975, 2) x sd / sqrt(3) = 0.07 +- 4.303 x 0.005 / 1.732
    assert statistics.mean_interval(E(0.07, 0.005, 3)) == pytest.approx((0.057579, 0.082421), abs=1e-6)
    # whole interval inside the margin: reproduced; wholly outside: not reproduced; straddling: inconclusive
    assert statistics.verdict_at_random_level(E(0.07, 0.005, 3), baseline, margin) == "reproduced"
    assert statistics.verdict_at_random_level(E(0.15, 0.005, 3), baseline, margin) == "not reproduced"
    assert statistics.verdict_at_random_level(E(0.10, 0.041, 3), baseline, margin) == "inconclusive"
    assert statistics.verdict_at_random_level(E(0.0, 0.002, 3), 0.05, 0.01) == "not reproduced"  # below it, too
    # three times the random level passes a value tolerance of 0.10, never this rule
    assert statistics.verdict_for_value(E(0.145, 0.01, 3), baseline) == "reproduced"
    assert statistics.verdict_at_random_level(E(0.145, 0.01, 3), baseline, margin) == "not reproduced"
    # one seed: its assumed spread (0.05) makes an interval wider than the band, so it never confirms the level
    assert statistics.verdict_at_random_level(E(baseline, math.nan, 1), baseline, margin) == "inconclusive"
    assert statistics.verdict_at_random_level(E(0.40, math.nan, 1), baseline, margin) == "not reproduced"
    assert statistics.verdict_at_random_level(statistics.known(0.06), baseline, margin) == "reproduced"
    assert statistics.verdict_at_random_level(E(math.nan, math.nan, 0), baseline, margin) == "not tested"
    with pytest.raises(ValueError, match="margin"):
        statistics.verdict_at_random_level(E(0.07, 0.01, 3), baseline, math.nan)


def test_more_seed_noise_never_turns_an_estimate_into_the_random_level():
    """A property over 5,000 random estimates: adding seed noise never makes "reproduced" of another verdict."""
    E = statistics.Estimate
    baseline, margin = 0.05, statistics.random_level_margin(256)
    rng = np.random.default_rng(0)
    seen = set()
    for mean, sd, extra, n in zip(
        rng.uniform(0, 0.3, 5000), rng.uniform(0, 0.1, 5000), rng.uniform(0, 0.2, 5000), rng.integers(2, 9, 5000)
    ):
        quiet = statistics.verdict_at_random_level(E(mean, sd, int(n)), baseline, margin)
        noisy = statistics.verdict_at_random_level(E(mean, sd + extra, int(n)), baseline, margin)
        seen.add(quiet)
        assert noisy != "reproduced" or quiet == "reproduced"
        assert quiet != "inconclusive" or noisy == "inconclusive"
    assert seen == {"reproduced", "inconclusive", "not reproduced"}


def _noisy_flat_runs(level=0.5, noise=0.05, snapshots=60, seeds=8) -> pd.DataFrame:
    """One layer pair per run, a flat level with iid noise over ``snapshots`` snapshots after step 0."""
    import numpy as np

    rng = np.random.default_rng(0)
    tables = []
    for seed in range(seeds):
        rows = [make_row(0, "hidden", 0, "weight_cos", "input", 1, 0.05)]
        rows += [
            make_row(10 * s, "hidden", 0, "weight_cos", "input", 1, level + noise * rng.standard_normal())
            for s in range(1, snapshots + 1)
        ]
        tables.append(rows_to_frame(rows).assign(condition="a", optimizer="adam", init_scale=1.0, seed=seed))
    return pd.concat(tables, ignore_index=True)


def test_a_windowed_peak_of_a_flat_noisy_series_stays_near_its_level_and_makes_no_fall():
    table = _noisy_flat_runs()
    raw = statistics.max_per_seed(table, "weight_cos", "input", 1)
    windowed = statistics.peaks_per_seed(table, "weight_cos", "input", 1)
    assert list(windowed.index) == list(raw.index) == list(range(8))
    raw_bias, windowed_bias = raw.mean() - 0.5, windowed.mean() - 0.5
    assert raw_bias > 0.09 and windowed_bias < 0.5 * raw_bias  # the max of 60 sits ~2.3 noise sds high
    fall = statistics.fall_from_peak(table)
    assert fall.peak.mean == pytest.approx(windowed.mean()) and fall.verdict == "not reproduced"
    # the largest single snapshot as the peak would make a clear fall out of the noise
    assert statistics.Fall(statistics.estimate(raw), fall.final).verdict == "reproduced"


def test_the_windowed_peak_is_the_best_mean_of_five_snapshots_and_its_step_the_windows_centre():
    steps = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90]
    values = [0.9, 0.95, 0.1, 0.1, 0.1, 0.5, 0.5, 0.5, 0.5, 0.5]  # step 0 (0.9) is left out
    peak, step = statistics.window_peak(steps, values)
    assert peak == pytest.approx(0.5) and step == 70  # a sustained 0.5 (steps 50-90), not the one-snapshot 0.95
    assert statistics.window_peak(steps[::-1], values[::-1]) == (peak, step)  # step order, not row order
    assert statistics.window_peak([0, 5, 10, 20], [0.9, 0.2, 0.4, 0.9]) == (pytest.approx(0.5), 10)  # fewer: all
    assert statistics.window_peak([0, 5, 10], [0.9, math.nan, 0.4]) == (pytest.approx(0.4), 10)  # NaN left out
    assert math.isnan(statistics.window_peak([0], [0.9])[0])
    table = timeline_run("a", 3, 1.0, [0] * 6, [0.1, 0.5, 0.9, 0.6, 0.3, 0.3])  # 5 snapshots after step 0
    peaks = statistics.windowed_peaks(table, "weight_cos", "input", 1)
    assert peaks.to_dict("records") == [dict(seed=3, peak=pytest.approx(0.52), step=10)]
    peak, final = statistics.peak_and_final(table, "weight_cos", "input", 1)
    assert peak.mean == pytest.approx(0.52) and final.mean == pytest.approx(0.3)
    assert statistics.max_per_seed(table, "weight_cos", "input", 1).tolist() == [0.9]


def test_a_single_seed_counts_as_the_floor_spread_and_a_known_number_as_exact():
    E = statistics.Estimate
    assert statistics.seed_spread(E(0.5, 0.02, 3)) == 0.02
    assert statistics.seed_spread(statistics.estimate(pd.Series([0.5]))) == statistics.SINGLE_SEED_SD
    assert statistics.seed_spread(statistics.known(0.05)) == 0.0
    assert math.isnan(statistics.seed_spread(E(math.nan, math.nan, 0)))
    assert statistics.SINGLE_SEED_SD == statistics.DIFFERENCE_MARGIN / 2
    noisy, single = E(0.62, 0.08, 3), E(0.50, math.nan, 1)
    assert statistics.pooled_sd(noisy, single) == pytest.approx(0.066708, abs=1e-6)  # the single seed counts 0.05
    # a known number counts as sd 0: the pooled sd is 0.057, and a difference of 0.12 clears two of them
    assert statistics.pooled_sd(noisy, statistics.known(0.50)) == pytest.approx(0.056569, abs=1e-6)
    assert statistics.verdict_for_difference(noisy, single) == "partly reproduced"
    assert statistics.verdict_for_difference(noisy, statistics.known(0.50)) == "reproduced"  # against a known 0.50


def test_a_difference_carries_the_seed_sd_of_a_difference_and_a_single_seed_its_floor():
    from geocont.statistics import SINGLE_SEED_SD, Estimate, difference, known

    gap = difference(Estimate(0.9, 0.03, 3), Estimate(0.2, 0.04, 4))
    assert (gap.mean, gap.std, gap.n) == (pytest.approx(0.7), pytest.approx(0.05), 3)
    one_seed = difference(Estimate(0.9, math.nan, 1), known(0.05))
    assert one_seed.mean == pytest.approx(0.85) and one_seed.std == SINGLE_SEED_SD and one_seed.n == 1
    assert math.isnan(difference(Estimate(math.nan, math.nan, 0), known(0.05)).std)
    # a measurement minus a known number keeps the measurement's seeds (it said n = 1 for three seeds)
    above = difference(Estimate(0.97, 0.01, 3), known(0.05))
    assert (above.mean, above.std, above.n) == (pytest.approx(0.92), 0.01, 3)
    assert difference(known(0.05), Estimate(0.2, 0.04, 4)).n == 4
    assert math.isnan(difference(Estimate(math.nan, math.nan, 0), known(0.05)).std)


def _per_run(series: dict[int, list[float]], steps: list[int]) -> pd.DataFrame:
    """A per_run frame: one run per seed, ``series[seed]`` its values at ``steps``."""
    return pd.DataFrame(
        [
            dict(condition="c", optimizer="adam", init_scale=1.0, seed=seed, step=step, value=value)
            for seed, values in series.items()
            for step, value in zip(steps, values)
        ]
    )


STEPS = [0, 100, 200, 300, 400, 500, 600]


def test_a_quantity_settles_only_where_every_seed_has_settled_not_where_opposite_moves_cancel():
    from geocont.statistics import settledness

    cancelling = _per_run({0: [0.1, 0.2, 0.3, 0.3, 0.3, 0.4, 0.5], 1: [0.1, 0.2, 0.3, 0.3, 0.3, 0.2, 0.1]}, STEPS)
    found = settledness(cancelling)
    assert found.trend.mean == pytest.approx(0.0) and not found.settled  # mean change 0, each seed moved 0.2
    assert dict(found.changes) == pytest.approx({0: 0.2, 1: -0.2})
    steady = _per_run({0: [0.1, 0.5, 0.6, 0.6, 0.61, 0.6, 0.62], 1: [0.1, 0.4, 0.5, 0.55, 0.55, 0.56, 0.56]}, STEPS)
    assert settledness(steady).settled and not settledness(steady, step=200).settled


def test_the_judging_horizon_is_the_first_settled_snapshot_before_memorising_or_names_what_still_moves():
    from geocont.statistics import judging_horizon

    rising_then_flat = _per_run({0: [0.1, 0.3, 0.5, 0.6, 0.6, 0.6, 0.6], 1: [0.1, 0.3, 0.5, 0.6, 0.6, 0.6, 0.6]}, STEPS)
    late_riser = _per_run({0: [0.1, 0.1, 0.1, 0.2, 0.3, 0.4, 0.5], 1: [0.1, 0.1, 0.1, 0.2, 0.3, 0.4, 0.5]}, STEPS)
    falling_val = _per_run({0: [3.0, 2.5, 2.2, 2.1, 2.05, 2.0, 1.99], 1: [3.0, 2.5, 2.2, 2.1, 2.05, 2.0, 1.99]}, STEPS)
    horizon = judging_horizon({"a": rising_then_flat}, falling_val, STEPS)
    # the last third of 400 steps starts at the first snapshot at or after step 267: 300, where it is flat
    assert (horizon.step, horizon.settled, horizon.memorising_after) == (400, True, None)
    flat = _per_run({0: [0.1] * 7, 1: [0.1] * 7}, STEPS)
    # nothing moves: settled at the first snapshot whose last third holds two snapshots (100 and 200 hold one)
    assert judging_horizon({"a": flat}, None, STEPS).step == 300
    assert judging_horizon({"a": flat}, None, STEPS, not_before=400).step == 400  # but not before the floor
    horizon = judging_horizon({"a": rising_then_flat, "b": late_riser}, falling_val, STEPS)
    assert (horizon.step, horizon.settled, horizon.moving()) == (600, False, ["b"])
    assert horizon.quantities["b"].trend.mean == pytest.approx(0.2)  # from step 400, the first at or after 400
    rising_val = _per_run({0: [3.0, 2.5, 2.2, 2.1, 2.2, 2.3, 2.4], 1: [3.0, 2.5, 2.2, 2.1, 2.1, 2.1, 2.1]}, STEPS)
    horizon = judging_horizon({"a": rising_then_flat}, rising_val, STEPS)  # seed 0 memorises after step 300
    assert (horizon.step, horizon.settled, horizon.memorising_after) == (300, False, 300)


@pytest.mark.parametrize(
    "v, others, verdict",
    [
        ((0.06, 0.01, 3), [(0.5, 0.05, 3), (0.4, 0.05, 3)], "reproduced"),  # near random, far below the others
        ((0.06, 0.01, 3), [], "not tested"),  # no other projection reproduced
        ((0.30, 0.01, 3), [(0.5, 0.05, 3)], "partly reproduced"),  # below the others, not near random
        ((0.08, 0.01, 3), [(0.12, 0.05, 3)], "partly reproduced"),  # near random, not clearly below
        ((0.45, 0.01, 3), [(0.5, 0.05, 3)], "not reproduced"),
    ],
)
def test_v_is_judged_low_on_its_own_numbers_and_the_reproduced_projections_alone(v, others, verdict):
    from geocont.statistics import Estimate, verdict_v_low

    assert verdict_v_low(Estimate(*v), 0.05, [Estimate(*o) for o in others]) == verdict


def test_continued_moves_each_final_value_on_by_its_last_third_change():
    table = timeline_run("a", 0, 1.0, [0, 1, 2, 3, 4, 5], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], steps=[0, 30, 60, 70, 80, 90])
    moved = statistics.continued(table)
    # the last third of 90 steps starts at 60 (0.3): the final 0.6 moves on by 0.3
    assert statistics.final_estimate(moved, "weight_cos", "input", 1).mean == pytest.approx(0.9)
    assert statistics.estimate_at_step(moved, 60, "weight_cos", "input", 1).mean == pytest.approx(0.3)
    assert statistics.movement_could_change("reproduced", "not reproduced")
    assert not statistics.movement_could_change("reproduced", "reproduced")
    assert not statistics.movement_could_change("not tested", "reproduced")


def test_a_near_random_quantity_is_judged_settled_against_its_own_noise():
    assert statistics.near_random_tolerance(128, 3) == pytest.approx(
        2 * math.sqrt(2) * statistics.random_level_sd(128, 3)
    )
    assert 0.08 < statistics.near_random_tolerance(128, 3) < 0.09
    assert statistics.near_random_tolerance(4096, 30) == statistics.SETTLED_TOLERANCE


def test_every_verdict_rule_can_return_each_of_its_verdicts():
    """A rule that cannot fail (or cannot pass) decides nothing: each rule, fed the cases below, returns every verdict
    it documents."""
    E, S = statistics.Estimate, statistics
    corr = S.RankCorrelation
    cases = {
        "value": ({S.verdict_for_value(E(m, 0.01, 3), 0.5) for m in (0.55, 0.7, 0.9, math.nan)}),
        "random level": {
            S.verdict_at_random_level(E(m, sd, 3), 0.05, 0.038) for m, sd in ((0.05, 0.002), (0.3, 0.01), (0.09, 0.04))
        }
        | {S.verdict_at_random_level(E(math.nan, math.nan, 0), 0.05, 0.038)},
        "difference": {S.verdict_for_difference(E(m, 0.01, 3), E(0.2, 0.01, 3)) for m in (0.5, 0.27, 0.2, math.nan)},
        "interval": {S.verdict_for_interval(lo, hi, +1) for lo, hi in ((0.1, 0.3), (-0.3, -0.1), (-0.1, 0.1))}
        | {S.verdict_for_interval(math.nan, math.nan, +1)},
        "closer": {S.closer_to(E(v, 0.01, 3), E(0.9, 0.01, 3), E(0.1, 0.01, 3)) for v in (0.85, 0.15, 0.5, math.nan)},
        "correlation": {
            S.verdict_for_correlation(corr(*c, 10), +1)
            for c in ((0.5, 0.2, 0.8), (0.2, -0.1, 0.5), (-0.5, -0.8, -0.2), (math.nan,) * 3)
        },
        "v low": {
            S.verdict_v_low(E(v, 0.01, 3), 0.05, others)
            for v, others in (
                (0.06, [E(0.6, 0.01, 3)]),
                (0.3, [E(0.6, 0.01, 3)]),
                (0.06, [E(0.1, 0.01, 3)]),
                (0.5, [E(0.5, 0.01, 3)]),
                (0.06, []),
            )
        },
    }
    every = {"reproduced", "not reproduced", "not tested"}
    assert cases["value"] == every | {"partly reproduced"}
    assert cases["random level"] == every | {"inconclusive"}
    assert cases["difference"] == every | {"partly reproduced"}
    assert cases["interval"] == every | {"inconclusive"}
    assert cases["closer"] == every | {"inconclusive"}
    assert cases["correlation"] == every | {"partly reproduced"}
    assert cases["v low"] == every | {"partly reproduced"}


def test_a_correlation_carried_by_depth_vanishes_when_depth_is_partialled_out():
    rng = np.random.default_rng(0)
    depth = np.arange(30)
    x, y = -depth + 3 * rng.standard_normal(30), depth + 3 * rng.standard_normal(30)  # related only through depth
    found = statistics.depth_correlation(x, y, depth, n_boot=400)
    assert found.raw.rho < -0.8 and found.raw.high < 0  # the raw correlation is strong and "significant"
    assert abs(found.partial.rho) < 0.4 and found.partial.low < 0 < found.partial.high
    assert (found.n, found.block) == (30, 5)
    related = statistics.depth_correlation(x, -x + rng.standard_normal(30), depth, n_boot=400)
    assert related.partial.high < 0 and related.partial.low <= related.partial.rho <= related.partial.high
    # seeds at one depth are averaged first: 3 seeds x 4 positions are 4 units, too few for a partial correlation
    few = statistics.depth_correlation(np.tile(x[:4], 3), np.tile(y[:4], 3), np.tile(depth[:4], 3), n_boot=50)
    assert few.n == 4 and math.isnan(few.partial.rho)
    assert statistics.circular_block_indices(5, 2, np.random.default_rng(1)).tolist() in (
        [[a % 5, (a + 1) % 5, b % 5, (b + 1) % 5, c % 5] for a in range(5) for b in range(5) for c in range(5)]
    )

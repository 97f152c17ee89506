"""Aggregation (two-stage: layers, then seeds) and the verdict rules, on synthetic tables."""

import math

import pandas as pd
import pytest

from geocont import analysis
from geocont.tables import VERDICTS, make_row, rows_to_frame


def synthetic(values: dict[tuple[str, int], list[float]], steps=(0, 10)) -> pd.DataFrame:
    """weight_cos rows: values[(condition, seed)] = per-direction final |cos| (2 layer pairs)."""
    tables = []
    for (condition, seed), per_direction in values.items():
        rows = []
        for step in steps:
            for layer in (0, 1):
                for direction, value in enumerate(per_direction, start=1):
                    v = value if step == steps[-1] else 0.05
                    rows.append(make_row(step, "hidden", layer, "weight_cos", "input", direction, v + 0.01 * layer))
        tables.append(rows_to_frame(rows).assign(condition=condition, optimizer="adam", init_scale=1.0, seed=seed))
    return pd.concat(tables, ignore_index=True)


def test_final_estimate_is_mean_over_layers_then_seeds():
    table = synthetic({("a", 0): [0.8, 0.1], ("a", 1): [0.6, 0.1]})
    est = analysis.final_estimate(table, "weight_cos", "input", 1, condition="a")
    assert est.mean == pytest.approx(0.705) and est.n == 2
    assert est.std == pytest.approx(math.sqrt(0.02))
    start = analysis.estimate_at_step(table, 0, "weight_cos", "input", 1, condition="a")
    assert start.mean == pytest.approx(0.055)


def test_direction_profile_and_concentration():
    table = synthetic({("peaked", 0): [0.9, 0.1, 0.1], ("flat", 0): [0.5, 0.5, 0.5]})
    shape = analysis.concentration(analysis.final_direction_profile(table)).set_index("condition")
    assert shape.loc["peaked", "concentration"] == pytest.approx(0.8)
    assert shape.loc["flat", "concentration"] == pytest.approx(0.0)
    assert shape.loc["flat", "rest"] == pytest.approx(0.505)


def test_verdict_rules():
    E = analysis.Estimate
    assert analysis.verdict_for_value(E(0.95, 0.01, 3), 0.93) == "reproduced"
    assert analysis.verdict_for_value(E(0.40, 0.01, 3), 0.22) == "partly reproduced"
    assert analysis.verdict_for_value(E(0.75, 0.01, 3), 0.22) == "not reproduced"
    assert analysis.verdict_for_difference(E(0.9, 0.01, 3), E(0.5, 0.01, 3)) == "reproduced"
    assert analysis.verdict_for_difference(E(0.9, 0.3, 3), E(0.5, 0.3, 3)) == "partly reproduced"  # noisy
    assert analysis.verdict_for_difference(E(0.46, 0.02, 3), E(0.45, 0.02, 3)) == "not reproduced"  # no difference
    assert analysis.verdict_for_difference(E(0.4, 0.01, 3), E(0.5, 0.01, 3)) == "not reproduced"
    assert analysis.closer_to(E(0.7, 0, 3), E(0.8, 0, 3), E(0.1, 0, 3)) == "reproduced"
    assert analysis.closer_to(E(0.2, 0, 3), E(0.8, 0, 3), E(0.1, 0, 3)) == "not reproduced"
    assert analysis.closer_to(E(0.50, 0.05, 3), E(0.71, 0.02, 3), E(0.30, 0.06, 3)) == "inconclusive"  # midway
    assert analysis.verdict_for_value(E(math.nan, math.nan, 0), 0.5) == "not tested"
    assert str(E(0.5, 0.1, 3)) == "0.50 ± 0.10" and str(E(0.5, math.nan, 1)) == "0.50 (1 seed)"


def timeline_run(condition: str, seed: int, init_scale: float, updates: list[float], continuity: list[float],
                 steps=(0, 1, 3, 10, 30, 100)) -> pd.DataFrame:
    """A run table with layer-mean relative update and weight v1 continuity per step (2 layers)."""
    rows = []
    for step, update, cos in zip(steps, updates, continuity):
        for layer in (0, 1):
            rows.append(make_row(step, "hidden", layer, "rel_update", "", 0, update))
            rows.append(make_row(step, "hidden", layer, "rel_update_spectral", "", 0, 10 * update))
            rows.append(make_row(step, "hidden", layer, "weight_cos", "input", 1, cos))
            rows.append(make_row(step, "hidden", layer, "grad_cos", "input", 1, 0.9))
            rows.append(make_row(step, "hidden", layer, "weight_cumgrad_cos", "input", 1, 0.8))
    return rows_to_frame(rows).assign(condition=condition, optimizer="adam", init_scale=init_scale, seed=seed)


def test_transfer_events_find_the_crossing_and_the_half_rise():
    table = pd.concat([
        # crosses 1 at step 10; continuity 0.05 -> 0.85, half-rise level 0.45 first reached at step 10
        timeline_run("a", 0, 1.0, [0, 0.1, 0.5, 1.2, 3, 5], [0.05, 0.05, 0.2, 0.5, 0.8, 0.85]),
        # never crosses; continuity rises anyway (at step 3)
        timeline_run("b", 0, 1.0, [0, 0.01, 0.02, 0.05, 0.1, 0.2], [0.05, 0.2, 0.6, 0.7, 0.7, 0.7]),
        # no rise at all (gains < MIN_RISE)
        timeline_run("c", 0, 1.0, [0, 0.5, 1.5, 2, 3, 4], [0.05, 0.06, 0.07, 0.08, 0.09, 0.1]),
    ], ignore_index=True)
    events = analysis.transfer_events(table).set_index("condition")
    assert events.loc["a", "crossing_step"] == 10 and events.loc["a", "rise_step"] == 10
    assert events.loc["a", "log10_rise_over_crossing"] == pytest.approx(0.0)
    assert events.loc["a", "spectral_crossing_step"] == 1  # 10 x 0.1 reaches 1 at step 1
    assert events.loc["a", "rel_update_at_rise"] == pytest.approx(1.2)
    assert math.isnan(events.loc["b", "crossing_step"]) and events.loc["b", "rise_step"] == 3
    assert events.loc["b", "log10_rise_over_crossing"] == -math.inf  # rose before any crossing
    assert math.isnan(events.loc["c", "rise_step"]) and math.isnan(events.loc["c", "log10_rise_over_crossing"])
    assert analysis.verdict_for_order(events.loc[["a"]]) == "reproduced"
    assert analysis.verdict_for_order(events.loc[["a", "b"]]) == "partly reproduced"
    assert analysis.verdict_for_order(events.loc[["b"]]) == "not reproduced"
    assert analysis.verdict_for_order(events.loc[["c"]]) == "not tested"


def test_late_mean_uses_the_last_third_of_the_snapshots():
    table = timeline_run("a", 0, 1.0, [0, 1, 2, 3, 4, 5], [0.0, 0.0, 0.0, 0.0, 0.6, 0.9])
    late = analysis.late_mean(table, "weight_cos", "input")
    assert late["value"].iloc[0] == pytest.approx(0.75)


def test_rank_correlation_and_its_verdict():
    x = pd.Series([0.03, 0.1, 0.3, 1.0, 3.0] * 3)
    increasing = analysis.rank_correlation(x, x * 10 + pd.Series(range(15)) * 1e-3)
    assert increasing.rho > 0.95 and increasing.low > 0.9  # (ties in x keep rho just below 1)
    assert analysis.verdict_for_correlation(increasing, +1) == "reproduced"
    assert analysis.verdict_for_correlation(increasing, -1) == "not reproduced"
    noise = analysis.rank_correlation(x, pd.Series([5, 1, 4, 2, 3, 2, 5, 1, 3, 4, 1, 3, 2, 5, 4]))
    assert noise.low < 0 < noise.high and analysis.verdict_for_correlation(noise, +1) != "reproduced"
    assert math.isnan(analysis.rank_correlation(x[:2], x[:2]).rho)  # too few pairs


def test_timeline_claims_on_a_synthetic_sweep():
    runs, sweep = [], []
    for seed in (0, 1, 2):
        runs += [timeline_run("res-relu", seed, 1.0, [0, 0.1, 0.5, 1.2, 3, 5], [0.05, 0.05, 0.2, 0.5, 0.8, 0.85]),
                 timeline_run("nores-relu", seed, 1.0, [0, 0.1, 0.5, 1.2, 3, 5], [0.05] * 6).assign(value=lambda t: t["value"].where(t["metric"] != "grad_cos", 0.05)),
                 timeline_run("res-none", seed, 1.0, [0, 0.1, 0.5, 1.2, 3, 5], [0.05, 0.05, 0.2, 0.5, 0.7, 0.7]),
                 timeline_run("res-radial", seed, 1.0, [0, 0.1, 0.5, 1.2, 3, 5], [0.05, 0.05, 0.2, 0.5, 0.7, 0.7])]
        for index, init in enumerate((0.1, 0.3, 1.0, 3.0)):  # larger init: the crossing and the rise come later
            updates = [0] + [min(5.0, 0.02 * (10 ** k) / init) for k in range(1, 6)]
            continuity = [0.05] * (1 + index) + [0.8] * (5 - index)
            sweep.append(timeline_run("res-relu", seed, init, updates, continuity))
    conditions, init_sweep = pd.concat(runs, ignore_index=True), pd.concat(sweep, ignore_index=True)
    claims = analysis.timeline_claims(conditions, init_sweep, conditions[conditions["condition"] == "res-relu"], 0.05)
    by_quantity = claims.set_index("quantity")["verdict"]
    assert by_quantity["res-relu minus nores-relu gradient v1 |cos| at step 0"] == "reproduced"
    assert by_quantity["res-relu log10(rise step / crossing step), Frobenius norm"] == "reproduced"
    # the spectral ratio (10x the Frobenius one here) crosses 1 two snapshots earlier: still not after the rise
    assert by_quantity["res-relu log10(rise step / crossing step), spectral norm"] == "reproduced"
    assert by_quantity["Spearman ρ(init scale, crossing step)"] == "reproduced"
    assert by_quantity["Spearman ρ(init scale, continuity rise step)"] == "reproduced"
    assert set(claims["verdict"]) <= set(VERDICTS)

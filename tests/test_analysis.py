"""Aggregation (two-stage: layers, then seeds) and the verdict rules, on synthetic tables."""

import math

import pandas as pd
import pytest

from geocont import analysis
from geocont.tables import make_row, rows_to_frame


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

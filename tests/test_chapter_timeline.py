"""The timeline chapter: transfer events, rank correlations, claims on synthetic sweeps."""

import math

import pandas as pd
import pytest

from geocont.chapters import timeline as chapter
from helpers import timeline_run

from geocont.tables import VERDICTS


def test_transfer_events_find_the_crossing_and_the_half_rise():
    table = pd.concat([
        # crosses 1 at step 10; continuity 0.05 -> 0.85, half-rise level 0.45 first reached at step 10
        timeline_run("a", 0, 1.0, [0, 0.1, 0.5, 1.2, 3, 5], [0.05, 0.05, 0.2, 0.5, 0.8, 0.85]),
        # never crosses; continuity rises anyway (at step 3)
        timeline_run("b", 0, 1.0, [0, 0.01, 0.02, 0.05, 0.1, 0.2], [0.05, 0.2, 0.6, 0.7, 0.7, 0.7]),
        # no rise at all (gains < MIN_RISE)
        timeline_run("c", 0, 1.0, [0, 0.5, 1.5, 2, 3, 4], [0.05, 0.06, 0.07, 0.08, 0.09, 0.1]),
    ], ignore_index=True)
    events = chapter.transfer_events(table).set_index("condition")
    assert events.loc["a", "crossing_step"] == 10 and events.loc["a", "rise_step"] == 10
    assert events.loc["a", "log10_rise_over_crossing"] == pytest.approx(0.0)
    assert events.loc["a", "spectral_crossing_step"] == 1  # 10 x 0.1 reaches 1 at step 1
    assert events.loc["a", "rel_update_at_rise"] == pytest.approx(1.2)
    assert math.isnan(events.loc["b", "crossing_step"]) and events.loc["b", "rise_step"] == 3
    assert events.loc["b", "log10_rise_over_crossing"] == -math.inf  # rose before any crossing
    assert math.isnan(events.loc["c", "rise_step"]) and math.isnan(events.loc["c", "log10_rise_over_crossing"])
    assert chapter.verdict_for_order(events.loc[["a"]]) == "reproduced"
    assert chapter.verdict_for_order(events.loc[["a", "b"]]) == "partly reproduced"
    assert chapter.verdict_for_order(events.loc[["b"]]) == "not reproduced"
    assert chapter.verdict_for_order(events.loc[["c"]]) == "not tested"


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
    claims = chapter.timeline_claims(conditions, init_sweep, conditions[conditions["condition"] == "res-relu"], 0.05)
    by_quantity = claims.set_index("quantity")["verdict"]
    assert by_quantity["res-relu minus nores-relu gradient v1 |cos| at step 0"] == "reproduced"
    assert by_quantity["res-relu log10(rise step / crossing step), Frobenius norm"] == "reproduced"
    # the spectral ratio (10x the Frobenius one here) crosses 1 two snapshots earlier: still not after the rise
    assert by_quantity["res-relu log10(rise step / crossing step), spectral norm"] == "reproduced"
    assert by_quantity["Spearman ρ(init scale, crossing step)"] == "reproduced"
    assert by_quantity["Spearman ρ(init scale, continuity rise step)"] == "reproduced"
    assert set(claims["verdict"]) <= set(VERDICTS)



"""The Condition-2 chapter: instability events, the run summary's split of a fall, drift in stable
windows, the bimodality rule, and the chapter's parameters."""

import math

import numpy as np
import pandas as pd
import pytest

from geocont import instability
from geocont.chapters import condition2
from geocont.scales import ParameterError
from geocont.tables import MODEL_LAYER, RUN_COLUMNS

KEYS = dict(condition="res-none", optimizer="adam", init_scale=1.0, seed=0)


def trace_table(losses, v1, every=10, stride=1, keys=KEYS, turns=None):
    """A run table holding only a trace: ``losses`` at steps 0, every, 2 every ...; ``v1`` (both layer
    pairs) at every ``stride``-th of them; ``turns``: {step: degrees} of input-space v1_turn."""
    rows = []
    for index, loss in enumerate(losses):
        step = index * every
        rows.append((step, "model", MODEL_LAYER, "trace_loss", "", 0, loss))
        if index % stride == 0:
            for layer in (0, 1):
                rows.append((step, "hidden", layer, "trace_weight_cos", "input", 1, v1[index // stride]))
                rows.append((step, "hidden", layer, "trace_weight_cos", "output", 1, 0.1))
    for step, degrees in (turns or {}).items():
        for layer in (0, 1, 2):
            rows.append((step, "hidden", layer, "v1_turn", "input", 1, degrees))
    return pd.DataFrame(rows, columns=RUN_COLUMNS).assign(**keys)


def test_a_spike_above_ten_times_the_running_minimum_is_one_event_with_continuity_around_it():
    losses = [2.0, 1.0, 0.5, 0.2, 0.1, 3.0, 5.0, 0.3, 0.09, 0.08]
    v1 = [0.1, 0.3, 0.5, 0.7, 0.8, 0.7, 0.5, 0.4, 0.45, 0.5]
    events = instability.instability_events(trace_table(losses, v1))
    assert len(events) == 1
    event = events.iloc[0]
    assert (event.start, event.end, event.peak_loss) == (50, 60, 5.0)
    assert math.isclose(event.running_min, 0.1) and event.v1_before == 0.8 and event.v1_after == 0.4


def test_wobbles_of_a_fitted_training_set_below_the_floor_are_not_events():
    losses = [1.0, 0.1, 1e-4, 1e-5, 5e-4, 1e-5, 0.009]  # 50x and 900x the running minimum, below 0.01
    assert instability.instability_events(trace_table(losses, [0.5] * 7)).empty
    summary = instability.run_summary(trace_table(losses, [0.5] * 7)).iloc[0]
    assert summary.events == 0 and summary.memorised_step == 20


def test_the_change_over_a_run_splits_into_across_and_between_events():
    losses = [2.0, 0.5, 0.1, 0.05, 2.0, 0.04, 0.03, 0.02]
    v1 = [0.1, 0.6, 0.8, 0.8, 0.6, 0.5, 0.45, 0.4]
    summary = instability.run_summary(trace_table(losses, v1)).iloc[0]
    assert summary.events == 1 and summary.first_event == 40
    assert math.isclose(summary.change_across_events, 0.5 - 0.8)
    assert math.isclose(summary.change_total, 0.4 - 0.1)
    assert math.isclose(summary.change_across_events + summary.change_between_events, summary.change_total)
    assert (summary.v1_peak, summary.peak_step, summary.v1_final) == (0.8, 20, 0.4)


def test_continuity_around_an_event_comes_from_the_nearest_traced_points():
    losses = [2.0, 1.0, 0.5, 0.2, 0.1, 0.09, 3.0, 0.08, 0.07, 0.06, 0.05, 0.04]
    v1 = [0.1, 0.5, 0.6, 0.3]  # at trace points 0, 3, 6, 9 (stride 3)
    event = instability.instability_events(trace_table(losses, v1, stride=3)).iloc[0]
    assert event.start == 60 and event.v1_before == 0.5 and event.v1_after == 0.3


def test_drift_in_stable_windows_leaves_out_intervals_that_hold_an_event():
    losses = [2.0, 1.0, 0.5, 0.2, 0.1, 3.0, 0.09, 0.08, 0.07, 0.06, 0.05]
    table = trace_table(losses, [0.5] * 11, turns={0: 0.0, 20: 4.0, 40: 6.0, 60: 100.0, 80: 10.0, 100: 6.0})
    events = instability.instability_events(table)
    rates = instability.stable_windows_turn_rate(table, events, start_fraction=0.0)
    # intervals (0, 20], (20, 40], (40, 60] [holds the event at 50], (60, 80], (80, 100]
    assert rates.iloc[0].windows == 4
    assert math.isclose(rates.iloc[0].turn_rate, 1000 * (4 + 6 + 10 + 6) / 80)


def test_a_diverged_run_is_marked_in_its_summary():
    table = trace_table([2.0, 1.0, 0.5], [0.1, 0.2, 0.3])
    diverged = pd.DataFrame([(25, "model", MODEL_LAYER, "diverged", "", 0, 0.5)], columns=RUN_COLUMNS).assign(**KEYS)
    summary = instability.run_summary(pd.concat([table, diverged], ignore_index=True)).iloc[0]
    assert summary.diverged_step == 25


@pytest.mark.parametrize("values, bimodal", [
    ([0.1, 0.12, 0.15, 0.11, 0.8, 0.82, 0.79, 0.81], True),
    ([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], False),   # evenly spread: no gap stands out
    ([0.1, 0.11, 0.12, 0.13, 0.14, 0.15, 0.16, 0.9], False),  # one outlier is not a second mode
    ([0.1, 0.9, 0.1], False),  # too few seeds
])
def test_the_bimodality_rule(values, bimodal):
    assert condition2.modality(pd.Series(values)).bimodal is bimodal


def test_configure_checks_names_and_values_in_one_line():
    with pytest.raises(ParameterError, match="unknown parameter.*valid choices: scale"):
        condition2.configure("smoke", step=3)
    with pytest.raises(ParameterError, match="datasets must not be empty"):
        condition2.configure("smoke", datasets=[])
    with pytest.raises(ParameterError, match="unknown intervention 'dropout'; valid choices"):
        condition2.configure("smoke", interventions=["dropout"])
    with pytest.raises(ParameterError, match="conditions must include res-relu"):
        condition2.configure("smoke", conditions=["res-none"])
    with pytest.raises(ParameterError, match="unknown dataset"):
        condition2.configure("smoke", datasets=["cifar"])


def test_a_horizon_below_the_early_snapshot_shortens_it():
    settings = condition2.configure("cpu", steps=500)
    assert settings.early_steps == 500 and settings.sgd_probe_steps == 500 and settings.base.steps == 500


def test_the_runs_differ_only_where_the_design_says():
    settings = condition2.configure("smoke")
    configs = settings.run_configs()
    assert len({repr(c.to_dict()) for c in configs}) == len(configs)
    headline = {c.condition for c in settings.comparison_configs(settings.headline)}
    assert headline == set(settings.conditions)
    for name in settings.interventions:
        changed = settings.intervention_configs(name)
        reference = {(c.condition, c.seed): c for c in settings.comparison_configs(settings.headline)}
        for config in changed:
            base = reference[(config.condition, config.seed)].to_dict()
            differing = {k for k in set(base) | set(config.to_dict()) if base.get(k) != config.to_dict().get(k)}
            assert differing == set(condition2.INTERVENTIONS[name]), name
    probes = settings.sgd_configs(0.01, steps=settings.sgd_probe_steps)
    assert all(c.steps == settings.sgd_probe_steps and c.optimizer.name == "sgd" for c in probes)
    assert sorted(c.seed for c in probes if c.condition == "res-none") == list(settings.many_seeds)

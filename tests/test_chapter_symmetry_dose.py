"""The symmetry-dose chapter: its run list at every scale (new runs and those it shares), the transition rule,
its claims and findings on synthetic run tables, the captions and readings, and its parameters."""

import dataclasses
import math

import pandas as pd
import pytest
from helpers import claim_names

from geocont.book.chapter import claim
from geocont.cache import cache_key
from geocont.chapters import symmetry_dose as chapter
from geocont.scales import ParameterError
from geocont.tables import make_row, rows_to_frame

BASELINE = 0.05
NEW = ("res-leaky-0.5", "res-leaky-0.9", "res-leaky-0.99", "res-radial-track")


# The run list, at every scale


@pytest.mark.parametrize(
    "scale, seeds, dataset", [("smoke", 2, "fashion-mnist"), ("cpu", 3, "fashion-mnist"), ("paper", 3, "mnist")]
)
def test_configure_lists_every_condition_x_seed_at_the_horizon(scale, seeds, dataset):
    settings = chapter.CHAPTER.configure(scale)
    runs = chapter.CHAPTER.run_configs(settings)
    assert [(c.condition, c.seed) for c in runs] == [(c, s) for c in chapter.CONDITIONS_COMPARED for s in range(seeds)]
    assert {c.steps for c in runs} == {settings.base.steps} and {c.dataset for c in runs} == {dataset}
    assert len({cache_key("mlp", c.to_dict()) for c in runs}) == len(runs)


def test_at_cpu_the_chapter_trains_twelve_new_runs_and_shares_the_rest():
    runs = chapter.CHAPTER.run_configs(chapter.CHAPTER.configure("cpu"))
    new = [c for c in runs if c.condition in NEW]
    assert len(runs) == 24 and len(new) == 12  # 3 Leaky-ReLU slopes x 3 seeds + res-radial-track x 3 seeds
    assert sorted({c.condition for c in new}) == sorted(NEW)
    assert (chapter.DOSE[0.0], chapter.DOSE[1.0]) == ("res-relu", "res-none")


def shared_keys(other) -> set[str]:
    return {cache_key("mlp", c.to_dict()) for c in other.CHAPTER.configure("cpu").condition_configs()}


def test_the_dose_ends_are_the_norm_chapter_s_runs():
    from geocont.chapters import activation_vs_norm

    ends = [
        c
        for c in chapter.CHAPTER.run_configs(chapter.CHAPTER.configure("cpu"))
        if c.condition in ("res-relu", "res-none")
    ]
    assert len(ends) == 6 and {cache_key("mlp", c.to_dict()) for c in ends} <= shared_keys(activation_vs_norm)


def test_every_run_but_the_new_ones_is_a_run_of_the_conditions_chapter():
    from geocont.chapters import mlp_conditions

    shared = [c for c in chapter.CHAPTER.run_configs(chapter.CHAPTER.configure("cpu")) if c.condition not in NEW]
    assert sorted({c.condition for c in shared}) == ["res-none", "res-radial", "res-radial-tau", "res-relu"]
    assert len(shared) == 12 and {cache_key("mlp", c.to_dict()) for c in shared} <= shared_keys(mlp_conditions)


def test_seeds_and_steps_replace_their_preset_values():
    settings = chapter.CHAPTER.configure("smoke", seeds=1, steps=24)
    assert settings.seeds == (0,) and settings.base.steps == 24 and settings.overrides == {"seeds": 1, "steps": 24}
    assert len(chapter.CHAPTER.run_configs(settings)) == len(chapter.CONDITIONS_COMPARED)


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(conditions=["res-relu"]), "unknown parameter.*conditions.*valid choices: scale, seeds, steps"),
        (dict(steps=0), "steps"),
        (dict(dataset="cifar"), "unknown dataset"),
        (dict(scale="gpu"), "unknown scale 'gpu'"),
    ],
)
def test_a_bad_parameter_is_a_one_line_error(params, message):
    with pytest.raises(ParameterError, match=message) as raised:
        chapter.CHAPTER.configure(**{"scale": "smoke", **params})
    assert "\n" not in str(raised.value)


# The transition rule

SLOPES = list(chapter.DOSE)


@pytest.mark.parametrize(
    "weight, case, low, high, share",
    [
        ([0.90, 0.88, 0.85, 0.30, 0.25], "sharp", 0.9, 0.99, 0.55 / 0.65),  # one interval holds 85% of the drop
        ([0.90, 0.72, 0.56, 0.42, 0.30], "gradual", 0.0, 0.9, 0.34 / 0.60),  # at most 30% per interval
        ([0.90, 0.30, 0.30, 0.30, 0.20], "sharp", 0.0, 0.5, 0.60 / 0.70),  # the drop at the first break
    ],
)
def test_the_transition_rule_locates_the_shortest_span_holding_more_than_half_the_drop(weight, case, low, high, share):
    found = chapter.locate_transition(SLOPES, weight, "reproduced")
    assert (found.case, found.low, found.high) == (case, low, high)
    assert found.share == pytest.approx(share) and found.total == pytest.approx(weight[0] - weight[-1])
    assert [i.drop for i in found.intervals] == pytest.approx([a - b for a, b in zip(weight, weight[1:])])


def test_of_two_equally_short_spans_the_larger_fall_is_the_transition():
    found = chapter.locate_transition(SLOPES, [0.9, 0.7, 0.45, 0.3, 0.3], "reproduced")  # drops .2, .25, .15, 0
    assert (found.case, found.low, found.high) == ("gradual", 0.0, 0.9)  # .2 + .25 beats .25 + .15
    assert found.share == pytest.approx(0.75) and found.largest_share == pytest.approx(0.25 / 0.6)


def test_no_transition_is_located_without_a_real_total_drop():
    found = chapter.locate_transition(SLOPES, [0.9, 0.3, 0.3, 0.3, 0.85], "not reproduced")
    assert found.case == "no-drop" and math.isnan(found.low)
    assert chapter.locate_transition(SLOPES, [0.9, math.nan, 0.3, 0.3, 0.2], "reproduced").case == "untested"


# Claims and findings on synthetic run tables


def run_table(
    weights: dict[str, float], shares: dict[str, tuple[float, float]] | None = None, gradient: float = 0.9
) -> pd.DataFrame:
    """Three seeds per condition, steps 0, 10, 20: weight v1 from the random level to ``weights[condition]``
    (reached at step 10), gradient v1 ``gradient``; for ``shares[condition] = (initial, final)`` the near-linear
    share (0..1) of both layers, ``initial`` at step 0 and ``final`` after. Seed s adds 0.01 (s - 1)."""
    frames = []
    for condition, weight in weights.items():
        initial, final = (shares or {}).get(condition, (None, None))
        for seed in range(3):
            jitter, rows = 0.01 * (seed - 1), []
            for step in (0, 10, 20):
                for layer in (0, 1):
                    rows.append(
                        make_row(
                            step,
                            "hidden",
                            layer,
                            "weight_cos",
                            "input",
                            1,
                            (BASELINE if step == 0 else weight) + jitter,
                        )
                    )
                    rows.append(make_row(step, "hidden", layer, "grad_cos", "input", 1, gradient + jitter))
                    if initial is not None:
                        rows.append(
                            make_row(
                                step,
                                "hidden",
                                layer,
                                "near_linear_share",
                                "",
                                0,
                                (initial if step == 0 else final) + jitter,
                            )
                        )
            frames.append(rows_to_frame(rows).assign(condition=condition, optimizer="adam", init_scale=1.0, seed=seed))
    return pd.concat(frames, ignore_index=True)


def dose(*weights: float) -> dict[str, float]:
    return dict(zip(chapter.DOSE_CONDITIONS, weights))


SHARP = dose(0.90, 0.88, 0.85, 0.27, 0.25)
GRADUAL = dose(0.90, 0.72, 0.56, 0.42, 0.30)
KEYS = [
    "dose-monotone",
    "dose-transition",
    "dose-099-breaks",
    "radial-ends-linear",
    "radial-tau-ends-linear",
    "radial-track-stays-nonlinear",
    "radial-track-weight-v1",
    "relu-above-radial-track",
]


def verdicts(claims: pd.DataFrame) -> dict[str, str]:
    return dict(zip(claims["key"], claims["verdict"]))


def test_a_sharp_transition_linear_paper_radials_and_a_nonlinear_tracking_net_that_loses():
    table = run_table(
        {**SHARP, "res-radial": 0.25, "res-radial-tau": 0.30, "res-radial-track": 0.30},
        {"res-radial": (0.99, 0.97), "res-radial-tau": (0.50, 0.95), "res-radial-track": (0.30, 0.20)},
    )
    claims = chapter.dose_claims(table, BASELINE)
    assert list(claims["key"]) == KEYS and (claims["chapter"] == "symmetry_dose").all()
    assert verdicts(claims) == {
        "dose-monotone": "reproduced",  # 0.90 - 0.25
        "dose-transition": "reproduced",  # 0.58 of 0.65 between slopes 0.9 and 0.99
        "dose-099-breaks": "not reproduced",  # 0.27 - 0.25: within the margin
        "radial-ends-linear": "reproduced",  # 97% >= 90%
        "radial-tau-ends-linear": "reproduced",  # 95%
        "radial-track-stays-nonlinear": "reproduced",  # 20%
        "radial-track-weight-v1": "reproduced",  # 0.30 against 0.22
        "relu-above-radial-track": "reproduced",  # 0.90 - 0.30
    }
    assert claim(claims, "dose-transition")["ours_mean"] == pytest.approx(0.58 / 0.65)
    assert claim(claims, "radial-ends-linear")["ours_mean"] == pytest.approx(97.0)
    assert claim(claims, "radial-ends-linear")["ours_std"] == pytest.approx(1.0)
    initial = chapter.radial_finding(table, BASELINE).nets["res-radial"].initial
    assert (initial.mean, initial.std) == pytest.approx((99.0, 1.0))
    assert chapter.radial_finding(table, BASELINE).case == "nonlinear-loses"
    found = chapter.dose_finding(table, BASELINE)
    assert found.transition.case == "sharp" and found.smallest_break.slope == 0.99
    step = found.transition
    assert (step.low, step.high, step.share, step.total) == pytest.approx((0.9, 0.99, 0.58 / 0.65, 0.65))
    assert (0.9, 0.99) in [(i.low, i.high) for i in step.intervals if i.drop == pytest.approx(0.58)]
    assert [p.above_random for p in found.points] == ["reproduced"] * 5
    assert found.at(1.0).symmetry_break == 0.0 and found.at(0.99).gradient.mean == pytest.approx(0.9)


def test_a_gradual_dose_a_nonlinear_paper_radial_and_a_tracking_net_that_ends_linear():
    table = run_table(
        {**GRADUAL, "res-radial": 0.25, "res-radial-tau": 0.30, "res-radial-track": 0.88},
        {"res-radial": (0.60, 0.50), "res-radial-tau": (0.50, 0.95), "res-radial-track": (0.50, 0.95)},
    )
    claims = chapter.dose_claims(table, BASELINE)
    assert verdicts(claims) == {
        "dose-monotone": "reproduced",
        "dose-transition": "not reproduced",  # gradual: no interval holds more than half
        "dose-099-breaks": "reproduced",  # 0.42 - 0.30
        "radial-ends-linear": "not reproduced",  # 50%
        "radial-tau-ends-linear": "reproduced",
        "radial-track-stays-nonlinear": "not reproduced",  # 95%
        "radial-track-weight-v1": "not reproduced",  # 0.88 against 0.22
        "relu-above-radial-track": "not reproduced",  # 0.90 - 0.88
    }
    step = chapter.dose_finding(table, BASELINE).transition
    assert (step.case, step.low, step.high, step.total) == ("gradual", 0.0, 0.9, pytest.approx(0.60))
    assert step.share == pytest.approx(0.57, abs=0.005)
    assert claim(claims, "dose-transition")["ours_mean"] == pytest.approx(0.18 / 0.60)
    assert chapter.radial_finding(table, BASELINE).case == "track-linear"


def test_without_a_drop_there_is_no_transition_and_a_tracking_net_that_keeps_is_named():
    table = run_table(
        {**dose(0.30, 0.30, 0.30, 0.30, 0.30), "res-radial": 0.3, "res-radial-tau": 0.3, "res-radial-track": 0.85},
        {"res-radial": (0.99, 0.99), "res-radial-tau": (0.5, 0.99), "res-radial-track": (0.3, 0.3)},
    )
    claims = chapter.dose_claims(table, BASELINE)
    assert verdicts(claims)["dose-monotone"] == "not reproduced"
    assert verdicts(claims)["dose-transition"] == "not tested"
    assert chapter.dose_finding(table, BASELINE).transition.case == "no-drop"
    found = chapter.radial_finding(table, BASELINE)
    assert found.relu_above_track == "not reproduced" and found.case == "nonlinear-keeps"


def test_a_tracking_net_beside_a_relu_net_at_the_random_level_has_nothing_to_lose():
    table = run_table(
        {**dose(0.06, 0.06, 0.06, 0.06, 0.06), "res-radial": 0.06, "res-radial-tau": 0.06, "res-radial-track": 0.06},
        {c: (0.3, 0.3) for c in chapter.RADIAL_CONDITIONS},
    )
    found = chapter.radial_finding(table, BASELINE)
    assert found.relu_above_random == "not reproduced" and found.case == "no-contrast"


def test_a_radial_net_without_a_recorded_share_is_not_tested():
    table = run_table({**SHARP, "res-radial": 0.25, "res-radial-tau": 0.30, "res-radial-track": 0.30})
    claims = chapter.dose_claims(table, BASELINE)
    assert {verdicts(claims)[k] for k in KEYS[3:6]} == {"not tested"}
    assert chapter.radial_finding(table, BASELINE).case == "unmeasured"


def results_of(table: pd.DataFrame) -> chapter.Results:
    settings = dataclasses.replace(chapter.CHAPTER.configure("smoke", seeds=3, steps=20), early_steps=10)
    return chapter.Results(settings=settings, table=table, baseline=BASELINE)


ALL = {**SHARP, "res-radial": 0.25, "res-radial-tau": 0.30, "res-radial-track": 0.30}
LINEAR_SHARES = {"res-radial": (0.99, 0.97), "res-radial-tau": (0.50, 0.95), "res-radial-track": (0.30, 0.20)}


def test_claims_are_judged_at_the_horizon_with_the_early_value_beside():
    claims = chapter.claims(results_of(run_table(ALL, LINEAR_SHARES)))
    assert claim_names(claims) == KEYS and (claims["early_step"] == 10).all()
    assert (claims["dataset"] == "fashion-mnist").all()
    # every claim is the chapter's verdict of record but the Res+Radial variant, shown and not counted
    assert list(claims.loc[~claims["primary"], "key"]) == ["radial-track-weight-v1@fashion-mnist"]
    assert claim(claims, "dose-monotone")["early_verdict"] == "reproduced"


@pytest.mark.parametrize(
    "weights, shares",
    [
        (ALL, LINEAR_SHARES),
        (
            {**GRADUAL, "res-radial": 0.25, "res-radial-tau": 0.3, "res-radial-track": 0.85},
            {c: (0.5, 0.95) for c in chapter.RADIAL_CONDITIONS},
        ),
        ({**dose(0.3, 0.3, 0.3, 0.3, 0.3), "res-radial": 0.3, "res-radial-tau": 0.3, "res-radial-track": 0.04}, None),
    ],
)
def test_the_captions_readings_and_rules_render(weights, shares):
    """Each caption, reading and rule fills its template (every transition and radial case above)."""
    results = results_of(run_table(weights, shares))
    texts = [
        chapter.run_note(results).data,
        chapter.dose_rule().data,
        chapter.radial_rule().data,
        chapter.dose_caption(results),
        chapter.dose_reading(results).data,
        chapter.radial_caption(results),
        chapter.radial_reading(results).data,
        chapter.verdict(results, chapter.claims(results)).data,
    ]
    for text in texts:
        assert text.strip() and "{" not in text, text
    assert f"{chapter.TRANSITION_SHARE:.0%}" in chapter.dose_rule().data  # the rules state their numbers
    assert f"{chapter.NEAR_LINEAR_SHARE:g}%" in chapter.radial_rule().data


def test_the_figures_draw_from_a_run_table(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = results_of(run_table(ALL, LINEAR_SHARES))
    chapter.dose_figure(results)
    chapter.radial_figure(results)
    assert chapter.horizon_summary(results).index.tolist() == list(chapter.CONDITIONS_COMPARED)
    plt.close("all")


def test_the_transition_share_carries_the_spread_of_each_seed_s_own_share():
    table = run_table(SHARP)
    moved = (table["condition"] == chapter.DOSE[0.9]) & (table["seed"] == 0) & (table["step"] > 0)
    table.loc[moved, "value"] += 0.06  # seed 0 holds more of its drop in 0.9 -> 0.99
    claims = chapter.dose_claims(table, BASELINE)
    transition = claim(claims, "dose-transition")
    shares = [(0.85 + 0.06 * (s == 0) - 0.27) / (0.90 - 0.25) for s in range(3)]  # the seeds' jitter cancels
    assert transition["ours_std"] == pytest.approx(pd.Series(shares).std(), rel=1e-4)
    assert transition["ours_std"] > 0 and transition["n_seeds"] == 3
    assert claim(chapter.dose_claims(run_table(SHARP), BASELINE), "dose-transition")["ours_std"] == pytest.approx(
        0, abs=1e-12
    )

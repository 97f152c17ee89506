"""The timeline chapter: transfer events, rank correlations, claims and the findings its prose words, on
synthetic sweeps; configure."""

import math

import pandas as pd
import pytest
from helpers import by_name, claim_names, timeline_run

from geocont.chapters import mlp_conditions, mlp_runs
from geocont.chapters import timeline as chapter
from geocont.scales import ParameterError

STEPS_UPDATE = [0, 0.1, 0.5, 1.2, 3, 5]  # crosses 1 at step 10 (Frobenius), 0.1 x 10 at step 1 (spectral)
RISE_AT_10 = [0.05, 0.05, 0.2, 0.5, 0.8, 0.85]  # half-rise level 0.45 first reached at step 10

KEYS = [
    "step0-gradient-coherence",
    "order-frobenius",
    "order-spectral",
    "weight-cumgrad-alignment",
    "init-moves-crossing",
    "init-moves-rise",
    "init-rise-follows-frobenius",
    "init-rise-follows-spectral",
    "res-none-late-drift",
    "res-none-decoupled",
    "res-radial-late-drift",
    "res-radial-decoupled",
    "linear-independent-rotation",
    "optimizer-adam-order-frobenius",
    "optimizer-adam-order-spectral",
]


def test_transfer_events_find_the_crossing_and_the_half_rise():
    table = pd.concat(
        [
            timeline_run("a", 0, 1.0, STEPS_UPDATE, RISE_AT_10),
            # never crosses; continuity rises anyway (at step 3)
            timeline_run("b", 0, 1.0, [0, 0.01, 0.02, 0.05, 0.1, 0.2], [0.05, 0.2, 0.6, 0.7, 0.7, 0.7]),
            # no rise at all (gains < the margin)
            timeline_run("c", 0, 1.0, [0, 0.5, 1.5, 2, 3, 4], [0.05, 0.06, 0.07, 0.08, 0.09, 0.1]),
        ],
        ignore_index=True,
    )
    events = chapter.transfer_events(table).set_index("condition")
    assert events.loc["a", "crossing_step"] == 10 and events.loc["a", "rise_step"] == 10
    assert events.loc["a", "log10_rise_over_crossing"] == pytest.approx(0.0)
    assert events.loc["a", "spectral_crossing_step"] == 1
    assert events.loc["a", "rel_update_at_rise"] == pytest.approx(1.2)
    assert math.isnan(events.loc["b", "crossing_step"]) and events.loc["b", "rise_step"] == 3
    assert events.loc["b", "log10_rise_over_crossing"] == -math.inf  # rose before any crossing
    assert math.isnan(events.loc["c", "rise_step"]) and math.isnan(events.loc["c", "log10_rise_over_crossing"])
    assert chapter.verdict_for_order(events.loc[["a"]]) == "reproduced"
    assert chapter.verdict_for_order(events.loc[["a", "b"]]) == "partly reproduced"
    assert chapter.verdict_for_order(events.loc[["b"]]) == "not reproduced"
    assert chapter.verdict_for_order(events.loc[["c"]]) == "not tested"


def sweeps(relu_updates, nores_grad: float, init_later: bool):
    """Synthetic condition and init-scale sweeps (3 seeds). ``init_later``: a larger init
    crosses and rises later (the paper's prediction), else earlier."""
    runs, sweep = [], []
    for seed in (0, 1, 2):
        nores = timeline_run("nores-relu", seed, 1.0, STEPS_UPDATE, [0.05] * 6)
        runs += [
            timeline_run("res-relu", seed, 1.0, relu_updates, RISE_AT_10),
            nores.assign(value=nores["value"].where(nores["metric"] != "grad_cos", nores_grad)),
            timeline_run("res-none", seed, 1.0, STEPS_UPDATE, [0.05, 0.05, 0.2, 0.5, 0.7, 0.7]),
            timeline_run("res-radial", seed, 1.0, STEPS_UPDATE, [0.05, 0.05, 0.2, 0.5, 0.7, 0.7]),
        ]
        for index, init in enumerate((0.1, 0.3, 1.0, 3.0)):
            lag = index if init_later else 3 - index
            updates = [0] + [min(5.0, 0.02 * (10**k) / (init if init_later else 1 / init)) for k in range(1, 6)]
            sweep.append(timeline_run("res-relu", seed, init, updates, [0.05] * (1 + lag) + [0.8] * (5 - lag)))
    conditions = pd.concat(runs, ignore_index=True)
    return conditions, pd.concat(sweep, ignore_index=True), conditions[conditions["condition"] == "res-relu"]


def test_timeline_claims_reproduced_on_a_sweep_that_follows_the_paper():
    claims = chapter.timeline_claims(
        *sweeps(STEPS_UPDATE, nores_grad=0.05, init_later=True), 0.05, dataset="fashion-mnist"
    )
    assert claim_names(claims) == KEYS
    verdict = by_name(claims)["verdict"]
    for key in (
        "step0-gradient-coherence",
        "order-frobenius",
        "order-spectral",
        "weight-cumgrad-alignment",
        "init-moves-crossing",
        "init-moves-rise",
        "optimizer-adam-order-frobenius",
    ):
        assert verdict[key] == "reproduced", key
    # the synthetic runs record no rotation: the drift claims cannot be tested
    assert verdict["res-none-late-drift"] == verdict["linear-independent-rotation"] == "not tested"


def test_timeline_claims_not_reproduced_on_a_sweep_against_the_paper():
    never_crossing = [0, 0.01, 0.02, 0.05, 0.08, 0.09]  # spectral: at most 0.9, so no norm crosses
    claims = chapter.timeline_claims(
        *sweeps(never_crossing, nores_grad=0.9, init_later=False), 0.05, dataset="fashion-mnist"
    )
    assert claim_names(claims) == KEYS
    verdict = by_name(claims)["verdict"]
    for key in (
        "step0-gradient-coherence",
        "order-frobenius",
        "order-spectral",
        "init-moves-crossing",
        "init-moves-rise",
        "optimizer-adam-order-spectral",
    ):
        assert verdict[key] == "not reproduced", key


def test_optimizer_labels_become_claim_keys():
    conditions, init_sweep, relu = sweeps(STEPS_UPDATE, nores_grad=0.05, init_later=True)
    relu = pd.concat([relu, relu.assign(optimizer="adam(beta2=0)")], ignore_index=True)
    keys = claim_names(chapter.timeline_claims(conditions, init_sweep, relu, 0.05, dataset="fashion-mnist"))
    assert keys[-2:] == ["optimizer-adam-beta2-0-order-frobenius", "optimizer-adam-beta2-0-order-spectral"]


def test_timeline_shares_the_horizon_runs_of_the_first_chapter():
    assert chapter.CHAPTER.configure("cpu").base == mlp_conditions.CHAPTER.configure("cpu").base


def test_the_init_sweep_is_short_and_finely_snapshotted():
    timeline = chapter.CHAPTER.configure("cpu")
    short = timeline.init_configs()
    assert {c.steps for c in short} == {timeline.early_steps} and {c.n_directions for c in short} == {1}
    assert short[0].n_snapshots > timeline.base.n_snapshots
    scales = sorted({c.init_scale for c in short})
    assert len(scales) >= 4 and max(scales) / min(scales) >= 100  # two orders of magnitude


def test_the_timeline_compares_every_robustness_optimizer():
    timeline = chapter.CHAPTER.configure("cpu")
    assert {c.optimizer.label for c in timeline.robustness_configs()} == set(mlp_runs.ROBUSTNESS_OPTIMIZERS)


def test_run_configs_are_the_three_sweeps():
    settings = chapter.CHAPTER.configure("smoke")
    runs = chapter.CHAPTER.run_configs(settings)
    assert runs == settings.condition_configs() + settings.robustness_configs() + settings.init_configs()


def test_the_settings_builder_rejects_an_unknown_robustness_condition():
    assert chapter.CHAPTER.configure("smoke", extra_init_scales=[0.5]).extra_init_scales == (0.5,)
    with pytest.raises(ValueError, match="valid choices"):
        mlp_runs.build_settings("smoke", {**chapter.CHAPTER.presets("smoke"), "robustness_conditions": ["res-tanh"]})


def test_configure_rejects_bad_parameters_before_any_work():
    with pytest.raises(ParameterError, match="extra_init_scales"):
        chapter.CHAPTER.configure("smoke", extra_init_scales=[-1.0])
    with pytest.raises(ParameterError, match="unknown parameter.*init_scale.*valid choices: scale, seeds"):
        chapter.CHAPTER.configure("smoke", init_scale=2.0)  # the timeline sweeps it with extra_init_scales instead
    with pytest.raises(ParameterError, match="valid choices: res-relu"):
        chapter.CHAPTER.configure("smoke", conditions=["res-tanh"])
    assert chapter.CHAPTER.configure("smoke", steps=None, lr=1e-4).overrides == {"lr": 1e-4}


def test_the_claims_follow_the_reference_condition_they_are_given():
    conditions, init_sweep, relu = sweeps(STEPS_UPDATE, nores_grad=0.05, init_later=True)
    renamed = [
        frame.assign(condition=frame["condition"].astype(str).replace("res-relu", "res-gelu"))
        for frame in (conditions, init_sweep, relu)
    ]
    as_relu = chapter.timeline_claims(conditions, init_sweep, relu, 0.05, dataset="fashion-mnist")
    as_gelu = chapter.timeline_claims(*renamed, 0.05, reference="res-gelu", dataset="fashion-mnist")
    assert list(as_gelu["verdict"]) == list(as_relu["verdict"])
    assert not as_gelu["quantity"].str.contains(r"(?<!no)res-relu").any()
    assert as_gelu["quantity"].str.contains("res-gelu").any()


def results_of(
    conditions: pd.DataFrame,
    init_sweep: pd.DataFrame,
    optimizers: pd.DataFrame,
    names=("res-relu", "nores-relu", "res-none", "res-radial"),
):
    """The chapter's results (``chapter.Results``) on synthetic sweeps, with the conditions ``names``."""
    settings = chapter.CHAPTER.configure("smoke", conditions=list(names))
    conditions = conditions[conditions["condition"].isin(names)]
    return chapter.Results(
        settings=settings,
        table=conditions,
        optimizer_table=optimizers,
        init_table=init_sweep,
        baseline=0.05,
        events=chapter.transfer_events(conditions),
        optimizer_events=chapter.transfer_events(optimizers),
        init_events=chapter.transfer_events(init_sweep),
    )


NEVER_CROSSING = [0, 0.01, 0.02, 0.05, 0.08, 0.09]  # spectral: at most 0.9, so no norm crosses


@pytest.fixture(scope="module")
def following():
    """Results and claims of a synthetic sweep that follows the paper (claims take a while: bootstraps)."""
    conditions, init_sweep, relu = sweeps(STEPS_UPDATE, nores_grad=0.05, init_later=True)
    results = results_of(conditions, init_sweep, relu)
    return results, chapter.timeline_claims(results.table, init_sweep, relu, 0.05, dataset="fashion-mnist")


def test_findings_on_a_sweep_that_follows_the_paper(following):
    results, claims = following
    summary = chapter.run_summary(results)
    assert (summary.width, summary.runs, summary.snapshots) == (results.settings.base.width, 12 + 3 + 12, 6)
    start = chapter.step_zero(results)
    assert start.case == "compared" and (start.reference, start.no_residual) == ("res-relu", "nores-relu")
    assert start.reference_v1.mean == pytest.approx(0.9) and start.no_residual_v1.mean == pytest.approx(0.05)
    assert [c.condition for c in start.conditions] == results.order
    assert start.conditions[0].v1.mean == pytest.approx(0.9)
    follow = chapter.weights_follow(results, claims)
    assert follow.case == "crossed" and (follow.never_crossed, follow.runs) == (0, 3)
    assert follow.crossing_step.mean == 10 and follow.spectral_crossing_step.mean == 1
    assert follow.rise_step.mean == 10 and follow.rel_update_at_rise.mean == pytest.approx(1.2)
    assert follow.frobenius_verdict == follow.spectral_verdict == "reproduced"
    relu_summary = chapter.condition_summaries(results)[0]
    assert relu_summary.label == "res-relu" and len(relu_summary.seeds) == 3
    assert relu_summary.seeds[0] == chapter.SeedEvents(
        chapter.EventStep("at", 10.0), chapter.EventStep("at", 1.0), chapter.EventStep("at", 10.0)
    )
    assert relu_summary.weight_v1_final.mean == pytest.approx(0.85)
    assert [s.label for s in chapter.optimizer_summaries(results)] == ["adam"]
    rise = chapter.rise_against_prediction(results)
    assert rise.predicted == pytest.approx(2 / math.sqrt(results.settings.base.width))
    assert [c.condition for c in rise.conditions] == results.order
    init = chapter.init_scale_events(results)
    assert init.case == "all-crossed" and init.never_crossed == ()
    assert [s.init_scale for s in init.scales] == [0.1, 0.3, 1.0, 3.0]
    assert [s.rise_step.mean for s in init.scales] == [1, 3, 10, 30]  # a larger init rises later
    drift = chapter.rotation_drift(results)
    assert drift.window_start == chapter.DRIFT_WINDOW_START and [c.condition for c in drift.conditions] == results.order
    assert drift.conditions[0].cumgrad_final.mean == pytest.approx(0.8)
    assert math.isnan(drift.conditions[0].turn.mean)  # the synthetic runs record no rotation


def test_findings_on_a_sweep_that_never_crosses():
    conditions, init_sweep, relu = sweeps(NEVER_CROSSING, nores_grad=0.9, init_later=False)
    # one more init run whose update never outgrows the initial weights
    init_sweep = pd.concat(
        [init_sweep, timeline_run("res-relu", 0, 10.0, NEVER_CROSSING, [0.05] * 6)], ignore_index=True
    )
    results = results_of(conditions, init_sweep, relu)
    claims = chapter.timeline_claims(results.table, init_sweep, relu, 0.05, dataset="fashion-mnist")
    follow = chapter.weights_follow(results, claims)
    assert follow.case == "never-crossed" and (follow.never_crossed, follow.runs) == (3, 3)
    assert math.isnan(follow.crossing_step.mean) and follow.rise_step.mean == 10
    assert follow.frobenius_verdict == follow.spectral_verdict == "not reproduced"
    seed = chapter.condition_summaries(results)[0].seeds[0]
    assert (seed.crossing.case, seed.spectral_crossing.case, seed.rise.case) == ("never", "never", "at")
    init = chapter.init_scale_events(results)
    assert init.case == "some-never-crossed" and init.never_crossed == ((10.0, 0),)
    assert chapter.step_zero(results).no_residual_v1.mean == pytest.approx(0.9)


def test_the_step0_reading_needs_the_no_residual_control():
    conditions, init_sweep, relu = sweeps(STEPS_UPDATE, nores_grad=0.05, init_later=True)
    results = results_of(conditions, init_sweep, relu, names=("res-relu", "res-none", "res-radial"))
    assert chapter.step_zero(results).case == "no-control"


@pytest.mark.parametrize(
    "verdicts, case",
    [
        (["not reproduced"] * 3, "not-faster"),
        (["reproduced"] * 3, "faster"),
        (["reproduced", "not reproduced", "not tested"], "mixed"),
        (["not reproduced"], "not-faster"),  # only the conditions that ran
    ],
)
def test_drift_verdicts(verdicts, case):
    conditions = chapter.DRIFT_CONDITIONS[: len(verdicts)]
    claims = pd.DataFrame(
        {"key": ["order-frobenius", *(f"{c}-late-drift" for c in conditions)], "verdict": ["reproduced", *verdicts]}
    )
    finding = chapter.drift_verdicts(claims)
    assert finding.case == case and finding.verdicts == tuple(zip(conditions, verdicts))


def test_the_sentence_builders_render(following):
    """One smoke check per sentence builder: it fills its templates (the words are prose.md's)."""
    results, claims = following
    summary = chapter.condition_summaries(results)[0]
    texts = [
        chapter.run_note(results).data,
        chapter.step0_caption(results),
        chapter.condition_timeline_caption(summary),
        chapter.optimizer_timeline_caption(results, chapter.optimizer_summaries(results)[0]),
        chapter.rise_note(results).data,
        chapter.EVENTS_TABLE_NOTE.data,
        chapter.init_scale_caption(results),
        chapter.rotation_caption(results),
        chapter.reading(results, claims).data,
    ]
    for text in texts:
        assert text.strip() and "{" not in text, text

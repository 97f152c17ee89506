"""The transformer chapter: presets, configure errors, and claims with known verdicts on synthetic run tables."""

import math

import pandas as pd
import pytest
from helpers import by_name, claim_names

from geocont.chapters import lm_runs
from geocont.chapters import transformer_projections as chapter
from geocont.layouts import PROJECTIONS
from geocont.metrics import random_abs_cos
from geocont.scales import ParameterError
from geocont.statistics import DIFFERENCE_MARGIN
from geocont.transformer import build_llama, parameter_count, projection_dims


def test_paper_shape_has_about_34m_parameters():
    count = parameter_count(build_llama(lm_runs.LM_SHAPES["paper"]))
    assert abs(count - 34e6) / 34e6 < 0.10, count


def test_configure_builds_every_variant_with_the_deeper_model_last():
    settings = chapter.CHAPTER.configure("smoke", steps=5, seeds=1)
    configs = settings.configs()
    assert list(configs) == [*lm_runs.LM_VARIANTS, settings.depth_label]
    assert configs["none"][0].shape.mlp_activation == "none"
    assert configs["silu, linear attention"][0].shape.attention == "linear"
    deeper = configs[settings.depth_label][0].shape
    assert deeper.n_layers == settings.depth_layers and deeper.d_model == settings.base.shape.d_model
    assert configs["silu"][0].steps == 5 and len(configs["silu"]) == 1
    assert settings.early_step in configs["silu"][0].schedule()  # the early horizon is a snapshot of every run
    assert settings.overrides == {"steps": 5, "seeds": 1}


def test_zero_other_and_depth_seeds_run_only_the_main_variants():
    assert list(chapter.CHAPTER.configure("smoke", other_seeds=0, depth_seeds=[]).configs()) == list(
        lm_runs.MAIN_VARIANTS
    )


def test_a_shape_parameter_replaces_its_preset_value():
    assert chapter.CHAPTER.configure("smoke", d_model=64).base.shape.d_model == 64


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(early_step=16), r"early_step \(16\) must lie strictly between 0 and steps"),
        (dict(variants=["none"]), "must include silu"),
        (dict(depth_seeds="x"), "depth_seeds must be a count"),
        (dict(epochs=3), "unknown parameter.*epochs; valid choices: scale, seeds, steps"),
        (dict(variants=["gelu"]), "unknown variant.*valid choices: 'silu', 'none', 'relu', 'silu, linear attention'"),
        (dict(seeds=0), "seeds must be a positive count"),
    ],
)
def test_configure_rejects_a_bad_parameter_in_one_line(params, message):
    with pytest.raises(ParameterError, match=message):
        chapter.CHAPTER.configure("smoke", **params)


def test_run_configs_are_every_variant_and_seed_then_the_longer_run():
    settings = chapter.CHAPTER.configure("smoke")
    assert chapter.CHAPTER.run_configs(settings) == [c for runs in settings.configs().values() for c in runs] + [
        settings.long_configs()[settings.long_label][0]
    ]


def test_the_longer_run_is_the_first_reference_seed_read_at_the_horizon_too():
    settings = chapter.CHAPTER.configure("smoke")
    assert settings.long_factor == chapter.LONG_FACTOR["smoke"] == 4 and settings.long_label == "silu, 4× steps"
    (long,) = settings.long_configs()["silu, 4× steps"]
    reference = settings.configs()["silu"][0]
    assert long == reference.replace(steps=64, snapshot_steps=(4, 16))
    assert {settings.early_step, settings.base.steps} <= set(long.schedule())
    assert list(settings.configs()) == list(settings.all_configs())[:-1]  # the analysed runs are unchanged
    for off in (0, 1):
        assert chapter.CHAPTER.configure("smoke", long_factor=off).long_configs() == {}
    assert chapter.CHAPTER.configure("paper").long_configs() == {}
    assert chapter.CHAPTER.configure("smoke", seeds=[3, 4]).long_configs()["silu, 4× steps"][0].seed == 3
    with pytest.raises(ParameterError, match="long_factor must be an integer >= 0"):
        chapter.CHAPTER.configure("smoke", long_factor=-1)


def test_a_longer_run_is_costed_where_asked_and_the_cpu_preset_runs_the_memorisation_control_instead():
    settings, longer = chapter.CHAPTER.configure("cpu"), chapter.CHAPTER.configure("cpu", long_factor=4)
    assert chapter.run_counts(settings)[-1] == chapter.RunCount("silu, kjv", 1)  # the memorisation control
    assert settings.long_configs() == {} and chapter.budget_finding(settings).long_steps == 0
    long = longer.long_configs()["silu, 4× steps"][0]
    assert long.steps == 64000 and chapter.run_seconds(long) == pytest.approx(64000 * chapter.CPU_SECONDS_PER_STEP[4])
    assert chapter.predicted_minutes(longer) > chapter.predicted_minutes(settings)
    assert chapter.budget_finding(longer).long_steps == 64000
    without_control = chapter.budget_finding(chapter.CHAPTER.configure("cpu", control_corpus="none"))
    assert without_control.cut == ("silu, kjv",)
    flags = chapter.budget_finding(settings).rerun_flags
    assert "-p long_factor 0" in flags and "-p control_corpus none" in flags and "-p steps 4000" in flags


def test_the_cpu_preset_resolves_the_last_third_of_training():
    base = chapter.CHAPTER.configure("cpu").base
    assert len([s for s in base.schedule() if s >= base.steps * 2 / 3]) >= 4


def test_the_cpu_preset_runs_the_full_design_over_its_budget_and_says_so():
    settings = chapter.CHAPTER.configure("cpu")
    assert settings.configs() == chapter.CHAPTER.configure("cpu", **chapter.FULL_CPU_DESIGN).configs()
    finding = chapter.budget_finding(settings)
    assert finding.costed and finding.over_budget and finding.cut == ()
    assert finding.minutes == chapter.predicted_minutes(settings) > finding.budget_minutes == chapter.CPU_BUDGET_MINUTES
    assert finding.n_runs == sum(r.seeds for r in finding.runs) and finding.full_runs == finding.runs
    assert finding.cheap_runs == (chapter.RunCount("silu", 2), chapter.RunCount("none", 2)) and finding.cheap_seeds == 2
    assert finding.cheap_minutes <= chapter.CPU_BUDGET_MINUTES
    assert f"{finding.minutes:.0f} min" in chapter.budget_note(settings).data  # renders


def test_the_budget_note_costs_only_the_cpu_scale():
    finding = chapter.budget_finding(chapter.CHAPTER.configure("smoke"))
    assert not finding.costed and not finding.over_budget and finding.cut == ()
    assert finding.runs[0] == chapter.RunCount("silu", 2) and finding.steps == 16
    assert (chapter.RunCount("a", 1).number, chapter.RunCount("a", 2).number) == ("one", "several")


def test_the_cheaper_design_fits_the_budget():
    cheap = chapter.CHAPTER.configure("cpu", **chapter.BUDGET_CPU_DESIGN)
    assert chapter.predicted_minutes(cheap) <= chapter.CPU_BUDGET_MINUTES


def test_the_budget_note_names_the_runs_an_override_leaves_out():
    settings = chapter.CHAPTER.configure("cpu", depth_seeds=0)
    full = chapter.CHAPTER.configure("cpu")
    finding = chapter.budget_finding(settings)
    assert finding.cut == (full.depth_label,) and finding.full_runs == chapter.run_counts(full)
    assert finding.full_minutes == chapter.predicted_minutes(full) > finding.minutes


def test_the_other_chapters_analyse_this_chapters_reference_runs():
    from geocont.chapters import compression, pretrained_continuity

    settings = chapter.CHAPTER.configure("cpu")
    assert compression.CHAPTER.configure("cpu").lm_configs() == settings.configs()[settings.reference]
    assert pretrained_continuity.CHAPTER.configure("cpu").trained_configs() == settings.configs()[settings.reference]


#: The smoke shape's projection dimensions: d = 32, SwiGLU width 88.
DIMS = projection_dims(lm_runs.LM_SHAPES["smoke"])
PREDICTED = set(chapter.PROJECTION_PREDICTIONS)


def _table(high: float, ablated: float) -> pd.DataFrame:
    """Final-step weight continuity of three seeds: ``high`` for the predicted (projection, space)
    pairs of ``silu``, 0.15 elsewhere and for V, ``ablated`` for the ablated variants' Gate/Up and Q/K."""
    rows = []
    for variant in ("silu", "none", "silu, linear attention"):
        for seed, jitter in enumerate((-0.01, 0.0, 0.01)):
            for projection in PROJECTIONS:
                for space in ("input", "output"):
                    value = high if (projection, space) in PREDICTED else 0.15
                    if variant == "none" and projection in ("gate_proj", "up_proj") and space == "input":
                        value = ablated
                    if variant != "silu" and projection in ("q_proj", "k_proj") and space == "input":
                        value = ablated if variant == "silu, linear attention" else value
                    for step, scale in ((0, 0.0), (12, 1.0)):
                        for layer in (0, 1):
                            rows.append(
                                dict(
                                    condition=variant,
                                    optimizer="adam",
                                    init_scale=1.0,
                                    seed=seed,
                                    step=step,
                                    group=projection,
                                    layer=layer,
                                    metric="weight_cos",
                                    space=space,
                                    direction=1,
                                    value=scale * value + jitter,
                                )
                            )
    return pd.DataFrame(rows)


KEYS = [
    "q-input-continuity",
    "k-input-continuity",
    "gate-input-continuity",
    "up-input-continuity",
    "o-output-continuity",
    "down-output-continuity",
    "v-low-input",
    "v-low-output",
    "activation-lowers-gate",
    "activation-lowers-up",
    "softmax-anchors-q",
    "softmax-anchors-k",
]
#: The Up/O claims every run table judges, and the two of the longer run.
UP_O_KEYS = ["up-gate-shared-v1", "up-gate-shared-u1", "up-align-vs-v1", "o-align-vs-v1"]
RISING_KEYS = ["up-still-rising", "o-still-rising"]


def test_claims_are_reproduced_where_the_predicted_projections_are_continuous():
    claims = chapter.transformer_claims(_table(high=0.8, ablated=0.15), DIMS)
    assert list(claims["key"]) == KEYS  # unique and stable
    assert (claims["verdict"] == "reproduced").all(), claims[["key", "verdict"]]
    by_key = claims.set_index("key")
    assert by_key.loc["q-input-continuity", "ours_mean"] == pytest.approx(0.8)
    assert by_key.loc["activation-lowers-gate", "ours_mean"] == pytest.approx(0.65)
    assert by_key.loc["down-output-continuity", "baseline"] == pytest.approx(random_abs_cos(32))  # d_model side
    assert chapter.softmax_finding(claims).case == "supported" and chapter.softmax_note(claims) is None


def test_claims_are_not_reproduced_without_continuity_and_the_softmax_note_says_so():
    claims = chapter.transformer_claims(_table(high=0.15, ablated=0.15), DIMS).set_index("key")
    v_keys = ["v-low-input", "v-low-output"]
    assert (claims.drop(index=v_keys)["verdict"] == "not reproduced").all(), claims["verdict"]
    assert (claims.loc[v_keys, "verdict"] == "not tested").all()  # no projection of V's space is reproduced
    assert claims.loc["v-low-input", "note"].endswith(": none")
    finding = chapter.softmax_finding(claims.reset_index())
    assert finding.case == "not-supported"
    assert finding.evidence == tuple(claims.loc[list(chapter.SOFTMAX_KEYS), "note"].str.split("; ").str[0])
    assert finding.evidence[0] in chapter.softmax_note(claims.reset_index()).data  # renders
    # without the ablated variants, their claims are left out
    only_silu = chapter.transformer_claims(_table(high=0.8, ablated=0.15).query("condition == 'silu'"), DIMS)
    assert list(only_silu["key"]) == KEYS[:8] and chapter.softmax_finding(only_silu).case == "not-run"
    assert chapter.softmax_note(only_silu) is None


def test_v_is_compared_only_with_projections_whose_continuity_is_reproduced_and_settled():
    table = _table(high=0.8, ablated=0.15)
    settled = chapter.transformer_claims(table, DIMS).set_index("key")
    assert settled.loc["v-low-output", "verdict"] == "reproduced"
    assert settled.loc["v-low-output", "note"].endswith(": o_proj, down_proj")
    moving = {("o_proj", "output"), ("down_proj", "output")}  # high, but still moving where judged
    claims = chapter.transformer_claims(table, DIMS, unsettled=moving).set_index("key")
    assert claims.loc["v-low-output", "verdict"] == "not tested" and claims.loc["v-low-output", "note"].endswith(
        ": none"
    )
    assert claims.loc["v-low-input", "verdict"] == "reproduced"  # its space's comparators all settled
    assert claims.loc["o-output-continuity", "verdict"] == "reproduced"  # "not settled" is claims()'s to say


def _long_table() -> pd.DataFrame:
    """Three steps (0, the early horizon 4, the end 16) and intermediate ones (10, 13: the last third of 16 steps
    starts at 13): Up's input continuity is high at step 4 and falls to 0.15 by step 10; everything else as
    ``_table(0.8, 0.15)``.
    A deeper model (one seed) keeps Up at 0.8."""
    base = _table(high=0.8, ablated=0.15)
    final = base[base.step == 12]
    frames = [base[base.step == 0]]
    for step in (4, 10, 13, 16):
        frame = final.assign(step=step)
        if step >= 10:
            up = (frame.group == "up_proj") & (frame.space == "input") & (frame.condition == "silu")
            frame.loc[up, "value"] = 0.15 + (frame.loc[up, "value"] - 0.8)
        frames.append(frame)
    deep = frames[-1][frames[-1].condition == "silu"].query("seed == 0").assign(condition="silu, 3 layers")
    deep.loc[(deep.group == "up_proj") & (deep.space == "input"), "value"] = 0.8  # the deeper model keeps Up
    loss = [
        dict(
            condition=condition,
            optimizer="adam",
            init_scale=1.0,
            seed=seed,
            step=step,
            group="",
            layer=0,
            metric="val_loss",
            space="",
            direction=0,
            value=6.0 - step / 4 + seed / 10,
        )
        for condition, seeds in (("silu", (0, 1, 2)), ("silu, 3 layers", (0,)))
        for seed in seeds
        for step in (0, 4, 10, 13, 16)
    ]
    gaps = [
        dict(
            condition="silu",
            optimizer="adam",
            init_scale=1.0,
            seed=seed,
            step=step,
            group=projection,
            layer=layer,
            metric="weight_gap",
            space="",
            direction=1,
            value=0.02 if step == 0 else 0.03 if projection == "up_proj" and step >= 10 else 0.2,
        )
        for seed in (0, 1, 2)
        for step in (0, 4, 10, 13, 16)
        for projection in PROJECTIONS
        for layer in (0, 1)
    ]
    return pd.concat([*frames, deep, pd.DataFrame(loss), pd.DataFrame(gaps)], ignore_index=True)


def test_claims_note_the_early_value_the_late_change_and_when_they_hold():
    settings = chapter.CHAPTER.configure("smoke", pretrained="none")
    table = _long_table()
    results = chapter.Results(settings, table, chapter.projection_finals(table), DIMS)
    claims = by_name(chapter.claims(results))
    assert list(claims.index) == KEYS + UP_O_KEYS + RISING_KEYS
    assert (claims.loc[UP_O_KEYS[:2], "verdict"] == "not tested").all()  # a table without cross_cos
    assert claims.loc["up-still-rising", "verdict"] == "not reproduced"  # Up fell 0.80 -> 0.15 after step 4
    ablation = claims.loc["activation-lowers-gate"]  # both variants' Gate settled by step 10
    assert ablation.verdict == "reproduced" and "none gate v1: change over the last third +0.00" in ablation.note
    assert claims.loc["up-gate-shared-v1", "note"].startswith("cross_cos not recorded")
    up = claims.loc["up-input-continuity"]
    assert up.verdict == "not reproduced"
    assert (up.early_step, up.early_mean, up.early_sd, up.early_n) == (4, pytest.approx(0.80), pytest.approx(0.01), 3)
    assert up.early_verdict == "reproduced"
    assert "holds only early" in up.note and "change over the last third +0.00" in up.note  # settled by step 10
    assert "holds throughout" in claims.loc["q-input-continuity", "note"]
    assert "change over the last third" in claims.loc["v-low-input", "note"]  # V's claims: one quantity too
    holds = chapter.holds_finding(results, claims.reset_index())
    assert (holds.early_step, holds.end) == (4, 13)  # the first snapshot whose last third (10 to 13) is flat
    assert [when for when, _ in holds.groups] == ["throughout", "only early", "not tested"]
    assert dict(holds.groups)["only early"] == ("up-input-continuity", "activation-lowers-up")  # V judged on itself
    lost = chapter.lost_finding(results, claims.reset_index())
    assert lost.case == "some-lost" and lost.reference == "silu" and len(lost.lost) == 1
    up_lost = lost.lost[0]
    assert (up_lost.projection, up_lost.space, up_lost.early_verdict, up_lost.verdict, up_lost.case) == (
        "up_proj",
        "input",
        "reproduced",
        "not reproduced",
        "alone",
    )
    assert (up_lost.early.mean, up_lost.early.std, up_lost.final.mean) == (
        pytest.approx(0.80),
        pytest.approx(0.01),
        pytest.approx(0.15),
    )
    settled = chapter.settled_finding(results)  # judged at 13: Up fell before step 10, where its last third starts
    assert (settled.case, settled.start, settled.end, settled.moving) == ("settled", 10, 13, ())
    statement = chapter.holds_statement(results, claims.reset_index()).data  # renders
    assert "`up-input-continuity`" in statement and "0.15 ± 0.01" in statement
    depth = chapter.depth_finding(results)
    assert depth.case == "one-seed" and (depth.depth_label, depth.n_layers, depth.steps) == ("silu, 3 layers", 2, 16)
    assert [c.key for c in depth.changed] == ["up-input-continuity"]
    assert len(depth.same) + len(depth.changed) == 8
    up_depth = depth.changed[0]
    assert (up_depth.shallow.ours_mean, up_depth.shallow.n_seeds, up_depth.shallow.verdict) == (
        pytest.approx(0.15),
        3,
        "not reproduced",
    )
    assert (up_depth.deep.ours_mean, up_depth.deep.n_seeds, up_depth.deep.verdict) == (
        pytest.approx(0.80),
        1,
        "reproduced",
    )
    assert "`up-input-continuity`" in chapter.depth_statement(results).data  # renders
    horizon = chapter.horizon_table(results)
    row = horizon[(horizon.projection == "up") & (horizon.vector == "v1")].iloc[0]
    assert row["silu, step 4"] == "0.80 ± 0.01" and row["silu, step 16"] == "0.15 ± 0.01"
    assert row["silu, 3 layers, step 16"] == "0.80 (1 seed)"
    assert "silu, 3 layers, step 4" not in horizon.columns
    shown = chapter.horizon_display(results).data  # silu with its settling first, then the others
    assert shown.count("<table") == 3 and shown.index("silu: change over last third") < shown.index("none, step 4")
    assert shown.index("none, step 4") < shown.index("silu, 3 layers, step 16")
    assert "up v1" in shown and "white-space: nowrap" in shown
    loss = horizon[horizon.projection == "val. loss"].iloc[0]
    assert loss["silu, step 4"] == "5.10 ± 0.10" and loss["silu, step 16"] == "2.10 ± 0.10"
    assert loss["silu, 3 layers, step 16"] == "2.00 (1 seed)" and loss["random baseline"].endswith("(uniform)")
    gaps = chapter.gap_finding(results)
    assert (gaps.case, gaps.reference, gaps.early_step, gaps.end, gaps.threshold) == (
        "moved",
        "silu",
        4,
        16,
        DIFFERENCE_MARGIN,
    )
    assert [(m.projection, m.space) for m in gaps.moved] == [("up_proj", "input")]
    moved = gaps.moved[0]
    assert [moved.before, moved.after, moved.gap_before, moved.gap_after] == pytest.approx([0.80, 0.15, 0.20, 0.03])
    assert "0.80 → 0.15" in chapter.gap_sentence(results)  # renders
    steady = chapter.Results(settings, table[table.step != 16], chapter.projection_finals(table), DIMS)
    still = table[table.step <= 4]  # stops at the early horizon: nothing can have moved
    nothing = chapter.gap_finding(chapter.Results(settings, still, chapter.projection_finals(still), DIMS))
    assert (nothing.case, nothing.moved, nothing.end) == ("none-moved", (), 16)
    steady_gaps = chapter.gap_finding(steady)  # step 10 is the last step there
    assert [(m.projection, m.before, m.after) for m in steady_gaps.moved] == [
        ("up_proj", pytest.approx(0.80), pytest.approx(0.15))
    ]
    from geocont.book.chapter import changed_verdicts

    assert claim_names(changed_verdicts(claims.reset_index())) == ["up-input-continuity", "activation-lowers-up"]
    assert claims.loc["up-input-continuity", "claim"] in chapter.verdict(results, claims.reset_index()).data  # renders
    pretrained = chapter.pretrained_finding(results)
    assert pretrained.case == "not-analysed" and pretrained.comparisons == ()
    without = chapter.depth_finding(
        chapter.Results(
            chapter.CHAPTER.configure("smoke", depth_seeds=0),
            table[table.condition != "silu, 3 layers"],
            chapter.projection_finals(table),
            DIMS,
        )
    )
    assert without.case == "not-run" and without.same == without.changed == ()
    losses = chapter.loss_finding(results)
    assert [v.label for v in losses.variants] == results.variants and losses.early_step == 4
    assert (losses.variants[0].early.mean, losses.variants[0].final.mean) == (pytest.approx(5.1), pytest.approx(2.1))
    profile = chapter.depth_profile_finding(results)
    assert profile.case == "with-deeper" and profile.labels == ("silu", "silu, 3 layers")


def test_an_early_step_outside_the_run_names_both_parameters():
    with pytest.raises(ParameterError, match=r"early_step \(16\) must lie strictly between 0 and steps \(16\)"):
        chapter.CHAPTER.configure("smoke", early_step=16)


def _up_o_rows(condition: str, seeds, steps, values: dict, cross: bool = True) -> list[dict]:
    """Rows of the Up/O quantities (:data:`chapter.UP_O_QUANTITIES`) for one run label: each quantity's
    value at the last of ``steps`` is ``values[name]`` (plus a seed jitter), scaled by step / last before it."""
    rows, last = [], max(steps)
    for name, (metric, group, space, direction) in chapter.UP_O_QUANTITIES.items():
        if metric == "cross_cos" and not cross:
            continue
        for seed in seeds:
            for step in steps:
                value = values[name](step) if callable(values[name]) else values[name] * step / last
                rows += [
                    dict(
                        condition=condition,
                        optimizer="adam",
                        init_scale=1.0,
                        seed=seed,
                        step=step,
                        group=group,
                        layer=layer,
                        metric=metric,
                        space=space,
                        direction=direction,
                        value=value + (seed - 1) / 100,
                    )
                    for layer in (0, 1)
                ]
    return rows


#: Final values (step 16) of the reference variant: Up's v1 and O's u1 low, Up's v1 shared with Gate's,
#: the alignment above v1 / u1, Up and Gate's u1 near random (E|cos| = 0.085 at the SwiGLU width 88).
UP_O_FINAL = {"up-v1": 0.15, "up-align": 0.6, "up-gate-v1": 0.8, "up-gate-u1": 0.1, "o-u1": 0.07, "o-align": 0.5}


def _up_o_results(cross: bool = True, long: bool = True, settings=None):
    """The reference variant (3 seeds, steps 0, 4, 12, 16) and a longer run (seed 0, to step 64) in which Up's
    v1 keeps rising (0.15 at step 16, 0.40 at 64) and O's u1 does not (0.07, 0.08); the rest as at step 16."""
    settings = settings or chapter.CHAPTER.configure("smoke", pretrained="none", depth_seeds=0, other_seeds=0)
    table = pd.DataFrame(_up_o_rows("silu", (0, 1, 2), (0, 4, 12, 16), UP_O_FINAL, cross))
    rising = {"up-v1": lambda s: 0.15 + 0.25 * max(0, s - 16) / 48, "o-u1": lambda s: 0.07 + 0.01 * max(0, s - 16) / 48}
    values = {name: rising.get(name, lambda s, v=v: v * min(s, 16) / 16) for name, v in UP_O_FINAL.items()}
    longer = pd.DataFrame(_up_o_rows(settings.long_label, (0,), (0, 4, 16, 32, 64), values, cross))
    return chapter.Results(settings, table, chapter.projection_finals(table), DIMS, long=longer if long else None)


def test_the_up_o_claims_have_known_verdicts_on_a_synthetic_table():
    results = _up_o_results()
    claims = chapter.gap_claims(results).set_index("key")
    assert list(claims.index) == UP_O_KEYS + RISING_KEYS
    assert dict(claims["verdict"]) == {
        "up-gate-shared-v1": "reproduced",
        "up-gate-shared-u1": "not reproduced",
        "up-align-vs-v1": "reproduced",
        "o-align-vs-v1": "reproduced",
        "up-still-rising": "reproduced",
        "o-still-rising": "not reproduced",
    }
    shared = claims.loc["up-gate-shared-v1"]
    assert (shared.ours_mean, shared.ours_std, shared.n_seeds) == (pytest.approx(0.8), pytest.approx(0.01), 3)
    assert shared.baseline == pytest.approx(random_abs_cos(32))  # Up's input: d_model
    assert claims.loc["up-gate-shared-u1", "baseline"] == pytest.approx(random_abs_cos(88))  # the SwiGLU width
    # each side above its own random level (the alignment's 0, v1's E|cos|): no single baseline in the verdict
    assert math.isnan(claims.loc["up-align-vs-v1", "baseline"])
    assert "v1 |cos| 0.15 ± 0.01" in claims.loc["up-align-vs-v1", "note"]
    up = claims.loc["up-still-rising"]
    assert (up.ours_mean, up.n_seeds, up.baseline) == (pytest.approx(0.39), 1, pytest.approx(random_abs_cos(32)))
    assert up.note == "at step 16: 0.14 (1 seed)"
    long = chapter.rising_finding(results)
    assert (long.source, long.label, long.seeds, long.factor, long.horizon, long.end) == (
        "longer-run",
        "silu, 4× steps",
        (0,),
        4,
        16,
        64,
    )
    assert long.items[0].reference.mean == pytest.approx(long.items[0].at_horizon.mean)  # the same weights
    explanations = {e.key: e.case for e in chapter.explanation_verdicts(chapter.gap_claims(results))}
    assert explanations == {"not-settled": "mixed", "gate-shared": "kept", "spread": "kept"}
    statement = chapter.gap_statement(results).data  # renders
    assert "0.14 (1 seed) → 0.39 (1 seed)" in statement
    # the statement reads the claims as the chapter judges them: the alignments still rise over the last third
    judged = {e.key: e.case for e in chapter.explanation_verdicts(chapter.claims(results))}
    # the alignments still rise over the last third, but away from their verdicts: the explanations are decided
    assert judged == {"not-settled": "mixed", "gate-shared": "kept", "spread": "kept"}
    assert statement.count("not decided yet") == 0
    finding = chapter.up_o_finding(results)
    assert [q.name for q in finding.up_gate] == ["up-gate-v1", "up-gate-u1"]
    assert finding.up_gate[0].early.mean == pytest.approx(0.2)  # step 4 of 16
    assert "0.80 ± 0.01 at step 16" in chapter.up_o_caption(results)


def test_an_explanation_whose_prediction_still_moves_is_not_decided():
    assert chapter.explanation_case(["not reproduced", "not settled"]) == "not-settled"
    assert chapter.explanation_case(["not tested", "not settled"]) == "not-tested"
    assert chapter.explanation_case(["reproduced", "not reproduced"]) == "mixed"


def test_without_the_longer_run_the_runs_themselves_say_whether_up_and_o_were_still_rising():
    results = _up_o_results(cross=False, long=False)
    assert chapter.up_o_finding(results).up_gate is None
    rising = chapter.rising_finding(results)  # from the early horizon (step 4) to the end (16), every seed
    assert (rising.source, rising.seeds, rising.factor, rising.horizon, rising.end) == (
        "same-runs",
        (0, 1, 2),
        4,
        4,
        16,
    )
    assert rising.runs == "silu, 3 seeds" and rising.items[0].reference is None
    claims = chapter.gap_claims(results).set_index("key")
    assert list(claims.index) == UP_O_KEYS + RISING_KEYS
    assert list(claims.loc[UP_O_KEYS[:2], "verdict"]) == ["not tested"] * 2
    assert claims.loc["up-align-vs-v1", "verdict"] == "reproduced"  # recorded for every projection
    up, o = claims.loc["up-still-rising"], claims.loc["o-still-rising"]
    assert (up.ours_mean, up.n_seeds, up.verdict) == (pytest.approx(0.15), 3, "reproduced")  # 0.0375 -> 0.15
    assert (o.ours_mean, o.verdict) == (pytest.approx(0.07), "partly reproduced")  # 0.0175 -> 0.07: +0.05
    explanations = {e.key: e.case for e in chapter.explanation_verdicts(claims.reset_index())}
    assert explanations == {"not-settled": "mixed", "gate-shared": "not-tested", "spread": "kept"}
    assert "from step 4 to step 16" in chapter.gap_statement(results).data
    off = _up_o_results(settings=chapter.CHAPTER.configure("smoke", pretrained="none", long_factor=0))
    assert chapter.rising_finding(off).source == "same-runs"  # turned off: a cached long table is not read


def test_the_full_claims_table_judges_the_longer_run_without_an_early_value():
    results = _up_o_results()
    claims = by_name(chapter.claims(results))
    assert list(claims.index)[-6:] == UP_O_KEYS + RISING_KEYS
    assert claims.loc["up-gate-shared-v1", "early_verdict"] == "partly reproduced"  # 0.20 at step 4, random 0.14
    assert (claims.loc[RISING_KEYS, "early_verdict"] == "").all()
    assert "holds" not in claims.loc["up-still-rising", "note"]
    assert "settledness not judged" in claims.loc["up-still-rising", "note"]  # it reads the change itself
    shared = claims.loc["up-gate-shared-v1"]  # 0.2 at step 4, 0.8 at 16: it moved in every seed, away from random
    assert shared.verdict == "reproduced" and "per seed: +0.20, +0.20, +0.20" in shared.note  # step 12 to 16
    assert "another third at its last-third rate would not change the verdict" in shared.note
    keys = [k for _, ks in chapter.holds_finding(results, claims.reset_index()).groups for k in ks]
    assert not set(RISING_KEYS) & set(keys)
    assert "`up-still-rising` reproduced" in chapter.lost_sentence(results, claims.reset_index())


def test_the_up_o_figure_draws_with_and_without_the_new_metric(monkeypatch):
    import matplotlib
    import matplotlib.pyplot as plt

    matplotlib.use("Agg")
    shown = []
    from geocont.chapters.transformer_projections import up_o_figures

    monkeypatch.setattr(up_o_figures, "show_figure", lambda fig, name, caption: shown.append((name, caption)))
    for results in (_up_o_results(), _up_o_results(cross=False, long=False)):
        chapter.up_o_figure(results)
        plt.close("all")
    assert [name for name, _ in shown] == ["lm-up-o-gap"] * 2


def _moving_table(o_change_seed0: float, val_rise: float = 0.0) -> pd.DataFrame:
    """:func:`_long_table` with O's output continuity in seed 0 of ``silu`` moved by ``o_change_seed0`` from step 10
    to 16, half of it by step 13 (so it moves over every last third from step 13 on), and, with ``val_rise``, seed 1's
    validation loss rising by that much after step 10."""
    table = _long_table()
    o = (
        (table.group == "o_proj")
        & (table.space == "output")
        & (table.condition == "silu")
        & (table.seed == 0)
        & (table.metric == "weight_cos")
    )
    table.loc[o & (table.step == 13), "value"] += o_change_seed0 / 2
    table.loc[o & (table.step == 16), "value"] += o_change_seed0
    if val_rise:
        loss = (table.metric == "val_loss") & (table.condition == "silu") & (table.seed == 1) & (table.step == 16)
        table.loc[loss, "value"] = (
            table.loc[
                (table.metric == "val_loss") & (table.condition == "silu") & (table.seed == 1) & (table.step == 10),
                "value",
            ].item()
            + val_rise
        )
    return table


def test_a_quantity_moving_in_one_seed_at_the_budget_is_not_settled_where_the_movement_could_change_its_verdict():
    settings = chapter.CHAPTER.configure("smoke", pretrained="none")
    table = _moving_table(o_change_seed0=-0.6)  # seed 0's O falls 0.80 -> 0.20 over the last third
    results = chapter.Results(settings, table, chapter.projection_finals(table), DIMS)
    claims = by_name(chapter.claims(results))
    o = claims.loc["o-output-continuity"]
    assert o.verdict == "not settled" and "by the rule" in o.note and "(per seed: -0.30, +0.00, +0.00)" in o.note
    assert claims.loc["q-input-continuity", "verdict"] == "reproduced"  # settled in every seed: judged as before
    finding = chapter.settled_finding(results)
    assert (finding.case, finding.end, [(m.projection, m.space) for m in finding.moving]) == (
        "moving",
        16,
        [("o_proj", "output")],
    )
    assert "-0.30" in chapter.settled_sentence(results)  # renders, with the moving seed's change
    # a smaller move that another third could not turn into another verdict leaves the verdict standing
    table = _moving_table(o_change_seed0=-0.12)
    results = chapter.Results(settings, table, chapter.projection_finals(table), DIMS)
    o = by_name(chapter.claims(results)).loc["o-output-continuity"]
    assert o.verdict == "reproduced" and "still moving" in o.note and "(per seed: -0.06, +0.00, +0.00)" in o.note


def test_claims_are_judged_before_the_validation_loss_rises():
    settings = chapter.CHAPTER.configure("smoke", pretrained="none")
    table = _moving_table(o_change_seed0=-0.12, val_rise=0.5)  # seed 1 memorises after step 10
    table = table[table["step"] != 13]  # the last third of 10 steps then holds no earlier snapshot: not settled
    results = chapter.Results(settings, table, chapter.projection_finals(table), DIMS)
    judged = chapter.horizon(results)
    assert (judged.step, judged.memorising_after) == (10, 10)
    claims = by_name(chapter.claims(results))
    assert claims.loc["o-output-continuity", "ours_mean"] == pytest.approx(0.8)  # read at step 10, before O moved


def test_a_continuity_still_moving_is_not_called_lost_and_the_statement_names_the_judged_step():
    settings = chapter.CHAPTER.configure("smoke", pretrained="none")
    table = _moving_table(o_change_seed0=-0.12, val_rise=0.5)  # judged at step 10, before seed 1 memorises
    table = table[table["step"] != 13]  # without step 13 the last third of 10 steps holds no earlier snapshot
    results = chapter.Results(settings, table, chapter.projection_finals(table), DIMS)
    claims = chapter.claims(results)
    assert chapter.holds_finding(results, claims).end == 10
    lost = chapter.lost_finding(results, claims)  # Up fell from 0.80 (step 4) to 0.15 (step 10): still moving there
    assert (lost.case, lost.lost) == ("some-moving", ())

"""The transformer chapter: presets, configure errors, and claims with known verdicts on synthetic run tables."""

import pandas as pd
import pytest

from geocont.chapters import lm_runs, transformer_projections as chapter
from geocont.layouts import PROJECTIONS
from geocont.metrics import random_abs_cos
from geocont.scales import ParameterError
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
    assert list(chapter.CHAPTER.configure("smoke", other_seeds=0, depth_seeds=[]).configs()) == list(lm_runs.MAIN_VARIANTS)


def test_a_shape_parameter_replaces_its_preset_value():
    assert chapter.CHAPTER.configure("smoke", d_model=64).base.shape.d_model == 64


@pytest.mark.parametrize("params, message", [
    (dict(early_step=16), r"early_step \(16\) must lie strictly between 0 and steps"),
    (dict(variants=["none"]), "must include silu"),
    (dict(depth_seeds="x"), "depth_seeds must be a count"),
    (dict(epochs=3), "unknown parameter.*epochs; valid choices: scale, seeds, steps"),
    (dict(variants=["gelu"]), "unknown variant.*valid choices: silu, none, relu"),
    (dict(seeds=0), "seeds must be a positive count"),
])
def test_configure_rejects_a_bad_parameter_in_one_line(params, message):
    with pytest.raises(ParameterError, match=message):
        chapter.CHAPTER.configure("smoke", **params)


def test_run_configs_are_every_variant_and_seed():
    settings = chapter.CHAPTER.configure("smoke")
    assert chapter.CHAPTER.run_configs(settings) == [c for runs in settings.configs().values() for c in runs]


def test_the_cpu_preset_resolves_the_last_third_of_training():
    base = chapter.CHAPTER.configure("cpu").base
    assert len([s for s in base.schedule() if s >= base.steps * 2 / 3]) >= 4


def test_the_cpu_preset_runs_the_full_design_over_its_budget_and_says_so():
    settings = chapter.CHAPTER.configure("cpu")
    assert settings.configs() == chapter.CHAPTER.configure("cpu", **chapter.FULL_CPU_DESIGN).configs()
    note = chapter.budget_note(settings).data
    assert chapter.predicted_minutes(settings) > chapter.CPU_BUDGET_MINUTES
    assert f"over the {chapter.CPU_BUDGET_MINUTES}-minute budget" in note and "leaves out" not in note


def test_the_cheaper_design_fits_the_budget():
    cheap = chapter.CHAPTER.configure("cpu", **chapter.BUDGET_CPU_DESIGN)
    assert chapter.predicted_minutes(cheap) <= chapter.CPU_BUDGET_MINUTES


def test_the_budget_note_names_the_runs_an_override_leaves_out():
    settings = chapter.CHAPTER.configure("cpu", depth_seeds=0)
    full = chapter.CHAPTER.configure("cpu")
    assert f"leaves out runs of `{full.depth_label}`" in chapter.budget_note(settings).data


def test_the_other_chapters_analyse_this_chapters_reference_runs():
    from geocont.chapters import compression, pretrained_continuity
    settings = chapter.CHAPTER.configure("cpu")
    assert compression.CHAPTER.configure("cpu").lm_configs() == settings.configs()[settings.reference]
    assert pretrained_continuity.CHAPTER.configure("cpu").trained_configs() == settings.configs()[settings.reference]


#: The smoke shape's projection dimensions: d = 32, SwiGLU width 88.
DIMS = projection_dims(lm_runs.LM_SHAPES["smoke"])
PREDICTED = {(p, s) for p, s, _ in chapter.PROJECTION_PREDICTIONS}


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
                            rows.append(dict(condition=variant, optimizer="adam", init_scale=1.0, seed=seed, step=step,
                                             group=projection, layer=layer, metric="weight_cos", space=space,
                                             direction=1, value=scale * value + jitter))
    return pd.DataFrame(rows)


KEYS = ["q-input-continuity", "k-input-continuity", "gate-input-continuity", "up-input-continuity",
        "o-output-continuity", "down-output-continuity", "v-low-input", "v-low-output", "activation-lowers-gate",
        "activation-lowers-up", "softmax-anchors-q", "softmax-anchors-k"]


def test_claims_are_reproduced_where_the_predicted_projections_are_continuous():
    claims = chapter.transformer_claims(_table(high=0.8, ablated=0.15), DIMS)
    assert list(claims["key"]) == KEYS  # unique and stable
    assert (claims["verdict"] == "reproduced").all(), claims[["key", "verdict"]]
    by_key = claims.set_index("key")
    assert by_key.loc["q-input-continuity", "ours_mean"] == pytest.approx(0.8)
    assert by_key.loc["activation-lowers-gate", "ours_mean"] == pytest.approx(0.65)
    assert by_key.loc["down-output-continuity", "baseline"] == pytest.approx(random_abs_cos(32))  # d_model side
    assert chapter.softmax_note(claims) is None


def test_claims_are_not_reproduced_without_continuity_and_the_softmax_note_says_so():
    claims = chapter.transformer_claims(_table(high=0.15, ablated=0.15), DIMS).set_index("key")
    assert (claims["verdict"] == "not reproduced").all(), claims["verdict"]
    note = chapter.softmax_note(claims.reset_index())
    assert note is not None and "keep their input-space continuity without the softmax" in note.data
    # without the ablated variants, their claims are left out
    only_silu = chapter.transformer_claims(_table(high=0.8, ablated=0.15).query("condition == 'silu'"), DIMS)
    assert list(only_silu["key"]) == KEYS[:8] and chapter.softmax_note(only_silu) is None


def _long_table() -> pd.DataFrame:
    """Three steps (0, the early horizon 4, the end 16) and an intermediate one (10): Up's input
    continuity is high at step 4 and falls to 0.15 by step 10; everything else as ``_table(0.8, 0.15)``.
    A deeper model (one seed) keeps Up at 0.8."""
    base = _table(high=0.8, ablated=0.15)
    final = base[base.step == 12]
    frames = [base[base.step == 0]]
    for step in (4, 10, 16):
        frame = final.assign(step=step)
        if step >= 10:
            up = (frame.group == "up_proj") & (frame.space == "input") & (frame.condition == "silu")
            frame.loc[up, "value"] = 0.15 + (frame.loc[up, "value"] - 0.8)
        frames.append(frame)
    deep = frames[-1][frames[-1].condition == "silu"].query("seed == 0").assign(condition="silu, 3 layers")
    deep.loc[(deep.group == "up_proj") & (deep.space == "input"), "value"] = 0.8  # the deeper model keeps Up
    loss = [dict(condition=condition, optimizer="adam", init_scale=1.0, seed=seed, step=step, group="", layer=0,
                 metric="val_loss", space="", direction=0, value=6.0 - step / 4 + seed / 10)
            for condition, seeds in (("silu", (0, 1, 2)), ("silu, 3 layers", (0,))) for seed in seeds
            for step in (0, 4, 10, 16)]
    gaps = [dict(condition="silu", optimizer="adam", init_scale=1.0, seed=seed, step=step, group=projection, layer=layer,
                 metric="weight_gap", space="", direction=1,
                 value=0.02 if step == 0 else 0.03 if projection == "up_proj" and step >= 10 else 0.2)
            for seed in (0, 1, 2) for step in (0, 4, 10, 16) for projection in PROJECTIONS for layer in (0, 1)]
    return pd.concat([*frames, deep, pd.DataFrame(loss), pd.DataFrame(gaps)], ignore_index=True)


def test_claims_note_the_early_value_the_late_change_and_when_they_hold():
    settings = chapter.CHAPTER.configure("smoke", pretrained="none")
    table = _long_table()
    results = chapter.Results(settings, table, chapter.projection_finals(table), DIMS)
    claims = chapter.claims(results).set_index("key")
    assert list(claims.index) == KEYS
    up = claims.loc["up-input-continuity"]
    assert up.verdict == "not reproduced"
    assert (up.early_step, up.early_mean, up.early_sd, up.early_n) == (4, pytest.approx(0.80), pytest.approx(0.01), 3)
    assert up.early_verdict == "reproduced"
    assert "holds only early" in up.note and "change over the last third +0.00" in up.note  # settled by step 10
    assert "holds throughout" in claims.loc["q-input-continuity", "note"]
    statement = chapter.holds_statement(results, claims.reset_index()).data
    assert "**only early** (3): `up-input-continuity`, `v-low-input`, `activation-lowers-up`" in statement
    assert "does not keep to the end of training** (`silu`, random baselines in the table): up v1 0.80 ± 0.01 at " \
           "step 4 (reproduced), 0.15 ± 0.01 at the end (not reproduced)." in statement
    depth = chapter.depth_statement(results).data
    assert "`silu, 3 layers` (1 seed: its sd is undefined)" in depth and "Changed: `up-input-continuity` (0.15 ± 0.01, n = 3 → 0.80, n = 1): not reproduced → reproduced" in depth
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
    assert chapter.gap_sentence(results).endswith("(seed means): up v1 0.80 → 0.15 (gap 0.200 → 0.030).")
    steady = chapter.Results(settings, table[table.step != 16], chapter.projection_finals(table), DIMS)
    still = table[table.step <= 4]  # stops at the early horizon: nothing can have moved
    assert "no predicted continuity moved by more than 0.1 between step 4 and step 16" in chapter.gap_sentence(
        chapter.Results(settings, still, chapter.projection_finals(still), DIMS))
    assert "up v1 0.80 → 0.15" in chapter.gap_sentence(steady)  # step 10 is the last step there
    verdict = chapter.verdict(results, claims.reset_index()).data
    assert "**Verdicts that differ between 4 steps and the end of training:**" in verdict
    assert "reproduced early, not reproduced at the end" in verdict
    assert chapter.pretrained_statement(results).data.startswith("No pretrained comparison")
    without = chapter.depth_statement(chapter.Results(chapter.CHAPTER.configure("smoke", depth_seeds=0), table[
        table.condition != "silu, 3 layers"], chapter.projection_finals(table), DIMS)).data
    assert "was not run at this scale" in without


def test_an_early_step_outside_the_run_names_both_parameters():
    with pytest.raises(ParameterError, match=r"early_step \(16\) must lie strictly between 0 and steps \(16\)"):
        chapter.CHAPTER.configure("smoke", early_step=16)

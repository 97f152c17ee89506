"""The transformer chapter: presets, configure errors, and claims with known verdicts on synthetic run tables."""

import pandas as pd
import pytest

from geocont.chapters import transformer_projections as chapter
from geocont.layouts import PROJECTIONS
from geocont.metrics import random_abs_cos
from geocont.scales import ParameterError
from geocont.transformer import build_llama, parameter_count, projection_dims


def test_paper_shape_has_about_34m_parameters():
    count = parameter_count(build_llama(chapter.LM_SHAPES["paper"]))
    assert abs(count - 34e6) / 34e6 < 0.10, count


def test_configure_builds_every_variant_and_rejects_bad_parameters():
    settings = chapter.configure("smoke", steps=5, seeds=1)
    configs = settings.configs()
    assert list(configs) == list(chapter.LM_VARIANTS)
    assert configs["none"][0].shape.mlp_activation == "none"
    assert configs["silu, linear attention"][0].shape.attention == "linear"
    assert configs["silu"][0].steps == 5 and len(configs["silu"]) == 1
    assert settings.overrides == {"steps": 5, "seeds": 1}
    assert chapter.configure("paper").base.corpus == "wikitext-103"
    assert chapter.configure("smoke", d_model=64).base.shape.d_model == 64
    with pytest.raises(ParameterError, match="unknown parameter.*epochs; valid choices: scale, seeds, steps"):
        chapter.configure("smoke", epochs=3)
    with pytest.raises(ParameterError, match="unknown variant.*valid choices: silu, none, relu"):
        chapter.configure("smoke", variants=["gelu"])
    with pytest.raises(ParameterError, match="seeds must be a positive count"):
        chapter.configure("smoke", seeds=0)


#: The smoke shape's projection dimensions: d = 32, SwiGLU width 88.
DIMS = projection_dims(chapter.LM_SHAPES["smoke"])
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

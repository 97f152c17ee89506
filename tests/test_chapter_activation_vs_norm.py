"""The activation-versus-LayerNorm chapter: direction profiles, concentration, claims, configure."""

import pandas as pd
import pytest

from helpers import synthetic

from geocont.chapters import activation_vs_norm as chapter
from geocont.scales import ParameterError
from geocont.tables import make_row, rows_to_frame

KEYS = ["activation-concentrates-v1", "layernorm-spreads", "layernorm-breaks-symmetry", "activation-dominates",
        "centring-breaks-symmetry"]


def test_direction_profile_and_concentration():
    table = synthetic({("peaked", 0): [0.9, 0.1, 0.1], ("flat", 0): [0.5, 0.5, 0.5]})
    shape = chapter.concentration(chapter.final_direction_profile(table)).set_index("condition")
    assert shape.loc["peaked", "concentration"] == pytest.approx(0.8)
    assert shape.loc["flat", "concentration"] == pytest.approx(0.0)
    assert shape.loc["flat", "rest"] == pytest.approx(0.505)


def norm_table(profiles: dict[str, list[float]], alignments: dict[str, float]) -> pd.DataFrame:
    """Three seeds per condition: final per-direction |cos| (``profiles``) and final sigma^2-alignment."""
    weight = synthetic({(c, seed): [v + 0.01 * seed for v in values]
                        for c, values in profiles.items() for seed in (0, 1, 2)})
    align = [rows_to_frame([make_row(step, "hidden", 0, "weight_align", "input", 0, value if step else 0.0)
                            for step in (0, 10)]).assign(condition=c, optimizer="adam", init_scale=1.0, seed=seed)
             for c, value in alignments.items() for seed in (0, 1, 2)]
    return pd.concat([weight, *align], ignore_index=True)


PEAKED, FLAT, LINEAR = [0.9, 0.1, 0.1], [0.5, 0.5, 0.5], [0.2, 0.2, 0.2]


def test_claims_reproduced_when_the_activation_concentrates_and_layernorm_spreads():
    table = norm_table({"res-relu": PEAKED, "res-ln": FLAT, "res-ln-relu": [0.85, 0.1, 0.1], "res-none": LINEAR,
                        "res-rms": LINEAR},
                       {"res-ln": 0.6, "res-none": 0.0, "res-rms": 0.0})
    claims = chapter.norm_claims(table, baseline=0.05)
    assert list(claims["key"]) == KEYS
    assert set(claims["verdict"]) == {"reproduced"}
    assert claims.set_index("key").loc["activation-concentrates-v1", "ours_mean"] == pytest.approx(0.8)
    assert chapter.rms_note(claims) is None


def test_claims_not_reproduced_when_the_roles_are_swapped():
    table = norm_table({"res-relu": FLAT, "res-ln": PEAKED, "res-ln-relu": [0.9, 0.1, 0.1], "res-none": LINEAR,
                        "res-rms": LINEAR},
                       {"res-ln": 0.0, "res-none": 0.6, "res-rms": 0.6})
    claims = chapter.norm_claims(table, baseline=0.05)
    assert set(claims["verdict"]) == {"not reproduced"}
    assert "RMSNorm behaves like LayerNorm" in chapter.rms_note(claims).data


def test_claims_without_rmsnorm_leave_out_our_own_claim():
    table = norm_table({"res-relu": PEAKED, "res-ln": FLAT, "res-ln-relu": PEAKED, "res-none": LINEAR},
                       {"res-ln": 0.6, "res-none": 0.0})
    claims = chapter.norm_claims(table, baseline=0.05)
    assert list(claims["key"]) == KEYS[:-1]
    assert chapter.rms_note(claims) is None


def test_parameters_replace_their_preset_values_and_are_recorded():
    settings = chapter.CHAPTER.configure("smoke", n_directions=4, seeds=1)
    assert settings.base.n_directions == 4 and settings.seeds == (0,)
    assert settings.overrides == {"n_directions": 4, "seeds": 1}


@pytest.mark.parametrize("params, message", [
    (dict(n_direction=4), "unknown parameter.*n_direction.*valid choices: scale, seeds"),
    (dict(n_directions=0), "n_directions"),
    (dict(conditions=["res-layernorm"]), "valid choices: res-relu"),
    (dict(scale="gpu"), "unknown scale 'gpu'"),
])
def test_configure_rejects_a_bad_value_before_any_work(params, message):
    with pytest.raises(ParameterError, match=message):
        chapter.CHAPTER.configure(**{"scale": "smoke", **params})

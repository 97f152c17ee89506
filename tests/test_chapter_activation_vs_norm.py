"""The activation-versus-LayerNorm chapter: direction profiles, concentration, claims and the findings its
prose words, configure."""

import pandas as pd
import pytest
from helpers import by_name, claim_names, synthetic

from geocont.chapters import activation_vs_norm as chapter
from geocont.scales import ParameterError
from geocont.tables import make_row, rows_to_frame

KEYS = [
    "activation-concentrates-v1",
    "layernorm-spreads",
    "layernorm-breaks-symmetry",
    "activation-dominates",
    "centring-breaks-symmetry",
]


def test_direction_profile_and_concentration():
    table = synthetic({("peaked", 0): [0.9, 0.1, 0.1], ("flat", 0): [0.5, 0.5, 0.5]})
    shape = chapter.concentration(chapter.final_direction_profile(table)).set_index("condition")
    assert shape.loc["peaked", "concentration"] == pytest.approx(0.8)
    assert shape.loc["flat", "concentration"] == pytest.approx(0.0)
    assert shape.loc["flat", "rest"] == pytest.approx(0.505)


def norm_table(profiles: dict[str, list[float]], alignments: dict[str, float]) -> pd.DataFrame:
    """Three seeds per condition: final per-direction |cos| (``profiles``) and final sigma^2-alignment."""
    weight = synthetic(
        {(c, seed): [v + 0.01 * seed for v in values] for c, values in profiles.items() for seed in (0, 1, 2)}
    )
    align = [
        rows_to_frame(
            [make_row(step, "hidden", 0, "weight_align", "input", 0, value if step else 0.0) for step in (0, 10)]
        ).assign(condition=c, optimizer="adam", init_scale=1.0, seed=seed)
        for c, value in alignments.items()
        for seed in (0, 1, 2)
    ]
    return pd.concat([weight, *align], ignore_index=True)


PEAKED, FLAT, LINEAR = [0.9, 0.1, 0.1], [0.5, 0.5, 0.5], [0.2, 0.2, 0.2]


def test_claims_reproduced_when_the_activation_concentrates_and_layernorm_spreads():
    table = norm_table(
        {"res-relu": PEAKED, "res-ln": FLAT, "res-ln-relu": [0.85, 0.1, 0.1], "res-none": LINEAR, "res-rms": LINEAR},
        {"res-ln": 0.6, "res-none": 0.0, "res-rms": 0.0},
    )
    claims = chapter.norm_claims(table, baseline=0.05, dataset="fashion-mnist")
    assert claim_names(claims) == KEYS
    assert set(claims["verdict"]) == {"reproduced"}
    assert by_name(claims).loc["activation-concentrates-v1", "ours_mean"] == pytest.approx(0.8)
    assert chapter.centring_finding(claims) == chapter.Centring("centring-breaks", claim_note(claims))
    assert chapter.rms_note(claims) is None


def test_claims_not_reproduced_when_the_roles_are_swapped():
    table = norm_table(
        {"res-relu": FLAT, "res-ln": PEAKED, "res-ln-relu": [0.9, 0.1, 0.1], "res-none": LINEAR, "res-rms": LINEAR},
        {"res-ln": 0.0, "res-none": 0.6, "res-rms": 0.6},
    )
    claims = chapter.norm_claims(table, baseline=0.05, dataset="fashion-mnist")
    assert set(claims["verdict"]) == {"not reproduced"}
    assert chapter.centring_finding(claims) == chapter.Centring("like-layernorm", claim_note(claims))
    note = chapter.rms_note(claims).data  # the one smoke check of the note: it renders, with the claim's numbers
    assert claim_note(claims) in note


def test_claims_without_rmsnorm_leave_out_our_own_claim():
    table = norm_table(
        {"res-relu": PEAKED, "res-ln": FLAT, "res-ln-relu": PEAKED, "res-none": LINEAR},
        {"res-ln": 0.6, "res-none": 0.0},
    )
    claims = chapter.norm_claims(table, baseline=0.05, dataset="fashion-mnist")
    assert claim_names(claims) == KEYS[:-1]
    assert chapter.centring_finding(claims) == chapter.Centring("absent", "")
    assert chapter.rms_note(claims) is None


def claim_note(claims: pd.DataFrame) -> str:
    """The note of the centring claim: the sigma^2-alignment of res-ln, res-rms and res-none."""
    return by_name(claims).loc["centring-breaks-symmetry", "note"]


def results_of(table: pd.DataFrame, conditions: list[str]):
    """The chapter's results (``chapter.Results``) on a synthetic run table, as ``chapter.run`` builds them."""
    settings = chapter.CHAPTER.configure("smoke", conditions=conditions, n_directions=3, seeds=3)
    profile_in = chapter.final_direction_profile(table, "weight_cos", "input")
    return chapter.Results(
        settings=settings,
        table=table,
        baseline=0.05,
        profile_in=profile_in,
        profile_out=profile_in,
        shape=chapter.concentration(profile_in),
    )


def test_the_condition_shapes_the_captions_state():
    table = norm_table({"res-relu": PEAKED, "res-ln": FLAT}, {"res-relu": 0.1, "res-ln": 0.6})
    results = results_of(table, ["res-relu", "res-ln"])
    summary = chapter.run_summary(results)
    assert (summary.conditions, summary.seeds, summary.baseline) == (2, 3, 0.05)
    shapes = chapter.condition_shapes(results)
    assert shapes.k == 3 and shapes.baseline == 0.05
    relu, ln = shapes.conditions
    assert (relu.condition, ln.condition) == ("res-relu", "res-ln")
    # each value + 0.01 per seed (mean 0.01) + 0.01 on the second layer pair (mean 0.005)
    assert relu.lead.mean == pytest.approx(0.915) and relu.rest.mean == pytest.approx(0.115)
    assert relu.concentration.mean == pytest.approx(0.8) and ln.concentration.mean == pytest.approx(0.0, abs=1e-12)
    assert relu.v1.mean == pytest.approx(0.915) and ln.alignment.mean == pytest.approx(0.6)


def test_the_captions_render():
    """One smoke check per caption builder and the run note: each fills its template."""
    table = norm_table({"res-relu": PEAKED, "res-ln": FLAT}, {"res-relu": 0.1, "res-ln": 0.6})
    results = results_of(table, ["res-relu", "res-ln"])
    for text in (
        chapter.run_note(results).data,
        chapter.direction_profile_caption(results),
        chapter.alignment_caption(results),
        chapter.concentration_caption(results),
    ):
        assert text.strip() and "{" not in text, text


def test_parameters_replace_their_preset_values_and_are_recorded():
    settings = chapter.CHAPTER.configure("smoke", n_directions=4, seeds=1)
    assert settings.base.n_directions == 4 and settings.seeds == (0,)
    assert settings.overrides == {"n_directions": 4, "seeds": 1}


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(n_direction=4), "unknown parameter.*n_direction.*valid choices: scale, seeds"),
        (dict(n_directions=0), "n_directions"),
        (dict(conditions=["res-layernorm"]), "valid choices: res-relu"),
        (dict(scale="gpu"), "unknown scale 'gpu'"),
    ],
)
def test_configure_rejects_a_bad_value_before_any_work(params, message):
    with pytest.raises(ParameterError, match=message):
        chapter.CHAPTER.configure(**{"scale": "smoke", **params})

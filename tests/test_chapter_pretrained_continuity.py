"""The pretrained-continuity chapter: its configure step, its claims on small synthetic analyzer
tables with known verdicts, the quantization rule, and the gain-scaled output continuity."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from helpers import by_name, claim_names
from safetensors.torch import save_file

from geocont.chapters import pretrained_continuity as chapter
from geocont.chapters.lm_runs import PROJECTION_PREDICTIONS
from geocont.chapters.pretrained_continuity import large_models as large_checkpoints
from geocont.scales import ParameterError
from geocont.statistics import Estimate

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
BASELINE = 0.05
N_LAYERS = 4
D_MODEL = 64


def analyzer_table(
    v1: dict[str, float], u1: dict[str, float], layout: str = "llama", n_layers: int = 5, jitter: float = 0.01
) -> pd.DataFrame:
    """An analyzer-style table: per projection, ``n_layers`` rows whose pair columns scatter by
    ``jitter`` around the given v1 / u1 |cos| (the last layer's pair columns are NaN)."""
    rows = []
    for projection in PROJECTIONS:
        for layer in range(n_layers):
            last = layer == n_layers - 1
            offset = jitter * (-1) ** layer
            rows.append(
                dict(
                    projection=projection,
                    layer=layer,
                    v1_cos=math.nan if last else v1[projection] + offset,
                    u1_cos=math.nan if last else u1[projection] + offset,
                    v1_baseline=BASELINE,
                    u1_baseline=BASELINE,
                )
            )
    table = pd.DataFrame(rows)
    table["projection"] = pd.Categorical(table["projection"], categories=list(PROJECTIONS))
    table.attrs["layout"] = layout
    return table


def paper_pattern() -> pd.DataFrame:
    """Q, K, Gate, Up continuous in v1; O, Down in u1; V low in both."""
    v1 = dict(q_proj=0.8, k_proj=0.8, gate_proj=0.7, up_proj=0.6, v_proj=0.1, o_proj=0.1, down_proj=0.1)
    u1 = dict(q_proj=0.1, k_proj=0.1, gate_proj=0.1, up_proj=0.1, v_proj=0.1, o_proj=0.7, down_proj=0.9)
    return analyzer_table(v1, u1)


def no_pattern() -> pd.DataFrame:
    """Everything at the random level except V, which is the most continuous."""
    level = {p: BASELINE + 0.01 for p in PROJECTIONS} | {"v_proj": 0.6}
    return analyzer_table(level, level)


def claims_of(tables, large_tables=None, gains=None, quantization=None, large_status=()) -> pd.DataFrame:
    return chapter.chapter_claims(
        tables, large_tables or {}, gains or {}, quantization or {}, large_status, n_trained=2
    )


def verdict(claims: pd.DataFrame, key: str) -> str:
    return by_name(claims).loc[key, "verdict"]


def test_the_papers_pattern_is_reproduced_and_its_absence_is_not():
    claims = claims_of({"good": paper_pattern(), "bad": no_pattern()})
    for name, expected in (("good", "reproduced"), ("bad", "not reproduced")):
        for key in ("q-v1", "k-v1", "gate-v1", "up-v1", "o-u1", "down-u1"):
            assert verdict(claims, f"{name}-{key}") == expected, (name, key)
    for key in ("v-low-v1", "v-low-u1"):  # V against the projections of its space that are reproduced: none in "bad"
        assert (verdict(claims, f"good-{key}"), verdict(claims, f"bad-{key}")) == ("reproduced", "not tested")
    good = by_name(claims).loc["good-down-u1"]
    assert good["ours_mean"] == pytest.approx(0.9) and good["n_seeds"] == 4 and good["baseline"] == BASELINE


def test_every_checkpoint_claim_says_its_weights_are_final():
    claims = claims_of({"m": paper_pattern()})
    assert len(claims) and claims["note"].str.contains("settled: a released checkpoint's final weights").all()


def test_v_is_low_is_judged_on_v_and_the_reproduced_projections_never_on_another_ones_failure():
    table = paper_pattern()
    table.loc[(table.projection == "up_proj") & table.v1_cos.notna(), "v1_cos"] = 0.08  # up at V's level
    claims = claims_of({"m": table})
    assert verdict(claims, "m-up-v1") == "not reproduced"
    assert verdict(claims, "m-v-low-v1") == "reproduced"  # up's failure is not counted again as V's
    assert (
        by_name(claims)
        .loc["m-v-low-v1", "note"]
        .split("; settled")[0]
        .endswith("reproduced: q_proj, k_proj, gate_proj")
    )
    table.loc[(table.projection == "v_proj") & table.u1_cos.notna(), "u1_cos"] = 0.6  # V well above random
    assert verdict(claims_of({"m": table}), "m-v-low-u1") == "partly reproduced"  # below O and Down, not near random


def test_claim_keys_are_unique_and_stable():
    quantization = {"Q8_0": chapter.QuantizationChange(0.001, 0.0005), "Q4_1": chapter.QuantizationChange(0.02, 0.01)}
    gains = {("gemma3-270m", "o_proj"): (Estimate(0.8, 0.05, 3), Estimate(0.2, 0.05, 3))}
    claims = claims_of(
        {
            "smollm2-135m": paper_pattern(),
            "gemma3-270m": analyzer_table(
                {p: 0.5 for p in PROJECTIONS}, {p: 0.1 for p in PROJECTIONS}, layout="gemma3"
            ),
        },
        gains=gains,
        quantization=quantization,
        large_status=[dict(model="meta-llama/Llama-3.1-8B", status="not available")],
    )
    keys = claim_names(claims)
    assert len(set(keys)) == len(keys)
    assert keys[:8] == [
        "smollm2-135m-q-v1",
        "smollm2-135m-k-v1",
        "smollm2-135m-gate-v1",
        "smollm2-135m-up-v1",
        "smollm2-135m-o-u1",
        "smollm2-135m-down-u1",
        "smollm2-135m-v-low-v1",
        "smollm2-135m-v-low-u1",
    ]
    assert keys[16:] == [
        "gemma-post-norm-o-u1",
        "gemma-post-norm-down-u1",
        "gemma3-270m-o-gain-scaled-u1",
        "quantization-q8-0",
        "quantization-q4-1",
        "large-meta-llama-llama-3-1-8b",
    ]
    assert verdict(claims, "gemma-post-norm-down-u1") == "reproduced"  # 0.9 in the Llama model vs 0.1
    assert verdict(claims, "gemma3-270m-o-gain-scaled-u1") == "reproduced"
    assert verdict(claims, "large-meta-llama-llama-3-1-8b") == "not tested"


def test_gemma_comparison_needs_both_layouts_and_checks_the_direction():
    flat = analyzer_table({p: 0.5 for p in PROJECTIONS}, {p: 0.5 for p in PROJECTIONS})
    assert not claims_of({"llama": flat})["key"].str.startswith("gemma-").any()
    gemma = paper_pattern()
    gemma.attrs["layout"] = "gemma3"
    claims = claims_of({"llama": flat, "gemma": gemma})
    assert verdict(claims, "gemma-post-norm-down-u1") == "not reproduced"  # Gemma's down_proj is the higher one


def test_quantization_rule():
    assert chapter.quantization_verdict(0.0499) == "reproduced"
    assert chapter.quantization_verdict(0.05) == "not reproduced"
    assert chapter.quantization_verdict(0.2) == "not reproduced"
    assert chapter.quantization_verdict(math.nan) == "not tested"
    claims = claims_of({}, quantization={"Q4_1": chapter.QuantizationChange(0.08, 0.01)})
    row = by_name(claims).loc["quantization-q4-1"]
    assert row["verdict"] == "not reproduced" and row["ours_mean"] == 0.08 and row["n_seeds"] == 2


def test_quantization_changes_leave_out_matrices_kept_as_f16():
    shifts = pd.DataFrame(
        [
            dict(
                format="Q4_1",
                projection="q_proj",
                stored_as="Q4_1",
                v1_shift_max=0.01,
                u1_shift_max=0.02,
                v1_shift_mean=0.004,
                u1_shift_mean=0.006,
            ),
            dict(
                format="Q4_1",
                projection="down_proj",
                stored_as="F16",
                v1_shift_max=0.5,
                u1_shift_max=0.5,
                v1_shift_mean=0.5,
                u1_shift_mean=0.5,
            ),
        ]
    )
    change = chapter.quantization_changes(shifts, ["Q4_1"])["Q4_1"]
    assert change.worst == pytest.approx(0.02) and change.typical == pytest.approx(0.005)


def results_of(tables, **fields) -> chapter.Results:
    values = dict(
        settings=chapter.CHAPTER.configure("smoke"),
        tables=tables,
        large_tables={},
        large_status=[],
        trained_tables={},
        trained_parameters=0,
        gains={},
        effects=pd.DataFrame(),
    )
    return chapter.Results(**{**values, **fields})


SHORT_CLAIMS = (
    "q_proj has input-space continuity",
    "k_proj has input-space continuity",
    "gate_proj has input-space continuity",
    "up_proj has input-space continuity",
    "o_proj has output-space continuity",
    "down_proj has output-space continuity",
    "V has low input-space continuity",
    "V has low output-space continuity",
)


def test_verdict_groups_each_checkpoints_claims_by_verdict():
    results = results_of({"good": paper_pattern(), "bad": no_pattern()})
    claims = claims_of(results.tables)
    finding = chapter.verdict_finding(results, claims)
    assert finding.checkpoints == (
        chapter.CheckpointVerdicts(
            "good",
            (("reproduced", SHORT_CLAIMS), ("partly reproduced", ()), ("not reproduced", ()), ("not tested", ())),
        ),
        chapter.CheckpointVerdicts(
            "bad",
            (
                ("reproduced", ()),
                ("partly reproduced", ()),
                ("not reproduced", SHORT_CLAIMS[:6]),
                ("not tested", SHORT_CLAIMS[6:]),
            ),
        ),
    )
    assert finding.gains == ()
    assert chapter.verdict_tally(claims) == (("reproduced", 8), ("not reproduced", 6), ("not tested", 2))
    assert "**good**" in chapter.verdict(results, claims).data  # renders


def test_each_checkpoints_depth_figure_states_its_predicted_projections_and_v():
    (finding,) = chapter.checkpoint_findings(results_of({"good": paper_pattern()}))
    assert (finding.name, finding.slug, finding.description, finding.layout) == ("good", "good", "good", "llama")
    assert [(p.projection, p.space) for p in finding.predicted] == list(PROJECTION_PREDICTIONS)
    down = finding.predicted[-1]
    assert (down.estimate.mean, down.estimate.n, down.baseline) == (pytest.approx(0.9), 4, BASELINE)
    assert finding.v_input.mean == pytest.approx(0.1) and finding.v_output.mean == pytest.approx(0.1)


def test_gemma_is_compared_with_the_first_llama_layout_model_where_both_are_analysed():
    gemma = paper_pattern()
    gemma.attrs["layout"] = "gemma3"
    flat = analyzer_table({p: 0.5 for p in PROJECTIONS}, {p: 0.5 for p in PROJECTIONS})
    assert chapter.gemma_finding(results_of({"llama": flat})).case == "missing-layout"
    finding = chapter.gemma_finding(results_of({"llama": flat, "gemma": gemma}))
    assert (finding.case, finding.llama, finding.gemma) == ("compared", ("llama",), ("gemma",))
    assert [(w.projection, round(w.gemma.mean, 6), round(w.llama.mean, 6)) for w in finding.writing] == [
        ("o_proj", 0.7, 0.5),
        ("down_proj", 0.9, 0.5),
    ]


@pytest.mark.parametrize(
    "large_models, status, case, missing",
    [
        ((), [], "none-looked-for", ()),
        (("big",), [dict(model="big", status="not available", detail="")], "missing", ("big",)),
        (("big",), [dict(model="big", status="analysed", detail="")], "all-analysed", ()),
    ],
)
def test_large_model_finding(large_models, status, case, missing):
    settings = chapter.CHAPTER.configure("smoke", large_models=list(large_models))
    finding = chapter.large_model_finding(results_of({}, settings=settings, large_status=status))
    assert (finding.case, finding.scale, finding.missing) == (case, "smoke", missing)


def test_a_name_or_a_list_of_names_and_a_seed_count_are_accepted():
    settings = chapter.CHAPTER.configure("smoke", models="gemma3-270m", seeds=2, max_layers=None)
    assert settings.models == ("gemma3-270m",) and settings.seeds == (0, 1)
    assert settings.overrides == {"models": "gemma3-270m", "seeds": 2}


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(modelz=["x"]), "unknown parameter.*modelz.*valid choices"),
        (dict(quantize=["Q3_X"]), "unknown GGUF type.*Q3_X"),
        (dict(max_layers=1), "max_layers must be an integer >= 2"),
        (dict(trained_scale="huge"), "unknown scale 'huge'; valid choices: smoke, cpu, paper"),
        (dict(scale="tiny"), "unknown scale"),
        (dict(seeds=[1, 1]), "seeds must be"),
        (dict(measure_cost="yes"), "measure_cost must be True or False"),
    ],
)
def test_configure_rejects_a_bad_value_before_any_work(params, message):
    with pytest.raises(ParameterError, match=message):
        chapter.CHAPTER.configure(**{"scale": "smoke", **params})


def test_notebook_parameters_are_checked_by_name():
    namespace = {name: None for name in chapter.CHAPTER.parameters} | {"scale": "smoke", "max_layrs": 3}
    with pytest.raises(ParameterError, match="unknown parameter.*max_layrs"):
        chapter.CHAPTER.from_notebook(namespace)


def test_large_model_cost_times_the_analyzer_and_scales_by_parameters(monkeypatch):
    """Two layers of the reference shapes take 10 s on the stub clock: 5 s per layer, scaled by parameters."""
    assert chapter.large_model_cost(chapter.CHAPTER.configure("smoke")) is None
    small = {"q_proj": (32, 32), "down_proj": (32, 64)}  # 3072 parameters per layer
    monkeypatch.setattr(large_checkpoints, "LLAMA_31_8B_LAYER", small)
    monkeypatch.setattr(large_checkpoints, "LARGE_MODELS", {"small": (small, 12), "double": ({"q_proj": (64, 96)}, 6)})
    clock = iter([100.0, 110.0])
    monkeypatch.setattr(large_checkpoints, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    cost = chapter.large_model_cost(chapter.CHAPTER.configure("smoke", measure_cost=True))
    assert cost.seconds_per_layer == 5.0
    table = cost.table.set_index("model")
    assert list(table["seconds_per_layer"]) == [5.0, 10.0] and list(table["total_minutes"]) == [1.0, 1.0]
    assert "5.0 s" in chapter.cost_display(chapter.CHAPTER.configure("cpu"), cost)[1].data  # renders


def test_gain_scaled_output_continuity_of_post_norm_layouts(tmp_path, monkeypatch):
    """diag(g_l) W_l shares its u1 across layers although W_l does not (Gemma-3 HF stores g - 1)."""
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path / "cache"))
    generator = torch.Generator().manual_seed(0)
    u = torch.randn(D_MODEL, generator=generator)
    state = {}
    for i in range(N_LAYERS):
        gain = torch.rand(D_MODEL, generator=generator) * 4 + 0.2
        W = torch.outer(u / gain, torch.randn(D_MODEL, generator=generator)) * 10
        state[f"model.layers.{i}.self_attn.o_proj.weight"] = W + 1e-4 * torch.randn(
            D_MODEL, D_MODEL, generator=generator
        )
        state[f"model.layers.{i}.post_attention_layernorm.weight"] = gain - 1.0
        state[f"model.layers.{i}.post_feedforward_layernorm.weight"] = torch.zeros(D_MODEL)
    save_file(state, str(tmp_path / "gemma.safetensors"))
    table = chapter.output_gain_continuity(tmp_path / "gemma.safetensors")
    pairs = table.dropna(subset=["u1_cos"])
    assert len(pairs) == N_LAYERS - 1
    assert (pairs["u1_cos_gained"] > 0.999).all() and (pairs["u1_cos"] < 0.95).all()
    assert (pairs["u1_cos_gain_only"] < 0.9).all()  # independent random gains give no continuity by themselves
    with pytest.raises(ValueError, match="no output norms"):
        chapter.output_gain_continuity(tmp_path / "gemma.safetensors", layout="llama")


def test_quantization_finding_sets_the_largest_change_beside_the_seed_spread():
    """Two trained seeds whose layer means differ by 0.02 everywhere; Q4_1 moves every |cos| by 0.01."""

    def table(offset: float) -> pd.DataFrame:
        pattern = paper_pattern()
        return pattern.assign(v1_cos=pattern.v1_cos + offset, u1_cos=pattern.u1_cos + offset)

    trained = {0: table(0.0), 1: table(0.02)}
    effects = pd.concat(
        [
            pd.concat(
                [t.assign(format="fp32", dtype="F32"), table(0.02 * seed + 0.01).assign(format="Q4_1", dtype="Q4_1")]
            ).assign(sigma1=1.0, seed=seed)
            for seed, t in trained.items()
        ],
        ignore_index=True,
    )
    settings = chapter.CHAPTER.configure("smoke", quantize=["Q4_1"])
    finding = chapter.quantization_finding(results_of({}, settings=settings, trained_tables=trained, effects=effects))
    ((fmt, change),) = finding.changes
    assert fmt == "Q4_1" and change.worst == pytest.approx(0.01) and change.typical == pytest.approx(0.01)
    assert [p for p, _ in finding.seed_spread] == list(PROJECTIONS)
    assert [sd for _, sd in finding.seed_spread] == pytest.approx([0.02 / 2**0.5] * len(PROJECTIONS))

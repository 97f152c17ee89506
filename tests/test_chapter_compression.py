"""The compression chapter: settings validation, summaries, and claims with known verdicts on synthetic tables."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
from helpers import by_name

from geocont.chapters import compression as chapter
from geocont.chapters import lm_runs
from geocont.layouts import PROJECTIONS
from geocont.scales import ParameterError
from geocont.statistics import DepthCorrelation, RankCorrelation


def test_the_chapter_compresses_the_transformer_chapters_reference_runs():
    settings = chapter.CHAPTER.configure("cpu")
    assert settings.lm_configs() == lm_runs.reference_configs("cpu", settings.lm.seeds)
    assert settings.overrides == {}


def test_pretrained_none_skips_the_pretrained_model_and_is_recorded():
    skipped = chapter.CHAPTER.configure("smoke", pretrained="none", seeds=1)
    assert skipped.pretrained is None and skipped.overrides == {"pretrained": "none", "seeds": 1}


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(windows=3), "unknown parameter.*windows; valid choices: scale, seeds"),
        (dict(projections=["attn"]), "valid choices: q_proj"),
        (dict(group_size=1), "group_size must be >= 2"),
        (dict(budgets=[0.0]), "budgets must be fractions"),
        (dict(sharing_layers=[1, 2]), "sharing_layers needs at least 3"),
        (dict(scale="gpu"), "unknown scale 'gpu'; valid choices: smoke, cpu, paper"),
    ],
)
def test_configure_rejects_a_bad_parameter_in_one_line(params, message):
    with pytest.raises(ParameterError, match=message):
        chapter.CHAPTER.configure(**{"scale": "smoke", **params})


def test_paired_difference_is_per_window_output_minus_input():
    rows = [
        dict(model="m", seed=0, projection="q_proj", budget=0.5, window=w, sharing=s, nll=v)
        for w, (a, b) in enumerate([(1.0, 1.5), (2.0, 2.1), (3.0, 3.2)])
        for s, v in (("input", a), ("output", b), ("none", 9.0))
    ]
    paired = chapter.paired_difference(pd.DataFrame(rows))
    assert len(paired) == 1
    assert paired["difference"].iloc[0] == pytest.approx((0.5 + 0.1 + 0.2) / 3)
    assert paired["difference_se"].iloc[0] == pytest.approx(np.std([0.5, 0.1, 0.2], ddof=1) / np.sqrt(3))


def _summary(model: str, seeds, follows_guideline: bool) -> pd.DataFrame:
    """Loss increases per projection x budget x scheme where the guideline's space is (or is not) the cheap one."""
    rows = []
    for seed in seeds:
        for projection in PROJECTIONS:
            for budget in (0.25, 0.5):
                space = chapter.GUIDELINE[projection]
                cheap, dear = 0.1 * budget, 0.5 * budget
                if space is None:  # V: a tie
                    d_in, d_out = 0.2, 0.21
                else:
                    d_in, d_out = (cheap, dear) if (space == "input") == follows_guideline else (dear, cheap)
                for sharing, value in (("input", d_in), ("output", d_out), ("none", 0.3)):
                    rows.append(
                        dict(
                            model=model,
                            seed=seed,
                            projection=projection,
                            budget=budget,
                            sharing=sharing,
                            loss_increase=value,
                            parameters=10,
                            relative_error=0.1,
                        )
                    )
    return pd.DataFrame(rows)


def test_input_advantage_is_signed_and_negligible_pairs_are_left_out():
    summary = pd.DataFrame(
        [
            dict(
                model="m", projection="q_proj", budget=b, sharing=s, loss_increase=v, parameters=10, relative_error=0.1
            )
            for b, values in ((0.25, (0.1, 0.3)), (0.5, (0.0002, 0.0003)))
            for s, v in zip(("input", "output"), values)
        ]
    )
    advantage = chapter.input_advantage(summary).set_index("budget")["advantage"]
    assert advantage[0.25] == pytest.approx(0.5) and np.isnan(advantage[0.5])


def _grouping(model: str, seeds, distant_error: float) -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(
                model=model,
                seed=seed,
                projection=p,
                sharing=s,
                grouping=g,
                budget=0.5,
                parameters=10,
                relative_error=0.5 if g == "adjacent" else distant_error,
            )
            for seed in seeds
            for p in ("q_proj", "o_proj")
            for s in ("input", "output")
            for g in ("adjacent", "distant")
        ]
    )


def _pruning(model: str, seeds) -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(model=model, seed=seed, layer=layer, window=0, loss_increase=1.0 - 0.1 * layer, continuity=0.1 * layer)
            for seed in seeds
            for layer in range(5)
        ]
    )


def _depth(partial: RankCorrelation) -> DepthCorrelation:
    """A correlation across 5 depth positions whose depth-partialled part (the one a verdict reads) is ``partial``."""
    return DepthCorrelation(raw=partial, partial=partial, without_edges=partial, n=5, block=2)


def _claims(follows_guideline: bool, distant_error: float, rho_interval: tuple[float, float]) -> pd.DataFrame:
    models = {"tiny-pretrained": [-1], chapter.OURS: [0, 1, 2]}
    summary = pd.concat([_summary(m, s, follows_guideline) for m, s in models.items()], ignore_index=True)
    correlation = _depth(RankCorrelation(sum(rho_interval) / 2, *rho_interval, n=5))
    correlations = {m: correlation for m in models}
    return chapter.compression_claims(
        chapter.input_advantage(summary, by=("model", "seed")),
        pd.DataFrame(columns=["model", "seed", "projection", "budget", "difference", "difference_se"]),
        pd.concat([_pruning(m, s) for m, s in models.items()], ignore_index=True),
        pd.concat([_grouping(m, s, distant_error) for m, s in models.items()], ignore_index=True),
        correlations,
        dataset="kjv",
    )


EXPECTED_KEYS = [
    f"{m}-{claim}"
    for m in ("pretrained", "ours")
    for claim in [f"share-{p.replace('_proj', '')}" for p in PROJECTIONS] + ["pruning", "adjacent-sharing"]
]


def test_claims_are_reproduced_when_the_guideline_holds():
    claims = _claims(follows_guideline=True, distant_error=0.8, rho_interval=(-0.9, -0.5)).pipe(by_name)
    assert list(claims.index) == EXPECTED_KEYS  # unique and stable
    assert (claims["verdict"] == "reproduced").all(), claims["verdict"]
    assert claims.loc["ours-share-o", "ours_mean"] == pytest.approx(4 / 6)  # output space's advantage, positive
    assert claims.loc["ours-share-o", "n_seeds"] == 3 and claims.loc["pretrained-share-o", "n_seeds"] == 2  # budgets


def test_claims_are_not_reproduced_when_the_other_space_wins():
    claims = _claims(follows_guideline=False, distant_error=0.5, rho_interval=(0.2, 0.6)).pipe(by_name)
    guided = [k for k in claims.index if "-share-" in k and not k.endswith("-share-v")]
    assert (claims.loc[guided, "verdict"] == "not reproduced").all()
    assert (claims.loc[["ours-share-v", "pretrained-share-v"], "verdict"] == "reproduced").all()  # still a tie
    assert (claims.loc[["ours-pruning", "pretrained-pruning"], "verdict"] == "not reproduced").all()
    assert (claims.loc[["ours-adjacent-sharing", "pretrained-adjacent-sharing"], "verdict"] == "not reproduced").all()


def test_a_correlation_interval_across_zero_is_inconclusive():
    claims = _claims(follows_guideline=True, distant_error=0.8, rho_interval=(-0.5, 0.3)).pipe(by_name)
    assert claims.loc["ours-pruning", "verdict"] == "inconclusive"
    assert claims.loc["ours-pruning", "ours_std"] == pytest.approx(0.8 / 3.92)


def _results(follows_guideline: bool = True, distant_error: float = 0.8) -> "chapter.Results":
    """A Results of the synthetic tables above: a pretrained model (one seed) and ours (three seeds)."""
    models = {"tiny-pretrained": [-1], chapter.OURS: [0, 1, 2]}
    summary = pd.concat([_summary(m, s, follows_guideline) for m, s in models.items()], ignore_index=True).assign(
        rank=2, dense_parameters=20
    )
    correlation = _depth(RankCorrelation(-0.7, -0.9, -0.5, n=5))
    settings = chapter.CHAPTER.configure("smoke", projections=list(PROJECTIONS), budgets=[0.25, 0.5])
    return chapter.Results(
        settings,
        summary[["model", "seed", "projection", "budget", "sharing"]],
        pd.concat([_pruning(m, s) for m, s in models.items()], ignore_index=True),
        pd.concat([_grouping(m, s, distant_error) for m, s in models.items()], ignore_index=True),
        summary,
        chapter.input_advantage(summary, by=("model", "seed")),
        pd.DataFrame(columns=["model", "seed", "projection", "budget", "difference", "difference_se"]),
        {m: correlation for m in models},
    )


GUIDED = [p for p in PROJECTIONS if chapter.GUIDELINE[p]]


def test_the_tables_findings_count_equal_budgets_cheapest_schemes_and_agreeing_rows():
    results = _results()
    counts = chapter.evaluation_counts(results)
    assert counts == chapter.EvaluationCounts(("tiny-pretrained", chapter.OURS), 4 * 7 * 2 * 3, 4 * 5)
    assert chapter.budget_equality(results) == chapter.BudgetEquality("all-equal", 2 * 7 * 2, 2 * 7 * 2)
    unequal = results.summary.copy()
    unequal.loc[(unequal.projection == "q_proj") & (unequal.sharing == "output"), "parameters"] = 11
    assert chapter.budget_equality(dataclasses.replace(results, summary=unequal)) == chapter.BudgetEquality(
        "some-differ", 2 * 6 * 2, 2 * 7 * 2
    )
    cheapest = chapter.cheapest_finding(results)  # the guideline's space, and input for V (0.2 against 0.21)
    assert cheapest.wins == (("input", 2 * 5 * 2), ("output", 2 * 2 * 2))
    assert cheapest.table.loc[(chapter.OURS, "o_proj"), 0.5] == "output" and cheapest.table.shape == (14, 2)
    error = chapter.error_loss_finding(results)  # equal errors: only the rows where input is not cheaper agree
    assert (error.budget, error.agree, error.rows) == (0.5, 2 * 2, 2 * 7)


def test_the_figures_findings_spread_advantage_and_grouping():
    results = _results()
    assert chapter.spread_case(results.summary[results.summary.model == chapter.OURS]) == "seeds"
    assert chapter.spread_case(results.summary[results.summary.model == "tiny-pretrained"]) == "one-model"
    pretrained, ours = chapter.advantage_findings(results)
    assert ours.model == chapter.OURS and [p for p, _ in ours.advantages] == list(PROJECTIONS)
    advantages = dict(ours.advantages)
    assert advantages["q_proj"].mean == pytest.approx(2 / 3) and advantages["o_proj"].mean == pytest.approx(-2 / 3)
    assert advantages["q_proj"].n == 3 * 2  # seeds x budgets
    (pre, mine) = chapter.grouping_findings(results)  # distant groups: 0.8 against 0.5, in every case alike
    assert (mine.worse, mine.cases, mine.guided, mine.agree) == (4, 4, 2, ())
    assert (mine.mean_percent, mine.max_percent) == (pytest.approx(60.0), pytest.approx(60.0))
    assert chapter.grouping_findings(_results(distant_error=0.5))[1].worse == 0


@pytest.mark.parametrize("follows", [True, False])
def test_in_short_names_where_the_papers_space_was_cheaper(follows):
    results = _results(follows_guideline=follows)
    findings = chapter.guideline_findings(results, chapter.claims(results))
    assert [g.model for g in findings] == ["tiny-pretrained", chapter.OURS]
    ours = findings[1]
    assert (ours.cheaper, ours.dearer) == ((tuple(GUIDED), ()) if follows else ((), tuple(GUIDED)))
    expected = (("input", 5 * 2), ("output", 2 * 2)) if follows else (("output", 4 * 2), ("input", 3 * 2))
    assert ours.cheapest == expected  # the most frequent first


def test_the_text_builders_state_their_counts_and_render():
    results = _results()
    claims = chapter.claims(results)
    assert chapter.evaluation_counts(results).configurations == 168
    assert chapter.budget_equality(results) == chapter.BudgetEquality("all-equal", 28, 28)
    assert ("input", 20) in chapter.cheapest_finding(results).wins
    found = chapter.error_loss_finding(results)
    assert (found.agree, found.rows) == (4, 14)
    texts = [
        chapter.evaluated_note(results).data,
        chapter.parameter_counts(results)[1].data,
        chapter.cheapest_schemes(results)[1].data,
        chapter.error_and_loss(results)[1].data,
        chapter.verdict(results, claims).data,
        chapter.in_short(results, claims).data,
    ]
    for text in texts:  # each fills its template
        assert text.strip() and "{" not in text, text


@pytest.mark.parametrize("value", ["9-20", ["a", "b", "c"]])
def test_a_block_list_in_another_form_names_the_parameter_and_its_form(value):
    with pytest.raises(ParameterError, match=r"sharing_layers must be a list of block indices such as \[9, 10, 11\]"):
        chapter.CHAPTER.configure(scale="smoke", sharing_layers=value)

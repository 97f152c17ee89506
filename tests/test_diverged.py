"""A diverged run is an outcome: left out of final estimates and counted, drawn as an x, named in claims."""

import math

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from geocont import plotting  # noqa: E402
from geocont.book.chapter import ClaimsBuilder  # noqa: E402
from geocont.book.prose import Prose, parse  # noqa: E402
from geocont.chapters.mlp_presentation import final_summary  # noqa: E402
from geocont.statistics import change_over_last, estimate_at_step, final_estimate, peak_and_final, up_to_step  # noqa: E402
from geocont.tables import DIVERGED, MODEL_LAYER, diverged_runs, make_row, rows_to_frame  # noqa: E402

STEPS = (0, 10, 20, 30)


def run_table(
    condition: str, seed: int, final: float, diverged_at: int | None = None, optimizer: str = "adam"
) -> pd.DataFrame:
    """weight_cos rising to ``final``; a run diverged at ``diverged_at`` has its rows before that step and
    then the one ``diverged`` row (the training side's format)."""
    rows = []
    for step in STEPS:
        if diverged_at is not None and step >= diverged_at:
            break
        value = 0.1 + (final - 0.1) * step / STEPS[-1]
        for layer in (0, 1):
            rows.append(make_row(step, "hidden", layer, "weight_cos", "input", 1, value))
        rows.append(make_row(step, "model", MODEL_LAYER, "test_acc", "", 0, 0.5))
    if diverged_at is not None:
        rows.append(make_row(diverged_at, "model", MODEL_LAYER, DIVERGED, "", 0, 2.31))
    return rows_to_frame(rows).assign(condition=condition, optimizer=optimizer, init_scale=1.0, seed=seed)


def sweep() -> pd.DataFrame:
    """res-relu: 3 finite seeds; res-none: seed 2 diverged at step 15 (after the snapshot at 10)."""
    tables = [run_table("res-relu", s, 0.8 + 0.01 * s) for s in range(3)]
    tables += [run_table("res-none", 0, 0.3), run_table("res-none", 1, 0.32), run_table("res-none", 2, 0.9, 15)]
    return pd.concat(tables, ignore_index=True)


def test_diverged_runs_lists_each_with_its_step_and_last_loss():
    runs = diverged_runs(sweep())
    assert runs.to_dict("records") == [
        dict(condition="res-none", optimizer="adam", init_scale=1.0, seed=2, step=15, last_loss=2.31, status="diverged")
    ]
    assert diverged_runs(run_table("res-relu", 0, 0.8)).empty


def test_final_estimates_leave_diverged_runs_out_and_count_them():
    table = sweep()
    none = final_estimate(table, "weight_cos", "input", 1, condition="res-none")
    assert none.n == 2 and none.n_diverged == 1 and math.isclose(none.mean, 0.31)  # not the diverged run's 0.9 path
    assert str(none).endswith("(1 of 3 seeds left out: res-none seed 2 diverged at step 15)")
    relu = final_estimate(table, "weight_cos", "input", 1, condition="res-relu")
    assert relu.n == 3 and relu.n_diverged == 0 and "diverged" not in str(relu)
    assert change_over_last(table, "weight_cos", "input", 1, condition="res-none").n_diverged == 1
    peak, last = peak_and_final(table, "weight_cos", "input", 1, condition="res-none")
    assert (peak.n, last.n, last.n_diverged) == (2, 2, 1)


def test_a_run_counts_as_diverged_from_its_divergence_step_on():
    table = sweep()
    early = estimate_at_step(table, 10, "weight_cos", "input", 1, condition="res-none")
    assert early.n == 3 and early.n_diverged == 0  # it had not diverged yet
    assert estimate_at_step(table, 20, "weight_cos", "input", 1, condition="res-none").n_diverged == 1
    at_ten = final_estimate(up_to_step(table, 10), "weight_cos", "input", 1, condition="res-none")
    assert at_ten.n == 3 and at_ten.n_diverged == 0


def test_every_seed_diverged_gives_no_number_and_says_so():
    table = pd.concat([run_table("res-none", s, 0.5, 5) for s in range(2)], ignore_index=True)
    none = final_estimate(table, "weight_cos", "input", 1)
    assert (
        math.isnan(none.mean)
        and none.n == 0
        and str(none)
        == "n/a (2 of 2 seeds left out: res-none seed 0 diverged at step 5; res-none seed 1 diverged at step 5)"
    )


def test_claims_notes_say_how_many_seeds_diverged():
    table = sweep()
    words = "## claim.linear\nclaim: a claim\nquantity: q\npaper: 0.22\n## claim.relu\nclaim: b\nquantity: q\npaper: high\nnote: n"
    builder = ClaimsBuilder("demo", prose=Prose("demo.md", parse(words)))
    builder.add(
        key="linear",
        ours=final_estimate(table, "weight_cos", "input", 1, condition="res-none"),
        baseline=0.05,
        verdict="reproduced",
    )
    builder.add(
        key="relu",
        ours=final_estimate(table, "weight_cos", "input", 1, condition="res-relu"),
        baseline=0.05,
        verdict="reproduced",
    )
    claims = builder.table().set_index("key")
    assert (
        claims.loc["linear", "note"] == "1 of 3 seeds left out: res-none seed 2 diverged at step 15"
        and claims.loc["linear", "n_seeds"] == 2
    )
    assert claims.loc["relu", "note"] == "n"


def test_figures_mark_a_diverged_run_at_its_divergence_step():
    table = sweep()
    fig, ax = plt.subplots()
    plotting.plot_over_training(table, "weight_cos", "input", 1, ax=ax, xscale="linear")
    marks = [c for c in ax.collections if c.get_label() == "diverged (x: step)"]
    assert len(marks) == 1 and marks[0].get_offsets().tolist() == [[15.0, 0.1 + 0.8 * 10 / 30]]
    plt.close(fig)
    fig, ax = plt.subplots()
    plotting.plot_final_by(table, "weight_cos", "input", 1, x="condition", hue="condition", ax=ax)
    assert any(
        "did not train, left out: res-none, adam, 1.0 seed 2 (diverged at step 15)" in t.get_text() for t in ax.texts
    )
    plt.close(fig)


def test_the_summary_table_counts_diverged_runs():
    summary = final_summary(sweep())
    assert summary.loc["res-none", "diverged runs (left out)"] == 1
    assert summary.loc["res-relu", "diverged runs (left out)"] == 0
    assert summary.loc["res-none", "weight v1"] == "0.31 ± 0.01"


@pytest.mark.slow
def test_the_chapter_completes_when_the_sgd_control_diverges(monkeypatch):
    """As the SGD control of res-none at the paper's scale on Fashion-MNIST (loss NaN at step 28), at a
    tiny size with a learning rate at which SGD diverges within a few steps."""
    import dataclasses

    from geocont.book.chapter import claim, claims_display
    from geocont.chapters import mlp_conditions as chapter
    from geocont.config import OptimizerConfig

    monkeypatch.setenv("GEOCONT_EXECUTOR", "serial")
    settings = chapter.CHAPTER.configure(
        "smoke", seeds=1, width=8, depth=2, steps=12, conditions=["res-relu", "nores-relu", "res-none", "res-radial"]
    )
    settings = dataclasses.replace(
        settings, optimizers={**settings.optimizers, "sgd(momentum=0.9)": OptimizerConfig("sgd", lr=10.0, momentum=0.9)}
    )
    results = chapter.run(settings)
    assert len(diverged_runs(results.robustness)) == 2  # res-relu and res-none under SGD
    chapter.baseline_note(results)
    chapter.continuity_figure(results)
    chapter.horizon_figure(results)
    chapter.horizon_summary(results)
    chapter.layer_heatmap(results)
    claims = chapter.claims(results)
    summary = chapter.summary_table(results)
    claims_display(claims).to_html()
    chapter.rise_and_collapse_figure(results)
    chapter.optimizer_over_training_figure(results)
    chapter.optimizer_figure(results, claims)
    chapter.condition_two_note(results)
    chapter.data_figure(results)
    chapter.data_table(results)
    chapter.init_scale_figure(results)
    chapter.verdict(results, claims)
    plt.close("all")
    note = claim(claims, "symmetry-breaking-every-optimizer")["note"]
    assert "sgd(momentum=0.9): res-relu n/a (1 of 1 seed left out: res-relu seed 0 diverged at step" in note
    assert "diverged" not in claim(claims, "linear-weight-v1")["note"]  # the Adam runs did not diverge
    assert summary.shape[0] == 4

"""The transformer chapter's memorisation control (transformer_projections.control_run): the rule read on
synthetic runs whose rises and validation losses are known."""

import pandas as pd
import pytest

from geocont.chapters import lm_runs
from geocont.chapters.transformer_projections import control_run
from geocont.chapters.transformer_projections.runs import Results
from geocont.corpus_census import COLUMNS

STEPS = (100, 400, 800, 1200)


def runs(label: str, seeds, o_rise: float, down_rise: float, val_rise: float) -> list[dict]:
    """Rows of ``label``'s runs: O and Down output u1 at 0.2 up to the early horizon (step 400), then rising
    linearly by ``o_rise`` / ``down_rise`` to the end; validation loss falling to 3.0 at step 400, then rising by
    ``val_rise``."""
    rows = []
    for seed in seeds:
        for step in STEPS:
            late = max(0, step - 400) / 800
            base = dict(condition=label, optimizer="adam", init_scale=1.0, seed=seed, step=step, direction=1)
            for group, rise in (("o_proj", o_rise), ("down_proj", down_rise)):
                for layer in (0, 1):
                    rows.append(
                        base
                        | dict(group=group, layer=layer, metric="weight_cos", space="output", value=0.2 + rise * late)
                    )
            val = 4.0 - step / 400 if step <= 400 else 3.0 + val_rise * late
            rows.append(base | dict(group="model", layer=0, metric="val_loss", space="", direction=0, value=val))
    return rows


def results(main: tuple[float, float, float], control: tuple[float, float, float] | None) -> Results:
    settings = lm_runs.build_settings(
        "smoke",
        {**lm_runs.lm_preset("smoke"), "steps": 1200, "early_step": 400, "seeds": (0, 1, 2)}
        | ({"corpus": "offline-english", "control_corpus": "kjv"} if control else {}),
    )
    table = pd.DataFrame(runs("silu", (0, 1, 2), *main))
    control_table = pd.DataFrame(runs("silu, kjv", (0,), *control)) if control else None
    return Results(settings, table, pd.DataFrame(), {}, control=control_table)


def test_a_rise_only_where_the_control_memorised_needs_memorisation():
    o, down = control_run.control_readings(results(main=(0.01, 0.3, 0.0), control=(0.4, 0.4, 0.5)))
    assert (o.projection, o.main.movement, o.main.memorised) == ("o_proj", "holds", "not-memorised")
    assert (o.control.movement, o.control.memorised, o.control.corpus) == ("rises", "memorised", "kjv")
    assert o.main.rises == pytest.approx((0.01, 0.01, 0.01)) and o.control.loss_rises == pytest.approx((0.5,))
    assert o.case == "needs-memorisation"
    assert down.case == "without-memorisation" and down.main.movement == "rises"


def test_a_rise_with_memorisation_on_both_corpora_is_undecided():
    (o, _) = control_run.control_readings(results(main=(0.3, 0.3, 0.1), control=(0.4, 0.4, 0.5)))
    assert (o.main.movement, o.main.memorised, o.case) == ("rises", "memorised", "undecided")


def test_no_control_run_reads_nothing():
    assert control_run.control_readings(results(main=(0.3, 0.3, 0.0), control=None)) == ()


@pytest.mark.parametrize(
    "rises, expected",
    [((0.1, 0.2), "rises"), ((-0.1, -0.2), "falls"), ((0.01, -0.04), "holds"), ((0.1, 0.01), "mixed"), ((), "mixed")],
)
def test_a_corpus_moves_only_where_every_seed_moves_alike(rises, expected):
    assert control_run.movement(rises) == expected


def test_memorised_needs_every_seed_and_not_memorised_none():
    assert [control_run.memorised(r) for r in ((0.1, 0.3), (0.0, 0.01), (0.1, 0.0))] == [
        "memorised",
        "not-memorised",
        "mixed",
    ]


def test_the_statement_reads_each_projection_and_the_figure_draws_both_corpora(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from geocont.chapters.transformer_projections import corpus_and_control

    shown = []
    monkeypatch.setattr(corpus_and_control, "show_figure", lambda fig, name, caption: shown.append((name, fig)))
    ruled = results(main=(0.01, 0.3, 0.0), control=(0.4, 0.4, 0.5))
    ruled.dims = {"o_proj": {"output": 128}, "down_proj": {"output": 128}}
    text = corpus_and_control.control_statement(ruled).data
    assert text.count("\n- **") == 2 and "- **O:" in text and "- **Down:" in text  # one reading per projection
    corpus_and_control.control_figure(ruled)
    ((name, fig),) = shown
    assert name == "lm-control" and len(fig.axes) == 3
    labels = {line.get_label() for line in fig.axes[0].get_lines()}
    assert {"silu", "silu, kjv"} <= labels
    unruled = results(main=(0.3, 0.3, 0.0), control=None)
    corpus_and_control.control_figure(unruled)
    assert len(shown) == 1 and "- **" not in corpus_and_control.control_statement(unruled).data


def test_the_corpus_display_gives_each_sources_share_and_every_runs_epochs():
    from geocont.chapters.transformer_projections import corpus_and_control

    census = pd.DataFrame(
        [
            ["kjv", "bible-kjv-text", "public domain", 90, 5, 700, 3000, 100],
            ["austen", "r-cran-janeaustenr", "public domain", 10, 1, 300, 1000, 50],
            ["total", "", "", 100, 6, 1000, 4002, 150],
        ],
        columns=list(COLUMNS),
    )
    ruled = results(main=(0.3, 0.3, 0.0), control=(0.4, 0.4, 0.5))
    ruled.census = {"offline-english": census}
    rows = corpus_and_control.census_rows(census)
    assert rows["share"].tolist() == ["75.0%", "25.0%", ""] and rows["documents"][0] == "90 (5 held out)"
    assert rows["training tokens"].tolist() == ["3,000", "1,000", "4,002"]
    sentence, table = corpus_and_control.corpus_display(ruled)
    # smoke preset: 1,200 steps of 4 sequences of 64 tokens = 307,200 tokens over 4,002: 76.76 epochs
    assert "`silu` 307,200 tokens, **76.76**" in sentence.data and "`silu, kjv`" not in sentence.data
    assert "r-cran-janeaustenr" in table.data

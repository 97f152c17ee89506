"""The transformer chapters' run set (geocont.chapters.lm_runs): the memorisation control."""

import pytest

from geocont.chapters import lm_runs


def settings(**values):
    return lm_runs.build_settings("cpu", {**lm_runs.lm_preset("cpu"), "corpus": "offline-english", **values})


def test_the_control_is_the_reference_trained_alike_on_its_own_corpus():
    ruled = settings(control_corpus="kjv", control_seeds=(0, 1))
    runs = ruled.all_configs()
    assert list(runs)[-1] == "silu, kjv" == ruled.control_label
    reference, control = runs["silu"][0], runs["silu, kjv"]
    assert [c.seed for c in control] == [0, 1]
    assert control[0].corpus == "kjv" and control[0].replace(corpus="offline-english") == reference
    assert any(
        row[0] == "transformer: memorisation control (corpus, seeds)" and "2 (0, 1)" in row[1]
        for row in lm_runs.scale_rows(ruled)
    )


@pytest.mark.parametrize("value", [None, "", "none"])
def test_no_control_corpus_runs_no_control(value):
    assert settings(control_corpus=value).control_configs() == {}
    assert settings(control_corpus="kjv", control_seeds=0).control_configs() == {}


def test_a_control_on_the_chapters_own_corpus_or_an_unknown_one_is_refused():
    with pytest.raises(ValueError, match="control_corpus must differ from corpus"):
        settings(control_corpus="offline-english")
    with pytest.raises(ValueError, match="unknown corpus 'bible'; valid choices: kjv"):
        settings(control_corpus="bible")


def test_the_reference_models_other_chapters_read_include_no_control():
    assert "silu, kjv" not in lm_runs.reference_settings("cpu", (0,)).all_configs()

"""The activation-versus-LayerNorm chapter: direction profiles, concentration, claims."""

import pytest

from helpers import synthetic

from geocont.chapters import activation_vs_norm as chapter


def test_direction_profile_and_concentration():
    table = synthetic({("peaked", 0): [0.9, 0.1, 0.1], ("flat", 0): [0.5, 0.5, 0.5]})
    shape = chapter.concentration(chapter.final_direction_profile(table)).set_index("condition")
    assert shape.loc["peaked", "concentration"] == pytest.approx(0.8)
    assert shape.loc["flat", "concentration"] == pytest.approx(0.0)
    assert shape.loc["flat", "rest"] == pytest.approx(0.505)

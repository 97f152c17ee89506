"""Shared fixtures: every test gets its own empty run cache."""

import pytest


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"

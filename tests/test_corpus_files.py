"""A language model is trained only on the corpus text its run key stands for (geocont.corpus_files)."""

import dataclasses
import pickle

import pytest

from geocont import corpus_files, sweeps
from geocont.config import LMRunConfig
from geocont.corpora import SOURCES
from geocont.lm import lm_job

pytestmark = pytest.mark.skipif(
    corpus_files.corpus_problem("offline-english") is not None, reason="the offline corpora are not installed here"
)


def source(name):
    return next(s for s in SOURCES if s.name == name)


def test_the_installed_sources_are_the_canonical_ones():
    assert corpus_files.corpus_problem("kjv") is None and corpus_files.corpus_problem("offline-english") is None
    assert corpus_files.corpus_problem("wikitext-103") is None  # no offline sources: nothing to fingerprint


def test_an_empty_missing_or_changed_source_is_named_in_one_line(tmp_path, monkeypatch):
    llvm = source("llvm-docs")
    empty = dataclasses.replace(llvm, location=str(tmp_path))
    monkeypatch.setattr(corpus_files, "SOURCES", tuple(empty if s.name == "llvm-docs" else s for s in SOURCES))
    problem = corpus_files.corpus_problem("offline-english")
    assert problem.startswith("corpus offline-english: source llvm-docs (llvm-15-doc) is empty")
    assert "apt-get install --reinstall llvm-15-doc" in problem and "\n" not in problem
    (tmp_path / "a.rst.txt").write_text("other text")
    assert "differs from the text the book's runs were trained on" in corpus_files.corpus_problem("offline-english")
    gone = dataclasses.replace(llvm, location=str(tmp_path / "missing"))
    monkeypatch.setattr(corpus_files, "SOURCES", tuple(gone if s.name == "llvm-docs" else s for s in SOURCES))
    assert "cannot be read" in corpus_files.corpus_problem("offline-english")
    assert corpus_files.corpus_problem("kjv") is None  # kjv reads none of those sources


def test_a_run_on_a_changed_corpus_is_refused_before_training_and_its_check_travels_to_workers(monkeypatch):
    job = lm_job(LMRunConfig(corpus="offline-english"))
    assert pickle.loads(pickle.dumps(job.before_training))() is None
    monkeypatch.setattr(corpus_files, "corpus_problem", lambda name: f"corpus {name}: source x is empty")
    with pytest.raises(sweeps.CannotTrain, match="source x is empty"):
        sweeps.refuse_untrainable([job, job])

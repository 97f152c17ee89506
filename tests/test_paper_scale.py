"""Every chapter's ``paper`` preset, executed on the CPU for a handful of steps with offline data.

The ``paper`` scale runs on a GPU machine (``make paper-gpu``) that this project does not always
have, so nothing else would notice when its path breaks. Here each chapter notebook's code cells
run in this process at ``scale = "paper"``, with the presets' sizes kept (the 16 x 256 MLP, the
8-layer d = 512 transformer with its 8,192-token vocabulary, bf16 autocast) and only what needs a
network or hours replaced: Fashion-MNIST from its Debian package for the 60k-digit MNIST, the King
James Bible for WikiText-103, SmolLM2-135M for Llama-3.1-8B, a few steps of one 64-token window
(bf16 matrix products are ten times slower than fp32 on a CPU without AVX-512 BF16).
Slow (about an hour of one worker on the slowest machine kind): the whole chapters run in ``make test-paper``
(``pytest -m paper``); ``make test`` keeps every chapter's paper preset built and validated, and one run of each run
family trained for two steps at the paper's shapes.
"""

import ast
import json
from pathlib import Path

import matplotlib
import pytest

from geocont.chapters import CHAPTER_MODULES, chapter, lm_runs, mlp_runs

pytestmark = pytest.mark.slow

BOOK = Path(__file__).resolve().parents[1] / "book"

#: What the dry run changes in the ``paper`` presets (the sizes stay). It trains in fp32: bf16 autocast is
#: many times slower than fp32 on a CPU without native bf16 (AVX-512 BF16 or AMX), and its own path is
#: tested in tests/test_training_speed.py; that the paper presets ask for bf16 is tested below.
MLP_DRY_RUN = dict(
    dataset="fashion-mnist",
    steps=6,
    early_steps=3,
    n_snapshots=4,
    n_late_snapshots=2,
    seeds=(0, 1),
    trace_every=1,
    precision="fp32",
)
LM_DRY_WINDOW = 64
LM_DRY_RUN = dict(
    corpus="kjv",
    steps=4,
    early_step=2,
    batch_size=1,
    n_snapshots=3,
    n_late_snapshots=2,
    eval_windows=2,
    max_seq_len=LM_DRY_WINDOW,
    precision="fp32",
)
#: Per chapter, notebook parameters set besides ``scale``: offline stand-ins and smaller analyses (the
#: Condition-2 chapter: its headline dataset offline, two seeds of the linear net).
CHAPTER_PARAMETERS = {
    "condition2": dict(datasets=["fashion-mnist"], many_seeds=2),
    "pretrained_continuity": dict(
        models=["smollm2-135m"], max_layers=4, measure_cost=False, quantize=["Q8_0"], large_models=[]
    ),
    "compression": dict(
        pretrained="smollm2-135m",
        sharing_layers=[12, 13, 14, 15],
        budgets=[0.25],
        projections=["q_proj", "o_proj"],
        n_windows=2,
        window_length=64,
    ),
}


@pytest.fixture
def paper_dry_run(monkeypatch, tmp_path):
    """The ``paper`` presets with :data:`MLP_DRY_RUN` and :data:`LM_DRY_RUN` applied to the two shared
    preset families (every chapter reads them when configured); serial runs; claims in tmp."""
    for presets, dry_run in ((mlp_runs.MLP_PRESETS, MLP_DRY_RUN), (lm_runs.LM_PRESETS, LM_DRY_RUN)):
        monkeypatch.setitem(presets, "paper", {**presets["paper"], **dry_run})
    monkeypatch.setenv("GEOCONT_EXECUTOR", "serial")
    monkeypatch.setenv("GEOCONT_CLAIMS_DIR", str(tmp_path / "claims"))
    matplotlib.use("Agg")


def code_cells(name: str) -> tuple[str, list[str]]:
    """A chapter notebook's parameters cell and its other code cells."""
    cells = [c for c in json.loads((BOOK / f"{name}.ipynb").read_text())["cells"] if c["cell_type"] == "code"]
    parameters = [c for c in cells if "parameters" in c["metadata"].get("tags", [])]
    return "".join(parameters[0]["source"]), ["".join(c["source"]) for c in cells if c not in parameters]


def execute(name: str, **parameters) -> dict:
    """Run chapter ``name``'s notebook code in a fresh namespace at ``scale="paper"``; its namespace."""
    import matplotlib.pyplot as plt

    source, cells = code_cells(name)
    namespace: dict = {}
    exec(compile(source, f"{name}:parameters", "exec"), namespace)
    assigned = [node.targets[0].id for node in ast.parse(source).body]
    namespace.update(scale="paper", **{k: v for k, v in parameters.items() if k in assigned})
    del namespace["__builtins__"]
    for index, cell in enumerate(cells):
        exec(compile(cell, f"{name}:cell {index}", "exec"), namespace)
        plt.close("all")
    return namespace


@pytest.mark.paper
@pytest.mark.parametrize("name", list(CHAPTER_MODULES))
def test_every_chapter_runs_its_paper_preset_on_offline_data(paper_dry_run, name):
    namespace = execute(name, **CHAPTER_PARAMETERS.get(name, {}))
    settings = namespace["settings"]
    assert settings.scale == "paper"
    assert not namespace["claims"].empty
    base = getattr(settings, "base", None)
    if base is not None:  # the MLP and transformer chapters train at the paper's sizes
        assert base.device == "auto"
        assert getattr(base, "width", 256) == 256 and getattr(getattr(base, "shape", None), "d_model", 512) == 512


@pytest.mark.parametrize("name", list(CHAPTER_MODULES))
def test_the_paper_presets_train_in_bf16_autocast(name):
    base = getattr(chapter(name).configure("paper"), "base", None)
    assert base is None or base.precision == "bf16-autocast"


def test_every_chapters_paper_preset_is_built_and_validated():
    for name in CHAPTER_MODULES:
        settings = chapter(name).configure("paper")
        assert settings.scale == "paper"


def test_one_run_of_each_family_trains_at_the_paper_shapes():
    """The MLP (16 x 256) and the transformer (8 layers, d = 512, an 8,192-token vocabulary), two steps each on
    offline data, in fp32 (bf16 autocast's own path: tests/test_training_speed.py)."""
    import dataclasses

    from geocont.config import MLPRunConfig
    from geocont.lm import train_lm
    from geocont.training import train_mlp

    fields = {f.name for f in dataclasses.fields(MLPRunConfig)}
    preset = {k: v for k, v in {**mlp_runs.mlp_preset("paper"), **MLP_DRY_RUN}.items() if k in fields}
    mlp = MLPRunConfig(**{**preset, "steps": 2, "device": "cpu", "n_snapshots": 2, "n_late_snapshots": 0})
    table = train_mlp(mlp, progress=False)
    assert (mlp.depth, mlp.width) == (16, 256) and table["step"].max() == 2
    lm = lm_runs.build_settings("paper", {**lm_runs.lm_preset("paper"), **LM_DRY_RUN}).base
    lm = lm.replace(device="cpu", steps=2, snapshot_steps=(1,), n_snapshots=2, n_late_snapshots=0)
    assert (lm.shape.n_layers, lm.shape.d_model, lm.shape.vocab_size) == (8, 512, 8192)
    trained = train_lm(lm, progress=False)
    assert trained.table["step"].max() == 2 and sum(p.numel() for p in trained.model.parameters()) > 30_000_000

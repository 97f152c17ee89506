"""The results store: written from cache entries, read after the cache, never written by a run, strict mode,
one revision, corruption reported, slices, verify, and the claims snapshot comparison.

Every test reads a store in its own temporary folder (``GEOCONT_STORE``), never the checkout's ``results/``.
"""

import ast
import io
import json
import math
import os
import re
import shutil
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from geocont import cache, store
from geocont.book import results, runs
from geocont.book.build import check
from geocont.book.provenance import (
    MeasuredCost,
    RunSource,
    measured_cost,
    provenance_markdown,
    run_sources,
    runs_markdown,
    trained_on,
)
from geocont.config import MLPRunConfig, OptimizerConfig
from geocont.sweeps import Job, run_jobs
from geocont.tables import make_row, rows_to_frame
from geocont.training import mlp_job

SRC = Path(store.__file__).resolve().parent


@pytest.fixture(autouse=True)
def store_root(tmp_path, monkeypatch):
    """Every test reads and writes its own store, in no strict mode."""
    root = tmp_path / "store"
    monkeypatch.setenv(store.STORE_ENV, str(root))
    monkeypatch.delenv(store.STORE_ONLY_ENV, raising=False)
    monkeypatch.delenv(store.CHAPTER_ENV, raising=False)
    monkeypatch.delenv("GEOCONT_EXECUTOR", raising=False)
    store._CHECKED.clear()
    store._PROBLEMS.clear()
    return root


CALLS: list[int] = []


def run_table(value: float) -> pd.DataFrame:
    """A small run table: two metrics, a NaN, and values that are not exact in float32."""
    rows = [
        make_row(step, "hidden", layer, "weight_cos", "input", 1, value + step / 3 + layer / 7)
        for step in (0, 5, 10)
        for layer in (0, 1)
    ]
    rows += [
        make_row(10, "model", -1, "test_acc", "", 0, 0.8123456789),
        make_row(5, "hidden", 0, "turn", "input", 1, math.nan),
    ]
    return rows_to_frame(rows)


def compute_table(value: float) -> pd.DataFrame:
    CALLS.append(value)
    return run_table(value)


def slow_table(value: float) -> pd.DataFrame:
    CALLS.append(value)
    time.sleep(0.4)
    return run_table(value)


def job(value: float, compute=compute_table, cost: float = 1.0) -> Job:
    return Job("mlp", {"test-run": value}, compute, value, label=f"run {value:g}", cost=cost)


def computed_entry(value: float) -> Job:
    """A job computed into the run cache (with its provenance)."""
    one = job(value)
    run_jobs([one], executor="serial", progress=False)
    return one


def book_run(one: Job, chapters=("chapter_a",)) -> runs.BookRun:
    return runs.BookRun(one, tuple(chapters))


# --------------------------------------------------------------------------- thinning and round trip


def test_float32_keeps_every_value_within_rounding_and_every_flag():
    values = np.array([0.0, 1 / 3, -2.5e-7, 123456.789, math.nan, math.inf, -math.inf, 1e30])
    assert store.float32_safe(values)
    thinned, dtype = store.thin_table(pd.DataFrame({"value": values}))
    assert dtype == "float32"
    back = thinned["value"].astype(np.float64).to_numpy()
    assert np.array_equal(np.isnan(back), np.isnan(values))
    assert np.array_equal(back[np.isinf(values)], values[np.isinf(values)])
    finite = np.isfinite(values)
    assert np.all(np.abs(back[finite] - values[finite]) <= 2.0**-24 * np.abs(values[finite]))


@pytest.mark.parametrize("value", [1e300, 1e-42])
def test_values_float32_would_change_keep_float64(value):
    """A finite value float32 would make infinite, or a tiny one it would make subnormal, keeps the table float64."""
    assert not store.float32_safe(np.array([0.5, value]))
    assert store.thin_table(pd.DataFrame({"value": [0.5, value]}))[1] == "float64"


def test_an_entry_written_from_the_cache_round_trips_with_its_provenance(store_root):
    one = computed_entry(0.25)
    written = results.copy_from_cache(store_root, "mlp", one.key_config(), label=one.label, chapters=["chapter_a"])
    entry = json.loads((written.folder / store.ENTRY).read_text())
    assert written.folder == store_root / "mlp" / cache.cache_key("mlp", one.key_config())
    assert entry["values"] == "float32" and entry["label"] == "run 0.25" and entry["chapters"] == ["chapter_a"]
    assert entry["files"][store.TABLE] == store._sha256_file(written.folder / store.TABLE)
    provenance = entry["provenance"]
    assert provenance["numerics_revision"] == cache.NUMERICS_REVISION
    assert provenance["training_code_hash"] == store.training_code_hash()
    assert provenance["threads"] >= 1 and provenance["wall_seconds"] >= 0 and "torch" in provenance
    assert pd.read_parquet(written.folder / store.TABLE)["value"].dtype == np.float32
    original = run_table(0.25)
    back = store.lookup("mlp", one.key_config())
    assert back["value"].dtype == np.float64 and list(back.columns) == list(original.columns)
    pd.testing.assert_frame_equal(back.drop(columns="value"), original.drop(columns="value"))
    np.testing.assert_allclose(back["value"], original["value"], rtol=2.0**-24, equal_nan=True)


def test_a_cache_entry_without_provenance_is_not_stored(store_root):
    cache.save("mlp", {"old": 1}, run_table(1.0))  # as cached before provenance was recorded
    with pytest.raises(store.StoreError, match="without provenance"):
        results.copy_from_cache(store_root, "mlp", {"old": 1})


# --------------------------------------------------------------------------- lookup


def test_the_cache_is_read_first_then_the_store(store_root, isolated_cache):
    one = computed_entry(1.0)
    results.copy_from_cache(store_root, "mlp", one.key_config())
    cache.save("mlp", one.key_config(), run_table(50.0))  # the user's own, newer entry of the same key
    assert cache.load("mlp", one.key_config())["value"].iloc[0] == 50.0
    cache._remove(cache.key_path("mlp", one.key_config()))
    assert cache.load("mlp", one.key_config())["value"].iloc[0] == pytest.approx(1.0)
    assert cache.load("mlp", one.key_config(), include_store=False) is None
    CALLS.clear()
    assert run_jobs([one], executor="serial", progress=False)[0]["value"].iloc[0] == pytest.approx(1.0)
    assert CALLS == []  # read from the store, not trained


def test_a_normal_run_never_writes_the_store(store_root, isolated_cache):
    store_root.mkdir()
    (store_root / "README").write_text("left alone\n")
    before = sorted(p.relative_to(store_root) for p in store_root.rglob("*"))
    run_jobs([job(2.0), job(3.0)], executor="serial", progress=False)
    assert sorted(p.relative_to(store_root) for p in store_root.rglob("*")) == before
    assert cache.load("mlp", job(2.0).key_config(), include_store=False) is not None


def test_store_off_reads_no_store(store_root, monkeypatch):
    one = computed_entry(4.0)
    results.copy_from_cache(store_root, "mlp", one.key_config())
    cache._remove(cache.key_path("mlp", one.key_config()))
    monkeypatch.setenv(store.STORE_ENV, store.STORE_OFF)
    assert store.store_roots() == [] and cache.load("mlp", one.key_config()) is None


def test_strict_mode_is_one_line_naming_key_label_and_chapter_before_any_training(monkeypatch):
    monkeypatch.setenv(store.STORE_ONLY_ENV, "1")
    monkeypatch.setenv(store.CHAPTER_ENV, "chapter_a")
    CALLS.clear()
    with pytest.raises(store.RunMissing) as caught:
        run_jobs([job(5.0), job(6.0)], executor="serial", progress=False)
    message = str(caught.value)
    assert "\n" not in message and CALLS == []
    assert cache.cache_key("mlp", job(5.0).key_config()) in message
    assert "run 5" in message and "chapter chapter_a" in message and "1 more run" in message
    with pytest.raises(store.RunMissing):  # the cache's own path, e.g. a single cached run, is strict too
        cache.ensure("mlp", {"other": 1}, lambda: run_table(0.0))


def test_strict_mode_computes_no_analysis_either():
    """Analyses (:data:`geocont.store.ANALYSIS_KINDS`) are captured into the store, so strict mode never
    computes them: the check renders the book in minutes or names what is missing."""
    with store.environment(**{store.STORE_ONLY_ENV: "1"}):
        with pytest.raises(store.RunMissing, match="analysis sharing/.* forbids computing it"):
            cache.ensure("sharing", {"analysis": 1}, lambda: run_table(0.0))
    table, _ = cache.ensure("sharing", {"analysis": 1}, lambda: run_table(0.0))
    assert len(table)


def _set_provenance(folder: Path, **values) -> None:
    entry = json.loads((folder / store.ENTRY).read_text())
    entry["provenance"].update(values)
    (folder / store.ENTRY).write_text(json.dumps(entry))
    store._CHECKED.clear()


def test_a_store_mixing_numerics_revisions_is_refused_naming_the_entries(store_root):
    for value in (1.0, 2.0, 3.0):
        results.copy_from_cache(store_root, "mlp", computed_entry(value).key_config())
    odd = store.entry_folder(store_root, "mlp", job(3.0).key_config())
    _set_provenance(odd, numerics_revision=99)
    cache._remove(cache.key_path("mlp", job(1.0).key_config()))
    with pytest.raises(store.StoreError) as caught:
        cache.load("mlp", job(1.0).key_config())
    message = str(caught.value)
    assert "mixes numerics revisions" in message and f"mlp/{odd.name}" in message and "\n" not in message
    assert store.status(store_root).mixed


def test_entries_of_one_numerics_revision_trained_by_different_code_are_one_store(store_root):
    results.copy_from_cache(store_root, "mlp", computed_entry(1.0).key_config())
    _set_provenance(store.entry_folder(store_root, "mlp", job(1.0).key_config()), training_code_hash="0" * 64)
    results.copy_from_cache(store_root, "mlp", computed_entry(2.0).key_config())  # this code's hash: accepted
    cache._remove(cache.key_path("mlp", job(1.0).key_config()))
    assert cache.load("mlp", job(1.0).key_config()) is not None  # read from the store, not refused
    status = store.status(store_root)
    assert len(status.revisions) == 2 and not status.mixed and status.current_numerics


def test_writing_an_entry_of_another_revision_is_refused(store_root):
    results.copy_from_cache(store_root, "mlp", computed_entry(1.0).key_config())
    other = computed_entry(2.0)
    manifest_path = cache.entry_path("mlp", other.key_config()) / cache.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["run"]["numerics_revision"] = 99
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(store.StoreError, match="would mix revisions"):
        results.copy_from_cache(store_root, "mlp", other.key_config())


def test_a_corrupt_store_entry_is_reported_and_never_read(store_root, monkeypatch):
    one = computed_entry(7.0)
    folder = results.copy_from_cache(store_root, "mlp", one.key_config()).folder
    cache._remove(cache.key_path("mlp", one.key_config()))
    data = bytearray((folder / store.TABLE).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (folder / store.TABLE).write_bytes(bytes(data))
    parsed = []
    monkeypatch.setattr(pd, "read_parquet", lambda *a, **k: parsed.append(1))
    with pytest.warns(UserWarning, match="fails its checksum"):
        assert cache.load("mlp", one.key_config()) is None
    assert parsed == []
    assert store.status(store_root).corrupt == {f"mlp/{folder.name}": f"{store.TABLE} fails its checksum"}
    monkeypatch.setenv(store.STORE_ONLY_ENV, "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(store.RunMissing, match="fails its checksum"):
            run_jobs([one], executor="serial", progress=False)


def test_a_dropped_artifact_still_gives_the_table_but_no_file(store_root):
    config = {"with": "weights"}
    cache.ensure(
        "lm", config, lambda: cache.Computed(run_table(1.0), {"model.safetensors": lambda p: p.write_bytes(b"w")})
    )
    results.copy_from_cache(store_root, "lm", config)  # the weights are not kept
    cache._remove(cache.key_path("lm", config))
    assert cache.load("lm", config, require_artifacts=("model.safetensors",)) is not None
    assert cache.artifact_path("lm", config, "model.safetensors") is None
    cache.save(
        "lm",
        config,
        run_table(1.0),
        {"model.safetensors": lambda p: p.write_bytes(b"w")},
        provenance=store.run_provenance(0.0),
    )  # ensure() would now find the store's entry
    results.copy_from_cache(store_root, "lm", config, keep_artifacts=("model.safetensors",))
    cache._remove(cache.key_path("lm", config))
    assert cache.artifact_path("lm", config, "model.safetensors").read_bytes() == b"w"


# --------------------------------------------------------------------------- revision


def _imports(path: Path) -> set[str]:
    """The top-level geocont modules a module imports (relative imports, anywhere in it)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                names.add(node.module.split(".")[0] + ".py")
            else:
                names.update(alias.name + ".py" for alias in node.names)
    return {name for name in names if (SRC / name).exists()}


def test_the_training_code_is_every_module_training_imports():
    excluded = {"cache.py", "sweeps.py", "extras.py"}  # keys and storage, executors, error messages
    seen, todo = set(), ["training.py", "lm.py"]
    while todo:
        name = todo.pop()
        if name in seen or name in excluded:
            continue
        seen.add(name)
        todo.extend(_imports(SRC / name))
    assert sorted(seen) == sorted(store.TRAINING_CODE)


def test_the_code_hash_ignores_comments_and_docstrings(tmp_path):
    a, b, c = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    a.write_text('"""Module."""\n\ndef f(x):\n    """Doc."""\n    return x + 1  # add one\n')
    b.write_text('"""Another docstring."""\n\n\ndef f(x):\n    """Other."""\n    # a comment\n    return x + 1\n')
    c.write_text('"""Module."""\n\ndef f(x):\n    """Doc."""\n    return x + 2\n')
    tokens = [list(store._source_tokens(path)) for path in (a, b, c)]
    assert tokens[0] == tokens[1] != tokens[2]
    assert re.fullmatch(r"[0-9a-f]{64}", store.training_code_hash())


# --------------------------------------------------------------------------- the book's run set and commands


def _chapter_source(name: str) -> str:
    return "\n".join(path.read_text() for path in (SRC / "chapters" / name).glob("*.py"))


def test_weights_are_kept_for_exactly_the_chapters_that_read_them():
    from geocont.chapters import CHAPTER_MODULES

    reading = {name for name in CHAPTER_MODULES if re.search(r"\btrained_(lm|subject)\(", _chapter_source(name))}
    assert reading == set(runs.WEIGHTS_READ_BY)


def test_every_claim_metric_is_read_by_a_chapter():
    code = "\n".join(
        path.read_text() for path in [*(SRC / "chapters").rglob("*.py"), SRC / "statistics.py", SRC / "instability.py"]
    )
    assert [m for m in results.CLAIM_METRICS if f'"{m}"' not in code and f"'{m}'" not in code] == []


def _fake_run_set(monkeypatch, jobs):
    run_set = runs.RunSet("smoke", [book_run(one) for one in jobs])
    monkeypatch.setattr(results, "book_run_set", lambda scale, chapters=None: run_set)
    monkeypatch.setattr(results, "ANALYSES_READ_BY", ())  # no chapter to execute
    return run_set


def test_prune_removes_only_the_entries_the_book_no_longer_reads(store_root, monkeypatch):
    kept, old = computed_entry(1.0), computed_entry(2.0)
    for one in (kept, old):
        results.copy_from_cache(store_root, "mlp", one.key_config())
    _fake_run_set(monkeypatch, [kept])
    kept_name, old_name = (store.entry_name("mlp", one.key_config()) for one in (kept, old))
    out = io.StringIO()
    assert results.prune("smoke", dry_run=True, out=out) == 0
    assert f"to remove: {old_name}" in out.getvalue() and kept_name not in out.getvalue()
    assert (store_root / old_name).exists()  # a dry run removes nothing
    assert results.prune("smoke", out=io.StringIO()) == 0
    assert not (store_root / old_name).exists() and (store_root / kept_name / store.ENTRY).exists()
    assert results.book_status("smoke").complete


def test_a_slice_stops_starting_runs_at_its_deadline_and_keeps_what_finished(store_root, monkeypatch):
    jobs = [job(value, slow_table, cost=10 - value) for value in (1.0, 2.0, 3.0)]
    _fake_run_set(monkeypatch, jobs)
    CALLS.clear()
    out = io.StringIO()
    assert results.fill("smoke", minutes=0.3 / 60, executor="serial", out=out) == 0
    assert CALLS == [1.0]  # longest first; none started after the deadline
    assert len(store.status(store_root).entries) == 1
    assert "2 of 3 runs missing" in out.getvalue() and ": 1 of 3 runs stored; 1 entries in all" in out.getvalue()
    assert results.fill("smoke", executor="serial", out=io.StringIO()) == 0
    assert CALLS == [1.0, 2.0, 3.0] and len(store.status(store_root).entries) == 3


def test_a_run_finished_but_not_stored_is_copied_in_without_training(store_root, monkeypatch):
    jobs = [job(8.0)]
    _fake_run_set(monkeypatch, jobs)
    with store.environment(GEOCONT_CACHE_DIR=str(results.staging_cache(store_root))):
        run_jobs(jobs, executor="serial", progress=False)  # a slice killed after the run landed in its cache
    CALLS.clear()
    out = io.StringIO()
    assert results.fill("smoke", executor="serial", out=out) == 0
    assert CALLS == [] and "from the staging cache" in out.getvalue()


def test_status_lists_missing_runs_and_the_check_skips_an_incomplete_store(store_root, monkeypatch):
    jobs = [job(1.0), job(2.0)]
    _fake_run_set(monkeypatch, jobs)
    results.copy_from_cache(store_root, "mlp", computed_entry(1.0).key_config())
    out = io.StringIO()
    assert results.print_status("smoke", out=out, list_entries=True) == 0
    assert f"missing: mlp/{cache.cache_key('mlp', jobs[1].key_config())}" in out.getvalue()
    assert f"entry: mlp/{cache.cache_key('mlp', jobs[0].key_config())}" in out.getvalue()
    out = io.StringIO()
    assert check("smoke", out=out) == 0
    assert out.getvalue().count("\n") == 1 and "1 of 2 runs missing" in out.getvalue()


def tiny_config(optimizer: str) -> MLPRunConfig:
    return MLPRunConfig(
        condition="res-relu",
        seed=0,
        dataset="fashion-mnist",
        max_train=256,
        depth=3,
        width=8,
        optimizer=OptimizerConfig(optimizer, lr=0.01),
        batch_size=32,
        steps=6,
        n_snapshots=3,
        n_late_snapshots=1,
        n_directions=2,
        trace_every=2,
    )


def test_verify_reports_zero_difference_for_a_deterministic_run(store_root, monkeypatch):
    tiny = mlp_job(tiny_config("sgd"))
    _fake_run_set(monkeypatch, [tiny])
    assert results.fill("smoke", executor="serial", out=io.StringIO()) == 0
    out = io.StringIO()
    assert results.verify("smoke", executor="serial", out=out) == 0
    text = out.getvalue()
    assert "bit-identical" in text
    lines = [line for line in text.splitlines() if "max |diff|" in line]
    assert lines and all(line.rstrip().endswith("max |diff| 0") for line in lines)


def test_verify_reports_a_difference_from_the_store(store_root, monkeypatch):
    tiny = mlp_job(tiny_config("sgd"))
    _fake_run_set(monkeypatch, [tiny])
    results.fill("smoke", executor="serial", out=io.StringIO())
    _rewrite_table(
        store.entry_folder(store_root, "mlp", tiny.key_config()),
        lambda table: table.__setitem__(
            "value", table["value"].where(table["metric"] != "test_acc", table["value"] + np.float32(0.25))
        ),
    )
    out = io.StringIO()
    assert results.verify("smoke", executor="serial", out=out) == 1
    assert re.search(r"test_acc\s+max \|diff\| 0\.25", out.getvalue()) and "DIFFERS" in out.getvalue()


def _rewrite_table(folder: Path, change) -> None:
    """Change a stored table in place (``change(table)``) and re-seal its checksum."""
    table = pd.read_parquet(folder / store.TABLE)
    change(table)
    (folder / store.TABLE).write_bytes(store._table_bytes(table))
    entry = json.loads((folder / store.ENTRY).read_text())
    entry["files"][store.TABLE] = store._sha256_file(folder / store.TABLE)
    (folder / store.ENTRY).write_text(json.dumps(entry))


def test_on_other_kernels_a_run_must_look_like_another_seed_of_its_condition(store_root, monkeypatch):
    import dataclasses

    seeds = [mlp_job(dataclasses.replace(tiny_config("adam"), seed=seed)) for seed in (0, 1, 2)]
    run_set = _fake_run_set(monkeypatch, seeds)
    assert results.fill("smoke", executor="serial", out=io.StringIO()) == 0
    siblings = results.seed_siblings(run_set, run_set.runs[0], store.status(store_root).entries)
    assert [run.name for run in siblings] == [run.name for run in run_set.runs]
    finals = results.seed_finals(store_root, siblings)
    assert finals.shape[1] == 3
    sd = float(finals.loc["weight_cos"].std(axis=1).min())
    assert sd > 0
    monkeypatch.setattr(store, "same_platform", lambda a, b: False)  # as if retrained on another machine

    def shift(by: float):
        def change(table):
            last = table["step"] == table.loc[table["metric"] == "weight_cos", "step"].max()
            table.loc[(table["metric"] == "weight_cos") & last, "value"] += np.float32(by)

        return change

    folders = [store.entry_folder(store_root, "mlp", one.key_config()) for one in seeds]
    for folder in folders:  # every stored seed moved by a fifth of their spread: the fresh run is one of them
        _rewrite_table(folder, shift(0.2 * sd))
    out = io.StringIO()
    assert results.verify("smoke", sample=[run_set.runs[0].name], executor="serial", out=out) == 0
    assert "like another seed of its 3 stored" in out.getvalue()
    assert re.search(r"weight_cos\s+max \|diff\| \S+; final mean \S+ prediction sd from the seeds'", out.getvalue())
    limit = float(re.search(r"limit (\S+),", out.getvalue()).group(1))
    for folder in folders:  # now the code gives numbers far outside what the seeds allow
        _rewrite_table(folder, shift(10 * limit * sd))
    out = io.StringIO()
    assert results.verify("smoke", sample=[run_set.runs[0].name], executor="serial", out=out) == 1
    assert "NOT LIKE another seed" in out.getvalue()


def test_a_single_seed_adam_run_must_be_bit_identical_on_its_platform_and_is_not_judged_elsewhere(
    store_root, monkeypatch
):
    tiny = mlp_job(tiny_config("adam"))
    _fake_run_set(monkeypatch, [tiny])
    results.fill("smoke", executor="serial", out=io.StringIO())
    out = io.StringIO()
    assert results.verify("smoke", executor="serial", out=out) == 0 and "bit-identical" in out.getvalue()
    _rewrite_table(
        store.entry_folder(store_root, "mlp", tiny.key_config()),
        lambda table: table.__setitem__("value", table["value"] + np.float32(1e-3)),
    )
    out = io.StringIO()
    assert results.verify("smoke", executor="serial", out=out) == 1 and "DIFFERS" in out.getvalue()
    monkeypatch.setattr(store, "same_platform", lambda a, b: False)  # as if retrained on another machine
    out = io.StringIO()
    assert results.verify("smoke", executor="serial", out=out) == 0
    assert "not judged: 1 seed of its condition stored" in out.getvalue()


def test_on_its_platform_a_run_must_train_bit_identically_while_its_measurements_may_follow_the_cpu_model(
    store_root, monkeypatch
):
    """Same torch, flags and threads: the losses and norms must repeat exactly; singular-vector measurements that
    moved in the last bits (LAPACK kernels the flags do not pin) are judged as another seed, and a NaN flag that
    moved is printed, not judged."""
    tiny = mlp_job(tiny_config("sgd"))
    _fake_run_set(monkeypatch, [tiny])
    results.fill("smoke", executor="serial", out=io.StringIO())
    folder = store.entry_folder(store_root, "mlp", tiny.key_config())

    def nudge_measurements(table):
        weight = table["metric"] == "weight_cos"
        table.loc[weight, "value"] = table.loc[weight, "value"] + np.float32(1e-6)
        table.loc[weight[weight].index[0], "value"] = np.nan  # a flag where the fresh run has a number

    _rewrite_table(folder, nudge_measurements)
    out = io.StringIO()
    assert results.verify("smoke", executor="serial", out=out) == 0
    assert "training bit-identical, measurements not" in out.getvalue()
    assert re.search(r"weight_cos\s+max \|diff\| \S+, 1 NaN/inf flags differ", out.getvalue())
    _rewrite_table(
        folder,
        lambda table: table.__setitem__(
            "value", table["value"].where(table["metric"] != "grad_norm", table["value"] * np.float32(1.001))
        ),
    )
    out = io.StringIO()
    assert results.verify("smoke", executor="serial", out=out) == 1
    assert "must train bit-identically" in out.getvalue()


def test_verify_retrains_with_the_threads_asked_for_and_compares_to_the_one_thread_entry(store_root, monkeypatch):
    tiny = mlp_job(tiny_config("sgd"))
    _fake_run_set(monkeypatch, [tiny])
    results.fill("smoke", executor="serial", out=io.StringIO())
    out = io.StringIO()
    assert results.verify("smoke", executor="serial", out=out, threads=2) == 0
    assert "with 2 threads each" in out.getvalue() and "1 thread(s), retrained on" in out.getvalue()
    assert "/2 thread(s))" in out.getvalue() and "bit-identical" not in out.getvalue()


def test_a_sample_key_that_matches_nothing_is_one_line(store_root, monkeypatch):
    _fake_run_set(monkeypatch, [job(1.0)])
    with pytest.raises(results.ParameterError, match="matches 0 stored runs"):
        results.verify("smoke", sample=["abcdef"], executor="serial", out=io.StringIO())


def _claims(path: Path, value: float, chapter: str = "chapter_a") -> None:
    path.mkdir(parents=True, exist_ok=True)
    rows = [
        {"chapter": chapter, "key": "weight-v1", "ours_mean": value, "ours_std": None, "verdict": "reproduced"},
        {"chapter": chapter, "key": "accuracy", "ours_mean": 0.9, "ours_std": 0.01, "verdict": "reproduced"},
    ]
    (path / f"{chapter}.json").write_text(
        json.dumps({"chapter": chapter, "scale": "cpu", "overrides": {}, "claims": rows})
    )


def test_the_snapshot_comparison_passes_on_equal_claims_and_fails_on_a_changed_value(tmp_path):
    _claims(tmp_path / "snapshot", 0.4213)
    _claims(tmp_path / "equal", 0.4213)
    _claims(tmp_path / "moved", 0.4214)
    assert results.compare_claims(tmp_path / "equal", tmp_path / "snapshot") == []
    assert results.compare_claims(tmp_path / "moved", tmp_path / "snapshot") == [
        "chapter_a: claim weight-v1: ours_mean: snapshot 0.4213 -> now 0.4214"
    ]
    (tmp_path / "equal" / "chapter_b.json").write_text((tmp_path / "equal" / "chapter_a.json").read_text())
    assert results.compare_claims(tmp_path / "equal", tmp_path / "snapshot") == [
        "chapter_b: published, but not in the snapshot"
    ]
    for name, value in (("named", 0.5), ("named-moved", 0.6)):  # a key that names its dataset is printed once
        (tmp_path / name).mkdir()
        (tmp_path / name / "chapter_a.json").write_text(
            json.dumps(
                {
                    "chapter": "chapter_a",
                    "scale": "cpu",
                    "overrides": {},
                    "claims": [
                        {
                            "chapter": "chapter_a",
                            "key": "weight-v1@mnist-10k",
                            "dataset": "mnist-10k",
                            "ours_mean": value,
                        }
                    ],
                }
            )
        )
    assert results.compare_claims(tmp_path / "named-moved", tmp_path / "named") == [
        "chapter_a: claim weight-v1@mnist-10k: ours_mean: snapshot 0.5 -> now 0.6"
    ]


def _perturbed_snapshot(tmp_path: Path, change: float) -> Path:
    """A copy of the committed cpu claims snapshot with every float of one claim moved by ``change`` (relative)."""
    source = Path(results.__file__).resolve().parents[3] / "results" / "cpu" / results.SNAPSHOT
    target = tmp_path / f"moved-{change:g}"
    shutil.copytree(source, target)
    path = target / "pretrained_continuity.json"
    payload = json.loads(path.read_text())
    row = next(r for r in payload["claims"] if r["key"] == "gemma3-270m-down-gain-scaled-u1@checkpoints")
    row["ours_mean"] *= 1 + change
    row["baseline"] *= 1 + change
    path.write_text(json.dumps(payload))
    return target


def test_the_snapshot_comparison_tolerates_cross_platform_noise_and_names_a_real_change(tmp_path):
    snapshot = Path(results.__file__).resolve().parents[3] / "results" / "cpu" / results.SNAPSHOT
    assert results.compare_claims(_perturbed_snapshot(tmp_path, 7e-6), snapshot) == []  # observed across CPUs
    lines = results.compare_claims(_perturbed_snapshot(tmp_path, 1e-3), snapshot)
    assert [line.split(": ")[:3] for line in lines] == [
        ["pretrained_continuity", "claim gemma3-270m-down-gain-scaled-u1@checkpoints", "baseline"],
        ["pretrained_continuity", "claim gemma3-270m-down-gain-scaled-u1@checkpoints", "ours_mean"],
    ]
    assert results.moved_summary(lines) == "pretrained_continuity (gemma3-270m-down-gain-scaled-u1@checkpoints)"


@pytest.mark.parametrize(
    "a, b, same",
    [
        (0.5, 0.5 + 4e-6, True),
        (0.5, 0.5 + 2e-5, False),
        (1200.0, 1200.01, True),
        (1200.0, 1200.1, False),
        (float("nan"), float("nan"), True),
        (float("nan"), 0.5, False),
        (3, 3, True),
        (3, 4, False),
        (1, 1.0, False),
        ("reproduced", "not reproduced", False),
        (None, None, True),
        (None, 0.0, False),
        (True, 1, False),
        (
            "diag(g) W 0.840 ± 0.021",
            "diag(g) W 0.839 ± 0.021",
            True,
        ),  # a noise-level value printed either side of .8395
        ("diag(g) W 0.840 ± 0.021", "diag(g) W 0.838 ± 0.021", False),
        ("lowest other: o_proj", "lowest other: q_proj", False),
    ],
)
def test_claim_fields_agree_by_type_numbers_within_tolerance_everything_else_exactly(a, b, same):
    assert results.same_value(a, b) is same


def test_the_check_executes_strictly_each_chapter_the_store_serves_whole_and_compares_its_claims(
    store_root, monkeypatch, tmp_path
):
    from geocont.book import build

    jobs = [job(1.0), job(2.0)]
    run_set = runs.RunSet(
        "smoke", [book_run(jobs[0], chapters=("timeline",)), book_run(jobs[1], chapters=("condition2",))]
    )
    monkeypatch.setattr(results, "book_run_set", lambda scale, chapters=None: run_set)
    monkeypatch.setattr(results, "ANALYSES_READ_BY", ())
    results.copy_from_cache(store_root, "mlp", computed_entry(1.0).key_config())  # the timeline's run alone
    monkeypatch.setattr(build, "repository_root", lambda: tmp_path)
    monkeypatch.setattr(build, "chapters", lambda root: [Path("book/timeline.ipynb"), Path("book/condition2.ipynb")])
    monkeypatch.setattr(build, "check_parameters", lambda root, notebook, parameters: None)
    executed, published = [], {"value": 0.4213}

    def execute(root, notebook, parameters, layout):
        assert os.environ[store.STORE_ONLY_ENV] == "1" and parameters == {"scale": "smoke"}
        executed.append(notebook.stem)
        _claims(layout.claims, published["value"], notebook.stem)

    monkeypatch.setattr(build, "execute", execute)
    out = io.StringIO()
    assert check("smoke", out=out) == 1 and "serves timeline whole, but its claims snapshot" in out.getvalue()
    assert executed == []  # refused before executing anything
    assert check("smoke", write_snapshot=True, out=io.StringIO()) == 0
    assert executed == ["timeline"] and sorted(p.name for p in (store_root / results.SNAPSHOT).iterdir()) == [
        "timeline.json"
    ]
    out = io.StringIO()
    assert check("smoke", out=out) == 0
    assert "claims of 1 of " in out.getvalue() and "(timeline) equal the committed snapshot" in out.getvalue()
    assert "1 of 2 runs missing" in out.getvalue()
    published["value"] = 0.4214
    out = io.StringIO()
    assert check("smoke", out=out) == 1
    assert "timeline: claim weight-v1: ours_mean: snapshot 0.4213 -> now 0.4214" in out.getvalue()
    assert executed == ["timeline"] * 3


def test_the_provenance_block_counts_where_runs_came_from():
    row, listing = runs_markdown(
        [
            RunSource("mlp/a", "run a", "store", {}),
            RunSource("mlp/b", "run b", "cache", {}),
            RunSource("mlp/c", "run c", "trained", {}),
        ]
    )
    assert row.startswith("3 listed, as looked up when the chapter started")
    assert "1 from the results store, 1 from your run cache, 1 trained now" in row
    assert "`mlp/b` run b: from your run cache" in listing and "mlp/a" not in listing
    assert runs_markdown([RunSource("mlp/a", "run a", "store", {})])[1] == ""


def test_the_provenance_block_names_where_the_runs_were_trained_and_their_measured_minutes():
    epyc = dict(cpu_model="AMD EPYC", cpu_capability="AVX512", threads=1, device="cpu")
    sources = [
        RunSource("mlp/a", "a", "store", {**epyc, "wall_seconds": 600.0}),
        RunSource("mlp/b", "b", "store", {**epyc, "wall_seconds": 300.0}),
        RunSource("mlp/c", "c", "cache", {**epyc, "cpu_capability": "AVX2", "wall_seconds": 60.0}),
        RunSource("mlp/d", "d", "store", {}),
        RunSource("mlp/e", "e", "trained", {}),
    ]
    assert trained_on(sources) == (
        "AMD EPYC (AVX512): 2 runs, 1 torch thread each, 15 worker-minutes measured; "
        "AMD EPYC (AVX2): 1 run, 1 torch thread each, 1 worker-minutes measured; "
        "1 to be trained on this machine; 1 without a record of where"
    )
    assert measured_cost(sources) == MeasuredCost(worker_minutes=16.0, measured=3, runs=5)


def test_the_provenance_block_looks_each_run_up_in_the_cache_then_the_store(store_root):
    stored, cached, new = (tiny_config("sgd").replace(seed=seed) for seed in (1, 2, 3))
    run_jobs([mlp_job(stored)], executor="serial", progress=False)
    results.copy_from_cache(store_root, "mlp", mlp_job(stored).key_config())
    cache._remove(cache.key_path("mlp", mlp_job(stored).key_config()))
    run_jobs([mlp_job(cached)], executor="serial", progress=False)
    found = run_sources([stored, cached, new, new])
    assert [run.source for run in found] == ["store", "cache", "trained"]
    assert [bool(run.provenance.get("wall_seconds")) for run in found] == [True, True, False]
    text = provenance_markdown(
        notebook="book/x.ipynb", scale="smoke", data="d", seeds=[0], model="m", training="t", runs=[stored, cached, new]
    )
    assert (
        "| runs | 3 listed" in text
        and "| trained on | " in text
        and f"`{store.entry_name('mlp', mlp_job(new).key_config())}`" in text
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["store", "--scale", "smoke", "--minutes", "-1"], "--minutes must be a positive number"),
        (["store", "--scale", "huge"], "unknown scale 'huge'"),
        (["store", "--chapters", "condition9"], "unknown chapter condition9; valid choices: activation_vs_norm"),
        (["verify", "--chapters", "condition2", "x"], "unknown chapter x; valid choices"),
    ],
)
def test_the_store_command_rejects_bad_input_in_one_line(argv, message, capsys):
    from geocont.book.build import main

    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_chapter_slice_holds_the_runs_it_reads_each_naming_every_chapter_that_reads_it():
    whole = runs.book_run_set("smoke")
    part = runs.book_run_set("smoke", ["timeline"])
    assert part.runs and all("timeline" in run.chapters for run in part.runs)
    assert {run.name for run in part.runs} == {run.name for run in whole.of_chapter("timeline")}
    shared = [run for run in part.runs if len(run.chapters) > 1]
    assert shared and all(run.chapters == next(r for r in whole.runs if r.name == run.name).chapters for run in shared)


def test_an_analysing_chapter_is_captured_once_its_runs_are_stored_and_then_read_strictly(store_root, monkeypatch):
    jobs = [job(1.0)]
    run_set = runs.RunSet("smoke", [book_run(jobs[0], chapters=("compression",))])
    monkeypatch.setattr(results, "book_run_set", lambda scale, chapters=None: run_set)
    monkeypatch.setattr(results, "ANALYSES_READ_BY", ("compression",))
    executed = []

    def execute(root, notebook, parameters, layout=None):  # what a chapter does: read a run, compute an analysis
        executed.append((notebook.name, parameters))
        assert cache.load("mlp", jobs[0].key_config()) is not None
        cache.cached("sharing", {"analysis": 1}, lambda: run_table(9.0))

    status = results.book_status("smoke")
    assert status.analyses_to_capture == ["compression"] and not status.ready_to_capture("compression")
    assert not status.complete and "the analyses of compression to capture" in results.missing_summary(status, 2)
    refused = io.StringIO()
    assert results.prune("smoke", out=refused) == 1 and "to capture first" in refused.getvalue()
    out = io.StringIO()
    assert results.fill("smoke", executor="serial", out=out, execute_chapter=execute) == 0
    assert executed == [("compression.ipynb", {"scale": "smoke"})] and "captured 1 analyses" in out.getvalue()
    status = results.book_status("smoke")
    assert status.complete and status.analyses["compression"] == [store.entry_name("sharing", {"analysis": 1})]
    assert status.store.extra == []
    assert results.fill("smoke", executor="serial", out=io.StringIO(), execute_chapter=execute) == 0
    assert len(executed) == 1  # nothing new
    with store.environment(GEOCONT_CACHE_DIR=str(store_root.parent / "empty"), **{store.STORE_ONLY_ENV: "1"}):
        assert cache.cached("sharing", {"analysis": 1}, lambda: pytest.fail("computed")).equals(
            cache.load("sharing", {"analysis": 1})
        )
    assert status.analysed_runs["compression"] == [run_set.runs[0].name]
    changed = runs.RunSet("smoke", [book_run(job(2.0), chapters=("compression",))])  # the chapter's preset changed
    monkeypatch.setattr(results, "book_run_set", lambda scale, chapters=None: changed)
    assert results.book_status("smoke").analyses_to_capture == ["compression"]  # captured on another run


def test_predictions_are_scaled_by_the_measured_times_of_the_stored_runs(store_root, monkeypatch):
    jobs = [job(1.0, cost=100.0), job(2.0, cost=100.0)]
    _fake_run_set(monkeypatch, jobs)
    monkeypatch.setattr(runs.BookRun, "optimizer", property(lambda run: "adam"))
    results.copy_from_cache(store_root, "mlp", computed_entry(1.0).key_config())
    status = results.book_status("smoke")
    wall = status.store.entries[status.run_set.runs[0].name]["provenance"]["wall_seconds"]
    assert status.calibration() == {"mlp/adam": pytest.approx(wall / 100), "mlp": pytest.approx(wall / 100)}
    assert status.seconds(status.run_set.runs[1]) == pytest.approx(wall)
    assert "scaled by the stored runs' measured times: mlp/adam x" in results.missing_summary(status, 1)
    # narrowed to chapters none of whose runs is stored, the whole book's stored runs still calibrate
    narrowed = runs.RunSet("smoke", [book_run(job(3.0, cost=100.0))], book_runs=status.run_set.runs)
    monkeypatch.setattr(results, "book_run_set", lambda scale, chapters=None: narrowed)
    narrowed_status = results.book_status("smoke")
    assert narrowed_status.seconds(narrowed.runs[0]) == pytest.approx(wall)
    # and a stored run of another chapter is in the run set (it is not listed as outside it)
    assert narrowed_status.store.extra and narrowed_status.outside_book == []
    _fake_run_set(monkeypatch, jobs)
    out = io.StringIO()
    assert results.fill("smoke", executor="serial", out=out) == 0
    assert f"training 1 runs into {store_root} (predicted {results._minutes(wall)})" in out.getvalue()


def test_a_store_of_another_numerics_revision_is_never_served_in_strict_mode_either(store_root):
    results.copy_from_cache(store_root, "mlp", computed_entry(1.0).key_config())
    _set_provenance(store.entry_folder(store_root, "mlp", job(1.0).key_config()), numerics_revision=2)
    cache._remove(cache.key_path("mlp", job(1.0).key_config()))
    for strict in ("0", "1"):
        store._CHECKED.clear()
        with store.environment(**{store.STORE_ONLY_ENV: strict}):
            with pytest.raises(store.StoreError) as caught:
                cache.load("mlp", job(1.0).key_config())
        message = str(caught.value)
        assert "numerics revision 2, but this code is revision 1" in message and "\n" not in message

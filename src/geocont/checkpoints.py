"""Tensor sources: read a checkpoint's weight matrices one at a time, never the whole model.

A source lists its tensors and their shapes without reading any data, and reads one tensor on request as a
float32 ``torch.Tensor`` in PyTorch's ``[out, in]`` orientation: :class:`GGUFSource`, :class:`SafetensorsSource`
(a file or a directory of shards), :class:`ModuleSource` (an in-memory module). :func:`open_source` picks one for
a path, a Hugging Face model id, an offline model name or a module. Damage found is a :class:`CorruptCheckpoint`
naming the file. docs/design.md ("Checkpoints and layouts") says how each format is read and what damage can
and cannot be found.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
import time
import warnings
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch


class CorruptCheckpoint(ValueError):
    """A checkpoint file is truncated, corrupt, or not the format its name says."""


class TensorSource(Protocol):
    """What the analyzer needs from a checkpoint."""

    description: str
    #: e.g. ``{"architecture": "llama"}`` where the checkpoint says so
    metadata: dict[str, Any]

    def names(self) -> list[str]: ...

    def shape(self, name: str) -> tuple[int, ...]: ...

    def read(self, name: str) -> torch.Tensor: ...

    def identity(self) -> dict[str, Any] | None:
        """What identifies the checkpoint's content for caching (None: do not cache)."""
        ...


def _finite(tensor: torch.Tensor, file: Path, name: str) -> torch.Tensor:
    """``tensor``, after checking that it holds no NaN or Inf (which no weight matrix does)."""
    if tensor.numel() and not bool(torch.isfinite(tensor.abs().amax())):  # NaN propagates through amax
        raise CorruptCheckpoint(f"{file}: tensor {name!r} holds NaN or Inf values: its data are corrupt")
    return tensor


def _bounded_gguf_reader(path: Path):
    """A ``gguf.GGUFReader`` that stops at the first read past the end of the file.

    The stock reader slices its memory map, so a read past the end yields a short array,
    and the failure surfaces later as an unrelated error ("cannot reshape array ...").
    """
    import gguf

    class Truncated(Exception):
        def __init__(self, end: int) -> None:
            self.end = end

    class BoundedReader(gguf.GGUFReader):
        def _get(self, offset, dtype, count=1, override_order=None):
            end = int(offset) + np.dtype(dtype).itemsize * int(count)
            if end > self.data.size:
                raise Truncated(end)
            return super()._get(offset, dtype, count, override_order)

    size = path.stat().st_size
    try:
        return BoundedReader(path)
    except Truncated as error:
        raise CorruptCheckpoint(
            f"{path}: truncated: its header asks for bytes up to {error.end:,}, "
            f"the file has {size:,} (or the header is corrupt)"
        ) from None
    except Exception as error:  # noqa: BLE001 - any parse failure means a bad file
        raise CorruptCheckpoint(f"{path}: not a readable GGUF file ({type(error).__name__}: {error})") from error


#: A file whose mtime or ctime is younger than this many seconds has its digest computed but not remembered
#: (:func:`content_digest`): file timestamps advance in ticks of milliseconds, so a file rewritten twice within
#: one tick keeps its stat, and a digest remembered in between would be stale ("racy git").
DIGEST_SETTLE_SECONDS = 2.0


def _signature(stat: os.stat_result) -> list[int]:
    return [stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def content_digest(path: Path) -> str:
    """The sha256 of the file's bytes: what the analyzer's cache keys a checkpoint file by, so that a file replaced by
    another of the same size and mtime (``cp -p``, ``rsync -t``, ``tar``, ``touch -r``) is never served the old table.

    Hashing reads the whole file (about 0.2-0.45 s for the 98 MB SmolLM2-135M GGUF on this project's machine). The
    digest is therefore remembered under the run cache (``digests/``) by the file's path and its whole stat: device,
    inode, size, mtime and ctime in ns. Any write, rename onto it or metadata change (``touch -r`` included) sets a
    new ctime, which no user tool can set back, so a remembered digest is used only for the very same, untouched file.
    """
    from . import cache

    resolved = path.resolve()
    stat = resolved.stat()
    signature = _signature(stat)
    memo = cache.cache_root() / "digests" / f"{hashlib.sha256(str(resolved).encode()).hexdigest()[:24]}.json"
    try:
        remembered = json.loads(memo.read_text())
        if remembered["path"] == str(resolved) and remembered["stat"] == signature:
            return remembered["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    with open(resolved, "rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    if (
        time.time() - max(stat.st_mtime, stat.st_ctime) > DIGEST_SETTLE_SECONDS
        and _signature(resolved.stat()) == signature
    ):
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            partial = memo.with_name(f".{memo.name}.{os.getpid()}.partial")
            partial.write_text(json.dumps({"path": str(resolved), "stat": signature, "sha256": digest}))
            os.replace(partial, memo)
        except OSError:
            pass  # an unwritable cache: the digest is computed again next time
    return digest


def _file_identity(path: Path) -> dict[str, Any]:
    """A checkpoint file's content (:func:`content_digest`) and size; its path and mtime are not part of it."""
    return {"sha256": content_digest(path), "size": path.stat().st_size}


class GGUFSource:
    """A GGUF file (any tensor type ``gguf.quants`` can dequantize)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._reader = _bounded_gguf_reader(self.path)  # every tensor's extent is checked against the file size
        self._tensors = {tensor.name: tensor for tensor in self._reader.tensors}
        field = self._reader.fields.get("general.architecture")
        try:
            architecture = bytes(field.parts[field.data[0]]).decode() if field is not None else ""
        except (IndexError, TypeError, UnicodeDecodeError) as error:
            raise CorruptCheckpoint(f"{self.path}: unreadable general.architecture field ({error})") from error
        self.metadata = {"architecture": architecture, "format": "gguf"}
        self.description = f"{self.path.name} (GGUF, {architecture or 'unknown architecture'})"

    def names(self) -> list[str]:
        return list(self._tensors)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(int(n) for n in reversed(self._tensors[name].shape.tolist()))

    def tensor_type(self, name: str) -> str:
        return self._tensors[name].tensor_type.name

    def read(self, name: str) -> torch.Tensor:
        from gguf.quants import dequantize

        tensor = self._tensors[name]
        try:
            with np.errstate(invalid="ignore", over="ignore"):  # corrupt scales: reported by _finite below
                array = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
            array = array.reshape(self.shape(name))
        except Exception as error:  # noqa: BLE001
            raise CorruptCheckpoint(f"{self.path}: cannot read tensor {name!r} ({error})") from error
        result = torch.from_numpy(array.copy())
        self._release(tensor)
        return _finite(result, self.path, name)

    def _release(self, tensor) -> None:
        """Drop the tensor's pages from this process's resident set (best effort)."""
        mapping = getattr(self._reader.data, "_mmap", None)
        if mapping is None or not hasattr(mapping, "madvise"):
            return
        start = int(tensor.data_offset) // mmap.PAGESIZE * mmap.PAGESIZE
        try:
            mapping.madvise(mmap.MADV_DONTNEED, start, int(tensor.data_offset) + int(tensor.n_bytes) - start)
        except (OSError, ValueError, AttributeError):
            pass

    def identity(self) -> dict[str, Any]:
        return _file_identity(self.path)


def _check_safetensors_extent(file: Path) -> None:
    """Raise :class:`CorruptCheckpoint` if ``file``'s header or a tensor it lists ends past the file.

    A safetensors file is an 8-byte little-endian header length, a JSON header giving each
    tensor's ``data_offsets`` (from the end of the header), and the data. A header that
    cannot be parsed is left to the safetensors library to report.
    """
    size = file.stat().st_size
    with open(file, "rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise CorruptCheckpoint(f"{file}: truncated: {size} bytes, shorter than a safetensors header")
        header_size = int.from_bytes(prefix, "little")
        if 8 + header_size > size:
            raise CorruptCheckpoint(
                f"{file}: truncated: its header needs bytes up to {8 + header_size:,}, "
                f"the file has {size:,} (or the header length is corrupt)"
            )
        try:
            header = json.loads(handle.read(header_size))
        except ValueError:
            return
    if not isinstance(header, dict):
        return
    for name, entry in header.items():
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if (
            name != "__metadata__"
            and isinstance(offsets, list)
            and len(offsets) == 2
            and isinstance(offsets[1], int)
            and 8 + header_size + offsets[1] > size
        ):
            raise CorruptCheckpoint(
                f"{file}: truncated: tensor {name!r} needs bytes up to "
                f"{8 + header_size + offsets[1]:,}, the file has {size:,}"
            )


INDEX_NAME = "model.safetensors.index.json"
#: A Hugging Face model id: ``owner/name`` (letters, digits, ``-``, ``_``, ``.``).
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


class SafetensorsSource:
    """One safetensors file or a directory of shards."""

    def __init__(self, path: str | os.PathLike) -> None:
        from safetensors import safe_open

        self.path = Path(path)
        if self.path.is_dir():
            index = self.path / INDEX_NAME
            if index.exists():
                try:
                    weight_map = json.loads(index.read_text())["weight_map"]
                except (ValueError, KeyError) as error:
                    raise CorruptCheckpoint(f"{index}: not a valid safetensors index ({error})") from error
                files = sorted({self.path / shard for shard in weight_map.values()})
                missing = [str(f) for f in files if not f.exists()]
                if missing:
                    raise CorruptCheckpoint(f"{index} names shard(s) that are missing: {', '.join(missing)}")
            else:
                files = sorted(self.path.glob("*.safetensors"))
            if not files:
                raise FileNotFoundError(f"{self.path}: no *.safetensors files in this directory")
        else:
            files = [self.path]
        self.files = files
        self._where: dict[str, Path] = {}
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._dtypes: dict[str, str] = {}
        architectures = []
        for file in files:
            _check_safetensors_extent(file)
            try:
                with safe_open(str(file), framework="pt") as handle:
                    for name in handle.keys():
                        view = handle.get_slice(name)
                        self._where[name] = file
                        self._shapes[name] = tuple(int(n) for n in view.get_shape())
                        self._dtypes[name] = view.get_dtype()
            except Exception as error:  # noqa: BLE001 - safetensors checks the header against the file size
                raise CorruptCheckpoint(f"{file}: not a readable safetensors file ({error})") from error
        config = (self.path if self.path.is_dir() else self.path.parent) / "config.json"
        if config.exists():
            try:
                settings = json.loads(config.read_text())
                architectures = settings.get("architectures") or [settings.get("model_type", "")]
            except ValueError:
                architectures = []
        self.metadata = {"architecture": ", ".join(a for a in architectures if a), "format": "safetensors"}
        shards = f"{len(files)} shards" if len(files) > 1 else files[0].name
        self.description = f"{self.path.name} (safetensors, {shards})"

    def names(self) -> list[str]:
        return list(self._where)

    def shape(self, name: str) -> tuple[int, ...]:
        return self._shapes[name]

    def tensor_type(self, name: str) -> str:
        return self._dtypes[name]

    def read(self, name: str) -> torch.Tensor:
        from safetensors import safe_open

        file = self._where[name]
        try:
            with safe_open(str(file), framework="pt") as handle:
                tensor = handle.get_tensor(name)
        except Exception as error:  # noqa: BLE001
            raise CorruptCheckpoint(f"{file}: cannot read tensor {name!r} ({error})") from error
        return _finite(tensor.float(), file, name)

    def identity(self) -> dict[str, Any]:
        return {"files": [_file_identity(f) for f in self.files]}


class ModuleSource:
    """An in-memory ``torch.nn.Module``; its parameters are read, never copied in bulk."""

    def __init__(self, module: torch.nn.Module) -> None:
        self._state = module.state_dict(keep_vars=True)
        config = getattr(module, "config", None)
        architecture = ", ".join(getattr(config, "architectures", None) or [getattr(config, "model_type", "")] or [])
        self.metadata = {"architecture": architecture or type(module).__name__, "format": "torch"}
        self.description = f"in-memory {type(module).__name__}"

    def names(self) -> list[str]:
        return list(self._state)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._state[name].shape)

    def tensor_type(self, name: str) -> str:
        return str(self._state[name].dtype).replace("torch.", "")

    def read(self, name: str) -> torch.Tensor:
        return self._state[name].detach().float().cpu()

    def identity(self) -> None:
        return None


def _from_directory(path: Path) -> TensorSource:
    """The checkpoint in a folder. Where it holds both safetensors and GGUF files, the rule is: the
    safetensors (the weights as trained; a GGUF file is usually a quantized copy), said in a warning."""
    ggufs = sorted(path.glob("*.gguf"))
    if list(path.glob("*.safetensors")) or (path / INDEX_NAME).exists():
        if ggufs:
            warnings.warn(
                f"{path} holds both safetensors and GGUF files ({', '.join(g.name for g in ggufs)}); "
                "analysing the safetensors (the weights as trained); pass a .gguf file's path to analyse it",
                stacklevel=3,
            )
        return SafetensorsSource(path)
    if len(ggufs) == 1:
        return GGUFSource(ggufs[0])
    if ggufs:
        raise ValueError(f"{path} holds several GGUF files ({', '.join(g.name for g in ggufs)}); pass one of them")
    raise FileNotFoundError(f"{path}: no *.safetensors or *.gguf files in this directory")


def hub_snapshot(model_id: str) -> Path:
    """Local directory of a Hugging Face model's weights: the local cache, else a download.

    Only ``*.safetensors`` (with its index) and ``config.json`` are fetched.
    """
    from .pretrained import ModelNotAvailable

    try:
        from huggingface_hub import snapshot_download
    except ImportError as error:  # pragma: no cover - transformers depends on it
        raise ModelNotAvailable("huggingface_hub is needed for model ids: pip install huggingface_hub") from error
    patterns = ["*.safetensors", "*.safetensors.index.json", "config.json"]
    try:
        return Path(snapshot_download(model_id, allow_patterns=patterns, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached: try the network
        pass
    try:
        return Path(snapshot_download(model_id, allow_patterns=patterns))
    except Exception as error:  # noqa: BLE001
        raise ModelNotAvailable(
            f"{model_id!r} is neither a local path nor in the Hugging Face cache, and downloading it failed "
            f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}). Where a network exists, "
            f"fetch it once with: huggingface-cli download {model_id} --include '*.safetensors*' config.json "
            f"(gated models such as meta-llama/* also need `huggingface-cli login`)"
        ) from error


#: File names that only a path has (a Hugging Face id names a repository, not a file).
CHECKPOINT_SUFFIXES = (".gguf", ".safetensors", ".json")


def looks_like_path(source: str | os.PathLike) -> bool:
    """Whether ``source`` is meant as a path rather than a Hugging Face id ``owner/name``.

    True for ``os.PathLike`` objects, strings starting with ``/``, ``./``, ``../`` or ``~``,
    and strings ending in a checkpoint file's suffix (``.gguf``, ``.safetensors``,
    ``.json``). ``models/missing.gguf`` is therefore a missing file; ``org/name`` remains an id.
    """
    if not isinstance(source, str):
        return True
    return source.startswith(("/", "./", "../", "~")) or source.endswith(CHECKPOINT_SUFFIXES)


def open_source(source: Any) -> TensorSource:
    """A tensor source for a path, a Hugging Face id, an offline model name, or a module."""
    if isinstance(source, torch.nn.Module):
        return ModuleSource(source)
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"cannot analyse a {type(source).__name__}; pass a path, a model id or a torch.nn.Module")
    path = Path(source).expanduser()
    if path.is_dir():
        return _from_directory(path)
    if path.is_file():
        if path.suffix == ".gguf":
            return GGUFSource(path)
        if path.suffix == ".safetensors":
            return SafetensorsSource(path)
        if path.name == INDEX_NAME:
            return SafetensorsSource(path.parent)
        raise ValueError(f"{path}: unknown checkpoint format; expected a .gguf or .safetensors file or a directory")
    from .pretrained import OFFLINE_MODELS, locate_model

    text = str(source)
    if text in OFFLINE_MODELS:
        return open_source(locate_model(text))
    if looks_like_path(source):
        raise FileNotFoundError(f"no such file or directory: {text}")
    if HUB_ID.fullmatch(text):
        return _from_directory(hub_snapshot(text))
    raise FileNotFoundError(
        f"{source}: no such file or directory, and not a Hugging Face model id (owner/name) or an offline model "
        f"({', '.join(OFFLINE_MODELS)})"
    )


def export_gguf(
    module: torch.nn.Module, path: str | os.PathLike, qtype: str = "Q8_0", architecture: str = "llama"
) -> Path:
    """Write a transformers model's weights as a GGUF file, quantizing every 2-D weight to ``qtype``.

    Names are translated with gguf's own tensor-name map (``model.layers.0.self_attn.q_proj``
    becomes ``blk.0.attn_q``); tensors it does not know are skipped. A matrix whose input
    dimension is not a multiple of the quantization block (32 for Q4_1 / Q8_0) is stored
    as F16, as llama.cpp does. llama.cpp's converter also permutes the rows of Q and K for
    its RoPE kernel; we do not (a row permutation shared by all layers changes no
    continuity metric). Only for measuring what quantization does to the metrics; the
    file has no tokenizer and is not meant to be run.
    """
    import gguf

    qtypes = {t.name: t for t in gguf.GGMLQuantizationType}
    if qtype not in qtypes:
        raise ValueError(f"unknown GGUF type {qtype!r}; valid choices: F32, F16, Q8_0, Q4_1, ...")
    quant = qtypes[qtype]
    state = module.state_dict()
    n_blocks = 1 + max((int(n.split(".")[2]) for n in state if n.startswith("model.layers.")), default=-1)
    name_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH[architecture.upper()], n_blocks)
    path = Path(path)
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_block_count(n_blocks)
    block = gguf.GGML_QUANT_SIZES[quant][0]
    for name, tensor in state.items():
        target = name_map.get_name(name, try_suffixes=(".weight", ".bias"))
        if target is None:
            continue
        array = tensor.detach().float().cpu().numpy()
        if (
            array.ndim != 2
            or quant in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16)
            or array.shape[1] % block
        ):
            dtype = np.float32 if array.ndim != 2 or quant == gguf.GGMLQuantizationType.F32 else np.float16
            writer.add_tensor(target, array.astype(dtype))
        else:
            writer.add_tensor(target, gguf.quants.quantize(array, quant), raw_dtype=quant)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path

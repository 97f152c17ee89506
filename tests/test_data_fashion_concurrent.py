"""Fashion-MNIST's Debian files unpacked by several sweep workers at once (a race seen in CI)."""

import multiprocessing

import pytest

from geocont import data


@pytest.mark.slow
def test_workers_unpacking_fashion_mnist_at_once_all_succeed(tmp_path):
    files = data._debian_fashion_mnist_files()
    assert files, (
        f"the Debian package dataset-fashion-mnist is not installed ({data.DEBIAN_FASHION_MNIST}); `make setup`"
    )
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pool.map(data._prepare_debian_fashion_mnist, [tmp_path] * 4)
    raw = tmp_path / "FashionMNIST" / "raw"
    for gz in files:
        assert (raw / gz.name[: -len(".gz")]).stat().st_size % 2**32 == data._gunzipped_size(gz)
    assert not list(raw.glob("*.partial"))  # every worker's own file was renamed into place

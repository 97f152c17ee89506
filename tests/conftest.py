"""Shared fixtures: every test gets its own empty run cache."""

import os
import subprocess

import pytest


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def full_tmpfs(tmp_path):
    """A 64 kB tmpfs with about 4 kB left (mounting needs root, as in CI): (mount point, filler file)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        filler = mount / "filler"
        stat = os.statvfs(mount)
        filler.write_bytes(b"\0" * max(0, stat.f_bavail * stat.f_frsize - 4096))
        yield mount, filler
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)

"""What each install holds: the core (`pip install geocont`) analyses a checkpoint without the MLP's
packages, a module that needs an extra names it in one line, and `make setup`'s `.[all]` is pinned."""

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
MLP_PACKAGES = ("torchvision", "mlxtend")
DATA_MESSAGE = (
    "geocont.data (the MLP chapters' image datasets) needs torchvision and mlxtend, which the core install "
    "leaves out: pip install geocont[mlp]"
)


def _name(requirement: str) -> str:
    """The normalised project name of a requirement string (``jupyter-book<2`` -> ``jupyter-book``)."""
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_every_dependency_of_every_extra_is_pinned_in_requirements_txt():
    """`make setup` installs `-e .[all]` against requirements.txt: nothing it names may come unpinned."""
    pins = {
        _name(line): line.strip()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert all("==" in pin for pin in pins.values()), [p for p in pins.values() if "==" not in p]
    project = _project()
    extras = project["optional-dependencies"]
    named = [*project["dependencies"], *(r for requirements in extras.values() for r in requirements)]
    unpinned = sorted({_name(r) for r in named if _name(r) != "geocont"} - set(pins))
    assert not unpinned, f"named in pyproject.toml but not pinned in requirements.txt: {unpinned}"
    everything = {extra for r in extras["all"] for extra in re.findall(r"\[(.*)\]", r)[0].split(",")}
    assert everything == set(extras) - {"all"}
    assert not {_name(r) for r in project["dependencies"]} & set(MLP_PACKAGES)  # the core leaves them out


BLOCKER = textwrap.dedent("""
    import sys

    class Blocker:
        "Records and refuses every import of the MLP's packages."
        attempts = []

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {blocked}:
                self.attempts.append(name)
                raise ImportError(f"blocked: {{name}}")

    blocker = Blocker()
    sys.meta_path.insert(0, blocker)
""")


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "GEOCONT_CACHE_DIR": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_analyze_never_imports_the_mlp_packages_and_geocont_data_names_their_extra(tmp_path):
    """In one subprocess (one torch import): `geocont analyze` with every import of torchvision and mlxtend
    refused and recorded, then `import geocont.data` as if they were not installed."""
    import torch

    from geocont.synthetic import write_spiked_checkpoint

    path = write_spiked_checkpoint(
        tmp_path / "ckpt", {"q_proj": (32, 32), "down_proj": (32, 48)}, n_layers=3, dtype=torch.float32
    )
    done = _python(
        BLOCKER.format(blocked=MLP_PACKAGES)
        + textwrap.dedent(f"""
        import geocont
        from geocont.cli import main
        status = main(["analyze", {str(path)!r}, "-q", "--no-cache", "-o", "table.csv"])
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {MLP_PACKAGES})
        print(status, blocker.attempts, loaded)
        sys.meta_path.remove(blocker)
        for package in {MLP_PACKAGES}:
            sys.modules[package] = None  # as if not installed
        import geocont.config, geocont.training  # the configurations and the training loop need neither
        from geocont.extras import MissingExtra
        try:
            import geocont.data
        except MissingExtra as error:
            print(error)
        for package in ("matplotlib", "seaborn"):
            sys.modules[package] = None
        print(main(["analyze", {str(path)!r}, "-q", "--figure", "depth.png"]))
    """),
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-3:] == ["0 [] []", DATA_MESSAGE, "2"]
    assert done.stderr.strip().splitlines()[-1] == (
        "error: geocont analyze --figure needs matplotlib and seaborn, "
        "which the core install leaves out: pip install geocont[plot]"
    )
    assert (tmp_path / "table.csv").read_text().count("\n") == 7  # header + 2 projections x 3 layers


def _installed_closure(name: str) -> list:
    """The installed distributions of ``name`` and of everything it requires (recursively, markers
    evaluated without extras), from this interpreter's environment."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found, todo = {}, [name]
    while todo:
        wanted = canonicalize_name(todo.pop())
        if wanted in found:
            continue
        try:
            found[wanted] = distribution = metadata.distribution(wanted)
        except metadata.PackageNotFoundError:
            continue  # pip installs it
        for requirement in map(Requirement, distribution.requires or []):
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return list(found.values())


def _link_installed(distributions: list, site: Path) -> bool:
    """Hard-link the files of ``distributions`` into ``site`` (what pip would unpack from the same wheels,
    without copying gigabytes); False, with nothing linked, where they lie on another filesystem."""
    if any(os.stat(d.locate_file("")).st_dev != os.stat(site).st_dev for d in distributions):
        return False
    for distribution in distributions:
        for file in distribution.files or []:
            source, target = Path(distribution.locate_file(file)), site / file
            if ".." in Path(file).parts or not source.is_file() or target.exists():
                continue  # console scripts outside site-packages; files never written (.pyc)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(source, target)
    return True


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory):
    """A fresh virtual environment with the core install only (`pip install geocont`, no extra), at the
    versions pinned in requirements.txt; created once for this module.

    torch (4 GB with its CUDA libraries) and what it requires are hard-linked from this test run's own
    environment, where it lies on the same filesystem: the files pip would unpack from the same wheels,
    in a few seconds instead of minutes (a real `pip install` of them measured 213 s on a busy 2-core
    machine). pip then installs everything else the core declares, and would install torch too if the
    linked one did not satisfy the pin.
    """
    base = tmp_path_factory.mktemp("core-install")
    project = base / "project"  # a copy, so that the build leaves nothing in the working tree
    shutil.copytree(ROOT / "src", project / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    venv = base / "venv"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = Path(
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    linked = _link_installed(_installed_closure("torch"), site)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-compile",
            "--disable-pip-version-check",
            "-c",
            str(ROOT / "requirements.txt"),
            str(project),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    print(f"core install: {time.perf_counter() - started:.0f} s (torch {'linked' if linked else 'installed by pip'})")
    yield venv, env
    shutil.rmtree(base, ignore_errors=True)  # hundreds of MB (gigabytes where torch was not linked)


@pytest.mark.slow
def test_the_core_install_analyzes_a_checkpoint_and_refuses_the_datasets_in_one_line(core_venv, tmp_path):
    import torch

    from geocont.synthetic import write_spiked_checkpoint

    venv, env = core_venv
    env = {**env, "GEOCONT_CACHE_DIR": str(tmp_path / "cache")}
    path = write_spiked_checkpoint(
        tmp_path / "ckpt", {"q_proj": (32, 32), "down_proj": (32, 48)}, n_layers=3, dtype=torch.float32
    )
    done = subprocess.run(
        [str(venv / "bin" / "geocont"), "analyze", str(path), "-q", "-o", str(tmp_path / "t.csv")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "t.csv").read_text().count("\n") == 7
    refused = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.util; print([importlib.util."
            f"find_spec(p) is None for p in {MLP_PACKAGES}]); import geocont.data",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.stdout.strip() == "[True, True]", refused.stderr  # the core install left them out
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == f"geocont.extras.MissingExtra: {DATA_MESSAGE}"

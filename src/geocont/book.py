"""Execute the book's chapters with papermill, then render them with Jupyter Book.

Usage (from the repository root)::

    python -m geocont.book build                 # execute missing/stale chapters at `cpu`, render
    python -m geocont.book build --scale smoke   # (re-)execute every chapter at `smoke`, render
    python -m geocont.book run book/mlp_conditions.ipynb -p scale cpu -p epochs 60

Source notebooks in ``book/`` stay free of outputs. Executed copies live in
``_build/executed/`` and record their parameters and the hash of the source they came
from; the rendered site is ``_build/html/index.html``. Training results are cached
separately (:mod:`geocont.cache`), so re-executing a chapter with unchanged parameters
costs no training.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

DEFAULT_SCALE = "cpu"
BUILD = Path("_build")
EXECUTED = BUILD / "executed"
SOURCE = BUILD / "source"


def repository_root() -> Path:
    root = Path.cwd()
    if not (root / "_toc.yml").exists() or not (root / "_config.yml").exists():
        raise SystemExit("run this from the repository root (where _config.yml and _toc.yml are)")
    return root


def toc_files(root: Path) -> list[str]:
    """Every file named in ``_toc.yml`` (without extension), in order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    names = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                names.append(entry["file"])
            walk(entry.get("sections"))
            for part in entry.get("parts", []) or []:
                walk(part.get("chapters"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", []) or []:
        walk(part.get("chapters"))
    return names


def chapters(root: Path) -> list[Path]:
    """The notebooks named in the table of contents."""
    return [Path(name).with_suffix(".ipynb") for name in toc_files(root) if (root / name).with_suffix(".ipynb").exists()]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _executed_state(executed: Path) -> tuple[str | None, dict]:
    """(source hash, parameters) recorded in an executed notebook, or (None, {})."""
    import nbformat

    if not executed.exists():
        return None, {}
    try:
        notebook = nbformat.read(executed, as_version=4)
    except Exception:  # noqa: BLE001 - an unreadable executed copy is simply re-executed
        return None, {}
    meta = notebook.metadata.get("geocont", {})
    return meta.get("source_sha256"), dict(notebook.metadata.get("papermill", {}).get("parameters", {}))


def execute(root: Path, notebook: Path, parameters: dict) -> Path:
    """Run one chapter with papermill into ``_build/executed`` (atomically)."""
    import nbformat
    import papermill

    target = root / EXECUTED / notebook
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial.ipynb")
    source_hash = _sha256(root / notebook)  # before running: the source may be edited meanwhile
    print(f"executing {notebook} with {parameters}", flush=True)
    papermill.execute_notebook(
        str(root / notebook), str(partial), parameters=parameters, cwd=str(root), progress_bar=True,
        kernel_name="python3",
    )
    executed = nbformat.read(partial, as_version=4)
    executed.metadata["geocont"] = {"source_sha256": source_hash}
    nbformat.write(executed, partial)
    partial.replace(target)
    return target


def execute_stale(root: Path, scale: str | None, force: bool) -> None:
    """Execute every chapter that is missing, outdated, or (with ``scale``) at another scale."""
    for notebook in chapters(root):
        source_hash, parameters = _executed_state(root / EXECUTED / notebook)
        wanted = scale or parameters.get("scale") or DEFAULT_SCALE
        fresh = source_hash == _sha256(root / notebook) and parameters.get("scale") == wanted
        if force or not fresh:
            keep = {k: v for k, v in parameters.items() if k != "scale"} if source_hash and not scale else {}
            execute(root, notebook, {"scale": wanted, **keep})
        else:
            print(f"up to date: {notebook} ({parameters})")


def render(root: Path, strict: bool = True) -> Path:
    """Stage sources with executed notebooks and build the HTML site with Jupyter Book."""
    staging = root / SOURCE
    if staging.exists():
        shutil.rmtree(staging)
    ignore = shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints", "__pycache__")
    shutil.copytree(root / "book", staging / "book", ignore=ignore)
    for name in ("_config.yml", "_toc.yml", "references.bib"):
        if (root / name).exists():
            shutil.copy2(root / name, staging / name)
    for notebook in chapters(root):
        executed = root / EXECUTED / notebook
        if not executed.exists():
            raise SystemExit(f"{notebook} has not been executed; run `python -m geocont.book build`")
        (staging / notebook).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(executed, staging / notebook)
    executable = Path(sys.executable).with_name("jupyter-book")
    command = [str(executable if executable.exists() else "jupyter-book"), "build", str(staging),
               "--path-output", str(root)]
    if strict:
        command += ["-W", "-n", "--keep-going"]
    subprocess.run(command, check=True)
    index = root / BUILD / "html" / "index.html"
    print(f"book: {index}")
    return index


def _parse_parameters(pairs: list[list[str]]) -> dict:
    """papermill-style ``-p name value``; values are read as Python literals where possible."""
    parsed = {}
    for name, value in pairs:
        try:
            parsed[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            parsed[name] = value
    return parsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m geocont.book", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="execute missing or stale chapters, then render the book")
    build.add_argument("--scale", help="execute every chapter at this scale (smoke | cpu | paper)")
    build.add_argument("--force", action="store_true", help="re-execute every chapter")
    build.add_argument("--no-strict", action="store_true", help="do not turn Sphinx warnings into errors")
    run = sub.add_parser("run", help="execute one chapter with parameters, then render the book")
    run.add_argument("notebook", type=Path)
    run.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    run.add_argument("--no-render", action="store_true", help="only execute the chapter")
    args = parser.parse_args(argv)
    root = repository_root()
    if args.command == "build":
        if args.scale:
            from .scales import check_scale

            check_scale(args.scale)
        execute_stale(root, args.scale, args.force)
        render(root, strict=not args.no_strict)
    else:
        notebook = args.notebook
        if notebook not in chapters(root):
            valid = ", ".join(str(c) for c in chapters(root))
            raise SystemExit(f"unknown chapter {notebook}; valid choices: {valid}")
        parameters = _parse_parameters(args.parameter)
        from .scales import check_scale

        check_scale(parameters.setdefault("scale", DEFAULT_SCALE))
        execute(root, notebook, parameters)
        if not args.no_render:
            render(root)


if __name__ == "__main__":
    main()

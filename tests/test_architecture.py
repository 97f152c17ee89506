"""The package's shape: a core that knows no chapter, no import cycles, and thin notebooks whose
parameters cell matches their chapter module."""

import ast
from pathlib import Path

import nbformat
import pytest

from geocont.book.chapter import Chapter
from geocont.chapters import CHAPTER_MODULES, chapter, chapter_module

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "geocont"
#: What a notebook may hold, at most (code lines outside the parameters cell; lines in one cell).
MAX_NOTEBOOK_LINES, MAX_CELL_LINES = 60, 12


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every geocont module ``path`` imports, at the top or inside a function."""
    name, found = module_name(path), set()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("geocont")}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[: len(base) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if target.startswith("geocont"):
                found.add(target)
                found |= {f"{target}.{alias.name}" for alias in node.names}
    modules = {module_name(p) for p in PACKAGE.rglob("*.py")}
    return {m for m in found if m in modules and m != name}


def test_no_import_cycle_in_the_package():
    graph = {module_name(p): imported_modules(p) for p in PACKAGE.rglob("*.py")}
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for child in sorted(graph[node]):
            if state.get(child) == "open":
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(child) :] + [child]))
            if child not in state:
                visit(child, path + [child])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def core_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.glob("*.py"))


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: p.name)
def test_the_core_knows_no_chapter(path):
    imports = imported_modules(path)
    assert not {m for m in imports if m.startswith(("geocont.chapters", "geocont.book"))}, imports
    tree = ast.parse(path.read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not (set(CHAPTER_MODULES) & (names | strings)), f"{path.name} names a chapter"


@pytest.mark.parametrize(
    "path",
    [PACKAGE / "book" / "claims.py", PACKAGE / "chapters" / "__init__.py"],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_the_book_layer_names_no_chapter(path):
    """The claims page summarises what the chapters flag (``headline``); the scales table is the chapters' hooks."""
    tree = ast.parse(path.read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
    }
    strings = " ".join(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))
    named = {c for c in CHAPTER_MODULES if c in names or c in strings}
    assert not named, f"{path.name} names chapter(s) {named}"


def notebook(name: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "book" / f"{name}.ipynb", as_version=4)


def parameters_cell(nb) -> nbformat.NotebookNode:
    cells = [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "a chapter has exactly one cell tagged 'parameters'"
    return cells[0]


@pytest.mark.parametrize("name", list(CHAPTER_MODULES))
def test_the_parameters_cell_matches_the_chapter_module(name):
    assigned = [node.targets[0].id for node in ast.parse(parameters_cell(notebook(name)).source).body]
    assert assigned == list(chapter(name).parameters)


@pytest.mark.parametrize("name", list(CHAPTER_MODULES))
def test_every_chapter_module_defines_its_chapter_and_claims(name):
    module = chapter_module(name)
    assert isinstance(module.CHAPTER, Chapter) and module.CHAPTER.name == name
    assert callable(module.claims)


@pytest.mark.parametrize("name", list(CHAPTER_MODULES))
def test_no_chapter_imports_another_chapter(name):
    others = tuple(f"geocont.chapters.{other}" for other in CHAPTER_MODULES if other != name)
    for path in (PACKAGE / "chapters" / name).glob("*.py"):
        assert not {m for m in imported_modules(path) if m.startswith(others)}, path


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CHAPTER_MODULES))
def test_what_a_chapter_computes_imports_no_figure_library(name):
    import subprocess
    import sys

    code = (
        "import sys; sys.modules.update(matplotlib=None, seaborn=None); "
        f"import geocont.chapters.{name}.compute as c; c.CHAPTER.configure('smoke'); c.claims"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr.splitlines()[-1:]


@pytest.mark.parametrize("name", list(CHAPTER_MODULES))
def test_notebooks_only_call_the_library(name):
    nb = notebook(name)
    cells = [c for c in nb.cells if c.cell_type == "code" and c is not parameters_cell(nb)]
    lengths = [len([line for line in c.source.splitlines() if line.strip()]) for c in cells]
    assert sum(lengths) <= MAX_NOTEBOOK_LINES and max(lengths) <= MAX_CELL_LINES, lengths
    for cell in cells:
        tree = ast.parse(cell.source)
        defined = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda, ast.ClassDef))]
        assert not defined, f"{name}: a notebook defines no functions or classes:\n{cell.source}"
        assert "startswith" not in cell.source, f"{name}: claims are looked up by key, not by text"
    first = cells[0].source
    assert (
        f"from geocont.chapters import {name} as chapter" in first
        and "chapter.CHAPTER.from_notebook(globals())" in first
    )


def test_the_closing_chapter_only_calls_the_library():
    from geocont.book import claims

    nb = notebook(claims.CLOSING_CHAPTER)
    cell = parameters_cell(nb)
    assert [node.targets[0].id for node in ast.parse(cell.source).body] == list(claims.PARAMETERS)
    assert [line.split("#", 1)[1].strip() for line in cell.source.splitlines() if line.strip()] == list(
        claims.PARAMETERS.values()
    )
    cells = [c for c in nb.cells if c.cell_type == "code" and c is not cell]
    assert "claims.from_notebook(globals())" in cells[0].source
    for one in cells:
        tree = ast.parse(one.source)
        assert len(tree.body) <= 2 and not [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))]
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) != "globals"]
        assert len(calls) == 1 and ast.unparse(calls[0].func).startswith("claims."), one.source


#: Import name -> distribution name, where they differ.
DISTRIBUTIONS = {
    "yaml": "pyyaml",
    "IPython": "ipython",
    "myst_nb": "myst-nb",
    "huggingface_hub": "huggingface-hub",
    "ray": "ray",
}


def test_pyproject_declares_every_third_party_import():
    import sys

    import tomllib

    declared = {
        dep.split("<")[0].split("=")[0].split(">")[0].strip().lower()
        for dep in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    }
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get("optional-dependencies", {})
    declared |= {dep.split("=")[0].split("<")[0].strip().lower() for deps in optional.values() for dep in deps}
    imported = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = {name for name in imported if name not in sys.stdlib_module_names and name != "geocont"}
    missing = sorted(
        DISTRIBUTIONS.get(name, name).lower()
        for name in third_party
        if DISTRIBUTIONS.get(name, name).lower() not in declared
    )
    assert not missing, f"pyproject.toml does not declare: {missing}"


@pytest.mark.parametrize("name", list(CHAPTER_MODULES))
def test_the_parameters_cell_comments_are_the_modules_help(name):
    source = parameters_cell(notebook(name)).source
    comments = [line.split("#", 1)[1].strip() if "#" in line else "" for line in source.splitlines() if line.strip()]
    assert comments == list(chapter(name).parameters.values())


@pytest.mark.parametrize("path", sorted((ROOT / "benchmarks").glob("*.py")), ids=lambda p: p.name)
def test_every_benchmark_imports_what_exists(path):
    """A benchmark is run by hand (``make bench``), so nothing else notices a renamed import."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"benchmark_{path.stem}", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))  # top level only: main() is not called


def test_every_relative_import_names_a_module_of_the_package():
    """Also the imports inside functions, which importing a module does not run."""
    unresolved = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = path.parents[node.level - 1]
                target = base.joinpath(*node.module.split(".")) if node.module else base
                if not (target.with_suffix(".py").exists() or target.is_dir()):
                    unresolved.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {'.' * node.level}{node.module}")
    assert not unresolved, unresolved


@pytest.mark.parametrize("name", list(CHAPTER_MODULES))
def test_run_configs_are_run_configurations(name):
    from geocont.config import LMRunConfig, MLPRunConfig

    runs = chapter(name).run_configs(chapter(name).configure("smoke"))
    assert all(isinstance(run, (MLPRunConfig, LMRunConfig)) for run in runs)  # a run two sweeps share is listed twice

"""Execute the book's chapters with papermill, then render them with Jupyter Book.

Usage (from the repository root)::

    python -m geocont.book build                 # execute missing/stale chapters at `cpu`, render
    python -m geocont.book build --scale smoke   # (re-)execute every chapter at `smoke`, render
    python -m geocont.book build --scale smoke --output /tmp/book   # build under /tmp/book/_build
    python -m geocont.book run book/mlp_conditions.ipynb -p scale cpu -p steps 2000
    python -m geocont.book build --fresh         # ignore the results store: train what the run cache lacks
    python -m geocont.book store --scale cpu --minutes 120   # train missing runs into results/cpu (a slice)
    python -m geocont.book store status --scale cpu          # what the results store holds and lacks
    python -m geocont.book verify --scale cpu    # retrain a sample of the store and compare
    python -m geocont.book check --scale cpu     # the chapters the store serves whole vs the claims snapshot

docs/design.md ("The book build") says what is executed when, and where executed chapters and claims live.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .. import store
from ..scales import ParameterError, check_scale
from ..store import CHAPTER_ENV, STORE_ENV, STORE_OFF, RunMissing, StoreError
from ..sweeps import EXECUTOR_ENV, CannotTrain, executor_problem, resolve_executor
from . import results
from .paths import BOOK_ENV, CLAIMS_ENV, CLOSING, DEFAULT_SCALE, Layout, chapters, repository_root

#: MathJax 3 as installed by ``make setup`` (``npm install --prefix .mathjax mathjax@3``).
MATHJAX = Path(".mathjax/node_modules/mathjax/es5")
#: The parts of MathJax the book loads: the combined TeX/MathML -> CommonHTML file, its fonts,
#: and the TeX extensions and UI it may load on demand.
MATHJAX_PARTS = ("tex-mml-chtml.js", "output/chtml", "input/tex/extensions", "ui", "a11y")


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


def _claims_inputs_sha256(layout: Layout, root: Path) -> str:
    """Hash of every chapter's published claims table: the closing chapter's input."""
    digest = hashlib.sha256()
    for notebook in chapters(root):
        if notebook == CLOSING:
            continue
        path = layout.claims / f"{notebook.stem}.json"
        digest.update(f"{notebook.stem}:".encode() + (path.read_bytes() if path.exists() else b"<missing>"))
    return digest.hexdigest()


def check_parameters(root: Path, notebook: Path, parameters: dict) -> None:
    """Validate a chapter's parameters in this process, before papermill starts a kernel.

    A chapter with a module in :mod:`geocont.chapters` is configured with them (its
    ``CHAPTER.configure`` checks names and values) and every input of its runs is checked
    (:mod:`geocont.preflight`); any other notebook (the closing chapter) accepts the names of its
    parameters cell and a known ``scale``. Raises :class:`geocont.scales.ParameterError`.
    """
    from ..chapters import CHAPTER_MODULES, chapter

    if notebook.stem in CHAPTER_MODULES:
        from ..preflight import check_settings
        from ..sweeps import announce_claims
        from .runs import job_of

        module = chapter(notebook.stem)
        settings = module.configure(**parameters)
        configs = module.run_configs(settings)
        check_settings(settings, configs)
        jobs = {store.entry_name(job.kind, job.key_config()): job for job in map(job_of, configs)}
        announce_claims(list(jobs.values()))  # the kernel's own notice goes into the notebook, not the terminal
        return
    import papermill

    known = list(papermill.inspect_notebook(str(root / notebook)))
    unknown = sorted(set(parameters) - set(known))
    if unknown:
        raise ParameterError(f"unknown parameter(s) {', '.join(unknown)}; valid choices: {', '.join(known)}")
    check_scale(parameters.get("scale", DEFAULT_SCALE))


def execute(root: Path, notebook: Path, parameters: dict, layout: Layout | None = None) -> Path:
    """Run one chapter with papermill into ``_build/executed`` (atomically)."""
    import nbformat
    import papermill

    layout = layout or Layout(root)
    target = layout.executed / notebook
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial.ipynb")
    source_hash = _sha256(root / notebook)  # before running: the source may be edited meanwhile
    state = {"source_sha256": source_hash}
    if notebook == CLOSING:
        state["claims_sha256"] = _claims_inputs_sha256(layout, root)
    print(f"executing {notebook} with {parameters}", flush=True)
    with store.environment(**{BOOK_ENV: "1", CLAIMS_ENV: str(layout.claims.resolve()), CHAPTER_ENV: notebook.stem}):
        try:
            papermill.execute_notebook(
                str(root / notebook),
                str(partial),
                parameters=parameters,
                cwd=str(root),
                progress_bar=True,
                kernel_name="python3",
                extra_arguments=KERNEL_ARGUMENTS,
            )
        except papermill.PapermillExecutionError as error:
            if error.ename == store.RunMissing.__name__:  # strict mode: the one line, not the kernel's traceback
                raise store.RunMissing(error.evalue) from None
            if error.ename == CannotTrain.__name__:  # a changed corpus: the one line, before any run trained
                raise CannotTrain(error.evalue) from None
            _say_partial(notebook, partial)
            raise
        except KeyboardInterrupt:
            raise
        except BaseException:  # kept for reading (the failing cell's output); the next run replaces it
            _say_partial(notebook, partial)
            raise
    executed = nbformat.read(partial, as_version=4)
    executed.metadata["geocont"] = state
    nbformat.write(executed, partial)
    partial.replace(target)
    return target


def _say_partial(notebook: Path, partial: Path) -> None:
    if partial.exists():
        print(
            f"{notebook} failed; the notebook as far as it ran, with the error, is {partial}",
            file=sys.stderr,
            flush=True,
        )


def _stale_reason(root: Path, notebook: Path, layout: Layout, wanted: str) -> str | None:
    """Why the executed copy of ``notebook`` must be re-executed at scale ``wanted``, or None."""
    import nbformat

    executed = layout.executed / notebook
    source_hash, parameters = _executed_state(executed)
    if source_hash is None:
        return "not executed yet"
    if source_hash != _sha256(root / notebook):
        return "its source changed"
    if parameters.get("scale") != wanted:
        return f"scale {parameters.get('scale')} -> {wanted}"
    if notebook == CLOSING:
        recorded = nbformat.read(executed, as_version=4).metadata.get("geocont", {}).get("claims_sha256")
        if recorded != _claims_inputs_sha256(layout, root):
            return "a chapter's claims changed"
    elif not (layout.claims / f"{notebook.stem}.json").exists():
        return "its claims table is missing"
    return None


def execute_stale(
    root: Path, scale: str | None, force: bool, layout: Layout | None = None, default_scale: str = DEFAULT_SCALE
) -> None:
    """Execute every chapter that is missing, outdated, or (with ``scale``) at another scale.

    Without ``scale`` a chapter keeps the scale it was executed at, and one never executed gets
    ``default_scale``. The closing chapter goes last, and is also re-executed when any published
    claims table changed.
    """
    layout = layout or Layout(root)
    ordered = [n for n in chapters(root) if n != CLOSING] + [n for n in chapters(root) if n == CLOSING]
    plan = []
    for notebook in ordered:
        source_hash, parameters = _executed_state(layout.executed / notebook)
        wanted = scale or parameters.get("scale") or default_scale
        reason = "--force" if force else _stale_reason(root, notebook, layout, wanted)
        if reason:
            keep = {k: v for k, v in parameters.items() if k != "scale"} if source_hash and not scale else {}
            plan.append((notebook, reason, {"scale": wanted, **keep}))
            check_parameters(root, notebook, plan[-1][2])  # every chapter's, before the first one runs
        else:
            print(f"up to date: {notebook} ({parameters})")
    for notebook, reason, parameters in plan:
        print(f"stale: {notebook} ({reason})", flush=True)
        execute(root, notebook, parameters, layout)


def stage_mathjax(root: Path, static: Path) -> None:
    """Copy MathJax into ``static/mathjax``; _config.yml makes ``static`` a static path and points
    ``mathjax_path`` at it, so that pages load ``_static/mathjax/tex-mml-chtml.js``."""
    source = root / MATHJAX
    if not (source / MATHJAX_PARTS[0]).exists():
        raise SystemExit(
            f"MathJax is not installed in {source}: run `make setup` "
            "(or `npm install --prefix .mathjax mathjax@3`); the book serves it itself, offline"
        )
    for part in MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, static / "mathjax" / part)
        else:
            (static / "mathjax" / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / part, static / "mathjax" / part)


def generated_markdown() -> dict[str, str]:
    """``{marker: Markdown}``: the parts of the book's Markdown pages generated at build time.
    A page holds the marker (an HTML comment) on a line of its own where the part goes."""
    from ..chapters import scales_markdown

    order = [path.stem for path in chapters(repository_root())]  # the chapters' rows in the book's order
    return {"<!-- generated: geocont.chapters.scales_markdown() -->": scales_markdown(order)}


def fill_generated(pages: Path, parts: dict[str, str]) -> None:
    """Replace each marker of ``parts`` in the Markdown pages under ``pages`` by its part; a marker
    that no page holds raises, so a part cannot silently go missing."""
    unused = set(parts)
    for page in sorted(pages.rglob("*.md")):
        text = page.read_text()
        filled = text
        for marker, part in parts.items():
            if marker in filled:
                filled = filled.replace(marker, part)
                unused.discard(marker)
        if filled != text:
            page.write_text(filled)
    if unused:
        raise SystemExit(f"no page under {pages} holds the marker(s) {', '.join(sorted(unused))}")


#: papermill's tag for the cell it inserts with the values a chapter was executed with.
INJECTED_TAG = "injected-parameters"
#: The tag of the cell with a notebook's default parameters.
PARAMETERS_TAG = "parameters"
#: Jupyter Book 1.x (myst-nb) shows a cell with this tag collapsed, its source behind a toggle.
HIDE_INPUT_TAG = "hide-input"
#: The first line of papermill's injected cell on a page.
EXECUTED_WITH = "# this page was executed with (papermill, replacing the defaults above):"


def show_executed_parameters(notebook) -> None:
    """Make a page show the parameters it was executed with: papermill's injected cell, headed by a comment
    that says so, and the notebook's defaults collapsed above it."""
    injected = [cell for cell in notebook.cells if INJECTED_TAG in cell.metadata.get("tags", [])]
    for cell in notebook.cells:
        tags = cell.metadata.setdefault("tags", [])
        if PARAMETERS_TAG in tags and injected and HIDE_INPUT_TAG not in tags:
            tags.append(HIDE_INPUT_TAG)
    for cell in injected:
        source = "\n".join(line for line in cell.source.splitlines() if line != "# Parameters")
        if not source.startswith(EXECUTED_WITH):
            cell.source = f"{EXECUTED_WITH}\n{source.lstrip()}"


def stage_executed(executed: Path, target: Path) -> None:
    """Copy an executed chapter into the staging folder as the page should show it."""
    import nbformat

    notebook = nbformat.read(executed, as_version=4)
    show_executed_parameters(notebook)
    nbformat.write(notebook, target)


def chapter_title(root: Path, notebook: Path) -> str:
    """The first Markdown heading of a chapter's source notebook (its name if it has none)."""
    import nbformat

    for cell in nbformat.read(root / notebook, as_version=4).cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return notebook.stem


def run_command(notebook: Path, scale: str) -> str:
    """The command that executes ``notebook`` at ``scale``."""
    return f"python -m geocont.book run {notebook} -p scale {scale}"


def placeholder_notebook(root: Path, notebook: Path, scale: str):
    """A page standing for a chapter not executed at ``scale``: its title and the command that executes it."""
    import nbformat

    note = (
        f"# {chapter_title(root, notebook)}\n\n```{{note}}\nThis chapter has not been executed at the `{scale}` "
        f"scale, so this page shows no results. Execute it (and re-render the book) with\n\n"
        f"    {run_command(notebook, scale)}\n\nor every chapter with `python -m geocont.book build --scale "
        f"{scale}`.\n```\n"
    )
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(note)])


def _with_scale_note(executed: Path, notebook: Path, scale: str):
    """The executed notebook with a note under its title that it was executed at another scale than ``scale``."""
    import nbformat

    copy = nbformat.read(executed, as_version=4)
    ran_at = copy.metadata.get("papermill", {}).get("parameters", {}).get("scale")
    note = (
        f"```{{note}}\nThis page was executed at the `{ran_at}` scale, not at `{scale}` like the chapter re-run "
        f"last. Execute it at `{scale}` with `{run_command(notebook, scale)}`.\n```"
    )
    position = next((i + 1 for i, cell in enumerate(copy.cells) if cell.cell_type == "markdown"), 0)
    copy.cells.insert(position, nbformat.v4.new_markdown_cell(note))
    return copy


def render(root: Path, strict: bool = True, layout: Layout | None = None, scale: str | None = None) -> Path:
    """Stage sources with executed notebooks and build the HTML site with Jupyter Book.

    Without ``scale`` every chapter must have been executed. With ``scale`` (after one chapter
    was re-run) a chapter not executed stands as a page saying so, with the command that
    executes it (:func:`placeholder_notebook`), and one executed at another scale carries a note
    saying which; Sphinx warnings are then not errors (links into absent pages).
    """
    layout = layout or Layout(root)
    _stage_sources(root, layout.source)
    placeholders = _stage_chapters(root, layout, scale)
    _stage_summary(root, layout)
    if placeholders:
        print(f"not executed at {scale} (shown as such): " + ", ".join(map(str, placeholders)), flush=True)
        strict = False
    executable = Path(sys.executable).with_name("jupyter-book")
    command = [
        str(executable if executable.exists() else "jupyter-book"),
        "build",
        str(layout.source),
        "--path-output",
        str(layout.output),
    ]
    if strict:
        command += ["-W", "-n", "--keep-going"]
    subprocess.run(command, check=True)
    index = layout.html / "index.html"
    complete_redirect_page(index)
    print(f"book: {index}")
    return index


def _stage_sources(root: Path, staging: Path) -> None:
    """A fresh ``staging`` folder with the book's pages (generated parts filled in), its configuration and MathJax."""
    if staging.exists():
        shutil.rmtree(staging)
    ignore = shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints", "__pycache__")
    shutil.copytree(root / "book", staging / "book", ignore=ignore)
    fill_generated(staging / "book", generated_markdown())
    for name in ("_config.yml", "_toc.yml", "references.bib"):
        if (root / name).exists():
            shutil.copy2(root / name, staging / name)
    stage_mathjax(root, staging / "_mathjax")


def _stage_summary(root: Path, layout: Layout) -> None:
    """The first page's reproducibility summary (:mod:`geocont.book.summary`) from this build's published claims."""
    from .claims import claim_chapters
    from .summary import MARKER, reproducibility_summary

    pages = layout.source / "book"
    fill_generated(pages, {MARKER: reproducibility_summary(layout.claims, pages, claim_chapters(root))})


def _stage_chapters(root: Path, layout: Layout, scale: str | None) -> list[Path]:
    """Every chapter into the staging folder as its page should show it (:func:`render`); the chapters that stand
    as placeholders."""
    import nbformat

    staging, placeholders = layout.source, []
    for notebook in chapters(root):
        executed = layout.executed / notebook
        (staging / notebook).parent.mkdir(parents=True, exist_ok=True)
        if scale is None:
            if not executed.exists():
                raise SystemExit(f"{notebook} has not been executed; run `python -m geocont.book build`")
            stage_executed(executed, staging / notebook)
            continue
        _, parameters = _executed_state(executed)
        if not executed.exists():
            placeholders.append(notebook)
            nbformat.write(placeholder_notebook(root, notebook, scale), staging / notebook)
        elif parameters.get("scale") != scale:
            noted = _with_scale_note(executed, notebook, scale)
            show_executed_parameters(noted)
            nbformat.write(noted, staging / notebook)
        else:
            stage_executed(executed, staging / notebook)
    return placeholders


def complete_redirect_page(index: Path) -> None:
    """Jupyter Book writes the site's ``index.html`` as a bare meta refresh; without a
    ``<link rel="icon">`` a browser then asks for ``/favicon.ico``, which does not exist
    (a console error). Rewrite it as a small complete page that names the book's icon."""
    match = re.search(r'url=([^"\s]+)"', index.read_text()) if index.exists() else None
    if match is None:
        return
    target = match.group(1)
    index.write_text(
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Refresh" content="0; url={target}">\n'
        '<link rel="icon" href="_static/favicon.svg" type="image/svg+xml">\n'
        f'<title>geocont</title>\n</head>\n<body><a href="{target}">Open the book</a></body>\n</html>\n'
    )


def _parse_parameters(pairs: list[list[str]]) -> dict:
    """papermill-style ``-p name value``; values are read as Python literals where possible."""
    parsed = {}
    for name, value in pairs:
        try:
            parsed[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            parsed[name] = value
    return parsed


#: How the sweeps of every executed chapter run (:mod:`geocont.sweeps`).
EXECUTOR_HELP = (
    "where the chapters' runs execute: serial | local | local:N | ray | ray:ADDRESS "
    "(default: $GEOCONT_EXECUTOR, else local on every core)"
)


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> None:
    """``python -m geocont.book``: parse the command line and run the command; its errors are one line."""
    args = _parser().parse_args(argv)
    try:
        _main(args)
    except (ParameterError, StoreError, RunMissing, CannotTrain) as error:
        raise SystemExit(f"error: {error}") from None
    except KeyboardInterrupt:
        print(
            f"interrupted: {args.command} stopped; the runs that finished are cached (run it again to go on)",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(INTERRUPTED) from None
    except BrokenPipeError:  # the reader left (`... | head -1`): it read what it wanted, so no traceback and exit 0
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m geocont.book", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _add_build_command(sub)
    _add_store_commands(sub)
    _add_run_command(sub)
    return parser


def _add_build_command(sub) -> None:
    build = sub.add_parser("build", help="execute missing or stale chapters, then render the book")
    build.add_argument("--scale", help="execute every chapter at this scale (smoke | cpu | paper)")
    build.add_argument("--force", action="store_true", help="re-execute every chapter")
    build.add_argument("--no-strict", action="store_true", help="do not turn Sphinx warnings into errors")
    build.add_argument(
        "--output", type=Path, default=None, help="build under OUTPUT/_build instead of the repository's _build"
    )
    build.add_argument("--executor", help=EXECUTOR_HELP)
    build.add_argument(
        "--fresh",
        action="store_true",
        help=f"ignore the results store ({STORE_ENV}={STORE_OFF}) and re-execute every chapter: every "
        "run your run cache lacks is trained",
    )


def _add_store_commands(sub) -> None:
    """``store`` (and ``store status``), ``verify`` and ``check``: the results store's commands."""
    store_command = sub.add_parser(
        "store", help="train the runs the results store lacks into it (or: store status, store prune)"
    )
    store_command.add_argument(
        "action",
        nargs="?",
        choices=("status", "prune"),
        help="status: what the store holds and lacks; prune: remove the entries the book no longer reads",
    )
    store_command.add_argument("--scale", default=DEFAULT_SCALE, help="the book's scale (default: %(default)s)")
    store_command.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="start no run after this many minutes (a slice; finished runs are kept)",
    )
    store_command.add_argument("--executor", help=EXECUTOR_HELP)
    store_command.add_argument("--entries", action="store_true", help="status: list every entry")
    store_command.add_argument("--dry-run", action="store_true", help="prune: only list what it would remove")
    store_command.add_argument(
        "--chapters",
        nargs="+",
        metavar="CHAPTER",
        default=None,
        help="only the runs these chapters read (a slice by chapter)",
    )
    verify_command = sub.add_parser("verify", help="retrain a sample of the results store and compare it")
    verify_command.add_argument("--scale", default=DEFAULT_SCALE, help="the book's scale (default: %(default)s)")
    verify_command.add_argument(
        "--sample",
        nargs="+",
        default=["default"],
        metavar="SAMPLE",
        help="default (one SGD and one Adam run per MLP chapter, one transformer run), all, or keys",
    )
    verify_command.add_argument("--executor", help=EXECUTOR_HELP)
    verify_command.add_argument(
        "--chapters", nargs="+", metavar="CHAPTER", default=None, help="sample only the runs these chapters read"
    )
    verify_command.add_argument(
        "--threads",
        type=_positive_int,
        default=None,
        metavar="N",
        help="retrain each run with N torch threads (other kernels, as on another machine)",
    )
    check_command = sub.add_parser(
        "check", help="the chapters the store serves whole, executed from it alone, vs the claims snapshot"
    )
    check_command.add_argument("--scale", default=DEFAULT_SCALE, help="the book's scale (default: %(default)s)")
    check_command.add_argument(
        "--write-snapshot",
        action="store_true",
        help="replace the committed claims snapshot with the tables the store gives",
    )


def _add_run_command(sub) -> None:
    run = sub.add_parser("run", help="execute one chapter with parameters, then build the book")
    run.add_argument("notebook", type=Path)
    run.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    run.add_argument("--no-render", action="store_true", help="only execute the chapter")
    run.add_argument("--executor", help=EXECUTOR_HELP)


#: The exit status of a command stopped by Ctrl-C (128 + SIGINT, as a shell reports it).
INTERRUPTED = 130


def store_line(args: argparse.Namespace) -> str:
    """Which results store the command reads (or writes), and why that one: its first line of output."""
    setting = store.store_setting()
    if setting == STORE_OFF:
        return f"results store: none ({STORE_ENV}={STORE_OFF})"
    roots = (
        [store.store_root(args.scale)]
        if getattr(args, "scale", None) and args.command != "build"
        else store.store_roots()
    )
    where = f"from {STORE_ENV}" if setting else f"of the checkout {store.checkout_root()}"
    return f"results store: {', '.join(map(str, roots)) or 'none'} ({where})"


def resolve_notebook(root: Path, notebook: Path) -> Path:
    """``notebook`` as the table of contents names it (relative to the repository root), whether it was given so,
    relative to the working directory (from inside ``book/``), or as an absolute path."""
    if notebook in chapters(root):
        return notebook
    with contextlib.suppress(ValueError, OSError):
        return (Path.cwd() / notebook).resolve().relative_to(root.resolve())
    return notebook


def _main(args: argparse.Namespace) -> None:
    try:
        root = repository_root()
    except FileNotFoundError as error:
        raise SystemExit(str(error)) from None
    _check_arguments(args)
    _check_where_it_works(args)
    if getattr(args, "executor", None):  # the chapters' kernels inherit it, once every check has passed
        os.environ[EXECUTOR_ENV] = args.executor
    if args.command in STORE_COMMANDS:
        raise SystemExit(_store_command(args))
    if args.command == "build":
        _build(args, root)
    else:
        _run_chapter(args, root)


#: The commands of the results store (:mod:`geocont.book.results`).
STORE_COMMANDS = ("store", "verify", "check")


#: The kernel's own log at errors only: its notice that a local kernel talks over TCP without encryption (once per
#: chapter, on the loopback interface of this machine) is not the reader's concern. Warnings of the chapters' code
#: are Python warnings, unaffected.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=ERROR"]


def _check_arguments(args: argparse.Namespace) -> None:
    """Before any work: ``GEOCONT_STORE_ONLY``, the executor (which the chapters' kernels inherit), the scale, the
    minutes and the chapters named; a bad one is a :class:`geocont.scales.ParameterError`."""
    store.strict()  # a GEOCONT_STORE_ONLY that is neither true nor false: one line
    if getattr(args, "executor", None):  # checked before any work; set for the chapters' kernels by _main
        try:
            resolve_executor(args.executor)
        except ValueError as error:
            raise ParameterError(str(error)) from None
    if args.command == "store":
        _check_store_options(args)
    if args.command in STORE_COMMANDS:
        check_scale(args.scale)
        if getattr(args, "minutes", None) is not None and not args.minutes > 0:
            raise ParameterError(f"--minutes must be a positive number, got {args.minutes:g}")
        if getattr(args, "chapters", None):
            from ..chapters import check_chapter_names

            try:
                check_chapter_names(args.chapters)
            except ValueError as error:
                raise ParameterError(str(error)) from None
    elif args.command == "build" and args.scale:
        check_scale(args.scale)


#: The ``store`` options that belong to one action only (``None``: filling the store, no action named).
STORE_ACTION_OPTIONS = {
    "dry_run": ("--dry-run", "prune"),
    "entries": ("--entries", "status"),
    "minutes": ("--minutes", None),
}


def _check_store_options(args: argparse.Namespace) -> None:
    """An option of another ``store`` action is refused in one line (``store --dry-run`` would otherwise train)."""
    for name, (flag, action) in STORE_ACTION_OPTIONS.items():
        value = getattr(args, name, None)
        if value not in (None, False) and args.action != action:
            belongs = f"`store {action}`" if action else "`store` (filling the store)"
            here = f"`store {args.action}`" if args.action else "`store` (filling the store)"
            raise ParameterError(f"{flag} belongs to {belongs}, not to {here}; nothing was done")


def _store_command(args: argparse.Namespace) -> int:
    """Run ``store``, ``store status``, ``verify`` or ``check``; the exit status."""
    if not (args.command == "store" and args.action == "status"):  # status names it on its first line
        print(store_line(args), flush=True)
    if args.command == "store" and args.action == "status":
        return results.print_status(args.scale, args.executor, chapters=args.chapters, list_entries=args.entries)
    if args.command == "store" and args.action == "prune":
        return results.prune(args.scale, dry_run=args.dry_run)
    if args.command == "store":
        return results.fill(args.scale, args.minutes, args.executor, chapters=args.chapters, execute_chapter=execute)
    if args.command == "verify":
        return results.verify(args.scale, args.sample, args.executor, chapters=args.chapters, threads=args.threads)
    return check(args.scale, args.write_snapshot)


def _build(args: argparse.Namespace, root: Path) -> None:
    """``build``: execute the missing and stale chapters, then render the book."""
    if args.fresh:
        os.environ[STORE_ENV] = STORE_OFF  # the chapters' kernels inherit it
    print(store_line(args), flush=True)
    layout = Layout((args.output or root).resolve())
    execute_stale(root, args.scale, force=args.force or args.fresh, layout=layout)
    render(root, strict=not args.no_strict, layout=layout)


def _run_chapter(args: argparse.Namespace, root: Path) -> None:
    """``run``: execute one chapter with its parameters, then (unless ``--no-render``) render the book."""
    notebook = resolve_notebook(root, args.notebook)
    if notebook not in chapters(root):
        valid = ", ".join(str(c) for c in chapters(root))
        raise SystemExit(f"unknown chapter {notebook}; valid choices: {valid}")
    parameters = _parse_parameters(args.parameter)
    parameters.setdefault("scale", DEFAULT_SCALE)
    check_parameters(root, notebook, parameters)
    print(store_line(args), flush=True)
    execute(root, notebook, parameters)
    if not args.no_render:
        render_after_run(root, parameters["scale"])


def _check_where_it_works(args: argparse.Namespace) -> None:
    """Before any work: the executor of the commands that train here (the chapters' commands check theirs in the
    preflight), the store folder ``$GEOCONT_STORE`` names, and that ``store`` can write its store."""
    filling = args.command == "store" and args.action is None
    pruning = args.command == "store" and args.action == "prune"
    if pruning:  # pruning trains nothing: only the store, and (without --dry-run) that it can be written
        problem = store.store_folder_problem(store.store_root(args.scale), write=not args.dry_run)
        if problem:
            raise StoreError(problem)
    if filling or args.command == "verify":
        problem = executor_problem(args.executor)
        if problem:
            raise ParameterError(problem)
    if store.store_setting() not in ("", STORE_OFF) and not filling and not pruning:  # `store` may create it
        problem = store.store_folder_problem(Path(store.store_setting()))
        if problem:
            raise StoreError(problem)
    if filling:
        problem = store.store_folder_problem(store.store_root(args.scale), write=True)
        if problem:
            raise StoreError(problem)
    if args.command in ("build", "run", "check"):
        output = getattr(args, "output", None)
        problem = build_folder_problem(Layout((Path(output) if output else repository_root()).resolve()).build)
        if problem:
            raise ParameterError(problem)


def build_folder_problem(folder: Path) -> str | None:
    """Why the book's build folder (``<output>/_build``) cannot be written, in one line, or None."""
    from ..folders import write_probe

    existing, why = write_probe(folder)
    if why == "not a folder":
        return f"the build folder {folder} cannot be made: {existing} is a file; move it aside or choose --output"
    if why is not None:
        return f"the build folder {folder} is not writable ({why}); make it writable or choose another --output"
    return None


def render_after_run(root: Path, scale: str, layout: Layout | None = None) -> Path:
    """After one chapter was executed: the closing chapter where every chapter has published its
    claims (else it too stands as not executed), then the book at once, every chapter not executed
    shown as such (:func:`render`), never executing the other chapters first."""
    layout = layout or Layout(root)
    published = all((layout.claims / f"{n.stem}.json").exists() for n in chapters(root) if n != CLOSING)
    if CLOSING in chapters(root) and published and _stale_reason(root, CLOSING, layout, scale):
        execute(root, CLOSING, {"scale": scale}, layout)
    return render(root, layout=layout, scale=scale)


def check(scale: str, write_snapshot: bool = False, out=sys.stdout) -> int:
    """``python -m geocont.book check`` (the results store's CI check, :mod:`geocont.book.results`): execute
    strictly from the store of ``scale`` (an empty run cache, :data:`geocont.store.STORE_ONLY_ENV`) into
    ``_build/check-<scale>`` every chapter it can serve whole (where the store is complete, the whole book, then
    rendered) and compare those chapters' published claims tables with the store's snapshot
    (:func:`geocont.book.results.compare_claims`: verdicts, seeds and keys exactly, numbers within
    :data:`geocont.book.results.CLAIM_TOLERANCE`; ``write_snapshot``: replace their snapshot with them instead).
    Where no chapter can be served, one line saying so and 0 (1 where entries are corrupt); 1 on any difference."""
    from ..chapters import CHAPTER_MODULES

    status = results.book_status(scale)
    if status.store.corrupt:
        print(
            f"error: the {scale} results store {status.store.root} has {len(status.store.corrupt)} corrupt "
            "entries (`python -m geocont.book store status` names them)",
            file=out,
        )
        return 1
    whole = status.complete
    ready = [name for name in CHAPTER_MODULES if status.chapter_complete(name)]
    waiting = (
        ""
        if whole
        else (
            f"the {scale} results store {status.store.root} is incomplete "
            f"({results.missing_summary(status, results.local_workers())})"
        )
    )
    if not ready:
        print(f"{waiting}, so no {scale} chapter is checked against its claims snapshot", file=out)
        return 0
    snapshot = status.store.root / results.SNAPSHOT
    problem = results.snapshot_problem(snapshot, ready, writing=write_snapshot)
    if problem:  # before any chapter is executed
        print(f"error: {problem}", file=out)
        return 1
    unsnapped = [name for name in ready if not (snapshot / f"{name}.json").exists()]
    if not write_snapshot and unsnapped:
        print(
            f"error: the {scale} store serves {', '.join(unsnapped)} whole, but its claims snapshot {snapshot} "
            f"lacks them: write it with `python -m geocont.book check --scale {scale} --write-snapshot` and "
            "commit it",
            file=out,
        )
        return 1
    layout = _execute_from_store(status, scale, ready=None if whole else ready)
    what = "every chapter" if whole else f"{len(ready)} of {len(CHAPTER_MODULES)} chapters ({', '.join(ready)})"
    if write_snapshot:
        _write_snapshot(snapshot, layout, ready=None if whole else ready)
        print(f"wrote the claims snapshot {snapshot} of {what}: commit it", file=out)
        return 0
    return _compare_with_snapshot(
        scale, snapshot, layout, checked=None if whole else ready, what=what, waiting=waiting, out=out
    )


def _execute_from_store(status, scale: str, ready: list[str] | None) -> Layout:
    """Execute, strictly from the store (an empty run cache), the chapters ``ready`` (None: the whole book, then
    rendered) into ``_build/check-<scale>``; that layout."""
    root = repository_root()
    layout = Layout(root / "_build" / f"check-{scale}")
    by_chapter = {notebook.stem: notebook for notebook in chapters(root)}
    with (
        tempfile.TemporaryDirectory(prefix="geocont-check-") as scratch,
        store.environment(
            GEOCONT_CACHE_DIR=scratch, **{store.STORE_ENV: str(status.store.root), store.STORE_ONLY_ENV: "1"}
        ),
    ):
        if ready is None:
            execute_stale(root, scale, force=True, layout=layout)
            render(root, layout=layout)
        else:
            for name in ready:
                check_parameters(root, by_chapter[name], {"scale": scale})
                execute(root, by_chapter[name], {"scale": scale}, layout=layout)
    return layout


def _write_snapshot(snapshot: Path, layout: Layout, ready: list[str] | None) -> None:
    """Copy the published claims tables of ``ready`` (None: every chapter's, the old snapshot removed first) into
    ``snapshot``."""
    if ready is None and snapshot.exists():
        shutil.rmtree(snapshot)
    snapshot.mkdir(parents=True, exist_ok=True)
    for name in ready if ready is not None else [p.stem for p in layout.claims.glob("*.json")]:
        shutil.copy2(layout.claims / f"{name}.json", snapshot / f"{name}.json")


def _compare_with_snapshot(
    scale: str, snapshot: Path, layout: Layout, *, checked: list[str] | None, what: str, waiting: str, out
) -> int:
    """Compare the claims tables published under ``layout`` (of the chapters ``checked``; None: every chapter)
    with ``snapshot`` and say so (``what`` was checked, which chapters are ``waiting``): 0 when they agree, else
    every difference and 1."""
    lines = results.compare_claims(layout.claims, snapshot, checked)
    if lines:
        print(
            f"the {scale} claims moved from the committed snapshot {snapshot} beyond its tolerance "
            f"({results.CLAIM_TOLERANCE:g} relative) in {results.moved_summary(lines)}; {len(lines)} "
            f"differences, of {what} checked:",
            file=out,
        )
        for line in lines:
            print(f"  {line}", file=out)
        print(
            "review them; if the new numbers are right, replace the snapshot with "
            f"`python -m geocont.book check --scale {scale} --write-snapshot`",
            file=out,
        )
        return 1
    print(
        f"the {scale} claims of {what} equal the committed snapshot"
        + (f"; the others wait: {waiting}" if waiting else ""),
        file=out,
    )
    return 0


if __name__ == "__main__":
    main()

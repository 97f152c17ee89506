"""The ``geocont`` command line (also ``python -m geocont``).

Subcommands register themselves in :data:`COMMANDS` (name -> (add_arguments, run)); add
one by writing those two functions and an entry there.

    geocont analyze SOURCE [-o table.csv|table.json] [--figure depth.png] [--layout NAME] ...
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from .extras import MissingExtra, require_extra
from .metrics import METHODS


class OutputNotWritable(ValueError):
    """An output path that cannot be written (checked before any work)."""


def check_output_path(path: Path) -> None:
    """Raise :class:`OutputNotWritable` unless ``path`` can be written as a file.

    The nearest existing ancestor must be a directory in which a file can be created (a
    real probe, so that read-only mounts are caught too); the missing directories below it
    are created when the output is written.
    """
    if path.is_dir():
        raise OutputNotWritable(f"{path}: is a directory, not a file name")
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputNotWritable(f"{path}: cannot be created, {ancestor} is a file, not a directory")
    try:
        with tempfile.NamedTemporaryFile(dir=ancestor, prefix=".geocont-probe-"):
            pass
    except OSError as error:
        raise OutputNotWritable(f"{path}: cannot write in {ancestor} ({error.strerror or error})") from None


def figure_formats() -> list[str]:
    """The file suffixes (without the dot) matplotlib can save a figure as (:class:`MissingExtra` without it)."""
    require_extra("plot", ("matplotlib", "seaborn"), "geocont analyze --figure")
    from matplotlib.backend_bases import FigureCanvasBase

    return sorted(FigureCanvasBase.get_supported_filetypes())


def current_umask() -> int:
    """The process's umask (read by setting it and setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """``write`` a file at ``path`` through a temporary file beside it, renamed into place: a failure
    (a full disk) leaves neither a partial nor an empty file, and its error names ``path``. The file gets the
    mode a plain ``open`` gives (0666 less the umask), not the temporary file's 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".partial{path.suffix}")
    os.close(handle)
    try:
        write(Path(temporary))
        os.chmod(temporary, 0o666 & ~current_umask())
        os.replace(temporary, path)
    except OSError as error:
        Path(temporary).unlink(missing_ok=True)
        raise OSError(error.errno, error.strerror or str(error), str(path)) from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _add_analyze_arguments(parser: argparse.ArgumentParser) -> None:
    from .layouts import LAYOUTS, PROJECTIONS

    parser.add_argument(
        "source",
        help="a .gguf or .safetensors file, a directory of shards, a Hugging Face model id "
        "or directory, or an offline model name (smollm2-135m, gemma3-270m, "
        "all-minilm-l6)",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        action="append",
        default=[],
        help="write the table to this .csv or .json file (may be given twice)",
    )
    parser.add_argument("--figure", type=Path, help="save the continuity-across-depth figure (e.g. depth.png)")
    parser.add_argument("--layout", choices=sorted(LAYOUTS), help="weight-naming layout (default: detected)")
    parser.add_argument(
        "--projections",
        nargs="+",
        choices=PROJECTIONS,
        metavar="PROJ",
        help=f"analyse only these projections ({', '.join(PROJECTIONS)})",
    )
    parser.add_argument("--max-layers", type=int, help="analyse only the first N layers")
    parser.add_argument(
        "--alignment",
        choices=("auto", "on", "off"),
        default="auto",
        help="sigma^2-weighted alignment: auto = only for matrices with both sides <= 2048",
    )
    parser.add_argument(
        "--method",
        choices=METHODS,
        default="auto",
        help="leading singular triplet: exact SVD, iterative with a convergence check, or auto",
    )
    parser.add_argument("--summary", action="store_true", help="print the per-projection means instead of every row")
    parser.add_argument("--no-cache", action="store_true", help="recompute even if a cached table exists")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no printed table")


def _run_analyze(args: argparse.Namespace) -> int:
    for path in args.output:
        if path.suffix not in (".csv", ".json"):
            raise OutputNotWritable(f"{path}: output must end in .csv or .json")
    for path in [*args.output, *([args.figure] if args.figure else [])]:
        check_output_path(path)
    if args.figure is not None and args.figure.suffix.lstrip(".").lower() not in figure_formats():
        raise OutputNotWritable(
            f"{args.figure}: unknown figure format {args.figure.suffix or '(none)'!r}; "
            f"valid choices: {', '.join('.' + f for f in figure_formats())}"
        )
    from .analyzer import analyze, format_table, summary

    alignment = {"auto": "auto", "on": True, "off": False}[args.alignment]
    table = analyze(
        args.source,
        layout=args.layout,
        projections=args.projections,
        max_layers=args.max_layers,
        alignment=alignment,
        method=args.method,
        progress=not args.quiet,
        use_cache=not args.no_cache,
    )
    for path in args.output:
        if path.suffix == ".csv":
            write_atomically(path, lambda target: table.to_csv(target, index=False))
        else:
            write_atomically(path, lambda target: table.to_json(target, orient="records", indent=1))
    if args.figure:
        from .plotting import plot_depth_continuity, set_theme

        set_theme()
        fig = plot_depth_continuity(table, title=table.attrs.get("source", ""))
        write_atomically(
            args.figure,
            lambda target: fig.savefig(target, bbox_inches="tight", format=args.figure.suffix.lstrip(".").lower()),
        )
    if not args.quiet:
        attrs = table.attrs
        print(f"{attrs.get('source')}: layout {attrs.get('layout')}, architecture {attrs.get('architecture') or '?'}")
        shown = summary(table).reset_index() if args.summary else table
        print(format_table(shown))
        for path in [*args.output, *([args.figure] if args.figure else [])]:
            print(f"wrote {path}")
    return 0


#: subcommand -> (help line, function adding its arguments, function running it and returning the exit status)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {
    "analyze": (
        "continuity table (v1/u1 |cos|, alignment, baselines) of a checkpoint, read one tensor at a time",
        _add_analyze_arguments,
        _run_analyze,
    ),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="geocont", description="Measure geometric continuity in neural networks.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (help_text, add_arguments, _) in COMMANDS.items():
        add_arguments(sub.add_parser(name, help=help_text, description=help_text))
    args = parser.parse_args(argv)
    import warnings

    formatwarning = warnings.formatwarning
    warnings.formatwarning = lambda message, category, *rest, **keywords: f"warning: {message}\n"  # one line each
    try:
        return _run(args)
    finally:
        warnings.formatwarning = formatwarning


def _run(args: argparse.Namespace) -> int:
    from .checkpoints import CorruptCheckpoint
    from .layouts import UnknownLayout
    from .pretrained import ModelNotAvailable

    try:
        return COMMANDS[args.command][2](args)
    except (CorruptCheckpoint, UnknownLayout, ModelNotAvailable, MissingExtra, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # FileNotFoundError, or writing the output failed after all: one line
        print(
            f"error: {error.strerror or error}: {error.filename}" if error.filename else f"error: {error}",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())

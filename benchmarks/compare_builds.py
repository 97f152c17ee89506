"""Compare two builds of the book: their published claims tables and their cached run tables.

Used to check that a refactor changes no number the book shows:

    python benchmarks/compare_builds.py claims BEFORE/_build/claims/book AFTER/_build/claims/book
    python benchmarks/compare_builds.py tables BEFORE_CACHE AFTER_CACHE [--renamed compression=sharing]

``claims`` compares every chapter's table column by column (the ``key`` column is ignored, so
tables from before claims had keys compare too; where the earlier build has the early value as
one text column, ``early``, the later build's ``early_*`` numbers are compared in that text, as
the book shows them); ``tables`` matches cache entries by kind and configuration and compares
their tables bit for bit, metrics under a former name (``geocont.tables.METRIC_ALIASES``) read
under their current one. Both print one line per difference and a total.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd

from geocont.book.claims import early_text
from geocont.tables import current_metric_names


def compare_claims(before: Path, after: Path) -> int:
    differences = 0
    for path in sorted(before.glob("*.json")):
        a, b = (json.loads(p.read_text())["claims"] for p in (path, after / path.name))
        for row in b:
            if "early" in a[0] and "early" not in row:
                row["early"] = early_text(argparse.Namespace(**{**row, "early_verdict": row["early_verdict"] or ""}))
        columns = [c for c in a[0] if c != "key"]
        diff = [
            (c, x.get(c), y.get(c))
            for x, y in zip(a, b)
            for c in columns
            if x.get(c) != y.get(c)
            and not (
                isinstance(x.get(c), float) and isinstance(y.get(c), float) and math.isnan(x[c]) and math.isnan(y[c])
            )
        ]
        diff += [("claims", len(a), len(b))] if len(a) != len(b) else []
        print(f"{path.stem}: {len(a)} vs {len(b)} claims, " + ("identical" if not diff else f"{len(diff)} differences"))
        for column, x, y in diff:
            print(f"  {column}: {x!r} | {y!r}")
        differences += len(diff)
    return differences


def _entries(root: Path, renamed: dict[str, str]) -> dict[str, Path]:
    """``{kind and configuration: table}`` of a cache: the current version of each entry
    (``<kind>/<key>/<version>/``, the version named in ``<key>/CURRENT``)."""
    entries = {}
    for current in root.glob("*/*/CURRENT"):
        version = current.parent / current.read_text().strip()
        config, table = version / "config.json", version / "table.parquet"
        if config.exists() and table.exists():
            kind = renamed.get(current.parent.parent.name, current.parent.parent.name)
            key = json.dumps({"kind": kind, "config": json.loads(config.read_text()).get("config")}, sort_keys=True)
            entries[key] = table
    return entries


def _table(path: Path) -> pd.DataFrame:
    """A cached table with current metric names (as strings: categories of renamed metrics sort anew)."""
    table = pd.read_parquet(path)
    if "metric" not in table:
        return table
    return current_metric_names(table).astype({"metric": str})


def compare_tables(before: Path, after: Path, renamed: dict[str, str]) -> int:
    a, b = _entries(before, renamed), _entries(after, {})
    common = sorted(set(a) & set(b))
    print(f"{len(a)} tables before, {len(b)} after, {len(common)} with the same configuration")
    differences = len(set(a) ^ set(b))
    for key in common:
        try:
            pd.testing.assert_frame_equal(_table(a[key]), _table(b[key]), check_exact=True)
        except AssertionError as error:
            differences += 1
            print(f"  {json.loads(key)['kind']}: {str(error).splitlines()[0]}")
    print(f"{len(common)} compared; {differences} differ or have no counterpart")
    return differences


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("claims", "tables"))
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument(
        "--renamed",
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="a cache kind renamed between the builds (e.g. compression=sharing)",
    )
    args = parser.parse_args()
    if args.what == "claims":
        differences = compare_claims(args.before, args.after)
    else:
        differences = compare_tables(args.before, args.after, dict(r.split("=", 1) for r in args.renamed))
    raise SystemExit(1 if differences else 0)


if __name__ == "__main__":
    main()

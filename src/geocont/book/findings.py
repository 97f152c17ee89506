"""The paper's main claims as the README's findings table, generated from the committed ``cpu`` claims snapshot.

    python -m geocont.book.findings            # print the table
    python -m geocont.book.findings --write    # replace the table in README.md (between its two markers)

The README's table is never typed: ``tests/test_findings.py`` compares it with the snapshot.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from .claims import MissingClaims, _cell, _ours_cell, read
from .paths import repository_root

#: The paper's main claims, one per row of the README's table, in the paper's order: ``(chapter, claim name)``;
#: each row is the claim's verdict of record (its primary row).
MAIN_CLAIMS = (
    ("mlp_conditions", "nores-gradient-v1"),
    ("mlp_conditions", "linear-gradient-v1"),
    ("timeline", "step0-gradient-coherence"),
    ("timeline", "order-spectral"),
    ("mlp_conditions", "linear-weight-v1"),
    ("mlp_conditions", "res-relu-above-linear"),
    ("mlp_conditions", "radial-weight-v1"),
    ("condition2", "rotation-drift"),
    ("activation_vs_norm", "layernorm-breaks-symmetry"),
    ("transformer_projections", "q-input-continuity"),
    ("transformer_projections", "o-output-continuity"),
    ("transformer_projections", "down-output-continuity"),
    ("pretrained_continuity", "smollm2-135m-o-u1"),
    ("pretrained_continuity", "smollm2-135m-v-low-v1"),
    ("compression", "pretrained-pruning"),
)
START, END = "<!-- findings:start -->", "<!-- findings:end -->"


def snapshot_dir(root: Path | None = None) -> Path:
    return (root or repository_root()) / "results" / "cpu" / "claims-snapshot"


def main_claims(snapshot: Path) -> pd.DataFrame:
    """The rows of :data:`MAIN_CLAIMS` from the snapshot in ``snapshot``, in that order; a claim the snapshot lacks
    raises :class:`KeyError` naming it."""
    rows = []
    tables = {chapter: read(snapshot / f"{chapter}.json")["claims"] for chapter in dict(MAIN_CLAIMS)}
    for chapter, name in MAIN_CLAIMS:
        table = tables[chapter]
        found = table[(table["key"].str.split("@").str[0] == name) & table["primary"]]
        if len(found) != 1:
            raise KeyError(f"the {chapter} claims snapshot has no primary claim {name!r}")
        rows.append(found.iloc[0])
    return pd.DataFrame(rows).reset_index(drop=True)


def findings_markdown(snapshot: Path) -> str:
    """The README's table: claim, chapter, the paper's value, ours (mean ± sd, n), the random baseline, verdict."""
    lines = ["| claim | chapter | paper | ours (mean ± sd, n) | random | verdict |", "|---|---|---|---|---|---|"]
    for row in main_claims(snapshot).itertuples():
        baseline = "–" if pd.isna(row.baseline) else f"{row.baseline:.2f}"
        lines.append(
            f"| {_cell(row.claim)} | [{row.chapter}](book/{row.chapter}.ipynb) | {_cell(row.paper)} | "
            f"{_ours_cell(row)} | {baseline} | **{row.verdict}** |"
        )
    return "\n".join(lines)


def readme_block(readme: str) -> str:
    """The table between the README's markers (what :func:`write` put there)."""
    if START not in readme or END not in readme:
        raise ValueError(f"README.md has no findings markers {START} ... {END}")
    return readme.split(START, 1)[1].split(END, 1)[0].strip()


def write(readme_path: Path, snapshot: Path) -> bool:
    """Replace the README's table with the snapshot's; True where it changed."""
    readme = readme_path.read_text()
    old = readme_block(readme)
    new = findings_markdown(snapshot)
    if old == new:
        return False
    before, rest = readme.split(START, 1)
    readme_path.write_text(f"{before}{START}\n{new}\n{END}{rest.split(END, 1)[1]}")
    return True


class FindingsError(RuntimeError):
    """The findings table cannot be made or written: one line naming the file and the fix."""


def _snapshot_tables(snapshot: Path) -> None:
    """A one-line :class:`FindingsError` where a snapshot file the table reads is missing or unreadable."""
    for chapter in dict(MAIN_CLAIMS):
        path = snapshot / f"{chapter}.json"
        try:
            read(path)
        except MissingClaims as error:
            raise FindingsError(
                f"the claims snapshot {path} is missing or unreadable ({str(error).split(': ', 1)[-1]}); restore it "
                f"(`git checkout {path}`) or rewrite it with `python -m geocont.book check --scale cpu --write-snapshot`"
            ) from None


def run(write_readme: bool, root: Path | None = None, out=sys.stdout) -> None:
    """Print the findings table, or (``write_readme``) write it into README.md; every failure a :class:`FindingsError`."""
    try:
        root = root or repository_root()
    except FileNotFoundError as error:
        raise FindingsError(str(error)) from None
    snapshot = snapshot_dir(root)
    _snapshot_tables(snapshot)
    try:
        table = findings_markdown(snapshot)
    except KeyError as error:
        raise FindingsError(
            f"{error.args[0]}; rewrite the snapshot with `python -m geocont.book check --write-snapshot`"
        ) from None
    if not write_readme:
        print(table, file=out)
        return
    readme = root / "README.md"
    try:
        changed = write(readme, snapshot)
    except ValueError as error:
        raise FindingsError(f"{error}: put them back around the findings table in {readme}") from None
    except OSError as error:
        raise FindingsError(f"cannot rewrite {readme} ({error.strerror or error}); make it writable") from None
    print("README.md: findings table " + ("rewritten" if changed else "already current"), file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="replace the table in README.md")
    args = parser.parse_args(argv)
    try:
        run(args.write)
    except FindingsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

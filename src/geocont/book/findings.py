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

from .claims import _cell, _ours_cell, read
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="replace the table in README.md")
    args = parser.parse_args(argv)
    root = repository_root()
    if args.write:
        changed = write(root / "README.md", snapshot_dir(root))
        print("README.md: findings table " + ("rewritten" if changed else "already current"))
    else:
        print(findings_markdown(snapshot_dir(root)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

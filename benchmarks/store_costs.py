"""What the runs of the results store cost, measured: per run group (a run's label without its seed), the
stored runs' count, their wall minutes on one worker as recorded when they were trained, and seconds per
optimizer step; then per chapter (a run several chapters read counts in each).

Nothing trains; it reads ``results/<scale>/*/*/entry.json``. Usage:

    python benchmarks/store_costs.py [--scale cpu] [--chapter condition2]
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict

from geocont import store


def group_of(label: str) -> str:
    """A run's label without its seed (``res-none adam init=1 seed=2`` -> ``res-none adam init=1``)."""
    return re.sub(r"\s*seed=\d+", "", label).strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--chapter", default=None, help="only the runs this chapter reads")
    args = parser.parse_args()
    groups: dict[str, list[tuple[float, int]]] = defaultdict(list)
    chapters: dict[str, float] = defaultdict(float)
    for _, entry in store.entries(store.store_root(args.scale)):
        if args.chapter and args.chapter not in entry.get("chapters", []):
            continue
        wall = entry.get("provenance", {}).get("wall_seconds")
        if not isinstance(wall, (int, float)):
            continue
        config = entry.get("config", {})
        steps = int(config.get("steps") or 0)
        where = " ".join(str(config[k]) for k in ("dataset", "corpus") if config.get(k))
        groups[f"{entry.get('kind')}: {group_of(entry.get('label', ''))} [{where}, {steps} steps]"].append(
            (wall, steps))
        for chapter in entry.get("chapters", []):
            chapters[chapter] += wall
    print(f"{'run group':70s} {'runs':>4s} {'worker-min':>10s} {'s/step':>8s}")
    for name, runs in sorted(groups.items()):
        wall = sum(w for w, _ in runs)
        steps = sum(s for _, s in runs)
        per_step = f"{wall / steps:.4f}" if steps else "-"
        print(f"{name:70s} {len(runs):4d} {wall / 60:10.1f} {per_step:>8s}")
    print(f"{'total':70s} {sum(map(len, groups.values())):4d} "
          f"{sum(w for runs in groups.values() for w, _ in runs) / 60:10.1f}")
    for chapter, wall in sorted(chapters.items()):
        print(f"chapter {chapter}: {wall / 60:.1f} worker-minutes of stored runs")


if __name__ == "__main__":
    main()

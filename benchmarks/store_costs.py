"""What the runs of the results store cost, measured: per run group (a run's label without its seed, with the
learning rate and the schedule, clipping and batch where they depart from the defaults), the
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


#: Settings that tell apart runs whose labels agree (the Condition-2 chapter's interventions and drift tests): shown
#: where they differ from these values.
DEFAULTS = {"lr_schedule": "constant", "lr_step_factor": None, "grad_clip": None, "batch_size": 128}


def departures(config: dict) -> str:
    """The learning rate and every :data:`DEFAULTS` setting a run changes (``lr=0.0003 cosine batch_size=64``)."""
    optimizer = config.get("optimizer") or {}
    parts = [f"lr={optimizer['lr']:g}"] if isinstance(optimizer, dict) and "lr" in optimizer else []
    for name, default in DEFAULTS.items():
        if name in config and config[name] != default:
            value = config[name]
            parts.append(
                str(value)
                if name == "lr_schedule"
                else f"{name}={value:g}"
                if isinstance(value, float)
                else f"{name}={value}"
            )
    return " ".join(parts)


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
        label = f"{group_of(entry.get('label', ''))} {departures(config)}".strip()
        groups[f"{entry.get('kind')}: {label} [{where}, {steps} steps]"].append((wall, steps))
        for chapter in entry.get("chapters", []):
            chapters[chapter] += wall
    print(f"{'run group':86s} {'runs':>4s} {'worker-min':>10s} {'s/step':>8s}")
    for name, runs in sorted(groups.items()):
        wall = sum(w for w, _ in runs)
        steps = sum(s for _, s in runs)
        per_step = f"{wall / steps:.4f}" if steps else "-"
        print(f"{name:86s} {len(runs):4d} {wall / 60:10.1f} {per_step:>8s}")
    print(
        f"{'total':86s} {sum(map(len, groups.values())):4d} "
        f"{sum(w for runs in groups.values() for w, _ in runs) / 60:10.1f}"
    )
    for chapter, wall in sorted(chapters.items()):
        print(f"chapter {chapter}: {wall / 60:.1f} worker-minutes of stored runs")


if __name__ == "__main__":
    main()

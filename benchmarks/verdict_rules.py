"""Which verdicts the three verdict rules of ``geocont.statistics`` change: each chapter's claims computed from
the same runs twice, under the book's rules and under the rules they replaced, and every claim whose verdict
or number differs printed as ``before -> after``.

The rules replaced (docs/design.md, "Verdict rules", gives the book's):

* a claim "at the random level" was ``verdict_for_value`` against the random level (within 0.10 of it),
  not ``verdict_at_random_level`` (the equivalence test: the whole 95% interval within one random pair's sd);
* a peak was the largest single snapshot of a seed's layer-mean series (``max_per_seed``), not the windowed
  peak of ``PEAK_WINDOW`` snapshots;
* a single seed counted as spread 0, not ``SINGLE_SEED_SD``.

Nothing trains: the runs are read from the run cache or the results store (strict mode); a missing run is a
one-line error naming it. Usage:

    python benchmarks/verdict_rules.py [--scale cpu] [--chapters mlp_conditions timeline ...]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys

import pandas as pd

from geocont import statistics, store
from geocont.chapters import chapter_module

#: The chapters whose claims read these rules (every MLP chapter).
DEFAULT_CHAPTERS = ("mlp_conditions", "timeline", "activation_vs_norm", "condition2", "symmetry_dose")


def old_peaks_per_seed(table, metric, space, direction, **equal):
    return statistics.max_per_seed(table, metric, space, direction, **equal)


def old_verdict_at_random_level(ours, baseline, margin):
    return statistics.verdict_for_value(ours, baseline)


def old_seed_spread(e):
    return 0.0 if math.isnan(e.std) else e.std


REPLACED = {
    "peaks_per_seed": old_peaks_per_seed,
    "verdict_at_random_level": old_verdict_at_random_level,
    "seed_spread": old_seed_spread,
}


@contextlib.contextmanager
def replaced_rules():
    """The replaced rules, in ``geocont.statistics`` and in every loaded geocont module that imported them."""
    saved = []
    for module in [m for name, m in list(sys.modules.items()) if name.startswith("geocont") and m is not None]:
        for name in REPLACED:
            if getattr(module, name, None) is getattr(statistics, name):
                saved.append((module, name, getattr(module, name)))
    originals = {name: getattr(statistics, name) for name in REPLACED}
    try:
        for module, name, _ in saved:
            setattr(module, name, REPLACED[name])
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)
        for name, original in originals.items():
            setattr(statistics, name, original)


def chapter_claims(name: str, scale: str) -> pd.DataFrame:
    module = chapter_module(name)
    settings = module.CHAPTER.configure(scale)
    with store.environment(**{store.STORE_ONLY_ENV: "1", store.CHAPTER_ENV: name}):
        return module.claims(module.run(settings))


def _number(value) -> str:
    return f"{value:.3f}" if isinstance(value, float) and math.isfinite(value) else str(value)


def changes(before: pd.DataFrame, after: pd.DataFrame) -> list[str]:
    """One line per claim whose verdict or numbers differ (``key: verdict (ours ± sd, n) -> ...``)."""
    lines = []
    old, new = before.set_index("key"), after.set_index("key")
    for key in new.index:
        if key not in old.index:
            lines.append(f"{key}: only under the book's rules")
            continue
        a, b = old.loc[key], new.loc[key]
        fields = ["verdict", "ours_mean", "ours_std", "n_seeds", "early_verdict"]
        if all(str(a[c]) == str(b[c]) for c in fields):
            continue

        def describe(r):
            return (
                f"{r['verdict']} ({_number(r['ours_mean'])} ± {_number(r['ours_std'])}, {r['n_seeds']} seeds; "
                f"paper {_number(r['paper'])}, baseline {_number(r['baseline'])})"
            )

        early = (
            f"; early {a['early_verdict']} ({_number(a['early_mean'])}) -> {b['early_verdict']} "
            f"({_number(b['early_mean'])})"
            if str(a["early_verdict"]) != str(b["early_verdict"])
            else ""
        )
        lines.append(f"{key}: {describe(a)} -> {describe(b)}{early}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--chapters", nargs="+", default=list(DEFAULT_CHAPTERS))
    args = parser.parse_args()
    for name in args.chapters:
        after = chapter_claims(name, args.scale)
        with replaced_rules():
            before = chapter_claims(name, args.scale)
        lines = changes(before, after)
        print(f"{name} at {args.scale}: {len(after)} claims, {len(lines)} changed by the verdict rules")
        for line in lines:
            print(f"  {line}")


if __name__ == "__main__":
    main()

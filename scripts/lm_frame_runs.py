"""Train the residual-frame runs (what carries O's and Down's output continuity) into results/cpu, in slices.

The set is :data:`geocont.chapters.transformer_projections.frame_runs.FRAME_RUNS`: the chapter's `cpu` reference
run with Adam's residual frame rotated (``silu`` x 3 seeds, ``none`` x 1) and with the RMSNorm gains frozen
(``silu`` x 1), each recording the residual channel at every snapshot and keeping its weights. Runs are written
exactly as `python -m geocont.book store` writes a run.

    python scripts/lm_frame_runs.py --list                        # the set, what is stored, predicted minutes
    python scripts/lm_frame_runs.py "silu, rotated frame:0"       # train these (label:seed), one worker each
"""

from __future__ import annotations

import argparse
import sys

from geocont import store
from geocont.book import results
from geocont.book.runs import predicted_seconds
from geocont.chapters import lm_runs
from geocont.chapters.transformer_projections.frame_runs import frame_configs
from geocont.lm import MODEL_ARTIFACT, lm_job
from geocont.sweeps import run_jobs


def the_set() -> dict[str, object]:
    """``{"label:seed": config}`` of every run of the set."""
    settings = lm_runs.build_settings("cpu", lm_runs.lm_preset("cpu"))
    return {f"{label}:{c.seed}": c for label, configs in frame_configs(settings).items() for c in configs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", help="label:seed (default: --list)")
    parser.add_argument("--list", action="store_true", help="print the set and what is stored")
    args = parser.parse_args(argv)
    root = store.store_root("cpu")
    runs = the_set()
    unknown = [item for item in args.runs if item not in runs]
    if unknown:
        raise SystemExit(f"error: unknown run(s) {unknown}; valid choices: {', '.join(map(repr, runs))}")
    if args.list or not args.runs:
        for item, config in runs.items():
            name = store.entry_name("lm", lm_job(config).key_config())
            stored = (root / name / store.ENTRY).exists()
            print(f"{item:26s} {name}  {'stored' if stored else f'~{predicted_seconds(config) / 60:.0f} min'}")
        return 0
    jobs = {store.entry_name("lm", lm_job(runs[item]).key_config()): item for item in args.runs}

    def put(job, _table) -> None:
        item = jobs[store.entry_name(job.kind, job.key_config())]
        config = runs[item]
        written = results.copy_from_cache(
            root,
            "lm",
            job.key_config(),
            keep_artifacts=(MODEL_ARTIFACT,),
            label=f"{item} ({config.corpus}, {config.steps:,} steps)",
            chapters=("transformer_projections",),
        )
        print(f"stored {written.folder}", flush=True)

    with store.environment(GEOCONT_CACHE_DIR=str(results.staging_cache(root)), **{store.STORE_ENV: str(root)}):
        run_jobs([lm_job(runs[item], label=item) for item in args.runs], f"local:{len(args.runs)}", on_result=put)
    return 0


if __name__ == "__main__":
    sys.exit(main())

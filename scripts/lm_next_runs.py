"""Train runs of the transformer chapters' next `cpu` run set into results/cpu, in slices.

The next `cpu` run set trains on the `offline-english` corpus (12.4M training tokens at the cpu tokenizer) for
16,000 steps of 2,048 tokens (2.65 epochs), with 16 log-spaced and 24 evenly spaced snapshots and one at the
early horizon, step 4,000 (:data:`NEXT_CPU`); the memorisation control is ``silu`` trained the same way on
``kjv``. The cpu preset switches to it once these runs are stored; until then
they sit in the store beside the current runs (`store status` lists them as not in the book's run set) and are
written exactly as `python -m geocont.book store` writes a run (the reference `silu` runs with their weights).

    python scripts/lm_next_runs.py --list                 # the set, what is stored, predicted minutes
    python scripts/lm_next_runs.py silu:1 none:1          # train these (label:seed[:corpus]) on one worker each
"""

from __future__ import annotations

import argparse
import sys

from geocont import store
from geocont.book import results
from geocont.book.runs import predicted_seconds
from geocont.chapters import lm_runs
from geocont.lm import MODEL_ARTIFACT, lm_job
from geocont.sweeps import run_jobs

NEXT_CPU = {
    "corpus": "offline-english",
    "steps": 16000,
    "early_step": 4000,
    "n_snapshots": 16,
    "n_late_snapshots": 24,
    "depth_seeds": (0,),
    "long_factor": 1,
    "control_corpus": "kjv",
    "control_seeds": (0,),
}
#: The set, most valuable first: the main variants' three seeds, the single-seed variants, then the memorisation
#: control (``silu`` on ``kjv``, trained as the others).
NEXT_RUNS = (
    "silu:0",
    "none:0",
    "silu:1",
    "none:1",
    "silu:2",
    "none:2",
    "relu:0",
    "silu, linear attention:0",
    "silu, 8 layers:0",
    "silu, kjv:0",
)


def config_of(item: str):
    label, seed, *corpus = item.rsplit(":", 2) if item.count(":") >= 2 else item.rsplit(":", 1)
    settings = lm_runs.build_settings(
        "cpu", {**lm_runs.lm_preset("cpu"), **NEXT_CPU, "seeds": (0, 1, 2), **({"corpus": corpus[0]} if corpus else {})}
    )
    configs = settings.all_configs()
    if label not in configs:
        raise SystemExit(f"error: unknown variant {label!r}; valid choices: {', '.join(map(repr, configs))}")
    return label, next(c for c in configs[label] if c.seed == int(seed))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", help="label:seed[:corpus] (default: --list)")
    parser.add_argument("--list", action="store_true", help="print the set and what is stored")
    args = parser.parse_args(argv)
    root = store.store_root("cpu")
    if args.list or not args.runs:
        for item in NEXT_RUNS:
            label, config = config_of(item)
            name = store.entry_name("lm", lm_job(config).key_config())
            stored = (root / name / store.ENTRY).exists()
            print(f"{item:28s} {name}  {'stored' if stored else f'~{predicted_seconds(config) / 60:.0f} min'}")
        return 0
    jobs, labels = [], {}
    for item in args.runs:
        label, config = config_of(item)
        job = lm_job(config, label=f"{label} ({config.corpus})")
        jobs.append(job)
        labels[store.entry_name("lm", job.key_config())] = (label, config)

    def put(job, _table) -> None:
        label, config = labels[store.entry_name(job.kind, job.key_config())]
        keep = (MODEL_ARTIFACT,) if label == lm_runs.REFERENCE else ()
        written = results.copy_from_cache(
            root,
            "lm",
            job.key_config(),
            keep_artifacts=keep,
            label=f"{label} seed={config.seed} ({config.corpus}, {config.steps:,} steps)",
            chapters=("transformer_projections",),
        )
        print(f"stored {written.folder}", flush=True)

    with store.environment(GEOCONT_CACHE_DIR=str(results.staging_cache(root)), **{store.STORE_ENV: str(root)}):
        run_jobs(jobs, f"local:{len(jobs)}", on_result=put)
    return 0


if __name__ == "__main__":
    sys.exit(main())

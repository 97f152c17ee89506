"""bf16 autocast against fp32 on the chapters' own runs: is every claim quantity within the seed spread?

Trains (or loads from the run cache) the MLP chapter's runs of the conditions ``res-relu``,
``res-none``, ``res-radial-tau`` and ``nores-relu`` at the scale's horizon (3 seeds), and the
transformer chapter's ``silu`` and ``none`` models (2 seeds), each in ``fp32`` and in
``bf16-autocast``, through ``run_sweep`` and ``run_lm_sweep`` (so the runs land in the run cache
under their own keys and a second call trains nothing). For every quantity the chapters' claims
read at the end of training (the MLP: weight and gradient v1/u1 continuity, relative update,
σ²-alignment, training-set loss, test accuracy; the transformer: each projection's v1 and u1
continuity and the validation loss), it gives the mean ± sd over seeds in both precisions and
the verdict of the rule

    |difference of means| <= max(0.03, pooled sd)      (pooled sd: root mean square of the two sds)

``within`` where it holds, ``OUTSIDE`` where not; a model whose quantities are all within may
train in bf16 by default, otherwise fp32 stays its default. Prints the table (markdown) and
writes it as ``precision_comparison_<scale>.csv`` and ``.md`` under ``--output``.

At ``cpu`` this is 24 MLP runs of 9,360 steps and 8 transformer runs of 4,000 steps (the fp32 half
is the chapters' own runs, cached when the book was built with fused optimizers): about 2 hours of
two cores whose processor multiplies bf16 natively (AVX-512 BF16 or AMX). Where it does not (``grep
avx512_bf16 /proc/cpuinfo`` finds nothing), bf16 matrix products are emulated and about ten times
slower than fp32, and the bf16 half takes a day: run it there on a GPU (``--device cuda``).
``--scale smoke`` (or ``--steps``/``--lm-steps``) checks the script.
Usage: python benchmarks/compare_precision.py [--scale cpu] [--seeds 3] [--lm-seeds 2]
       [--steps N] [--lm-steps N] [--device cpu] [--output _build/precision] [--executor local]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from geocont.chapters import mlp_conditions, transformer_projections
from geocont.config import PRECISIONS
from geocont.lm import run_lm_sweep
from geocont.statistics import Estimate, final_estimate, pooled_sd
from geocont.training import run_sweep
from geocont.transformer import PROJECTIONS

MLP_CONDITIONS = ("res-relu", "res-none", "res-radial-tau", "nores-relu")
LM_VARIANTS = ("silu", "none")
#: The smallest difference of means that counts, whatever the seed spread.
ABSOLUTE_TOLERANCE = 0.03

#: MLP quantities at the end of training: label -> (metric, space, direction).
MLP_QUANTITIES: dict[str, tuple[str, str, int | None]] = {
    "weight v1": ("weight_cos", "input", 1),
    "weight u1": ("weight_cos", "output", 1),
    "gradient v1": ("grad_cos", "input", 1),
    "gradient u1": ("grad_cos", "output", 1),
    "relative update": ("rel_update", "", None),
    "σ²-align (in)": ("weight_align", "input", None),
    "train-set loss": ("train_set_loss", "", None),
    "test accuracy": ("test_acc", "", None),
}
#: Transformer quantities: each projection's v1 and u1 continuity, and the validation loss.
LM_QUANTITIES: dict[str, tuple[str, str, int | None]] = {
    **{f"{p} {v}": ("weight_cos", space, 1) for p in PROJECTIONS for v, space in (("v1", "input"), ("u1", "output"))},
    "validation loss": ("val_loss", "", None),
}


def comparison_rows(
    model: str,
    tables: dict[str, pd.DataFrame],
    quantities: dict[str, tuple[str, str, int | None]],
    groups: tuple[str, ...],
) -> list[dict]:
    """One row per group x quantity: both precisions' estimates, their difference and the verdict."""
    rows = []
    for group in groups:
        for label, (metric, space, direction) in quantities.items():
            fp32, bf16 = (final_estimate(tables[p], metric, space, direction, condition=group) for p in PRECISIONS)
            if fp32.n == 0 and bf16.n == 0:
                continue
            difference = bf16.mean - fp32.mean
            spread = pooled_sd(fp32, bf16)
            tolerance = max(ABSOLUTE_TOLERANCE, spread)
            rows.append(
                dict(
                    model=model,
                    group=group,
                    quantity=label,
                    n=min(fp32.n, bf16.n),
                    fp32_mean=fp32.mean,
                    fp32_sd=fp32.std,
                    bf16_mean=bf16.mean,
                    bf16_sd=bf16.std,
                    difference=difference,
                    pooled_sd=spread,
                    tolerance=tolerance,
                    verdict="within" if abs(difference) <= tolerance else "OUTSIDE",
                )
            )
    return rows


def _estimate_text(mean: float, sd: float, n: int) -> str:
    return str(Estimate(mean, sd, n))


def markdown(frame: pd.DataFrame) -> str:
    lines = [
        "| model | group | quantity | fp32 | bf16-autocast | difference | max(0.03, pooled sd) | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in frame.itertuples():
        lines.append(
            f"| {row.model} | {row.group} | {row.quantity} | {_estimate_text(row.fp32_mean, row.fp32_sd, row.n)} "
            f"| {_estimate_text(row.bf16_mean, row.bf16_sd, row.n)} | {row.difference:+.3f} "
            f"| {row.tolerance:.3f} | {row.verdict} |"
        )
    lines.append("")
    for model, group in frame.groupby("model", sort=False):
        outside = group[group["verdict"] != "within"]
        lines.append(
            f"- {model}: "
            + (
                "every quantity within; bf16-autocast may be its default"
                if outside.empty
                else f"{len(outside)} of {len(group)} outside ("
                + ", ".join(f"{r.group} {r.quantity}" for r in outside.itertuples())
                + "); fp32 stays its default"
            )
        )
    return "\n".join(lines) + "\n"


def compare(
    scale: str,
    seeds: int,
    lm_seeds: int,
    steps: int | None = None,
    lm_steps: int | None = None,
    executor: str | None = None,
    progress: bool = True,
    device: str | None = None,
) -> pd.DataFrame:
    """The comparison table (one row per model x group x quantity), training what is not cached."""
    mlp_overrides = dict(steps=steps) if steps else {}  # a shorter run shortens the early horizon with it
    mlp = mlp_conditions.CHAPTER.configure(scale, conditions=MLP_CONDITIONS, seeds=seeds, **mlp_overrides)
    lm_overrides = dict(steps=lm_steps, early_step=max(1, lm_steps // 10)) if lm_steps else {}
    lm = transformer_projections.CHAPTER.configure(
        scale, seeds=lm_seeds, variants=list(LM_VARIANTS), other_seeds=0, depth_seeds=0, **lm_overrides
    )
    mlp_tables, lm_tables = {}, {}
    for precision in PRECISIONS:
        on_device = dict(device=device) if device else {}
        configs = [c.replace(precision=precision, **on_device) for c in mlp.condition_configs()]
        mlp_tables[precision] = run_sweep(configs, progress=progress, executor=executor)
        lm_configs = {
            label: [c.replace(precision=precision, **on_device) for c in group]
            for label, group in lm.configs().items()
            if label in LM_VARIANTS
        }
        lm_tables[precision] = run_lm_sweep(lm_configs, progress=progress, executor=executor)
    rows = comparison_rows(
        f"MLP {mlp.base.depth}x{mlp.base.width}, {mlp.base.steps:,} steps", mlp_tables, MLP_QUANTITIES, MLP_CONDITIONS
    )
    rows += comparison_rows(
        f"transformer {lm.base.shape.n_layers} layers, {lm.base.steps:,} steps", lm_tables, LM_QUANTITIES, LM_VARIANTS
    )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--seeds", type=int, default=3, help="seeds of each MLP condition")
    parser.add_argument("--lm-seeds", type=int, default=2, help="seeds of each transformer variant")
    parser.add_argument("--steps", type=int, help="the MLP horizon (default: the scale's)")
    parser.add_argument("--lm-steps", type=int, help="the transformer horizon (default: the scale's)")
    parser.add_argument("--executor", help="as GEOCONT_EXECUTOR (default: it, else every local core)")
    parser.add_argument("--device", help="cpu | cuda | auto (default: the scale's)")
    parser.add_argument("--output", type=Path, default=Path("_build/precision"))
    args = parser.parse_args()
    frame = compare(args.scale, args.seeds, args.lm_seeds, args.steps, args.lm_steps, args.executor, device=args.device)
    text = markdown(frame)
    args.output.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.output / f"precision_comparison_{args.scale}.csv", index=False)
    (args.output / f"precision_comparison_{args.scale}.md").write_text(text)
    print(text)
    print(f"written to {args.output}/precision_comparison_{args.scale}.csv and .md")


if __name__ == "__main__":
    main()

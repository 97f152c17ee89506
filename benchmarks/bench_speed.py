"""Training steps against the limit: ms per step, GFLOP/s, and the fraction of this process's matmul peak.

For each model the book trains (the MLP step, the 4- and 8-layer transformer step at a scale),
each precision (``fp32``, ``bf16-autocast``) and each optimizer implementation (torch's default
loop, fused), times a training step (forward, backward, optimizer update; no recording) as the
runs take it (:func:`geocont.training.make_optimizer`, :func:`geocont.training.precision_context`,
subnormals flushed), and measures the matmul peak of this process in fp32 and bf16 before and
after, so that a busy machine lowers step and peak alike. FLOPs count the matrix products
(:mod:`geocont.flops`).
Usage: python benchmarks/bench_speed.py [--threads 1] [--scale cpu] [--device cpu] [--seconds 4] [--warmup 5] [--calls 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable

import torch

from geocont.chapters import mlp_conditions, transformer_projections
from geocont.config import PRECISIONS
from geocont.flops import mlp_step_flops, transformer_step_flops
from geocont.mlp import ResidualMLP
from geocont.training import make_optimizer, precision_context, resolve_device
from geocont.transformer import build_llama

#: Input features and classes of the MLP's images (28x28 digits, 10 classes).
MLP_FEATURES, MLP_CLASSES = 784, 10


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


#: Untimed calls before timing, and the fewest timed calls (``--warmup``, ``--calls``).
WARMUP, CALLS = 5, 5


def timed(step: Callable[[], None], device: torch.device, seconds: float) -> float:
    """Mean seconds per call of ``step``, over at least ``seconds`` and :data:`CALLS` calls, after
    :data:`WARMUP` untimed ones."""
    for _ in range(WARMUP):
        step()
    synchronize(device)
    calls, start = 0, time.perf_counter()
    while calls < CALLS or time.perf_counter() - start < seconds:
        step()
        calls += 1
    synchronize(device)
    return (time.perf_counter() - start) / calls


def matmul_peak(dtype: torch.dtype, device: torch.device, seconds: float, n: int = 2048) -> float:
    """GFLOP/s of an n x n matmul in ``dtype``."""
    a, b = (torch.randn(n, n, device=device).to(dtype) for _ in range(2))
    return 2 * n**3 / timed(lambda: a @ b, device, seconds) / 1e9


def mlp_step(config, device: torch.device, precision: str, fused: bool) -> Callable[[], None]:
    torch.manual_seed(0)
    model = ResidualMLP(
        config.condition,
        in_features=MLP_FEATURES,
        width=config.width,
        depth=config.depth,
        n_classes=MLP_CLASSES,
        init_scale=config.init_scale,
    ).to(device)
    optimizer = make_optimizer(model.parameters(), config.optimizer, fused=fused)
    x = torch.rand(config.batch_size, MLP_FEATURES, device=device)
    y = torch.randint(0, MLP_CLASSES, (config.batch_size,), device=device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with precision_context(precision, device):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()

    return step


def lm_step(config, device: torch.device, precision: str, fused: bool) -> Callable[[], None]:
    model = build_llama(config.shape, seed=0).to(device)
    optimizer = make_optimizer(model.parameters(), config.optimizer, fused=fused)
    batch = torch.randint(0, config.shape.vocab_size, (config.batch_size, config.shape.max_seq_len), device=device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with precision_context(precision, device):
            loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()

    return step


def main() -> None:
    global WARMUP, CALLS
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--scale", default="cpu", help="the scale whose model shapes are timed")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--seconds", type=float, default=4.0, help="timing per measurement")
    parser.add_argument("--deep-layers", type=int, default=8, help="layers of the deeper transformer")
    parser.add_argument("--warmup", type=int, default=WARMUP, help="untimed calls first")
    parser.add_argument("--calls", type=int, default=CALLS, help="the fewest timed calls")
    args = parser.parse_args()
    WARMUP, CALLS = args.warmup, args.calls
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    torch.set_flush_denormal(True)
    mlp = mlp_conditions.CHAPTER.configure(args.scale).base
    lm = transformer_projections.CHAPTER.configure(args.scale).base
    deep = lm.replace(shape=dataclasses.replace(lm.shape, n_layers=args.deep_layers))
    models = {
        f"MLP {mlp.depth}x{mlp.width} ({mlp.condition}), batch {mlp.batch_size}": (
            mlp_step_flops(mlp.depth, mlp.width, mlp.batch_size, MLP_FEATURES, MLP_CLASSES),
            lambda p, f: mlp_step(mlp, device, p, f),
        ),
        **{
            f"transformer {c.shape.n_layers} layers d={c.shape.d_model}, batch {c.batch_size}x{c.shape.max_seq_len}": (
                transformer_step_flops(c.shape, c.batch_size),
                lambda p, f, c=c: lm_step(c, device, p, f),
            )
            for c in (lm, deep)
        },
    }
    peaks = {dtype: [matmul_peak(dtype, device, args.seconds)] for dtype in (torch.float32, torch.bfloat16)}
    rows = []
    for name, (flops, make_step) in models.items():
        for precision in PRECISIONS:
            for fused in (False, True):
                seconds = timed(make_step(precision, fused), device, args.seconds)
                rows.append((name, flops, precision, "fused" if fused else "default", seconds))
    for dtype in peaks:
        peaks[dtype].append(matmul_peak(dtype, device, args.seconds))
    fp32, bf16 = (sum(peaks[d]) / 2 for d in (torch.float32, torch.bfloat16))
    print(
        f"{device.type}, {torch.get_num_threads()} torch thread(s), torch {torch.__version__}; 2048^2 matmul peak "
        f"(before, after): fp32 {peaks[torch.float32][0]:.3g}, {peaks[torch.float32][1]:.3g} GFLOP/s; "
        f"bf16 {peaks[torch.bfloat16][0]:.3g}, {peaks[torch.bfloat16][1]:.3g} GFLOP/s"
    )
    print()
    print("| model | GFLOP/step | precision | optimizer | ms/step | GFLOP/s | of fp32 peak | of bf16 peak |")
    print("|---|---|---|---|---|---|---|---|")
    for name, flops, precision, optimizer, seconds in rows:
        rate = flops / seconds / 1e9
        print(
            f"| {name} | {flops / 1e9:.2f} | {precision} | {optimizer} | {1e3 * seconds:.1f} | {rate:.0f} | "
            f"{rate / fp32:.0%} | {rate / bf16:.0%} |"
        )


if __name__ == "__main__":
    main()

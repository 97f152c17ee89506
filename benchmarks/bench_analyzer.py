"""The streaming analyzer: wall time and peak memory, and its accuracy against exact SVD.

1. SmolLM2-135M (GGUF Q4_1, 210 matrices), whole analysis, no cache.
2. Two layers with Llama-3.1-8B shapes (4096x4096, 1024x4096, 14336x4096; random spiked
   bf16 weights written as a safetensors shard by this script in a temporary directory):
   time per layer and peak memory, extrapolated to all 32 layers of Llama-3.1-8B and all
   80 layers of Llama-3.1-70B (time in proportion to parameters per layer; memory: the
   process baseline plus the per-matrix working set scaled by the largest matrix).
3. The same tensors through exact SVD: the speed ratio and the largest |cos| error of the
   iterative v1 / u1.

Each step runs in a child process; its peak resident memory is the kernel's high-water
mark VmHWM (reset at exec, unlike ru_maxrss which a child inherits from its parent). Usage: python benchmarks/bench_analyzer.py [--skip-exact] [--skip-smollm]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def memory_mib(field: str) -> float:
    """VmRSS (now) or VmHWM (peak) of this process in MiB; ru_maxrss where /proc is missing."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(task: str, path: str) -> None:
    """Run one measurement; print one JSON line with seconds and peak RSS."""
    import torch

    from geocont import analyzer, metrics, synthetic

    baseline_rss = memory_mib("VmRSS")  # MiB after imports
    start = time.perf_counter()
    result: dict = {}
    if task == "write":
        result["path"] = str(synthetic.write_spiked_checkpoint(path, synthetic.LLAMA_31_8B_LAYER, n_layers=2))
    elif task == "smollm2":
        table = analyzer.analyze("smollm2-135m", use_cache=False, progress=False)
        result["matrices"] = len(table)
        result["methods"] = table["method"].value_counts().to_dict()
    elif task == "layers":
        table = analyzer.analyze(path, use_cache=False, progress=False)
        result["matrices"] = len(table)
        result["methods"] = table["method"].value_counts().to_dict()
        result["aligned"] = int(table["align_input"].notna().sum())
    elif task == "exact":
        from geocont.checkpoints import open_source
        from geocont.layouts import detect_layout

        source = open_source(path)
        errors, t_iterative, t_exact = [], 0.0, 0.0
        for projection, refs in detect_layout(source.names()).matrices(source).items():
            W = refs[0].load(source)
            t0 = time.perf_counter()
            iterative = metrics.top_singular_triplets(W, 1, method=analyzer.triplet_method("auto", refs[0].shape))
            t1 = time.perf_counter()
            exact = metrics.top_singular_triplets(W, 1, method="exact")
            t2 = time.perf_counter()
            t_iterative += t1 - t0
            t_exact += t2 - t1
            errors.append(
                dict(
                    projection=projection,
                    method=iterative.method,
                    iterative_s=t1 - t0,
                    exact_s=t2 - t1,
                    v1_error=abs(1 - float(metrics.abs_cos(iterative.v[:, 0], exact.v[:, 0]))),
                    u1_error=abs(1 - float(metrics.abs_cos(iterative.u[:, 0], exact.u[:, 0]))),
                )
            )
        result.update(per_matrix=errors, iterative_s=t_iterative, exact_s=t_exact)
    result["seconds"] = time.perf_counter() - start
    result["peak_rss_mib"] = memory_mib("VmHWM")
    result["baseline_rss_mib"] = baseline_rss
    result["threads"] = torch.get_num_threads()
    print(json.dumps(result))


def run_child(task: str, path: str = "") -> dict:
    output = subprocess.run(
        [sys.executable, __file__, "--child", task, path], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--skip-exact", action="store_true", help="skip the exact-SVD comparison (minutes)")
    parser.add_argument("--skip-smollm", action="store_true", help="skip the SmolLM2-135M analysis")
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    from geocont.book.provenance import hardware
    from geocont.synthetic import LARGE_MODELS, LLAMA_31_8B_LAYER, layer_parameters

    print(f"hardware: {hardware()} (timings disturbed by other work on this machine are as measured)")
    if not args.skip_smollm:
        smol = run_child("smollm2")
        print(
            f"\nSmolLM2-135M, whole analysis ({smol['matrices']} matrices, {smol['methods']}): "
            f"{smol['seconds']:.1f} s wall, peak RSS {smol['peak_rss_mib']:.0f} MiB "
            f"(after imports: {smol['baseline_rss_mib']:.0f} MiB)"
        )
    with tempfile.TemporaryDirectory(prefix="geocont-bench-") as directory:
        n_layers = 2
        start = time.perf_counter()
        path = Path(run_child("write", directory)["path"])
        print(
            f"\nwrote {n_layers} Llama-3.1-8B-shaped layers ({path.stat().st_size / 2**20:.0f} MiB bf16) "
            f"in {time.perf_counter() - start:.0f} s"
        )
        layers = run_child("layers", str(path))
        per_layer = layers["seconds"] / n_layers
        print(
            f"analysis: {layers['seconds']:.1f} s for {n_layers} layers = {per_layer:.1f} s per layer "
            f"({layers['methods']}; sigma^2-alignment computed for {layers['aligned']} of {layers['matrices']} "
            f"matrices, skipped by alignment='auto' for matrices with a side > 2048); peak RSS {layers['peak_rss_mib']:.0f} MiB "
            f"(after imports: {layers['baseline_rss_mib']:.0f} MiB)"
        )
        base = layers["baseline_rss_mib"]
        largest_8b = max(o * i for o, i in LLAMA_31_8B_LAYER.values())
        for name, (shapes, count) in LARGE_MODELS.items():
            ratio = layer_parameters(shapes) / layer_parameters(LLAMA_31_8B_LAYER)
            memory = base + (layers["peak_rss_mib"] - base) * max(o * i for o, i in shapes.values()) / largest_8b
            minutes = per_layer * ratio * count / 60
            print(
                f"extrapolated {name}: {count} layers x {per_layer * ratio:.1f} s = {minutes:.1f} min, "
                f"peak RSS ~{memory / 1024:.2f} GiB"
            )
        print("goal for Llama-3.1-8B on this 2-core CPU: < 5 min, < 4 GB")
        if not args.skip_exact:
            exact = run_child("exact", str(path))
            print(
                f"\nexact SVD vs the analyzer's method, one layer: exact {exact['exact_s']:.1f} s, "
                f"analyzer {exact['iterative_s']:.1f} s, speed ratio {exact['exact_s'] / exact['iterative_s']:.1f}x"
            )
            for row in exact["per_matrix"]:
                print(
                    f"  {row['projection']:9s} {row['method']:14s} {row['iterative_s']:6.2f} s vs exact "
                    f"{row['exact_s']:6.2f} s; 1-|cos| v1 {row['v1_error']:.1e}, u1 {row['u1_error']:.1e}"
                )
            worst = max(max(r["v1_error"], r["u1_error"]) for r in exact["per_matrix"])
            print(f"largest |cos| error (1 - |cos(iterative, exact)|): {worst:.1e}")


if __name__ == "__main__":
    main()

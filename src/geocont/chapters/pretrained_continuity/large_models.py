"""The large checkpoints (Llama-3.1-8B and 70B): which were found here, and what analysing them would cost,
extrapolated from two Llama-3.1-8B-shaped layers."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass

import pandas as pd

from ...analyzer import analyze
from ...synthetic import LARGE_MODELS, LLAMA_31_8B_LAYER, layer_parameters, write_spiked_checkpoint
from .analyses import Results
from .settings import PretrainedChapterSettings


@dataclass(frozen=True)
class LargeModelCost:
    """The measured analysis time of one Llama-3.1-8B-shaped layer, and per large model
    (:data:`geocont.synthetic.LARGE_MODELS`) its extrapolated cost."""

    seconds_per_layer: float
    table: pd.DataFrame


def large_model_cost(settings: PretrainedChapterSettings) -> LargeModelCost | None:
    """Time the analyzer on two Llama-3.1-8B-shaped layers (random bf16 weights with a planted
    leading direction) and extrapolate by parameters per layer; ``None`` unless ``measure_cost``."""
    if not settings.measure_cost:
        return None
    with tempfile.TemporaryDirectory(prefix="geocont-cost-") as directory:
        path = write_spiked_checkpoint(directory, LLAMA_31_8B_LAYER, n_layers=2)
        start = time.perf_counter()
        analyze(path, use_cache=False, progress=False)
        per_layer = (time.perf_counter() - start) / 2
    rows = []
    for name, (shapes, count) in LARGE_MODELS.items():
        seconds = per_layer * layer_parameters(shapes) / layer_parameters(LLAMA_31_8B_LAYER)
        largest = max(o * i for o, i in shapes.values())
        rows.append(
            dict(
                model=name,
                layers=count,
                parameters_per_layer=f"{layer_parameters(shapes) / 1e6:.0f}M",
                seconds_per_layer=round(seconds, 1),
                total_minutes=round(seconds * count / 60, 1),
                largest_matrix=f"{largest / 1e6:.0f}M values = {largest * 4 / 2**20:.0f} MiB fp32",
            )
        )
    return LargeModelCost(per_layer, pd.DataFrame(rows))


@dataclass(frozen=True)
class LargeModelFinding:
    """The large checkpoints looked for. ``case``: "none-looked-for", "missing" (``missing`` lists
    those not found here) or "all-analysed"."""

    case: str
    scale: str
    missing: tuple[str, ...] = ()


def large_model_finding(results: Results) -> LargeModelFinding:
    """:class:`LargeModelFinding` of ``results``."""
    missing = tuple(s["model"] for s in results.large_status if s["status"] != "analysed")
    if not results.settings.large_models:
        return LargeModelFinding("none-looked-for", results.settings.scale)
    return LargeModelFinding("missing" if missing else "all-analysed", results.settings.scale, missing)

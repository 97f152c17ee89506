"""What GGUF quantization does to the metric: a trained model analysed in fp32 and after a round trip
through each GGUF type, the change of v1/u1 |cos| per type, and the rule that says it keeps the metric."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
import torch

from ... import cache
from ...analyzer import ANALYZER_VERSION, analyze
from ...lm import lm_job
from .settings import ANALYSIS_KIND

if TYPE_CHECKING:
    from ...config import LMRunConfig


#: The quantization check's rule: a GGUF type "keeps the metric" when no v1/u1 |cos| moves by this much.
QUANTIZATION_LIMIT = 0.05


def quantization_effect(
    module: torch.nn.Module, qtypes: Sequence[str] = ("Q8_0", "Q4_1"), progress: bool = False
) -> pd.DataFrame:
    """The analyzer's table of ``module`` in fp32 and after a GGUF round trip through each type.

    Each quantized copy is written with :func:`geocont.checkpoints.export_gguf` to a
    temporary file and analysed from it, as a downloaded GGUF would be. Returns the
    stacked tables with a ``format`` column (``fp32`` first, then each type).
    """
    import tempfile

    from ...checkpoints import export_gguf

    tables = [analyze(module, progress=progress, use_cache=False).assign(format="fp32")]
    with tempfile.TemporaryDirectory(prefix="geocont-quant-") as directory:
        for qtype in qtypes:
            path = export_gguf(module, f"{directory}/model-{qtype}.gguf", qtype)
            tables.append(analyze(path, layout="gguf", progress=progress, use_cache=False).assign(format=qtype))
    return pd.concat(tables, ignore_index=True)


def cached_quantization_effect(config: LMRunConfig, model: torch.nn.Module, qtypes: Sequence[str]) -> pd.DataFrame:
    """:func:`quantization_effect` of ``config``'s trained ``model``, cached by the run's key and the types."""
    key = dict(
        analysis="quantization-effect",
        trained=cache.cache_key("lm", lm_job(config).key_config()),
        qtypes=list(qtypes),
        version=ANALYZER_VERSION,
    )
    return cache.cached(ANALYSIS_KIND, key, lambda: quantization_effect(model, qtypes))


def quantization_shift(effect: pd.DataFrame) -> pd.DataFrame:
    """Per quantized format and projection: largest and mean |change| of v1/u1 |cos| and the
    relative change of sigma1, against the fp32 rows of :func:`quantization_effect`."""
    keys = ["projection", "layer"]
    reference = effect[effect["format"] == "fp32"].set_index(keys)
    rows = []
    for fmt, table in effect[effect["format"] != "fp32"].groupby("format", sort=False):
        table = table.set_index(keys)
        for projection in reference.index.get_level_values(0).unique():
            ref, quant = reference.loc[projection], table.loc[projection]
            dv = (quant["v1_cos"] - ref["v1_cos"]).abs().dropna()
            du = (quant["u1_cos"] - ref["u1_cos"]).abs().dropna()
            ds = ((quant["sigma1"] - ref["sigma1"]) / ref["sigma1"]).abs()
            rows.append(
                dict(
                    format=fmt,
                    projection=projection,
                    stored_as=", ".join(sorted(set(quant["dtype"]))),
                    v1_shift_max=dv.max(),
                    v1_shift_mean=dv.mean(),
                    u1_shift_max=du.max(),
                    u1_shift_mean=du.mean(),
                    sigma1_rel_change_max=ds.max(),
                )
            )
    return pd.DataFrame(rows)


def quantization_shifts(effects: pd.DataFrame) -> pd.DataFrame:
    """:func:`quantization_shift` of each seed of ``effects`` (column ``seed``)."""
    return pd.concat([quantization_shift(effects[effects.seed == s]).assign(seed=s) for s in effects.seed.unique()])


@dataclass(frozen=True)
class QuantizationChange:
    """One GGUF type's effect on the metric: the largest and the mean |change| of v1/u1 |cos| over
    the quantized matrices (those stored as F16 excluded), layer pairs and seeds."""

    worst: float
    typical: float


def quantization_changes(shifts: pd.DataFrame, formats: Sequence[str]) -> dict[str, QuantizationChange]:
    """Per GGUF type of :func:`quantization_shifts`: its :class:`QuantizationChange`."""
    quantized = shifts[shifts.stored_as != "F16"]
    return {
        fmt: QuantizationChange(
            worst=quantized.loc[quantized.format == fmt, ["v1_shift_max", "u1_shift_max"]].max().max(),
            typical=quantized.loc[quantized.format == fmt, ["v1_shift_mean", "u1_shift_mean"]].mean().mean(),
        )
        for fmt in formats
    }


def quantization_verdict(worst: float, limit: float = QUANTIZATION_LIMIT) -> str:
    """ "reproduced" when the largest |change| of v1/u1 |cos| stays below ``limit``, "not reproduced"
    when it reaches it, "not tested" when nothing was quantized (NaN)."""
    if math.isnan(worst):
        return "not tested"
    return "reproduced" if worst < limit else "not reproduced"

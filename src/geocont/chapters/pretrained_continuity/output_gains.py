"""What Gemma-3's post-norms do to output continuity: u1 continuity of each projection's weights, of what it
writes into the stream (its output gain times the weights) and of the gains alone."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import torch

from ... import cache
from ...analyzer import ANALYZER_VERSION, plan, triplet_method
from ...layouts import LAYOUTS
from ...metrics import abs_cos, random_abs_cos, top_singular_triplets
from ...statistics import Estimate, estimate
from .settings import ANALYSIS_KIND


def output_gain_continuity(
    source: Any, layout: str | None = None, max_layers: int | None = None, progress: bool = False
) -> pd.DataFrame:
    """For layouts with post-norms (Gemma-3): u1 continuity of ``W`` and of ``diag(g_l) W``.

    ``g_l`` is the gain of the RMSNorm that layer l applies to the projection's output
    before the residual add, so ``diag(g_l) W`` is (up to the per-token RMS scalar) what
    the projection actually writes into the stream. One row per (projection, layer) with
    ``u1_cos`` (W) and ``u1_cos_gained`` (diag(g) W), pair columns as in :func:`analyze`,
    Controls, since similar gains alone pull ``diag(g) W`` towards the same large-gain
    coordinates: ``u1_cos_gain_only``, the same |cos| for ``diag(g_l) G_l`` with ``G_l`` an
    independent Gaussian matrix (what the gains would give with no learned structure in W);
    ``gain_cos``, |cos| of g_l and g_l+1; ``gain_top1_share``, the share of ||g||^2 held by
    the largest coordinate.
    """
    src, chosen, matrices = plan(source, layout, max_layers=max_layers)
    if not chosen.output_gains:
        raise ValueError(
            f"layout {chosen.name!r} has no output norms; layouts with them: "
            + ", ".join(name for name, known in LAYOUTS.items() if known.output_gains)
        )
    rows = []
    for projection, template in chosen.output_gains:
        previous = None
        for ref in matrices.get(projection, []):
            W = ref.load(src)
            gain = src.read(template.format(layer=ref.layer)) + chosen.gain_offset
            plain = top_singular_triplets(W, 1, method=triplet_method("auto", ref.shape))
            gained = top_singular_triplets(gain[:, None] * W, 1, method=triplet_method("auto", ref.shape))
            noise = torch.randn(ref.shape, generator=torch.Generator().manual_seed(ref.layer))
            gain_only = top_singular_triplets(gain[:, None] * noise, 1, method=triplet_method("auto", ref.shape))
            row = dict(
                projection=projection,
                layer=ref.layer,
                u1_cos=math.nan,
                u1_cos_gained=math.nan,
                u1_cos_gain_only=math.nan,
                gain_cos=math.nan,
                u1_baseline=random_abs_cos(ref.shape[0]),
                gain_top1_share=float(gain.square().max() / gain.square().sum()),
            )
            if previous is not None:
                before, before_plain, before_gained, before_gain, before_gain_only = previous
                before["gain_cos"] = float(abs_cos(before_gain, gain))
                before["u1_cos_gain_only"] = float(abs_cos(before_gain_only.u[:, 0], gain_only.u[:, 0]))
                before["u1_cos"] = float(abs_cos(before_plain.u[:, 0], plain.u[:, 0]))
                before["u1_cos_gained"] = float(abs_cos(before_gained.u[:, 0], gained.u[:, 0]))
            rows.append(row)
            previous = (row, plain, gained, gain, gain_only)
    return pd.DataFrame(rows)


def cached_output_gain_continuity(source: Any, max_layers: int | None = None) -> pd.DataFrame:
    """:func:`output_gain_continuity` of a checkpoint, cached by its content (as :func:`~geocont.analyzer.analyze`)."""
    src, chosen, _ = plan(source, max_layers=max_layers)
    identity = src.identity()
    if identity is None:
        return output_gain_continuity(source, max_layers=max_layers)
    key = dict(
        analysis="output-gain-continuity",
        source=identity,
        layout=chosen.name,
        max_layers=max_layers,
        version=ANALYZER_VERSION,
    )
    return cache.cached(ANALYSIS_KIND, key, lambda: output_gain_continuity(source, max_layers=max_layers))


def gain_estimates(gains: dict[str, pd.DataFrame]) -> dict[tuple[str, str], tuple[Estimate, Estimate]]:
    """Per (post-norm model, projection): u1 continuity of diag(g) W and of the gain-only control."""
    out = {}
    for model, table in gains.items():
        for projection, rows in table.groupby("projection", sort=False):
            pairs = rows.dropna(subset=["u1_cos"])
            out[(model, projection)] = (estimate(pairs["u1_cos_gained"]), estimate(pairs["u1_cos_gain_only"]))
    return out

"""What the chapter shows of the residual channel: each projection's continuity against the top coordinate's share
of its residual-space vector, seed by seed, and the table of the channel measures (:mod:`.residual_channel`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from ...book.figures import show_figure
from ...channel import WRITERS, random_top_share
from ...metrics import random_abs_cos
from ..common import short_projection
from .page_text import PROSE
from .residual_channel import channel_table, per_seed, reference_channel
from .runs import Results, projection_finals


def channel_figure(results: Results, channel: pd.DataFrame | None = None) -> pd.DataFrame:
    """One panel per projection: each reference seed's continuity in the residual space (v1 of Q, K, V, Gate and
    Up; u1 of O and Down) against its layer-mean top-coordinate share, with both random levels dashed; returns the
    channel table (:func:`.residual_channel.channel_table`)."""
    channel = reference_channel(results) if channel is None else channel
    finals = projection_finals(results.table)
    finals = finals[finals["condition"] == results.reference]
    projections = list(dict.fromkeys(channel["projection"]))
    d = results.settings.base.shape.d_model
    fig, axes = plt.subplots(1, len(projections), figsize=(2.2 * len(projections), 2.6), sharex=True, sharey=True)
    for ax, projection in zip(axes, projections):
        space = "output" if projection in WRITERS else "input"
        share = per_seed(channel, projection, "channel_share")
        mine = finals[(finals["group"] == projection) & (finals["space"] == space)].set_index("seed")["value"]
        ax.scatter(share.to_numpy(), mine.reindex(share.index).to_numpy(), color="C3" if space == "output" else "C0")
        ax.axvline(random_top_share(d), color="grey", ls="--", lw=0.8)
        ax.axhline(random_abs_cos(results.dims[projection][space]), color="grey", ls=":", lw=0.8)
        ax.set_title(f"{short_projection(projection)} ({'u1' if space == 'output' else 'v1'})", fontsize="small")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("top-coordinate share", fontsize="small")
    axes[0].set_ylabel("continuity (|cos|)")
    fig.tight_layout()
    show_figure(fig, "lm-channel", PROSE.render("channel-caption", reference=results.reference, d=d))
    return channel_table(results, channel)

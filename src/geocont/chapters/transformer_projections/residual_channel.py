"""What carries O's and Down's output continuity in the chapter's own models: the residual channel of each
reference seed's trained weights (:mod:`geocont.channel`), and the claims that read it (:mod:`.channel_rules`).

The stored runs keep the reference variant's final weights only, so the channel is read at the end of training, one
snapshot per seed; runs that record it at every snapshot (``record_channel``, :mod:`.frame_runs`) give its course.
"""

from __future__ import annotations

import pandas as pd

from ...book.chapter import ClaimsBuilder
from ...channel import WRITERS, model_channel, random_top_share
from ...lm import trained_lm
from ...statistics import estimate
from .channel_rules import carried_by_one_coordinate
from .runs import Results, projection_finals
from .settings import CHAPTER
from .up_o_gap import PROSE

#: The claims, one per projection that writes the residual stream.
CHANNEL_KEYS = {"o_proj": "o-channel", "down_proj": "down-channel"}


def reference_channel(results: Results) -> pd.DataFrame:
    """Per reference seed, layer and projection, every channel metric of its trained weights (columns ``seed``,
    ``projection``, ``layer``, ``metric``, ``value``)."""
    frames = []
    for config in results.settings.configs()[results.reference]:
        rows = model_channel(trained_lm(config, progress=False))
        frames.append(pd.DataFrame(rows, columns=["projection", "layer", "metric", "value"]).assign(seed=config.seed))
    return pd.concat(frames, ignore_index=True)


def per_seed(channel: pd.DataFrame, projection: str, metric: str) -> pd.Series:
    """Per seed, the layer mean of one channel metric of one projection."""
    mine = channel[(channel["projection"] == projection) & (channel["metric"] == metric)]
    return mine.groupby("seed")["value"].mean()


def same_coordinate(channel: pd.DataFrame, projection: str) -> pd.Series:
    """Per seed, the share of layers whose top coordinate is that seed's most common one for this projection."""
    mine = channel[(channel["projection"] == projection) & (channel["metric"] == "channel_index")]
    return mine.groupby("seed")["value"].agg(lambda index: float((index == index.mode().iloc[0]).mean()))


def channel_claims(results: Results, channel: pd.DataFrame) -> pd.DataFrame:
    """O's and Down's u1 on one coordinate: each seed's layer-mean top-coordinate share against its random level
    (:func:`.channel_rules.carried_by_one_coordinate`), at the end of training."""
    d = results.settings.base.shape.d_model
    out = ClaimsBuilder(CHAPTER.name, prose=PROSE)
    for projection in WRITERS:
        share = estimate(per_seed(channel, projection, "channel_share"))
        out.add(
            key=CHANNEL_KEYS[projection],
            template="channel",
            ours=share,
            baseline=random_top_share(d),
            verdict=carried_by_one_coordinate(share, d),
            fill={
                "projection": projection,
                "d": d,
                "same": estimate(same_coordinate(channel, projection)),
                "gain": estimate(per_seed(channel, projection, "channel_gain")),
                "ratio": estimate(per_seed(channel, projection, "channel_pr")),
            },
        )
    return out.table()


def channel_table(results: Results, channel: pd.DataFrame) -> pd.DataFrame:
    """Per projection, mean ± sd over seeds of the top-coordinate share (beside its random level), the share of
    layers on the seed's most common coordinate, the participation ratio, the gain there, and the projection's own
    continuity in the residual space."""
    finals = projection_finals(results.table)
    finals = finals[finals["condition"] == results.reference]
    d = results.settings.base.shape.d_model
    rows = []
    for projection in dict.fromkeys(channel["projection"]):
        space = "output" if projection in WRITERS else "input"
        continuity = finals[(finals["group"] == projection) & (finals["space"] == space)]["value"]
        rows.append(
            {
                "projection": projection,
                "vector": "u1" if space == "output" else "v1",
                "top share": str(estimate(per_seed(channel, projection, "channel_share"))),
                "random share": f"{random_top_share(d):.3f}",
                "layers on one coordinate": str(estimate(same_coordinate(channel, projection))),
                "participation ratio": str(estimate(per_seed(channel, projection, "channel_pr"))),
                "gain there / median": str(estimate(per_seed(channel, projection, "channel_gain"))),
                "continuity": str(estimate(continuity)),
            }
        )
    return pd.DataFrame(rows).set_index("projection")

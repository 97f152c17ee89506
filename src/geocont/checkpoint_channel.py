"""The residual channel (:mod:`geocont.channel`) of any checkpoint the analyzer reads: GGUF, safetensors, a Hugging
Face id or an offline model's name, with the pre-norm gains where the checkpoint's naming has them."""

from __future__ import annotations

import pandas as pd

from .channel import READERS, channel_rows

#: The pre-norm gains' tensor names per checkpoint naming (``{layer}`` filled): the attention norm, the MLP norm and
#: the final norm. A naming not listed (BERT's post-norms) gives no gains.
NORM_NAMES = {
    "gguf": ("blk.{layer}.attn_norm.weight", "blk.{layer}.ffn_norm.weight", "output_norm.weight"),
    "llama": (
        "model.layers.{layer}.input_layernorm.weight",
        "model.layers.{layer}.post_attention_layernorm.weight",
        "model.norm.weight",
    ),
    "gemma3": (
        "model.layers.{layer}.input_layernorm.weight",
        "model.layers.{layer}.pre_feedforward_layernorm.weight",
        "model.norm.weight",
    ),
}


def checkpoint_channel(source, layout: str | None = None) -> pd.DataFrame:
    """:func:`channel_rows` of a checkpoint (a path, an offline model's name, a Hugging Face id: as
    :func:`geocont.analyzer.analyze` takes), one row per (projection, layer, metric), columns ``projection``, ``layer``,
    ``metric``, ``value``; the pre-norm gains where its naming has them (:data:`NORM_NAMES`), else NaN."""
    from .analyzer import _open_with_layout

    src, chosen = _open_with_layout(source, layout)
    matrices = chosen.matrices(src)
    n_layers = min(len(refs) for refs in matrices.values())
    names = src.names()
    family = "gguf" if chosen.name.endswith("gguf") else chosen.name
    gains: dict[str, object] = {}
    if family in NORM_NAMES:
        attention, mlp, final = NORM_NAMES[family]
        offset = chosen.gain_offset
        wanted = {"attention": attention, "mlp": mlp}
        for key, template in wanted.items():
            tensors = [template.format(layer=layer) for layer in range(n_layers)]
            if all(name in names for name in tensors):
                gains[key] = [src.read(name).float() + offset for name in tensors]
        if final in names:
            gains["final"] = src.read(final).float() + offset
    rows = channel_rows(
        {projection: [ref.load(src) for ref in refs[:n_layers]] for projection, refs in matrices.items()},
        attention_gains=gains.get("attention"),
        mlp_gains=gains.get("mlp"),
        final_gain=gains.get("final"),
    )
    table = pd.DataFrame(rows, columns=["projection", "layer", "metric", "value"])
    reader = next(p for p in READERS if p in matrices)
    table.attrs["d_model"] = int(matrices[reader][0].shape[1])  # the residual stream: a reader's input side
    return table


def channel_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per projection: the mean, min and max over layers of each channel metric, and ``same_index``: the share of
    layers whose top coordinate is the projection's most common one (1.0: one coordinate in every layer)."""
    table = rows.pivot_table(
        index=["projection", "layer"], columns="metric", values="value", dropna=False
    ).reset_index()
    out = []
    for projection, mine in table.groupby("projection", sort=False):
        index = mine["channel_index"].astype(int)
        row = {"projection": projection, "layers": len(mine), "top_coordinate": int(index.mode().iloc[0])}
        row["same_index"] = float((index == row["top_coordinate"]).mean())
        for metric in ("channel_share", "channel_pr", "channel_gain", "ones_cos"):
            if metric in mine and mine[metric].notna().any():
                row[f"{metric}_mean"] = float(mine[metric].mean())
                row[f"{metric}_min"] = float(mine[metric].min())
                row[f"{metric}_max"] = float(mine[metric].max())
        out.append(row)
    return pd.DataFrame(out).set_index("projection")

"""Print the residual channel (geocont.channel) of the stored `cpu` transformer runs that kept their weights, and of
the offline pretrained models: per projection, the top coordinate's share of the residual-space singular vector
(against its random level), whether it is the same coordinate in every layer, the participation ratio and the
RMSNorm gain there.

    python scripts/channel_report.py                 # every stored run with weights, and the three pretrained models
    python scripts/channel_report.py --no-pretrained
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import pandas as pd
import torch
from safetensors.torch import load_file

from geocont.channel import model_channel, random_top_share
from geocont.checkpoint_channel import channel_summary, checkpoint_channel
from geocont.config import TransformerShape
from geocont.pretrained import OFFLINE_MODELS
from geocont.store import store_root
from geocont.transformer import build_llama

COLUMNS = ["layers", "top_coordinate", "same_index", "channel_share_mean", "channel_pr_mean", "channel_gain_mean"]


def stored_runs(root: Path):
    """(label, model) of every stored language-model run that kept its weights."""
    for entry in sorted(root.glob("lm/*/entry.json")):
        weights = entry.with_name("model.safetensors")
        if not weights.exists():
            continue
        found = json.loads(entry.read_text())
        config = dict(found["config"])
        shape = TransformerShape(**config.pop("shape"))
        model = build_llama(shape, seed=int(config.get("seed", 0)))
        model.load_state_dict(load_file(str(weights)))
        yield found.get("label", entry.parent.name), model


def show(label: str, rows: pd.DataFrame, d: int) -> None:
    table = channel_summary(rows).reindex(columns=COLUMNS)
    print(f"\n{label} (random top share at d = {d}: {random_top_share(d):.3f})")
    with pd.option_context("display.width", 160, "display.max_columns", 12):
        print(table.round(3).to_string())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-pretrained", action="store_true", help="only the stored runs")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    for label, model in stored_runs(store_root("cpu")):
        rows = pd.DataFrame(model_channel(model), columns=["projection", "layer", "metric", "value"])
        show(label, rows, model.config.hidden_size)
    if not args.no_pretrained:
        for name in OFFLINE_MODELS:
            rows = checkpoint_channel(name)
            show(name, rows, rows.attrs["d_model"])
    return 0


if __name__ == "__main__":
    sys.exit(main())

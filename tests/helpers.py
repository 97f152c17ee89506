"""Synthetic run tables shared by the tests (imported as ``from helpers import ...``)."""

import functools

import pandas as pd

from geocont.tables import make_row, rows_to_frame, split_claim_key


def claim_names(claims: pd.DataFrame) -> list[str]:
    """The claims' names, in order: their keys without the dataset (``linear-weight-v1@mnist-10k`` -> ``linear-weight-v1``)."""
    return [split_claim_key(key)[0] for key in claims["key"]]


def by_name(claims: pd.DataFrame) -> pd.DataFrame:
    """The claims' primary rows indexed by name (each name once)."""
    primary = claims[claims["primary"]] if "primary" in claims else claims
    return primary.set_index(pd.Index(claim_names(primary), name="name"))


def synthetic(values: dict[tuple[str, int], list[float]], steps=(0, 10)) -> pd.DataFrame:
    """weight_cos rows: values[(condition, seed)] = per-direction final |cos| (2 layer pairs)."""
    tables = []
    for (condition, seed), per_direction in values.items():
        rows = []
        for step in steps:
            for layer in (0, 1):
                for direction, value in enumerate(per_direction, start=1):
                    v = value if step == steps[-1] else 0.05
                    rows.append(make_row(step, "hidden", layer, "weight_cos", "input", direction, v + 0.01 * layer))
        tables.append(rows_to_frame(rows).assign(condition=condition, optimizer="adam", init_scale=1.0, seed=seed))
    return pd.concat(tables, ignore_index=True)


def timeline_run(
    condition: str,
    seed: int,
    init_scale: float,
    updates: list[float],
    continuity: list[float],
    steps=(0, 1, 3, 10, 30, 100),
) -> pd.DataFrame:
    """A run table with layer-mean relative update and weight v1 continuity per step (2 layers)."""
    rows = []
    for step, update, cos in zip(steps, updates, continuity):
        for layer in (0, 1):
            rows.append(make_row(step, "hidden", layer, "rel_update", "", 0, update))
            rows.append(make_row(step, "hidden", layer, "rel_update_spectral", "", 0, 10 * update))
            rows.append(make_row(step, "hidden", layer, "weight_cos", "input", 1, cos))
            rows.append(make_row(step, "hidden", layer, "grad_cos", "input", 1, 0.9))
            rows.append(make_row(step, "hidden", layer, "weight_cumgrad_cos", "input", 1, 0.8))
    return rows_to_frame(rows).assign(condition=condition, optimizer="adam", init_scale=init_scale, seed=seed)


@functools.lru_cache(maxsize=2)
def tiny_llama_data(n_layers: int = 2, seed: int = 0):
    """(model, held-out token ids) of a tiny random Llama, once per process: a picklable subject
    loader (``functools.partial(tiny_llama_data, ...)``) for sweep workers."""
    import torch

    from geocont.config import TransformerShape
    from geocont.transformer import build_llama

    shape = TransformerShape(
        n_layers=n_layers, d_model=32, n_heads=2, n_kv_heads=2, ffn_dim=88, vocab_size=512, max_seq_len=64
    )
    ids = torch.randint(0, shape.vocab_size, (400,), generator=torch.Generator().manual_seed(seed))
    return build_llama(shape, seed=seed).eval(), ids

"""The recorder leaves undefined singular directions out (NaN) and changes nothing else."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from torch import nn

from geocont import metrics
from geocont.config import MLPRunConfig
from geocont.recorder import ContinuityRecorder
from geocont.tables import METRICS, rows_to_frame, select
from geocont.training import train_mlp

GAP_METRICS = ["weight_gap", "grad_gap", "cumgrad_gap"]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path / "cache"))


def _tiny_run() -> pd.DataFrame:
    config = MLPRunConfig(depth=4, width=32, epochs=2, max_train=512, batch_size=64, n_snapshots=4, n_directions=4)
    return train_mlp(config, progress=False)


def test_a_trained_run_is_unchanged_by_flagging_except_for_the_gap_rows(monkeypatch):
    flagged = _tiny_run()
    monkeypatch.setattr(metrics, "direction_flags", lambda triplets, tol=0.0: [""] * triplets.s.numel())
    unflagged = _tiny_run()
    assert all(m in METRICS for m in GAP_METRICS)
    gaps = flagged[flagged["metric"].isin(GAP_METRICS)]
    assert len(gaps) and float(gaps["value"].min()) > 5 * metrics.DEGENERACY_TOL  # far from the tolerance
    rest = flagged[~flagged["metric"].isin(GAP_METRICS)].reset_index(drop=True)
    unflagged = unflagged[~unflagged["metric"].isin(GAP_METRICS)].reset_index(drop=True)
    pd.testing.assert_frame_equal(rest.astype(str), unflagged.astype(str))  # every number, bit for bit
    assert not rest["value"].isna().any()


def _with_spectrum(spectrum, seed, n=24):
    generator = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(n, len(spectrum), generator=generator, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(n, len(spectrum), generator=generator, dtype=torch.float64))
    return ((u * torch.tensor(spectrum, dtype=torch.float64)) @ v.T).float()


def _snapshots(weights, n_directions, steps=2):
    """Record ``steps`` snapshots of fixed weights with random gradients; the run table."""
    params = [nn.Parameter(W.clone()) for W in weights]
    recorder = ContinuityRecorder({"hidden": params}, schedule=range(steps), n_directions=n_directions)
    generator = torch.Generator().manual_seed(1)
    for step in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=generator)
        recorder.observe(step)
    return rows_to_frame(recorder.rows)


def test_a_zero_layer_gives_nan_for_its_pairs_and_turns():
    spread = [5.0, 3.0, 2.0, 1.0, 0.5]
    table = _snapshots(
        [_with_spectrum(spread, 0), torch.zeros(24, 24), _with_spectrum(spread, 2), _with_spectrum(spread, 3)],
        n_directions=2,
    )
    for space in ("input", "output"):
        cos = select(table, "weight_cos", space, direction=1, step=0).set_index("layer")["value"]
        assert math.isnan(cos[0]) and math.isnan(cos[1]) and not math.isnan(cos[2])
        turn = select(table, "turn", space, step=1).set_index("layer")["value"]
        assert math.isnan(turn[1]) and not math.isnan(turn[0])
        co = select(table, "co_rotation", space, step=1).set_index("layer")["value"]
        assert math.isnan(co[0]) and math.isnan(co[1])
        assert math.isnan(select(table, "weight_cumgrad_cos", space, step=0).set_index("layer")["value"][1])
    gap = select(table, "weight_gap", direction=1, step=0).set_index("layer")["value"]
    assert math.isnan(gap[1]) and gap[0] == pytest.approx(0.4, abs=1e-5)
    # the sigma^2-weighted alignment is still reported for the defined pair
    assert not math.isnan(select(table, "weight_align", "input", step=0).set_index("layer")["value"][2])


@pytest.mark.parametrize("n_directions", [1, 3])  # k = 1 takes the iterative path, k = 3 the Gram-eigh one
def test_tied_leading_pair_gives_nan_and_a_tie_between_directions_two_and_three_flags_both(n_directions):
    tied = [4.0, 4.0, 2.0, 1.0, 0.5]
    lower_tie = [4.0, 2.0, 2.0 * (1 - 1e-5), 1.0, 0.5]
    table = _snapshots(
        [_with_spectrum(tied, 0), _with_spectrum(lower_tie, 1), _with_spectrum(lower_tie, 1)],
        n_directions=n_directions,
        steps=1,
    )
    cos = select(table, "weight_cos", "input").pivot(index="layer", columns="direction", values="value")
    assert math.isnan(cos.loc[0, 1])  # layer 0's v1 is undefined
    assert cos.loc[1, 1] == pytest.approx(1.0, abs=1e-5)  # identical, separated leading pairs
    gaps = select(table, "weight_gap").pivot(index="layer", columns="direction", values="value")
    assert gaps.loc[0, 1] < 1e-5
    if n_directions == 3:
        assert math.isnan(cos.loc[1, 2]) and math.isnan(cos.loc[1, 3])
        assert gaps.loc[1, 2] == pytest.approx(0.5e-5, abs=1e-6) and gaps.loc[1, 3] == gaps.loc[1, 2]

"""The recorder's spectral-gap, subspace, motion and cross-pair metrics, on matrices with known answers."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest
import torch
from torch import nn

from geocont import metrics
from geocont.config import MLPRunConfig
from geocont.recorder import SUBSPACE_KS, ContinuityRecorder
from geocont.tables import METRICS, rows_to_frame, select
from geocont.training import train_mlp

NEW_METRICS = ["sigma2", "subspace_cos", "step_change", "cross_cos"]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path / "cache"))


def _orthonormal(n: int, k: int, seed: int) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(n, k, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    return q


def _matrix(spectrum, seed: int, n: int = 24, v: torch.Tensor | None = None) -> torch.Tensor:
    """A [n, n] matrix of this spectrum; right singular vectors ``v`` (random if None)."""
    u = _orthonormal(n, len(spectrum), seed)
    v = _orthonormal(n, len(spectrum), seed + 1000) if v is None else v
    return ((u * torch.tensor(spectrum, dtype=torch.float64)) @ v.T).float()


def _record(
    groups: dict[str, list[torch.Tensor]], n_directions: int, steps: int = 1, cross_pairs=None, between=None
) -> pd.DataFrame:
    """Snapshots at steps 0 .. steps - 1 with random gradients; ``between(step, params)`` edits weights first."""
    params = {name: [nn.Parameter(W.clone()) for W in weights] for name, weights in groups.items()}
    recorder = ContinuityRecorder(params, schedule=range(steps), n_directions=n_directions, cross_pairs=cross_pairs)
    generator = torch.Generator().manual_seed(1)
    for step in range(steps):
        if between is not None:
            with torch.no_grad():
                between(step, params)
        for group in params.values():
            for p in group:
                p.grad = torch.randn(p.shape, generator=generator)
        recorder.observe(step)
    return rows_to_frame(recorder.rows)


def test_the_new_metrics_are_catalogued():
    assert set(NEW_METRICS) <= set(METRICS)


@pytest.mark.parametrize("n_directions", [1, 2, 4, 8])
def test_sigma2_and_the_subspace_sizes_follow_n_directions(n_directions):
    spectra = [[9.0, 7.0, 5.0, 4.0, 3.0, 2.0, 1.5, 1.0, 0.5], [8.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.5, 1.0, 0.5]]
    table = _record({"hidden": [_matrix(s, seed) for seed, s in enumerate(spectra)]}, n_directions)
    sigma2 = select(table, "sigma2", direction=2).sort_values("layer")["value"].tolist()
    assert sigma2 == (pytest.approx([7.0, 6.0], rel=1e-5) if n_directions > 1 else [])
    for space in metrics.SPACES:
        ks = sorted(select(table, "subspace_cos", space)["direction"].unique().tolist())
        assert ks == [k for k in SUBSPACE_KS if k < n_directions]


def test_layers_sharing_their_top_two_subspace_give_subspace_cos_one_at_k_two_and_a_tie_gives_nan():
    n, top = 24, _orthonormal(24, 2, seed=5)
    layers = []
    for seed, spectrum in (
        (10, [9.0, 7.0, 3.0, 2.0, 2.0, 0.5]),
        (20, [8.0, 6.0, 4.0, 2.0, 1.0, 0.5]),
        (30, [8.0, 6.0, 4.0, 2.0, 1.0, 0.5]),
    ):
        private = _orthonormal(n, 4, seed)
        private, _ = torch.linalg.qr(private - top @ (top.T @ private))
        v = torch.cat([top @ _orthonormal(2, 2, seed + 1), private], dim=1)  # v1, v2 rotated inside span(top)
        layers.append(_matrix(spectrum, seed, n, v))
    table = _record({"hidden": layers}, n_directions=8)
    cos = select(table, "subspace_cos", "input").pivot(index="layer", columns="direction", values="value")
    assert cos[2].tolist() == pytest.approx([1.0, 1.0], abs=1e-5)
    assert math.isnan(cos.loc[0, 4]) and not math.isnan(cos.loc[1, 4])  # layer 0: sigma4 = sigma5
    assert float(select(table, "weight_cos", "input", direction=1).query("layer == 0")["value"].iloc[0]) < 0.999

    tied = _matrix([9.0, 5.0, 5.0, 2.0, 1.0], seed=40)  # sigma2 = sigma3: no top-2 subspace
    table = _record({"hidden": [tied, tied, _matrix([9.0, 5.0, 3.0, 2.0, 1.0], seed=41)]}, n_directions=4)
    cos = select(table, "subspace_cos", "output", direction=2).set_index("layer")["value"]
    assert math.isnan(cos[0]) and math.isnan(cos[1])


def test_step_change_measures_a_known_perturbation_from_the_second_snapshot_on():
    W = [_matrix([5.0, 3.0, 2.0, 1.0], seed) for seed in range(3)]
    direction = torch.randn(24, 24, generator=torch.Generator().manual_seed(9))

    def perturb(step, params):
        if step == 1:  # layer 1 moves by 10 % of its norm, the others stay
            layer = params["hidden"][1]
            layer.add_(direction * (0.1 * layer.norm() / direction.norm()))
        if step == 2:
            params["hidden"][2].zero_()

    table = _record({"hidden": W}, n_directions=1, steps=4, between=perturb)
    change = select(table, "step_change").pivot(index="step", columns="layer", values="value")
    assert change.index.tolist() == [1, 2, 3]  # no row at the first snapshot
    assert change.loc[1].tolist() == pytest.approx([0.0, 0.1, 0.0], abs=1e-6)
    assert change.loc[2, 2] == pytest.approx(1.0)  # zeroed: moved by all of its norm
    assert math.isnan(change.loc[3, 2]) and change.loc[3, 0] == 0.0  # nothing to divide by: undefined


def test_cross_cos_is_one_for_identical_groups_and_nan_where_a_direction_is_undefined():
    up = [_matrix([5.0, 3.0, 2.0, 1.0], seed) for seed in range(3)]
    gate = [up[0].clone(), _matrix([4.0, 4.0, 2.0, 1.0], seed=7), up[2].clone()]  # layer 1: tied sigma1
    table = _record({"up": up, "gate": gate}, n_directions=2, steps=2, cross_pairs={"up~gate": ("up", "gate")})
    cross = select(table, "cross_cos", "input", direction=1, group="up~gate", step=1).set_index("layer")["value"]
    assert cross[0] == pytest.approx(1.0, abs=1e-5) and cross[2] == pytest.approx(1.0, abs=1e-5)
    assert math.isnan(cross[1])
    assert len(select(table, "cross_cos", "output", group="up~gate")) == 6  # both spaces shared: [24, 24] each
    assert set(table.loc[table["group"] == "up~gate", "metric"]) == {"cross_cos"}


def test_cross_cos_is_recorded_only_in_the_spaces_the_two_groups_share():
    wide = [torch.randn(24, 30, generator=torch.Generator().manual_seed(s)) for s in range(2)]
    square = [torch.randn(24, 24, generator=torch.Generator().manual_seed(s + 5)) for s in range(2)]
    table = _record({"wide": wide, "square": square}, n_directions=1, cross_pairs={"pair": ("wide", "square")})
    assert set(select(table, "cross_cos", "output")["layer"]) == {0, 1}
    assert select(table, "cross_cos", "input").empty


@pytest.mark.parametrize(
    "pairs, message",
    [
        ({"up~gate": ("up", "gaet")}, re.escape("must name two of the groups up, gate, down; got ('up', 'gaet')")),
        ({"up": ("up", "gate")}, "has a group's name"),
        ({"up~down": ("up", "down")}, "'up' has 2 layers, 'down' 3"),
        ({"x": ("up", "odd")}, r"shapes \(24, 24\) and \(20, 30\) share no space"),
    ],
)
def test_a_bad_cross_pair_is_a_one_line_error(pairs, message):
    W = torch.randn(24, 24)
    groups = {
        "up": [nn.Parameter(W), nn.Parameter(W)],
        "gate": [nn.Parameter(W), nn.Parameter(W)],
        "down": [nn.Parameter(W)] * 3,
        "odd": [nn.Parameter(torch.randn(20, 30))] * 2,
    }
    if "odd" not in str(pairs):
        groups.pop("odd")
    with pytest.raises(ValueError, match=message) as error:
        ContinuityRecorder(groups, [0], cross_pairs=pairs)
    assert "\n" not in str(error.value)


def _tiny_run() -> pd.DataFrame:
    config = MLPRunConfig(depth=4, width=32, epochs=2, max_train=512, batch_size=64, n_snapshots=4, n_directions=4)
    return train_mlp(config, progress=False)


def test_the_new_metrics_change_no_old_row(monkeypatch):
    table = _tiny_run()
    assert {"sigma2", "subspace_cos", "step_change"} <= set(table["metric"])
    for method in ("_record_subspaces", "_record_motion", "_record_cross_pairs"):
        monkeypatch.setattr(ContinuityRecorder, method, lambda *args: None)
    without = _tiny_run()
    old = table[~table["metric"].isin(NEW_METRICS)].reset_index(drop=True)
    pd.testing.assert_frame_equal(
        old.astype(str), without[without["metric"] != "sigma2"].reset_index(drop=True).astype(str)
    )  # every number, bit for bit, in the same order
    assert not table[table["metric"].isin(NEW_METRICS)]["value"].isna().any()

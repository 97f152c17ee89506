"""The balances (geocont.balance): conserved by gradient flow, broken at second order by finite gradient-descent
steps and at first order by Adam, on a tiny net."""

from __future__ import annotations

import pytest
import torch

from geocont.balance import pair_balances, relative_motion, unit_balance
from geocont.mlp import ResidualMLP


def _net(condition: str) -> tuple[ResidualMLP, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = ResidualMLP(condition, in_features=6, width=5, depth=3, n_classes=3, init_scale=3.0).double()
    x, y = torch.randn(64, 6, dtype=torch.float64), torch.randint(0, 3, (64,))
    return model, x, y


def _pair(model) -> torch.Tensor:
    return torch.stack([c for c, _ in pair_balances(model)])


def _moved(condition: str, balance, lr: float, steps: int, optimizer: str = "sgd") -> float:
    """How far ``balance`` of a fresh tiny net moves over ``steps`` full-batch steps at ``lr``."""
    model, x, y = _net(condition)
    start = balance(model)
    make = torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam
    opt = make(model.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return float(torch.linalg.vector_norm((balance(model) - start).flatten()))


def _unit(model) -> torch.Tensor:
    return unit_balance(model)[0]


@pytest.mark.parametrize("condition, balance", [("res-none", _pair), ("res-none", _unit), ("res-relu", _unit)])
def test_gradient_descent_breaks_a_conserved_balance_at_second_order_in_the_step(condition, balance):
    one_step = [_moved(condition, balance, lr, 1) for lr in (0.02, 0.01)]
    assert one_step[0] / one_step[1] == pytest.approx(4, rel=0.1)  # O(lr^2) per step
    same_time = [_moved(condition, balance, lr, round(0.4 / lr)) for lr in (0.02, 0.01)]
    assert same_time[0] / same_time[1] == pytest.approx(2, rel=0.15)  # O(lr) over a fixed time: gone as lr -> 0


@pytest.mark.parametrize("condition, balance", [("res-none", _pair), ("res-none", _unit), ("res-relu", _unit)])
def test_adam_moves_a_balance_at_first_order_in_the_step(condition, balance):
    one_step = [_moved(condition, balance, lr, 1, optimizer="adam") for lr in (0.002, 0.001)]
    assert one_step[0] / one_step[1] == pytest.approx(2, rel=0.1)
    assert _moved(condition, balance, 0.001, 1, optimizer="adam") > 10 * _moved(condition, balance, 0.001, 1)


def test_the_pair_balance_is_not_conserved_where_the_activation_breaks_the_symmetry():
    one_step = [_moved("res-relu", _pair, lr, 1) for lr in (0.02, 0.01)]
    assert one_step[0] / one_step[1] == pytest.approx(2, rel=0.1)  # first order: the gradient itself moves it


def test_relative_motion_is_the_change_over_the_larger_size():
    start, now = torch.zeros(3), torch.tensor([3.0, 4.0, 0.0])
    assert relative_motion(now, start, torch.tensor(10.0), torch.tensor(20.0)) == pytest.approx(0.25)

"""The log-plus-linear snapshot schedule (recorder.log_and_linear_steps)."""

import pytest

from geocont.recorder import log_and_linear_steps, log_spaced_steps


def test_log_and_linear_contains_both_schedules_sorted_and_unique():
    steps = log_and_linear_steps(9300, 12, 12)
    assert steps[0] == 0 and steps[-1] == 9300 and steps == sorted(set(steps))
    assert all(type(step) is int for step in steps)
    assert set(log_spaced_steps(9300, 12)) <= set(steps)
    assert {775 * k for k in range(1, 13)} <= set(steps)
    assert steps == log_and_linear_steps(9300, 12, 12)  # deterministic


def test_the_late_run_is_resolved_evenly():
    total, n_linear = 9300, 12
    late = [s for s in log_and_linear_steps(total, 12, n_linear) if s >= total // 3]
    assert len(late) >= 2 * n_linear // 3
    assert max(b - a for a, b in zip(late, late[1:])) <= total / n_linear
    assert len([s for s in log_spaced_steps(total, 12) if s >= total // 3]) == 2  # what log spacing alone gives


def test_edge_cases_and_validation():
    assert log_and_linear_steps(0, 5, 3) == [0]
    assert log_and_linear_steps(3, 4, 10) == [0, 1, 2, 3]  # more snapshots than steps: every step, once
    assert log_and_linear_steps(100, 2, 1) == log_spaced_steps(100, 2) == [0, 1, 100]
    with pytest.raises(ValueError, match="n_linear"):
        log_and_linear_steps(100, 5, 0)
    with pytest.raises(ValueError, match="n_snapshots"):
        log_and_linear_steps(100, 1, 5)

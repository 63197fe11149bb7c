"""``topo.crosscheck``'s per-iteration summary, on hand-made rows."""

from __future__ import annotations

import math

import pytest

from topo.crosscheck import mean_iteration_ratio


def test_mean_iteration_ratio_is_of_the_sums_not_a_mean_of_ratios() -> None:
    # one iteration twice its prediction, one on time: sums 0.3 / 0.25, not (2 + 1) / 2
    rows = [
        {"job": "a", "iteration": 0, "predicted": 0.05, "measured": 0.1},
        {"job": "b", "iteration": 0, "predicted": 0.2, "measured": 0.2},
    ]
    assert mean_iteration_ratio(rows) == pytest.approx(1.2)
    assert math.isnan(mean_iteration_ratio([]))

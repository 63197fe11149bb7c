"""``topo.crosscheck``'s per-iteration summary on hand-made rows, and its timing spread
on the stock demo's jobs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from topo import demo
from topo.crosscheck import (
    TIMING_SHIFTS_S,
    mean_iteration_ratio,
    model_mean_iteration,
    predict,
    timing_spread,
)


def test_mean_iteration_ratio_is_of_the_sums_not_a_mean_of_ratios() -> None:
    # one iteration twice its prediction, one on time: sums 0.3 / 0.25, not (2 + 1) / 2
    rows = [
        {"job": "a", "iteration": 0, "predicted": 0.05, "measured": 0.1},
        {"job": "b", "iteration": 0, "predicted": 0.2, "measured": 0.2},
    ]
    assert mean_iteration_ratio(rows) == pytest.approx(1.2)
    assert math.isnan(mean_iteration_ratio([]))


def demo_results(tmp_path: Path, p50_ms: float = 6.0) -> dict[str, Any]:
    """What ``topo.run`` stores of the stock demo, as far as the packet model reads it
    (no emulated flows: :func:`timing_spread` compares the model with itself)."""
    jobs = demo.load_demo_jobs(list(demo.JOB_FILES), demo.DEFAULT_SCALE, {"h1", "h2", "h3", "h4"})
    return {
        "topo_path": str(demo.ROOT / "topo" / "star.yaml"),
        "controller_topo_path": str(demo.controller_topology("topo/star.yaml", 40.0, tmp_path)),
        "jobs": [j.description for j in jobs],
        "release": "closed",
        "packet_bytes": 2000,
        "rate_mbit": 40.0,
        "iterations": 2,
        "entered_reports": True,
        "policies": {
            "echelon-online": {"online": {"interval_s": 0.01, "reaction_ms": {"p50": p50_ms}}},
            "echelon": {},
        },
    }


def test_the_timing_spread_moves_the_controllers_reaction_and_brackets_the_model(
    tmp_path: Path,
) -> None:
    results = demo_results(tmp_path)
    assert timing_spread(results, "echelon") is None  # a static plan has no re-plans to move
    base = predict(results, "echelon-online", "packet")
    lo, hi = timing_spread(results, "echelon-online", base) or (math.nan, math.nan)
    # what the spread measures: a re-plan landing later moves flows of the online plan,
    # and that model's mean iteration is one end of the spread or inside it
    later = predict(results, "echelon-online", "packet", reaction_shift=max(TIMING_SHIFTS_S))
    assert later.finish != base.finish
    assert lo <= model_mean_iteration(later) / model_mean_iteration(base) <= hi
    # the reaction never goes below zero: far earlier is the same as no delay at all
    clamped = predict(results, "echelon-online", "packet", reaction_shift=-1.0)
    assert clamped.finish == predict(demo_results(tmp_path, 0.0), "echelon-online", "packet").finish

"""The steady-state report's explanation of a lost mean (sim.eval.steady_report)."""

from __future__ import annotations

from typing import Any

import pytest

from sim.eval.steady_report import size_split, why_mean


def row(times: dict[str, float], alone: dict[str, float]) -> dict[str, Any]:
    jobs = {j: {"steady_s": t, "alone_s": alone[j]} for j, t in times.items()}
    return {"steady_mean": sum(times.values()) / len(times), "jobs": jobs}


ALONE = {"big": 10.0, "mid": 4.0, "small": 1.0, "tiny": 0.5}


def test_a_mean_lost_on_the_large_jobs_is_attributed_to_them() -> None:
    fair = {0: row({"big": 20.0, "mid": 8.0, "small": 2.0, "tiny": 1.0}, ALONE)}
    ours = {0: row({"big": 24.0, "mid": 8.0, "small": 1.5, "tiny": 0.7}, ALONE)}
    per = {"echelon": ours, "fair": fair}
    large, small = size_split(per, "echelon", "fair")
    base = fair[0]["steady_mean"]
    assert large == pytest.approx(4.0 / 4 / base)  # big and mid: the upper half
    assert small == pytest.approx(-0.8 / 4 / base)
    # The two shares add up to the difference of the means.
    assert large + small == pytest.approx(ours[0]["steady_mean"] / base - 1)
    assert "carried by the large jobs" in why_mean(per, "echelon")


def test_no_size_story_where_the_small_jobs_lose_too() -> None:
    fair = {1: row({"big": 20.0, "mid": 8.0, "small": 2.0, "tiny": 1.0}, ALONE)}
    ours = {1: row({"big": 21.0, "mid": 8.0, "small": 2.5, "tiny": 1.0}, ALONE)}
    large, small = size_split({"echelon": ours, "fair": fair}, "echelon", "fair")
    assert large > 0 and small > 0
    assert "carried by" not in why_mean({"echelon": ours, "fair": fair}, "echelon")

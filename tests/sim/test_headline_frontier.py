"""The report's explanation of a missed mean-and-p99 target (sim.eval.headline.frontier)."""

from __future__ import annotations

from typing import Any

from sim.eval.headline import frontier, holdout_table


def row(policy: str, mean: float, p99: float, **extra: Any) -> dict[str, Any]:
    return {"mix": "m", "levels": "K=8", "policy": policy, "iter_mean": mean, "iter_p99": p99,
            **extra}  # fmt: skip


def test_empty_target_box_is_said_and_front_listed() -> None:
    batch = [row("echelon", 2.7, 4.8), row("v1", 2.9, 4.5), row("edf", 3.4, 4.1),
             row("fifo", 3.6, 4.4)]  # fmt: skip
    abl = [row("echelon-edf", 2.76, 4.7, gbit=100.0), row("echelon-x", 2.0, 1.0, gbit=25.0)]
    text = frontier(batch, abl, ["m"])
    assert "no measured policy is in it" in text
    assert "mean ≤ 2.755 s and p99 ≤ 4.1 s" in text
    # fifo is dominated by edf; the 25 Gbit/s ablation row is not on this plane
    front = text.split("Non-dominated points")[1]
    for p in ("echelon 2.7", "echelon-edf 2.76", "v1 2.9", "edf 3.4"):
        assert p in front, p
    assert "fifo" not in front and "echelon-x" not in front


def test_met_target_is_not_explained_and_other_points_in_box_are_named() -> None:
    batch = [row("echelon", 2.5, 4.0), row("v1", 2.9, 4.5), row("edf", 3.4, 4.1)]
    assert frontier(batch, [], ["m"]) == ""
    batch[0] = row("echelon", 2.8, 4.0)
    abl = [row("echelon-edf", 2.7, 4.05, gbit=100.0)]
    assert "measured in it: echelon-edf" in frontier(batch, abl, ["m"])


def test_holdout_table_compares_on_8_queues() -> None:
    rows = [row("echelon", 2.0, 3.0), row("v1", 2.5, 2.9), row("v1", 1.0, 1.0, levels="ideal")]
    text = holdout_table(rows, ["m"])
    assert "| m | 2 | v1 2.5 | -20.0% | 3 | v1 2.9 | +3.4% |" in text

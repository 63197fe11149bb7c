"""The demo's comparison table shows actual and ideal iteration time next to ECT."""

from __future__ import annotations

from typing import Any

from topo.report import table


def job(iteration: float | None, ect: float) -> dict[str, Any]:
    return {"iteration_time_mean": iteration, "iteration_time_ideal": 0.125, "ect_mean": ect,
            "ect_max": ect, "total_lateness": 1.0, "finish": 2.0, "complete": True}  # fmt: skip


def test_table_has_iteration_time_per_job_and_policy_and_na_when_unmeasured() -> None:
    results = {"policies": {"echelon": {"jobs": {"dp": job(0.414, 0.232)}},
                            "coflow": {"jobs": {"dp": job(None, 0.284)}}}}  # fmt: skip
    head, *rows = table(results).splitlines()
    assert head.split()[2:4] == ["iter", "ideal"]
    by_policy = {r.split()[1]: r.split() for r in rows}
    assert by_policy["echelon"][2:5] == ["0.414", "0.125", "0.232"]
    assert by_policy["coflow"][2:5] == ["n/a", "0.125", "0.284"]

"""The end-of-run verdict: units, the best per row, % against FIFO and Coflow, the
mean-over-jobs and slowest-job rows, and runs the machine disturbed."""

from __future__ import annotations

from typing import Any

from topo.report import disturbances, verdict, verdict_rows


def job(it: float | None, complete: bool = True) -> dict[str, Any]:
    return {"iteration_time_mean": it, "iteration_time_ideal": 0.1, "complete": complete}


def results() -> dict[str, Any]:
    return {
        "policies": {
            "echelon-online": {"jobs": {"a": job(0.30), "b": job(0.50)}},
            "coflow": {"jobs": {"a": job(0.40), "b": job(0.45)}},
            "fifo": {
                "jobs": {"a": job(0.50), "b": job(0.60)},
                "attempts": 2,
                "lost_packets_per_attempt": [328, 0],
                "lost_packets": 0,
            },
            "srpt": {"jobs": {"a": job(None, False), "b": job(0.2)}, "stalls": ["agent h2: x"]},
        }
    }


def _cells(line: str) -> list[str]:
    return line.split()


def test_rows_are_jobs_then_mean_and_slowest() -> None:
    rows = dict(verdict_rows(results()))
    assert list(rows) == ["a", "b", "mean over jobs", "slowest job"]
    assert rows["mean over jobs"]["echelon-online"] == 0.4
    assert rows["slowest job"]["coflow"] == 0.45
    # srpt did not finish job a: no summary over fewer jobs
    assert rows["mean over jobs"]["srpt"] is None and rows["b"]["srpt"] == 0.2


def test_verdict_marks_the_best_and_compares_with_fifo_and_coflow() -> None:
    text = verdict(results())
    lines = text.splitlines()
    assert "(s)" in lines[0] and "lower is better" in lines[0]
    head = lines[1].split()
    assert head == ["ideal", "echelon-online", "coflow", "fifo", "srpt"]
    by = {ln[:19].strip(): ln[19:] for ln in lines[2:]}
    assert _cells(by["a"]) == ["0.100", "0.300", "*", "0.400", "0.500", "n/a"]
    assert _cells(by["b"]) == ["0.100", "0.500", "0.450", "0.600", "0.200", "*"]
    assert _cells(by["mean over jobs"]) == ["0.400", "*", "0.425", "0.550", "n/a"]
    assert _cells(by["slowest job"]) == ["0.500", "0.450", "*", "0.600", "n/a"]
    # (0.4 / 0.55 - 1) = -27.3 %; against coflow (0.4 / 0.425 - 1) = -5.9 %
    assert _cells(by["vs fifo, mean"])[:2] == ["-27.3", "%"]
    assert _cells(by["vs coflow, mean"])[:2] == ["-5.9", "%"]
    assert _cells(by["vs coflow, slowest"])[:2] == ["+11.1", "%"]
    notes = [ln for ln in lines if ln.startswith("note:")]
    assert "note: fifo's run was disturbed: played 2 times (packets lost: [328, 0])" in notes
    assert any(n.startswith("note: srpt's run was disturbed: 1 agents stopped") for n in notes)


def test_columns_line_up_with_long_policy_names() -> None:
    r = results()
    r["policies"]["smallest_first:SmallestFirst"] = {"jobs": {"a": job(0.3), "b": job(0.3)}}
    lines = verdict(r).splitlines()[1:]
    ends = {len(ln.rstrip(" *")) for ln in lines if not ln.startswith("note")}
    # every row's last cell ends in the same column (the best marker aside)
    assert max(ends) - min(ends) <= 2, lines


def test_undisturbed_runs_have_no_note() -> None:
    r = results()
    assert set(disturbances(r)) == {"fifo", "srpt"}


def test_a_cross_check_outside_the_tolerance_is_flagged() -> None:
    from topo.crosscheck import DEFAULT_TOLERANCE_S, tolerance_flag

    assert DEFAULT_TOLERANCE_S == 0.020
    assert tolerance_flag(0.2776, 0.01, True) == "OUTSIDE the tolerance"
    assert tolerance_flag(0.007, 0.021, True) == "OUTSIDE the tolerance"
    assert tolerance_flag(0.007, 0.007, True) == "within the tolerance"
    # a miss on a plan the model flags as racing says so; a pass stays a pass
    assert (
        tolerance_flag(0.18, 0.18, True, races=13) == "OUTSIDE the tolerance, on a race (13 flows)"
    )
    assert tolerance_flag(0.007, 0.007, True, races=13) == "within the tolerance"
    assert tolerance_flag(float("nan"), 0.0, True).startswith("NOT CHECKED")
    assert tolerance_flag(0.0, 0.0, False).startswith("NOT CHECKED")

"""The closed-loop scheduler: tasks wait for their input flows, late flows delay downstream,
each host's lane enters an iteration only after finishing its previous one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from echelon.errors import SpecError
from hostagent.closedloop import ClosedLoop, OpenLoop, releaser
from hostagent.plan import build_scenario
from hostagent.report import formation_report, iteration_times, merge_records
from hostagent.scenario import Scenario, parse

from .test_agent import HOSTS, play
from .test_plan import ids, specs

P, C, D = 0.01, 0.02, 0.005  # durations: producer on h1, consumer on h2, last step on h1


def chain(iterations: int = 2, start_at: float = 0.0) -> dict[str, Any]:
    """Per iteration: h1 sends ``pull`` at once (no producer) and runs ``p`` (→ flow
    ``a``); h2 runs ``c`` after ``a`` arrives (→ flow ``b``); h1 runs ``d`` after ``b``."""
    echelons: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] = []
    port = 20000

    def flow(src: str, dst: str) -> dict[str, Any]:
        nonlocal port
        port += 1
        return {"index": 0, "src": src, "dst": dst, "size": 3000, "offset": 0.0,
                "release": 0.0, "sport": port}  # fmt: skip

    for i in range(iterations):
        for name, src, dst, eid in (("pull", "h1", "h2", 3), ("a", "h1", "h2", 1),
                                    ("b", "h2", "h1", 2)):  # fmt: skip
            echelons.append({"name": f"j/{i}/{name}", "job": "j", "group": name,
                             "iteration": i, "echelon_id": eid, "t_ref": 0.05,
                             "flows": [flow(src, dst)]})  # fmt: skip
        tasks += [
            {"id": f"j/{i}/p", "job": "j", "iteration": i, "host": "h1", "duration": P,
             "produces": [f"j/{i}/a#0"]},
            {"id": f"j/{i}/c", "job": "j", "iteration": i, "host": "h2", "duration": C,
             "after_flows": [f"j/{i}/a#0"], "produces": [f"j/{i}/b#0"]},
            {"id": f"j/{i}/d", "job": "j", "iteration": i, "host": "h1", "duration": D,
             "after_tasks": [f"j/{i}/p"], "after_flows": [f"j/{i}/b#0"]},
        ]  # fmt: skip
    return {"start_at": start_at, "hosts": HOSTS, "packet_bytes": 500, "default_rate_mbit": 8.0,
            "timeout_s": 20.0, "echelons": echelons, "tasks": tasks}  # fmt: skip


def sc() -> Scenario:
    return parse(chain())


def test_a_task_waits_for_its_input_flow_and_its_end_releases_its_output() -> None:
    h2 = ClosedLoop(sc(), "h2")
    assert h2.due(5.0) == [] and not h2.finished()  # flow a never arrived: c cannot run
    h2.arrive("j/0/a#0", 0.3)
    assert h2.due(0.3 + C - 1e-6) == []  # c runs 0.3 .. 0.3 + C
    assert h2.due(0.3 + C) == ["j/0/b#0"]
    assert h2.records["j/0/c"]["start"] == pytest.approx(0.3)
    assert h2.records["j/0/c"]["end"] == pytest.approx(0.3 + C)
    # Iteration 1's c starts when its own input arrives, never before c of iteration 0 ended.
    h2.arrive("j/1/a#0", 0.31)
    assert h2.due(0.3 + 2 * C + 1e-9) == ["j/1/b#0"]
    assert h2.records["j/1/c"]["start"] == pytest.approx(0.3 + C)
    assert h2.finished()


def h1_timeline(b_arrives: float) -> ClosedLoop:
    h1 = ClosedLoop(sc(), "h1")
    assert h1.due(0.0) == ["j/0/pull#0"]  # released as the iteration begins
    assert h1.due(P) == ["j/0/a#0"]  # p's end
    h1.arrive("j/0/b#0", b_arrives)
    return h1


def test_a_late_flow_delays_its_consumer_the_next_iteration_and_its_flows() -> None:
    early, late = h1_timeline(0.1), h1_timeline(0.4)
    for h1, b in ((early, 0.1), (late, 0.4)):
        assert h1.due(b + D - 1e-6) == []
        # d ends at b + D; the lane then enters iteration 1 (pull at once) and runs p.
        assert h1.due(b + D) == ["j/1/pull#0"]
        assert h1.records["j/0/d"]["start"] == pytest.approx(b)
        assert h1.due(b + D + P) == ["j/1/a#0"]
        assert h1.iteration_starts() == {"j": {0: 0.0, 1: pytest.approx(b + D)}}
    delay = late.records["j/1/p"]["end"] - early.records["j/1/p"]["end"]
    assert delay == pytest.approx(0.3)  # the lateness of b, carried downstream


def test_local_barrier_next_iteration_waits_for_this_hosts_previous_one() -> None:
    h1 = h1_timeline(0.2)
    # p of iteration 1 has no inputs at all, yet it does not start while d of 0 waits.
    assert h1.due(0.19) == [] and "j/1/p" not in h1.records
    h1.due(1.0)
    assert h1.records["j/1/p"]["start"] == pytest.approx(h1.records["j/0/d"]["end"])
    assert not h1.finished()  # iteration 1's d still waits for b


def test_open_loop_releases_at_fixed_times() -> None:
    d = chain(1)
    d["release"] = "open"
    d["echelons"][1]["flows"][0]["release"] = 0.5
    scn = parse(d)
    rel = releaser(scn, "h1")
    assert isinstance(rel, OpenLoop) and isinstance(releaser(sc(), "h1"), ClosedLoop)
    assert rel.due(0.49) == ["j/0/pull#0"] and rel.due(0.5) == ["j/0/a#0"] and rel.finished()


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("after_flows", ["j/0/b#0"], "tasks.j/0/c.after_flows"),  # b goes to h1, c is on h2
        ("after_tasks", ["j/0/p"], "tasks.j/0/c.after_tasks"),  # p runs on h1
        ("produces", ["j/0/a#0"], "tasks.j/0/c.produces"),  # a leaves h1 (and has a producer)
    ],
)
def test_dependencies_across_hosts_are_rejected(key: str, value: list[str], field: str) -> None:
    d = chain(1)
    d["tasks"][1][key] = value
    with pytest.raises(SpecError) as e:
        parse(d)
    assert e.value.field == field


def test_paradigm_plans_satisfy_the_host_local_rules_and_iteration_times_add_up() -> None:
    jobs = specs()
    scn = build_scenario(jobs, 2, ids(jobs), {**HOSTS, "h4": "10.0.0.4"}, start_at=0.0)
    again = parse(json.loads(scn.to_json()))  # validates every task's host-local deps
    assert again.tasks == scn.tasks and len(scn.tasks) == sum(
        len(s.plan().tasks) for s in jobs for _ in range(2)
    )
    # Synthetic records: iteration 1 begins when iteration 0's last task ends.
    recs = [
        {"tasks": {"j/0/x": {"job": "dp", "iteration": 0, "start": 0.2, "end": 0.5},
                   "j/1/x": {"job": "dp", "iteration": 1, "start": 0.7, "end": 0.9}},
         "iteration_starts": {"dp": {"0": 0.0, "1": 0.5}}},
    ]  # fmt: skip
    tiny = parse(json.loads(scn.to_json()) | {"tasks": []})
    rows = iteration_times(tiny, recs, {"dp": 0.3})["dp"]
    assert [(r["start"], r["end"], r["ideal"]) for r in rows] == [(0.0, 0.5, 0.3), (0.5, 0.9, 0.3)]
    assert [r["time"] for r in rows] == [pytest.approx(0.5), pytest.approx(0.4)]


@pytest.mark.slow
def test_agents_run_the_closed_loop_end_to_end(tmp_path: Path) -> None:
    """Real agents over loopback: each consumer starts after its input arrived, the
    iteration's times are measured, and ideal finishes follow the iteration's start."""
    recs = play(tmp_path, chain(), ["h1", "h2"])
    h1, h2 = recs
    assert all(r["complete"] and r["release"] == "closed" for r in recs)
    finish = merge_records(recs)
    for i in range(2):
        c, d = h2["tasks"][f"j/{i}/c"], h1["tasks"][f"j/{i}/d"]
        a, b = finish[f"j/{i}/a#0"], finish[f"j/{i}/b#0"]
        assert a is not None and b is not None
        assert c["start"] >= a and d["start"] >= b  # waits for its input
        assert h2["sent"][f"j/{i}/b#0"]["released"] >= c["end"]  # released by c's end
    assert h1["tasks"]["j/1/p"]["start"] == pytest.approx(h1["tasks"]["j/0/d"]["end"])
    rep = formation_report(parse(chain(start_at=h1["start_at"])), recs, {"j": 0.1})
    j = rep["jobs"]["j"]
    assert j["complete"] and len(j["iterations"]) == 2
    it1 = j["iterations"][1]
    assert it1["start"] == pytest.approx(h1["tasks"]["j/0/d"]["end"])
    assert it1["time"] == pytest.approx(h1["tasks"]["j/1/d"]["end"] - it1["start"])
    e1 = next(e for e in j["echelons"] if e["name"] == "j/1/a")
    assert e1["t_ref"] == pytest.approx(it1["start"] + 0.05)
    assert e1["flows"][0]["ideal"] == pytest.approx(e1["t_ref"])


def test_an_iteration_without_tasks_ends_with_its_last_flow() -> None:
    """A job of flows only (a trace's bare collective): no task ends, so the iteration
    ends when its last flow arrives; a flow never received leaves it unmeasured."""
    d = chain(1)
    d["tasks"] = []
    scn = parse(d)
    recs: list[dict[str, Any]] = [
        {"iteration_starts": {"j": {"0": 1.0}},
         "received": {"j/0/pull#0": {"finish": 1.2}, "j/0/a#0": {"finish": 1.5},
                      "j/0/b#0": {"finish": 1.4}}},
    ]  # fmt: skip
    (row,) = iteration_times(scn, recs)["j"]
    assert (row["start"], row["end"]) == (1.0, 1.5) and row["time"] == pytest.approx(0.5)
    recs[0]["received"]["j/0/a#0"]["finish"] = None
    (row,) = iteration_times(scn, recs)["j"]
    assert row["end"] is None and row["time"] is None

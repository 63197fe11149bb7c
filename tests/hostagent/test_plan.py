"""Release times from iteration plans, the scenario built from them, and the report."""

from __future__ import annotations

import pytest

from echelon.errors import SpecError
from echelon.model import ComputeTask, EchelonFlow, Flow, IterationPlan
from hostagent.plan import build_scenario, ideal_schedule, release_times
from hostagent.report import formation_report
from topo import demo

HOSTS = {"h1": "10.0.0.1", "h2": "10.0.0.2", "h3": "10.0.0.3", "h4": "10.0.0.4"}
IDS = {("pipe", "act"): 3, ("dp", "grad"): 4}


def test_pipeline_releases_follow_stage0_and_consumers_wait_for_ideal_arrivals() -> None:
    plan = demo.pipe_plan(0)
    rel = release_times(plan)
    ef = plan.echelons[0]
    for j in range(demo.MICRO):
        assert rel[(ef.name, j)] == pytest.approx((j + 1) * demo.FWD0_S)
    end, makespan = ideal_schedule(plan)
    # Stage 1 consumes micro-batch j at its ideal finish t_ref + A(j), one at a time.
    for j in range(demo.MICRO):
        start = max(ef.ideal_finish(j), end[f"fwd1/{j - 1}"] if j else 0.0)
        assert end[f"fwd1/{j}"] == pytest.approx(start + demo.FWD1_S)
    assert makespan == pytest.approx(end[f"fwd1/{demo.MICRO - 1}"])


def test_scenario_stacks_iterations_and_keeps_ports_unique() -> None:
    plans = demo.plans(2)
    sc = build_scenario(plans, IDS, HOSTS, start_at=100.0, job_offset={"dp": 0.5}, scale=0.5)
    by_name = {e.name: e for e in sc.echelons}
    _, pipe_span = ideal_schedule(demo.pipe_plan(0))
    p0, p1 = by_name["pipe/0/act"], by_name["pipe/1/act"]
    assert p1.t_ref == pytest.approx(p0.t_ref + pipe_span)
    assert p1.flows[0].release == pytest.approx(p0.flows[0].release + pipe_span)
    assert by_name["dp/0/grad"].flows[0].release == pytest.approx(0.5 + demo.BACKWARD_S)
    assert {e.echelon_id for e in sc.echelons if e.job == "pipe"} == {3}
    assert p0.flows[0].size == demo.ACT_BYTES // 2
    ports = [(f.src, f.sport) for e in sc.echelons for f in e.flows]
    assert len(ports) == len(set(ports)) == 2 * (demo.MICRO + 2)


def test_missing_echelon_id_and_cycles_are_spec_errors() -> None:
    with pytest.raises(SpecError) as e:
        build_scenario(demo.plans(1), {("pipe", "act"): 1}, HOSTS, start_at=0.0)
    assert e.value.field == "dp/0/grad.group"
    ef = EchelonFlow("x/0/g", "x", "g", (Flow(0, "h1", "h2", 10, 0.0),))
    tasks = (
        ComputeTask("a", "h1", 1.0, after_tasks=("b",)),
        ComputeTask("b", "h2", 1.0, after_tasks=("a",)),
    )
    loop = IterationPlan("x", 0, (ef,), tasks, {})
    with pytest.raises(SpecError, match="cycle"):
        ideal_schedule(loop)


def test_report_marks_missing_flows_and_computes_metrics() -> None:
    sc = build_scenario(demo.plans(1), IDS, HOSTS, start_at=0.0)
    pipe = next(e for e in sc.echelons if e.job == "pipe")
    late = 0.01
    finish: dict[str, float | None] = {
        pipe.uid(f): pipe.t_ref + f.offset + (late if f.index == 2 else 0.0) for f in pipe.flows
    }
    rep = formation_report(sc, finish)
    p = rep["jobs"]["pipe"]
    assert p["complete"] and p["total_lateness"] == pytest.approx(late)
    assert p["ect_max"] == pytest.approx(late)
    assert p["echelons"][0]["flows"][2]["lateness"] == pytest.approx(late)
    d = rep["jobs"]["dp"]  # no finish times at all
    assert not d["complete"] and d["ect_mean"] is None and len(d["missing"]) == 2

"""Scenarios from job specs: release times from the paradigm plans, iterations, the report."""

from __future__ import annotations

import pytest

from echelon.errors import SpecError
from echelon.jobs import JobSpec, load_job
from echelon.paradigms.plan import ideal_timeline
from hostagent.plan import build_scenario, iteration_plans, release_times
from hostagent.report import formation_report

HOSTS = {"h1": "10.0.0.1", "h2": "10.0.0.2", "h3": "10.0.0.3", "h4": "10.0.0.4"}
PIPE = {
    "job": "pipe",
    "paradigm": "gpipe",
    "hosts": ["h1", "h4"],
    "micro_batches": 3,
    "stages": [
        {"fwd_s": 0.01, "bwd_s": 0.02, "activation_bytes": 5000},
        {"fwd_s": 0.03, "bwd_s": 0.04},
    ],
}
DP = {
    "job": "dp",
    "paradigm": "dp_ps",
    "hosts": ["h2", "h3", "h4"],
    "ps": "h4",
    "layers": [{"fwd_s": 0.01, "bwd_s": 0.02, "param_bytes": 7000}],
}


def specs() -> list[JobSpec]:
    return [load_job(PIPE), load_job(DP)]


def ids(jobs: list[JobSpec]) -> dict[tuple[str, str], int]:
    groups = sorted({(ef.job, ef.group) for s in jobs for ef in s.plan().echelons})
    return {g: i + 1 for i, g in enumerate(groups)}


def test_release_is_the_producers_ideal_end_and_flows_without_producer_start_at_zero() -> None:
    plan = load_job(DP).plan()
    rel = release_times(plan)
    ends = {t: e for t, (_, e) in ideal_timeline(plan).items()}
    for ef in plan.echelons:
        for f in ef.flows:
            producer = plan.producer.get((ef.name, f.index))
            assert rel[(ef.name, f.index)] == (ends[producer] if producer else 0.0)
    assert any(r == 0.0 for r in rel.values()) and any(r > 0 for r in rel.values())


def test_open_loop_plays_each_iteration_of_the_plan_at_its_ideal_start() -> None:
    jobs = specs()
    sc = build_scenario(jobs, 2, ids(jobs), HOSTS, start_at=100.0, release="open")
    assert sc.release == "open" and not sc.tasks
    by_name = {e.name: e for e in sc.echelons}
    for spec in jobs:
        span = spec.ideal_iteration_s
        for i in range(2):
            plan = spec.plan(i, i * span)
            rel = release_times(plan)
            for ef in plan.echelons:
                got = by_name[ef.name]
                assert got.t_ref == pytest.approx(ef.t_ref)
                assert got.echelon_id == ids(jobs)[(ef.job, ef.group)]
                for f, g in zip(ef.flows, got.flows, strict=True):
                    assert (g.src, g.dst, g.size, g.offset) == (f.src, f.dst, f.size, f.offset)
                    assert g.release == pytest.approx(i * span + rel[(ef.name, f.index)])
    first = by_name["pipe/1/fwd/s0-s1"].t_ref - by_name["pipe/0/fwd/s0-s1"].t_ref
    assert first == pytest.approx(jobs[0].ideal_iteration_s)
    ports = [(f.src, f.sport) for e in sc.echelons for f in e.flows]
    assert len(ports) == len(set(ports)) == sum(len(e.flows) for e in sc.echelons)


def test_missing_echelon_id_and_bad_iterations_are_spec_errors() -> None:
    jobs = specs()
    partial = {k: v for k, v in ids(jobs).items() if k != ("dp", "push")}
    with pytest.raises(SpecError) as e:
        build_scenario(jobs, 1, partial, HOSTS, start_at=0.0)
    assert e.value.field == "dp/0/push.group"
    with pytest.raises(SpecError) as e:
        iteration_plans(jobs, 0)
    assert e.value.field == "iterations"


def test_report_marks_missing_flows_and_computes_metrics() -> None:
    jobs = specs()
    sc = build_scenario(jobs, 1, ids(jobs), HOSTS, start_at=0.0, release="open")
    late = 0.01
    finish: dict[str, float | None] = {}
    for e in sc.echelons:
        if e.job == "pipe":
            for f in e.flows:
                extra = late if (e.group == "fwd/s0-s1" and f.index == 2) else 0.0
                finish[e.uid(f)] = e.t_ref + f.offset + extra
    received = {u: {"finish": t} for u, t in finish.items()}
    rec = {"host": "h1", "complete": False, "unknown_packets": 0, "received": received}
    rep = formation_report(sc, [rec])
    p = rep["jobs"]["pipe"]
    assert p["complete"] and p["total_lateness"] == pytest.approx(late)
    assert p["ect_max"] == pytest.approx(late)
    fwd = next(e for e in p["echelons"] if e["group"] == "fwd/s0-s1")
    assert fwd["flows"][2]["lateness"] == pytest.approx(late)
    d = rep["jobs"]["dp"]  # no finish times at all
    n_dp = sum(len(e.flows) for e in sc.echelons if e.job == "dp")
    assert not d["complete"] and d["ect_mean"] is None and len(d["missing"]) == n_dp

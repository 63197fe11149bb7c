"""Late agents as a disturbance: an agent that released its first flow (one that waits
on no other flow) notably later than planned is named next to the verdict's numbers."""

from __future__ import annotations

from typing import Any

import pytest

from hostagent.closedloop import ClosedLoop
from hostagent.plan import build_scenario
from hostagent.report import first_flow_delays
from hostagent.scenario import Scenario
from topo import demo
from topo.report import LATE_FRACTION, LATE_MIN_S, disturbances, late_agents, verdict

HOSTS = {f"h{i}": f"10.0.0.{i}" for i in range(1, 5)}


def _scenario() -> tuple[Scenario, dict[str, float]]:
    """The demo's three jobs (scaled to 0.1), two iterations, closed loop."""
    files = ["topo/jobs/pipe.yaml", "topo/jobs/dp.yaml", "topo/jobs/big.yaml"]
    specs = [j.spec for j in demo.load_demo_jobs(files, 0.1, set(HOSTS))]
    ids: dict[tuple[str, str], int] = {}
    for s in specs:
        for ef in s.plan(0, 0.0).echelons:
            ids.setdefault((ef.job, ef.group), len(ids) + 1)
    sc = build_scenario(specs, 2, ids, HOSTS, start_at=0.0)
    return sc, {s.job_id: s.ideal_iteration_s for s in specs}


def _released_without_network(sc: Scenario, host: str) -> dict[str, float]:
    """When the closed loop releases each flow if nothing ever arrives (virtual clock)."""
    loop = ClosedLoop(sc, host)
    out: dict[str, float] = {}
    for ms in range(3000):
        for uid in loop.due(ms / 1000):
            out[uid] = ms / 1000
    return out


def _records(sc: Scenario, delay: dict[str, float]) -> list[dict[str, Any]]:
    """Every agent released every flow at its planned time plus its host's delay."""
    return [
        {
            "host": h,
            "sent": {
                e.uid(f): {"released": f.release + delay.get(h, 0.0)} for e, f in sc.flows_from(h)
            },
        }
        for h in HOSTS
    ]


def test_judged_flows_are_those_released_on_the_plans_clock() -> None:
    sc, ideal = _scenario()
    delays = first_flow_delays(sc, _records(sc, {}), ideal)
    assert set(delays) == {"h1", "h2", "h3"}  # h4's first flows all wait on arrivals
    for host, d in delays.items():
        alone = _released_without_network(sc, host)
        # the flow judged leaves at its planned release with no packet ever arriving
        assert alone[d["flow"]] == pytest.approx(d["planned_s"], abs=1e-3)
        assert d["late_s"] == 0.0
    # h4's flows released 1 s late are not the machine's doing as far as we can tell
    assert "h4" not in first_flow_delays(sc, _records(sc, {"h4": 1.0}), ideal)


def test_a_late_agent_is_found_and_named_in_the_verdict() -> None:
    sc, ideal = _scenario()
    d = first_flow_delays(sc, _records(sc, {"h1": 0.040}), ideal)
    assert d["h1"]["job"] == "pipe" and d["h1"]["late_s"] == pytest.approx(0.040)
    assert d["h1"]["late_s"] > LATE_FRACTION * ideal["pipe"]  # the case is a late one
    results = {
        "policies": {
            "echelon": {"jobs": {"pipe": {"iteration_time_mean": 0.2, "complete": True}},
                        "agent_delays": d},
            "fifo": {"jobs": {"pipe": {"iteration_time_mean": 0.3, "complete": True}},
                     "agent_delays": first_flow_delays(sc, _records(sc, {}), ideal)},
        }
    }  # fmt: skip
    assert set(disturbances(results)) == {"echelon"}
    (note,) = [ln for ln in verdict(results).splitlines() if ln.startswith("note:")]
    assert note.startswith("note: echelon's run was disturbed: agent h1 released its first ")
    assert "of pipe 40 ms late" in note


@pytest.mark.parametrize(
    ("late", "ideal", "is_late"),
    [
        (0.011, 0.1, True),  # over 10 % of the iteration and over 5 ms
        (0.009, 0.1, False),  # under 10 %
        (0.004, 0.02, False),  # 20 % of a tiny iteration, but timer jitter
        (0.006, 0.02, True),
        (-0.001, 0.1, False),  # early: the sender polled just before (never late)
    ],
)
def test_threshold_is_a_fraction_of_the_ideal_iteration_and_a_floor(
    late: float, ideal: float, is_late: bool
) -> None:
    assert LATE_MIN_S == 0.005 and LATE_FRACTION == 0.1
    d = {"h2": {"job": "j", "flow": "x", "planned_s": 0.0, "released_s": late,
                "late_s": late, "ideal_iteration_s": ideal}}  # fmt: skip
    assert bool(late_agents(d)) == is_late

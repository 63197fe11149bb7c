"""The packet-level model (sim.packet): strict priority per packet, classes kept in queues.

Hand-sized cases on one switch ``s``: 1,000-byte packets (no header), the port to
h3 drains 1 packet/s, hosts' links are faster, so packets queue at that port.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from echelon.errors import SpecError
from echelon.model import ComputeTask, EchelonFlow, Flow, IterationPlan
from sim.packet import PacketConfig, simulate_packets

PKT = 1000


class StarNet:
    """Hosts around one switch ``s``; ``rates`` in bytes/s per directed link."""

    def __init__(self, rates: Mapping[str, float]) -> None:
        self._links = dict(rates)

    @property
    def links(self) -> Mapping[str, float]:
        return self._links

    def path(self, src: str, dst: str) -> tuple[str, ...]:
        return (f"{src}>s", f"s>{dst}")


class Job:
    def __init__(self, plan: IterationPlan) -> None:
        self._plan = plan
        self.job_id = plan.job

    def plan(self, iteration: int = 0, t0: float = 0.0) -> IterationPlan:
        return self._plan


def group_job(job: str, src: str, dst: str, packets: int) -> Job:
    ef = EchelonFlow(f"{job}/0/g", job, "g", (Flow(0, src, dst, packets * PKT, 0.0),), 0.0)
    return Job(IterationPlan(job, 0, (ef,), (), {}))


NET = StarNet({"h1>s": 3900.0, "h2>s": 4000.0, "s>h3": 1000.0})
# h1 sends a (2 packets), h2 sends b (8 packets), both to h3, both released at 0
JOBS = [group_job("a", "h1", "h3", 2), group_job("b", "h2", "h3", 8)]
STALE = {("a", "g", 0): 1, ("b", "g", 0): 7}  # installed before the run: b above a


def cfg(
    online: bool, replan_delay: float = 0.0, initial_levels: Mapping[tuple[str, str, int], int] = {}
) -> PacketConfig:
    return PacketConfig(
        "echelon",
        online=online,
        replan_delay=replan_delay,
        initial_levels=initial_levels,
        header_bytes=0,
        payload_bytes=PKT,
    )


def test_strict_priority_and_fifo_with_static_levels() -> None:
    """b's first packet reaches the idle port at 0.25 s and is served; b (level 7)
    keeps the port until its last packet left, a (level 1) waits for all of it."""
    got = simulate_packets(JOBS, NET, cfg(online=False, initial_levels=STALE))
    assert got[("b/0/g", 0)] == pytest.approx(0.25 + 8.0)
    assert got[("a/0/g", 0)] == pytest.approx(0.25 + 8.0 + 2.0)


def test_an_immediate_replan_serves_the_smaller_group_first() -> None:
    """The policy ranks a (2 packets) above b (8): re-planned at t = 0, a's packets
    pass b's queued ones; only b's first packet, already on the port, goes before."""
    got = simulate_packets(JOBS, NET, cfg(online=True, initial_levels=STALE))
    assert got[("a/0/g", 0)] == pytest.approx(1.25 + 2.0)
    assert got[("b/0/g", 0)] == pytest.approx(0.25 + 10.0)


def test_packets_queued_before_a_replan_keep_their_class() -> None:
    """Re-planned only at 1.1 s: by then every packet of a (sent by 0.52 s) waits at
    level 1, and stays there, behind all of b -- whatever the re-plan says. A fluid
    model would move a's bytes up at 1.1 s and finish a at ~3.25 s."""
    late = simulate_packets(JOBS, NET, cfg(online=True, replan_delay=1.1, initial_levels=STALE))
    assert late[("b/0/g", 0)] == pytest.approx(0.25 + 8.0)
    assert late[("a/0/g", 0)] == pytest.approx(0.25 + 8.0 + 2.0)


def test_compute_tasks_chain_flows() -> None:
    """h1 -> h3 (1 packet), a 0.5-s task on h3 consumes it and releases h3 -> h1."""
    net = StarNet({"h1>s": 2000.0, "s>h3": 1000.0, "h3>s": 4000.0, "s>h1": 500.0})
    f1 = EchelonFlow("j/0/in", "j", "in", (Flow(0, "h1", "h3", PKT, 0.0),), 0.0)
    f2 = EchelonFlow("j/0/out", "j", "out", (Flow(0, "h3", "h1", PKT, 0.0),), 2.0)
    task = ComputeTask("t", "h3", 0.5, after_flows=(("j/0/in", 0),))
    plan = IterationPlan("j", 0, (f1, f2), (task,), {("j/0/out", 0): "t"})
    got = simulate_packets([Job(plan)], net, cfg(online=False))
    assert got[("j/0/in", 0)] == pytest.approx(0.5 + 1.0)
    assert got[("j/0/out", 0)] == pytest.approx(1.5 + 0.5 + 0.25 + 2.0)


def test_bad_config_names_the_field() -> None:
    with pytest.raises(SpecError, match="levels"):
        PacketConfig(levels=1)
    with pytest.raises(SpecError, match="replan_delay"):
        PacketConfig(replan_delay=-1.0)

"""The packet-level model (sim.packet): strict priority per packet, classes kept in queues.

Hand-sized cases on one switch ``s``: 1,000-byte packets (no header), the port to
h3 drains 1 packet/s, hosts' links are faster, so packets queue at that port.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import pytest

from echelon.errors import SpecError
from echelon.model import ComputeTask, EchelonFlow, Flow, FlowKey, IterationPlan
from echelon.schedule import Network
from sim.core.config import Plannable
from sim.packet import PacketConfig, PacketModel

PKT = 1000


def simulate_packets(
    jobs: Sequence[Plannable], network: Network, cfg: PacketConfig, plan: Network | None = None
) -> dict[FlowKey, float]:
    return PacketModel(jobs, network, cfg, plan).run()


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


@pytest.mark.parametrize(
    ("task", "field"),
    [
        (ComputeTask("t", "h3", 0.5, after_flows=(("j/0/nope", 0),)), "tasks.t.after_flows"),
        (ComputeTask("t", "h3", 0.5, after_tasks=("nope",)), "tasks.t.after_tasks"),
    ],
)
def test_a_task_waiting_for_an_unknown_input_names_it(task: ComputeTask, field: str) -> None:
    ef = EchelonFlow("j/0/in", "j", "in", (Flow(0, "h1", "h3", PKT, 0.0),), 0.0)
    plan = IterationPlan("j", 0, (ef,), (task,), {})
    with pytest.raises(SpecError) as e:
        PacketModel([Job(plan)], StarNet({"h1>s": 1.0, "s>h3": 1.0}), cfg(online=False))
    assert e.value.field == field and "nope" in str(e.value)


def test_bad_config_names_the_field() -> None:
    with pytest.raises(SpecError, match="levels"):
        PacketConfig(levels=1)
    with pytest.raises(SpecError, match="replan_delay"):
        PacketConfig(replan_delay=-1.0)
    with pytest.raises(SpecError, match="iterations"):
        PacketConfig(iterations=0)
    with pytest.raises(SpecError, match="pacing"):
        PacketConfig(pacing={"h1": 0.0})
    with pytest.raises(SpecError, match="report_period"):
        PacketConfig(report_period=-0.1)


class Iterated:
    """A job whose every iteration is the same plan, named per iteration (as the
    paradigm builders name instances: ``<job>/<iteration>/<group>``)."""

    def __init__(self, job: str, build: Callable[[int], IterationPlan]) -> None:
        self.job_id = job
        self._build = build

    def plan(self, iteration: int = 0, t0: float = 0.0) -> IterationPlan:
        return self._build(iteration)


def ps_plan(i: int) -> IterationPlan:
    """A parameter server h1 pulls to h2 (1 packet, no producer: released when h1's
    lane enters the iteration); h2 computes 0.5 s on it and pushes back (1 packet);
    h1 updates for 0.25 s on the push; h3 computes 5 s, needing nothing, producing
    nothing. Links: 1 packet/s h1 -> h2, 2 packets/s back."""
    pull = EchelonFlow(f"j/{i}/pull", "j", "pull", (Flow(0, "h1", "h2", PKT, 0.0),), 0.0)
    push = EchelonFlow(f"j/{i}/push", "j", "push", (Flow(0, "h2", "h1", PKT, 0.0),), 1.5)
    work = ComputeTask(f"j/{i}/work", "h2", 0.5, after_flows=((f"j/{i}/pull", 0),))
    update = ComputeTask(f"j/{i}/update", "h1", 0.25, after_flows=((f"j/{i}/push", 0),))
    long = ComputeTask(f"j/{i}/long", "h3", 5.0)
    tasks = (work, update, long)
    return IterationPlan("j", i, (pull, push), tasks, {(f"j/{i}/push", 0): f"j/{i}/work"})


PS_NET = StarNet({"h1>s": 1e9, "s>h2": 1000.0, "h2>s": 1e9, "s>h1": 2000.0})


def test_iterations_follow_each_hosts_own_barrier() -> None:
    """h1 enters iteration 1 when its update ends (1 + 0.5 + 0.5 + 0.25 = 2.25 s) and
    releases pull 1 then, although h3 is still in iteration 0 until 5 s (a global
    barrier, the fluid engine's, would hold pull 1 until then)."""
    c = PacketConfig("echelon", online=False, header_bytes=0, payload_bytes=PKT, iterations=3)
    got = simulate_packets([Iterated("j", ps_plan)], PS_NET, c)
    for i in range(3):
        assert got[(f"j/{i}/pull", 0)] == pytest.approx(2.25 * i + 1.0)
        assert got[(f"j/{i}/push", 0)] == pytest.approx(2.25 * i + 2.0)
    assert len(got) == 6


def test_a_host_paced_faster_than_its_link_queues_in_fifo_order() -> None:
    """h1 paces at 4 packets/s into its own 1-packet/s link. a (4 packets) is
    released at 0, b (1 packet) at 0.5 s, when the pacer is sending a's 3rd packet:
    it queues a0 a1 a2 b a3 (0.25 s apart) and h1's FIFO link sends them in that
    order, so b waits for three of a's packets. Without the pacer the link itself
    round-robins over the released flows: b goes right after the packet on the wire
    at 0.5 s and the one that follows it (a1, 1-2 s)."""
    net = StarNet({"h1>s": 1000.0, "s>h3": 1e9})
    a = EchelonFlow("a/0/g", "a", "g", (Flow(0, "h1", "h3", 4 * PKT, 0.0),), 0.0)
    b_flow = EchelonFlow("b/0/g", "b", "g", (Flow(0, "h1", "h3", PKT, 0.0),), 0.0)
    hold = ComputeTask("b/0/hold", "h1", 0.5)
    jobs = [
        Job(IterationPlan("a", 0, (a,), (), {})),
        Job(IterationPlan("b", 0, (b_flow,), (hold,), {("b/0/g", 0): "b/0/hold"})),
    ]
    base = PacketConfig("echelon", online=False, header_bytes=0, payload_bytes=PKT)
    plain = simulate_packets(jobs, net, base)
    assert plain[("b/0/g", 0)] == pytest.approx(3.0)  # a0 0-1, a1 1-2, b 2-3
    assert plain[("a/0/g", 0)] == pytest.approx(5.0)
    paced = simulate_packets(jobs, net, replace(base, pacing={"h1": 4000.0}))
    # on h1's link from 0.25 s, one packet per second: a0 a1 a2 b a3
    assert paced[("b/0/g", 0)] == pytest.approx(0.25 + 4.0)
    assert paced[("a/0/g", 0)] == pytest.approx(0.25 + 5.0)


def test_replans_rank_on_the_controllers_network() -> None:
    """The controller plans with its own topology. If that says h1's link is very
    slow, a (2 packets from h1) is the larger group and b goes first -- the opposite
    of what the network the packets cross would say (test above: a first)."""
    slow_h1 = StarNet({"h1>s": 1.0, "h2>s": 4000.0, "s>h3": 1000.0})
    got = simulate_packets(JOBS, NET, cfg(online=True, initial_levels=STALE), slow_h1)
    assert got[("b/0/g", 0)] == pytest.approx(0.25 + 8.0)
    assert got[("a/0/g", 0)] == pytest.approx(0.25 + 8.0 + 2.0)


def test_reported_bytes_keep_a_group_half_sent_ahead_of_a_bigger_one_just_released() -> None:
    """a (8 packets) leaves h1 from 0 s; b (4 packets) is released at 6 s by a task on h2.
    Every link carries one packet per second. Counting every flow whole, b (4,000 bytes)
    ranks above a (8,000) and passes it: a ends at 13 s. With the hosts' bytes sent
    (reported every 0.5 s) a has at most 3,000 left, keeps its place and ends at 10 s;
    b's first packet, on the port before the re-plan reaches it, is the only one ahead."""
    net = StarNet({"h1>s": 1000.0, "h2>s": 1000.0, "s>h3": 1000.0})
    a = EchelonFlow("a/0/g", "a", "g", (Flow(0, "h1", "h3", 8 * PKT, 0.0),), 0.0)
    b = EchelonFlow("b/0/g", "b", "g", (Flow(0, "h2", "h3", 4 * PKT, 0.0),), 6.0)
    jobs = [
        Job(IterationPlan("a", 0, (a,), (), {})),
        Job(IterationPlan("b", 0, (b,), (ComputeTask("t", "h2", 6.0),), {("b/0/g", 0): "t"})),
    ]
    whole = simulate_packets(jobs, net, replace(cfg(online=True), report_period=0.0))
    assert whole[("b/0/g", 0)] == pytest.approx(11.0)
    assert whole[("a/0/g", 0)] == pytest.approx(13.0)
    reported = simulate_packets(jobs, net, replace(cfg(online=True), report_period=0.5))
    assert reported[("a/0/g", 0)] == pytest.approx(10.0)
    assert reported[("b/0/g", 0)] == pytest.approx(13.0)

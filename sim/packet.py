"""Packet-level model of a few iterations on a small network: queues keep their packets' class.

The fluid engine (:mod:`sim.core.engine`) re-ranks every byte in flight at a re-plan.
A switch does not: a packet is classified when it enters the switch, and once it
waits in a port's priority queue it leaves at that priority, whatever the
controller writes afterwards. Where hosts send faster than a port drains -- the
demo's hosts pace at 40 Mbit/s into h4's 10 Mbit/s port -- most of a flow sits
in that queue, so a re-plan reaches only the bytes a host has not sent yet. With
the online controller re-planning tens of times per iteration, that difference
is what the fluid prediction misses (docs/demo.md measures it with per-port
captures). This model is built to be compared with the emulation
(``topo.crosscheck --model packet``); the fluid engine stays the simulator for
everything at scale.

What it models, and how that maps to the emulation:

* **Packets.** A flow of ``size`` bytes is ``ceil(size / payload_bytes)``
  packets, each ``payload + header_bytes`` on the wire (the last one shorter).
* **Hosts.** A host's released flows share its first link round-robin, packet by
  packet, at that link's rate (the host agent's pacing, :mod:`hostagent.sender`).
  With ``pacing`` (config: bytes/s per host) the round-robin runs at the agent's
  pacing rate instead and feeds the host's own link as a FIFO queue (the host's
  plain rate limit, :func:`topo.tc.link_commands`): where a host paces faster
  than its link (h4 in the demo: 40 Mbit/s into 10), its flows leave in the order
  the pacer queued them, so a flow released later waits behind what the others
  are ahead by.
* **Switch ports.** Every later link is a port with strict priority between
  levels and FIFO inside a level (the bottleneck's HTB classes, one pfifo each),
  non-preemptive. A packet's level is looked up when it reaches the switch in
  front of the link, from the levels installed at that moment: ``initial`` (per
  (job, group, flow index); absent: level 0, best effort) and, ``online``, the
  re-plans.
* **Re-plans** (``online``), as the simulator's controller model
  (:class:`sim.core.config.SimConfig`): at a group's release (its first flow
  released) or finish (its last flow delivered) a re-plan is due at
  ``max(last re-plan + replan_interval, event + replan_delay)``, events in
  between coalesce into it; it asks the policy at that instant over the groups
  in flight, each flow counting the bytes its host last reported it had left, and
  quantises to ``levels`` switch levels (:func:`echelon.quantize.flow_levels`).
  The hosts report what they have sent every ``report_period`` (all at once) and
  with each release (the releasing host's flows), as the host agents do
  (:data:`echelon.progress.REPORT_PERIOD_S`); ``report_period`` 0: never (every
  flow counts whole).
* **Compute, closed loop, as the host agents play it** (:mod:`hostagent.closedloop`),
  with their code, :mod:`echelon.lanes`, a task's end an event in simulated time.
  Each (job, host) taking part in a job is a *lane*: it runs its tasks one at a
  time in plan order, iteration after iteration, each starting when its
  ``after_tasks`` ended and its ``after_flows`` arrived; a task's end releases the
  flows it produces. A lane enters iteration ``i + 1`` when its own iteration-``i``
  tasks are done (a *local* barrier, not the fluid engine's global one) and then
  releases the flows of ``i + 1`` it sends that have no producer (a parameter
  server's pull). ``iterations`` (config) says how many; every lane enters
  iteration 0 at time 0.
* **What the controller knows of an iteration** (:mod:`controlplane.inflight`):
  a group instance is in flight from its first released flow until its last flow
  arrived; only the newest instance of a (job, group) is planned; a job's
  *opening* groups (:func:`echelon.jobs.opening_groups`) are in flight as soon as
  anything of their iteration is (iteration 0's from the start with ``entered``: the
  hosts said so before it); the iteration's start is the earliest
  ``release - t_ref`` over its released groups (``t_ref`` relative to the
  iteration's start), and an opening group planned before any release of its
  iteration counts as starting at the re-plan.

Not modelled: propagation and switch processing delay, the agents' 1-ms pacing
bursts, the first packet each HTB class may send ahead of a higher one (its only
leak: :mod:`topo.tc`); links are shared by nothing else.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

from echelon.constants import PACKET_HEADER_LEN
from echelon.errors import SpecError
from echelon.jobs import opening_groups
from echelon.lanes import Ended, Lane, Lanes, Started, Step
from echelon.model import ComputeTask, EchelonFlow, FlowKey, IterationPlan
from echelon.policies import get_policy
from echelon.progress import REPORT_PERIOD_S, bytes_left
from echelon.quantize import flow_levels
from echelon.schedule import Network
from sim.core.config import Plannable

#: (job, group, flow index): one classification entry on the switch, as in sim.core.engine
Slot = tuple[str, str, int]


@dataclass(frozen=True)
class PacketConfig:
    """What the packet model needs besides jobs and network (see the module doc)."""

    policy: str = "echelon"
    levels: int = 8
    online: bool = True
    replan_interval: float = 0.0
    replan_delay: float = 0.0
    initial_levels: Mapping[Slot, int] = field(default_factory=dict)
    #: every host reported entering iteration 0 before the start (the host agents'
    #: ``entered`` reports): iteration 0's opening groups are in flight from t = 0
    entered: bool = False
    header_bytes: int = PACKET_HEADER_LEN
    payload_bytes: int = 1400
    iterations: int = 1
    report_period: float = REPORT_PERIOD_S
    pacing: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise SpecError("iterations", f"need at least one iteration, got {self.iterations}")
        if self.levels < 2:
            raise SpecError("levels", f"need at least 2 switch levels, got {self.levels}")
        if self.payload_bytes <= 0 or self.header_bytes < 0:
            raise SpecError("payload_bytes", "payload > 0 and header >= 0 bytes required")
        if any(rate <= 0 for rate in self.pacing.values()):
            raise SpecError("pacing", "host pacing rates must be > 0 bytes/s")
        if self.replan_interval < 0 or self.replan_delay < 0:
            raise SpecError("replan_delay", "re-plan interval and delay must be >= 0")
        if not self.report_period >= 0:
            raise SpecError("report_period", "must be >= 0 seconds")


@dataclass
class _Flow:
    key: FlowKey
    slot: Slot
    path: tuple[str, ...]
    packets: int
    last_bytes: int
    group: int
    sent: int = 0
    #: packets sent as of the host's last report (what the controller knows)
    reported: int = 0
    delivered: int = 0
    finish: float = math.nan


@dataclass
class _Link:
    rate: float  # bytes per second
    busy: bool = False
    #: a switch port: level -> FIFO of (flow, hop, bytes)
    queues: dict[int, deque[tuple[int, int, int]]] = field(default_factory=dict)
    #: a host's first link: flows with packets left, served round-robin
    ready: deque[int] = field(default_factory=deque)
    #: a queue without priorities (a host's own link behind its pacer)
    fifo: bool = False


@dataclass
class _Group:
    """One instance (job, iteration, group) and what the controller knows of it."""

    ef: EchelonFlow  # planned at t0 = 0: ``t_ref`` relative to the iteration's start
    iteration: int
    flows: list[int]
    opening: bool
    released: bool = False  # a flow of it left its host
    alive: bool = False  # the controller plans it (released, or anticipated)
    finished: bool = False


class PacketModel:
    """One run of the packet-level model; :meth:`run` returns per-flow finish times."""

    def __init__(
        self,
        jobs: Sequence[Plannable],
        network: Network,
        cfg: PacketConfig,
        plan_network: Network | None = None,
    ) -> None:
        self.cfg = cfg
        self.net = network
        #: what the controller plans with (its own topology file), if not ``network``
        self.plan_net = plan_network if plan_network is not None else network
        self.policy = get_policy(cfg.policy)
        self.now = 0.0
        self._heap: list[tuple[float, int, str, object]] = []
        self._seq = itertools.count()
        self.links = {name: _Link(rate) for name, rate in network.links.items()}
        self.flows: list[_Flow] = []
        self.by_key: dict[FlowKey, int] = {}
        self.groups: list[_Group] = []
        #: (job, iteration) -> its groups; and its start as the controller estimates it
        self.instances: dict[tuple[str, int], list[int]] = {}
        self.starts: dict[tuple[str, int], float] = {}
        #: (job, iteration) -> when it began (its first task start or producer-less
        #: release on any host) and ended (its last task end), as the emulation's
        #: report measures them (:func:`hostagent.report.iteration_times`)
        self.iteration_start: dict[tuple[str, int], float] = {}
        self.iteration_end: dict[tuple[str, int], float] = {}
        self.level: dict[Slot, int] = dict(cfg.initial_levels)
        #: the closed loop; a flow released is its index in ``flows``
        self.loop: Lanes[ComputeTask, int] = Lanes()
        #: task id -> the flows its end releases
        self.produces: dict[str, list[int]] = {}
        self._last_replan = -math.inf
        self._replan_pending = False
        for job in jobs:
            for it in range(cfg.iterations):
                self._add(job.plan(it, 0.0), it)
        tasks = [t for ln in self.loop.lanes.values() for q in ln.tasks.values() for t in q]
        for t in tasks:  # an unknown input would stall its lane without a word
            for dep in t.after_tasks:
                if dep not in self.produces:
                    raise SpecError(f"tasks.{t.id}.after_tasks", f"unknown task {dep!r}")
            for key in t.after_flows:
                if key not in self.by_key:
                    raise SpecError(f"tasks.{t.id}.after_flows", f"unknown flow {key}")

    # ------------------------------------------------------------ set-up

    def _add(self, plan: IterationPlan, it: int) -> None:
        opening = opening_groups(plan)
        ids_of: dict[str, list[int]] = {}
        for ef in plan.echelons:
            ids = []
            for f in ef.flows:
                path = tuple(self.net.path(f.src, f.dst))
                if not path:
                    raise SpecError(f"{ef.name}#{f.index}", f"no path from {f.src} to {f.dst}")
                if f.src in self.cfg.pacing:
                    pacer = f"pace:{f.src}"
                    self.links.setdefault(pacer, _Link(self.cfg.pacing[f.src]))
                    self.links[path[0]].fifo = True
                    path = (pacer, *path)
                n = max(1, math.ceil(f.size / self.cfg.payload_bytes))
                last = f.size - (n - 1) * self.cfg.payload_bytes + self.cfg.header_bytes
                gi = len(self.groups)
                self.flows.append(
                    _Flow((ef.name, f.index), (ef.job, ef.group, f.index), path, n, last, gi)
                )
                self.by_key[(ef.name, f.index)] = len(self.flows) - 1
                ids.append(len(self.flows) - 1)
            ids_of[ef.name] = ids
            self.groups.append(_Group(ef, it, ids, ef.group in opening))
            self.instances.setdefault((plan.job, it), []).append(len(self.groups) - 1)
        produced: set[FlowKey] = set(plan.producer)
        iterations = range(self.cfg.iterations)
        for t in plan.tasks:
            if t.id in self.produces:
                raise SpecError(f"tasks.{t.id}", "task ids must differ between iterations")
            self.produces[t.id] = []
            self.loop.lane(plan.job, t.host, iterations).tasks[it].append(t)
        for key, task in plan.producer.items():
            if task not in self.produces:
                raise SpecError(f"producer.{key[0]}#{key[1]}", f"unknown task {task!r}")
            self.produces[task].append(self.by_key[key])
        for ef in plan.echelons:
            for f, fid in zip(ef.flows, ids_of[ef.name], strict=True):
                if (ef.name, f.index) not in produced:
                    self.loop.lane(plan.job, f.src, iterations).fresh[it].append(fid)

    # ------------------------------------------------------------ the loop

    def run(self) -> dict[FlowKey, float]:
        """Per-flow finish times of iterations ``0 .. cfg.iterations - 1`` (seconds after
        the common start); ``nan`` for a flow that never arrives (it cannot: every queue
        drains)."""
        if self.cfg.online and self.cfg.entered:
            for g in self.groups:
                g.alive |= g.iteration == 0 and g.opening
        self._advance_lanes()
        if self.cfg.online and self.cfg.report_period > 0:
            self._push(self.cfg.report_period, "report", None)
        while self._heap:
            t, _, kind, what = heapq.heappop(self._heap)
            self.now = t
            if kind == "tx":
                link, fid, hop, size = cast(tuple[str, int, int, int], what)
                self._sent(link, fid, hop, size)
            elif kind == "task":
                self._task_end(cast(Lane[ComputeTask, int], what))
            elif kind == "report":
                for f in self.flows:
                    f.reported = f.sent
                if self._heap:  # anything else to come: report again a period on
                    self._push(self.now + self.cfg.report_period, "report", None)
            else:
                self._replan_pending = False
                self._replan()
        return {f.key: f.finish for f in self.flows}

    def _push(self, t: float, kind: str, what: object) -> None:
        heapq.heappush(self._heap, (t, next(self._seq), kind, what))

    # ------------------------------------------------------------ hosts and ports

    def _release(self, fids: list[int]) -> None:
        events = False
        for fid in fids:
            f = self.flows[fid]
            first = self.links[f.path[0]]
            first.ready.append(fid)
            g = self.groups[f.group]
            if not g.released:
                g.released = True
                events = True
                self._started(g)
                if self.cfg.report_period > 0:  # the release's report carries the host's bytes
                    for other in first.ready:
                        self.flows[other].reported = self.flows[other].sent
            self._serve(f.path[0])
        if events:
            self._group_event()

    def _started(self, g: _Group) -> None:
        """A group's first flow left: it is in flight, it dates its iteration's start,
        and its iteration's opening groups are in flight too (anticipated)."""
        key = (g.ef.job, g.iteration)
        self.starts[key] = min(self.starts.get(key, math.inf), self.now - g.ef.t_ref)
        g.alive = True
        for gi in self.instances[key]:
            if self.groups[gi].opening:
                self.groups[gi].alive = True

    def _serve(self, name: str) -> None:
        """Start the next transmission on an idle link, if it has anything to send."""
        link = self.links[name]
        if link.busy:
            return
        if link.ready:  # a host's first link: round-robin over its flows
            fid = link.ready.popleft()
            f = self.flows[fid]
            f.sent += 1
            if f.sent < f.packets:
                link.ready.append(fid)
            self._transmit(name, fid, 0, self._packet_bytes(f, f.sent - 1))
            return
        for level in sorted(link.queues, reverse=True):
            q = link.queues[level]
            if q:
                fid, hop, size = q.popleft()
                self._transmit(name, fid, hop, size)
                return

    def _packet_bytes(self, f: _Flow, k: int) -> int:
        if k == f.packets - 1:
            return f.last_bytes
        return self.cfg.payload_bytes + self.cfg.header_bytes

    def _transmit(self, name: str, fid: int, hop: int, size: int) -> None:
        link = self.links[name]
        link.busy = True
        self._push(self.now + size / link.rate, "tx", (name, fid, hop, size))

    def _sent(self, name: str, fid: int, hop: int, size: int) -> None:
        """A packet of ``size`` bytes left link ``name`` (hop ``hop`` of its flow's path)."""
        self.links[name].busy = False
        f = self.flows[fid]
        if hop + 1 < len(f.path):
            nxt = f.path[hop + 1]
            # classified on entering the switch; a host's own queue has no classes
            level = 0 if self.links[nxt].fifo else self.level.get(f.slot, 0)
            self.links[nxt].queues.setdefault(level, deque()).append((fid, hop + 1, size))
            self._serve(nxt)
        else:
            f.delivered += 1
            if f.delivered == f.packets:
                self._arrived(fid)
        self._serve(name)

    # ------------------------------------------------------------ compute

    def _arrived(self, fid: int) -> None:
        f = self.flows[fid]
        f.finish = self.now
        self.loop.arrived[f.key] = self.now
        g = self.groups[f.group]
        if all(not math.isnan(self.flows[i].finish) for i in g.flows):
            g.finished = True
            self._group_event()
        self._advance_lanes()

    def _task_end(self, lane: Lane[ComputeTask, int]) -> None:
        self._play(self.loop.end(lane))
        self._advance_lanes()

    def _advance_lanes(self) -> None:
        for step in self.loop.advance(self.now):
            self._play(step)

    def _play(self, step: Step[ComputeTask, int]) -> None:
        """Do what a step of the closed loop says, at ``self.now`` (its instant)."""
        key = (step.lane.job, step.iteration)
        if isinstance(step, Ended):
            self.iteration_end[key] = max(self.iteration_end.get(key, -math.inf), self.now)
            self._release(self.produces[step.task.id])
            return
        if isinstance(step, Started):
            self._push(step.end, "task", step.lane)
        elif step.lane.fresh[step.iteration]:
            self._release(step.lane.fresh[step.iteration])
        else:
            return  # entered with nothing to release: not yet a start of the iteration
        self.iteration_start[key] = min(self.iteration_start.get(key, math.inf), self.now)

    # ------------------------------------------------------------ the controller

    def _group_event(self) -> None:
        if not self.cfg.online:
            return
        at = max(self._last_replan + self.cfg.replan_interval, self.now + self.cfg.replan_delay)
        if self.now >= at:
            self._replan()
        elif not self._replan_pending:
            self._replan_pending = True
            self._push(at, "replan", None)

    def _replan(self) -> None:
        self._last_replan = self.now
        newest: dict[tuple[str, str], _Group] = {}  # one instance per (job, group)
        for g in self.groups:
            if g.alive:
                key = (g.ef.job, g.ef.group)
                if key not in newest or newest[key].iteration < g.iteration:
                    newest[key] = g
        alive = [
            replace(g.ef, t_ref=self.starts.get((g.ef.job, g.iteration), self.now) + g.ef.t_ref)
            for g in newest.values()
            if not g.finished
        ]
        if not alive:
            return
        sched = self.policy.schedule(alive, self.plan_net, self._left(alive), self.now)
        levels = flow_levels(sched, alive, tuple(range(1, self.cfg.levels)))
        for ef in alive:
            for f in ef.flows:
                lv = levels.get((ef.name, f.index))
                if lv is not None:
                    self.level[(ef.job, ef.group, f.index)] = lv

    def _left(self, alive: Sequence[EchelonFlow]) -> dict[FlowKey, int] | None:
        """Bytes left of each flow in flight as its host last reported them, told as the
        controller tells them (:func:`echelon.progress.bytes_left`)."""
        left: dict[FlowKey, int] = {}
        for ef in alive:
            sent = {}
            for fl in ef.flows:
                f = self.flows[self.by_key[(ef.name, fl.index)]]
                if f.reported:
                    sent[fl.index] = min(fl.size, f.reported * self.cfg.payload_bytes)
            left.update(bytes_left(ef, sent))
        return left or None

"""Packet-level model of one iteration on a small network: queues keep their packets' class.

The fluid engine (:mod:`sim.engine`) re-ranks every byte in flight at a re-plan.
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
* **Switch ports.** Every later link is a port with strict priority between
  levels and FIFO inside a level (the bottleneck's HTB classes, one pfifo each),
  non-preemptive. A packet's level is looked up when it reaches the switch in
  front of the link, from the levels installed at that moment: ``initial`` (per
  (job, group, flow index); absent: level 0, best effort) and, ``online``, the
  re-plans.
* **Re-plans** (``online``), as the simulator's controller model
  (:class:`sim.config.SimConfig`): at a group's release (its first flow
  released) or finish (its last flow delivered) a re-plan is due at
  ``max(last re-plan + replan_interval, event + replan_delay)``, events in
  between coalesce into it; it asks the policy at that instant over the groups
  in flight, counting every flow whole (what progress reports give), and
  quantises to ``levels`` switch levels (:func:`echelon.quantize.flow_levels`).
* **Compute.** Iteration 0 of each job, its plan's tasks: one at a time per
  (job, host) in plan order, each starting when its ``after_tasks`` ended and its
  ``after_flows`` arrived; a task's end releases the flows it produces, flows with
  no producer leave at time 0. One iteration only: the emulation's per-host
  barrier and the simulator's global one differ after it
  (:mod:`hostagent.closedloop`), and the cross-check compares iteration 0.

Not modelled: propagation and switch processing delay, the agents' 1-ms pacing
bursts, HTB's token leaks to lower classes; links are shared by nothing else.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from echelon.errors import SpecError
from echelon.model import EchelonFlow, FlowKey, IterationPlan
from echelon.policies import get_policy
from echelon.quantize import flow_levels
from echelon.schedule import Network
from sim.config import Plannable
from sim.predict import DEFAULT_HEADER_BYTES

#: (job, group, flow index): one classification entry on the switch, as in sim.engine
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
    header_bytes: int = DEFAULT_HEADER_BYTES
    payload_bytes: int = 1400

    def __post_init__(self) -> None:
        if self.levels < 2:
            raise SpecError("levels", f"need at least 2 switch levels, got {self.levels}")
        if self.payload_bytes <= 0 or self.header_bytes < 0:
            raise SpecError("payload_bytes", "payload > 0 and header >= 0 bytes required")
        if self.replan_interval < 0 or self.replan_delay < 0:
            raise SpecError("replan_delay", "re-plan interval and delay must be >= 0")


@dataclass
class _Flow:
    key: FlowKey
    slot: Slot
    path: tuple[str, ...]
    packets: int
    last_bytes: int
    group: int
    sent: int = 0
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


@dataclass
class _Task:
    lane: tuple[str, str]  # (job, host): one task at a time
    duration: float
    after_tasks: tuple[str, ...]
    after_flows: tuple[FlowKey, ...]
    produces: list[int] = field(default_factory=list)
    done: bool = False


class PacketModel:
    """One run of the packet-level model; :meth:`run` returns per-flow finish times."""

    def __init__(self, jobs: Sequence[Plannable], network: Network, cfg: PacketConfig) -> None:
        self.cfg = cfg
        self.net = network
        self.policy = get_policy(cfg.policy)
        self.now = 0.0
        self._heap: list[tuple[float, int, str, object]] = []
        self._seq = itertools.count()
        self.links = {name: _Link(rate) for name, rate in network.links.items()}
        self.flows: list[_Flow] = []
        self.by_key: dict[FlowKey, int] = {}
        self.groups: list[EchelonFlow] = []
        self.group_flows: list[list[int]] = []
        self.released: set[int] = set()  # groups with a released flow
        self.finished: set[int] = set()
        self.level: dict[Slot, int] = dict(cfg.initial_levels)
        self.tasks: dict[str, _Task] = {}
        self.lanes: dict[tuple[str, str], deque[str]] = {}
        self.running: set[tuple[str, str]] = set()
        self._last_replan = -math.inf
        self._replan_pending = False
        self.replans = 0
        for job in jobs:
            self._add(job.plan(0, 0.0))

    # ------------------------------------------------------------ set-up

    def _add(self, plan: IterationPlan) -> None:
        for ef in plan.echelons:
            self.groups.append(ef)
            gi = len(self.groups) - 1
            ids = []
            for f in ef.flows:
                path = tuple(self.net.path(f.src, f.dst))
                if not path:
                    raise SpecError(f"{ef.name}#{f.index}", f"no path from {f.src} to {f.dst}")
                n = max(1, math.ceil(f.size / self.cfg.payload_bytes))
                last = f.size - (n - 1) * self.cfg.payload_bytes + self.cfg.header_bytes
                self.flows.append(
                    _Flow((ef.name, f.index), (ef.job, ef.group, f.index), path, n, last, gi)
                )
                self.by_key[(ef.name, f.index)] = len(self.flows) - 1
                ids.append(len(self.flows) - 1)
            self.group_flows.append(ids)
        for t in plan.tasks:
            self.tasks[t.id] = _Task((plan.job, t.host), t.duration, t.after_tasks, t.after_flows)
            self.lanes.setdefault((plan.job, t.host), deque()).append(t.id)
        for key, task in plan.producer.items():
            if task not in self.tasks:
                raise SpecError(f"producer.{key[0]}#{key[1]}", f"unknown task {task!r}")
            self.tasks[task].produces.append(self.by_key[key])

    # ------------------------------------------------------------ the loop

    def run(self) -> dict[FlowKey, float]:
        producers = {f for t in self.tasks.values() for f in t.produces}
        self._release([i for i in range(len(self.flows)) if i not in producers])
        self._advance_lanes()
        while self._heap:
            t, _, kind, what = heapq.heappop(self._heap)
            self.now = t
            if kind == "tx":
                link, fid, hop, size = cast(tuple[str, int, int, int], what)
                self._sent(link, fid, hop, size)
            elif kind == "task":
                self._task_end(str(what))
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
            if f.group not in self.released:
                self.released.add(f.group)
                events = True
            self._serve(f.path[0])
        if events:
            self._group_event()

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
            level = self.level.get(f.slot, 0)  # classified on entering the switch
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
        g = f.group
        if all(not math.isnan(self.flows[i].finish) for i in self.group_flows[g]):
            self.finished.add(g)
            self._group_event()
        self._advance_lanes()

    def _task_end(self, tid: str) -> None:
        task = self.tasks[tid]
        task.done = True
        self.running.discard(task.lane)
        self._release(task.produces)
        self._advance_lanes()

    def _advance_lanes(self) -> None:
        for key, lane in self.lanes.items():
            if not lane or key in self.running:
                continue
            task = self.tasks[lane[0]]
            if not all(self.tasks[t].done for t in task.after_tasks):
                continue
            if not all(not math.isnan(self.flows[self.by_key[k]].finish) for k in task.after_flows):
                continue
            self.running.add(key)
            self._push(self.now + task.duration, "task", lane.popleft())

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
        alive = [self.groups[g] for g in sorted(self.released - self.finished)]
        if not alive:
            return
        sched = self.policy.schedule(alive, self.net, None, self.now)
        levels = flow_levels(sched, alive, tuple(range(1, self.cfg.levels)))
        for ef in alive:
            for f in ef.flows:
                lv = levels.get((ef.name, f.index))
                if lv is not None:
                    self.level[(ef.job, ef.group, f.index)] = lv
        self.replans += 1


def simulate_packets(
    jobs: Sequence[Plannable], network: Network, cfg: PacketConfig
) -> dict[FlowKey, float]:
    """Per-flow finish times of iteration 0 (seconds after the common start);
    ``nan`` for a flow that never arrives (it cannot: every queue drains)."""
    return PacketModel(jobs, network, cfg).run()

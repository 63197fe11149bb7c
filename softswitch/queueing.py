"""Egress queueing with simple_switch 1.15's ``QueueingLogicPriRL`` semantics.

Per egress port there are ``nb_queues`` priority queues (``--priority-queues``).
Each queue has its own depth (tail drop, default 64 packets) and its own rate
limiter in packets per second (0 = unlimited, the default). A packet's
departure time is fixed when it is enqueued::

    departure = max(now, last_departure_of_that_queue + 1 / rate)

so the first packet into an idle queue leaves at once. The egress side serves,
among queues whose head is due, the highest priority first (7 before 0). There
is no port shaper: packets of different queues are only ordered by this rule.
A packet whose priority is >= nb_queues is dropped, as simple_switch does.

The queue also keeps what simple_switch's queueing metadata reports, for the
egress pipeline that runs after it: the enqueue time and the depth (packets in
that port's queue *of that priority*) the packet found at enqueue, and the depth
it leaves behind at dequeue -- ``enq_timestamp``, ``enq_qdepth``, ``deq_qdepth``
(``egress_buffers.size(port, priority)`` before the push and after the pop in
simple_switch 1.15's ``enqueue`` and ``egress_thread``).

The clock is injected (``now`` arguments) so the rules can be tested exactly
with a fake clock; the data plane passes ``time.monotonic()``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from softswitch.errors import UsageError

T = TypeVar("T")

DEFAULT_DEPTH = 64
MAX_PORT = 511


@dataclass
class _Queue(Generic[T]):
    depth: int
    delay: float  # seconds between departures; 0 = unlimited
    rate: float
    last: float = float("-inf")
    #: (departure, item, enqueue time, depth found at enqueue)
    items: deque[tuple[float, T, float, int]] = field(default_factory=deque)


#: What :meth:`PriorityRateQueues.pop_due` hands the egress side per packet:
#: (port, priority, item, enqueue time, depth at enqueue, depth left at dequeue).
Departure = tuple[int, int, T, float, int, int]


@dataclass
class QueueStats:
    """Why packets were not queued; read by logs, tests and the benchmark."""

    enqueued: int = 0
    dequeued: int = 0
    dropped_priority: int = 0
    dropped_full: int = 0


class PriorityRateQueues(Generic[T]):
    """All egress ports' priority queues."""

    def __init__(self, nb_queues: int = 1, depth: int = DEFAULT_DEPTH, rate: float = 0.0) -> None:
        if not 1 <= nb_queues <= 32:
            raise UsageError("priority-queues", f"{nb_queues} is not in 1..32")
        self.nb_queues = nb_queues
        self._default_depth = depth
        self._default_rate = rate
        self.ports: dict[int, list[_Queue[T]]] = {}
        self.backlog = 0
        self.stats = QueueStats()

    def _port(self, port: int) -> list[_Queue[T]]:
        queues = self.ports.get(port)
        if queues is None:
            delay = 1.0 / self._default_rate if self._default_rate > 0 else 0.0
            queues = [
                _Queue[T](self._default_depth, delay, self._default_rate)
                for _ in range(self.nb_queues)
            ]
            self.ports[port] = queues
        return queues

    def add_port(self, port: int) -> None:
        """Create a port's queues now (they are otherwise created on first use)."""
        self._port(port)

    # ----------------------------------------------------------------- data path
    def push(self, port: int, priority: int, item: T, now: float) -> bool:
        """Enqueue; False if dropped (priority >= nb_queues, or the queue is full)."""
        if priority >= self.nb_queues or priority < 0:
            self.stats.dropped_priority += 1
            return False
        q = self._port(port)[priority]
        if len(q.items) >= q.depth:
            self.stats.dropped_full += 1
            return False
        nxt = q.last + q.delay
        departure = now if now > nxt else nxt
        q.last = departure
        q.items.append((departure, item, now, len(q.items)))
        self.backlog += 1
        self.stats.enqueued += 1
        return True

    def pop_due(self, now: float) -> list[Departure[T]]:
        """Every packet due at ``now``, per port highest priority first (see ``Departure``)."""
        out: list[Departure[T]] = []
        if not self.backlog:
            return out
        for port, queues in self.ports.items():
            for prio in range(self.nb_queues - 1, -1, -1):
                items = queues[prio].items
                while items and items[0][0] <= now:
                    _due, item, enq_time, enq_depth = items.popleft()
                    out.append((port, prio, item, enq_time, enq_depth, len(items)))
        self.backlog -= len(out)
        self.stats.dequeued += len(out)
        return out

    def next_departure(self) -> float | None:
        """Earliest head departure over all queues (None when everything is empty)."""
        if not self.backlog:
            return None
        best: float | None = None
        for queues in self.ports.values():
            for q in queues:
                if q.items:
                    t = q.items[0][0]
                    if best is None or t < best:
                        best = t
        return best

    # --------------------------------------------------------------- runtime CLI
    def _targets(self, port: int | None, priority: int | None) -> list[_Queue[T]]:
        if port is None:
            return [q for queues in self.ports.values() for q in queues]
        if not 0 <= port <= MAX_PORT:
            raise UsageError("port", f"{port} is not in 0..{MAX_PORT}")
        queues = self._port(port)
        if priority is None:
            return list(queues)
        if not 0 <= priority < self.nb_queues:
            raise UsageError("priority", f"{priority} is not in 0..{self.nb_queues - 1}")
        return [queues[priority]]

    def set_rate(self, pps: float, port: int | None = None, priority: int | None = None) -> None:
        """``set_queue_rate``: no port = every queue of every port (and ports seen later)."""
        if not pps >= 0:
            raise UsageError("rate", f"{pps} is not a rate >= 0 packets/s")
        if port is None:
            self._default_rate = pps
        for q in self._targets(port, priority):
            q.rate = pps
            q.delay = 1.0 / pps if pps > 0 else 0.0

    def set_depth(self, depth: int, port: int | None = None, priority: int | None = None) -> None:
        """``set_queue_depth``; packets already queued beyond a new depth stay queued.
        Depth 0 is accepted and drops every packet, as BMv2 does (its priority
        queueing refuses an item when ``size >= capacity``)."""
        if depth < 0:
            raise UsageError("depth", f"{depth} is not a depth >= 0 packets")
        if port is None:
            self._default_depth = depth
        for q in self._targets(port, priority):
            q.depth = depth

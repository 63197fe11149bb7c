"""When a host's flows may leave: closed loop (run the compute tasks) or open loop (fixed times).

Closed loop is what training does: a compute task starts when its predecessor
tasks have finished and its input flows have fully arrived, runs for its
duration, and its end releases the flows it produces. Late communication
therefore delays the consumer, the flows it produces and everything
downstream, and stretches the iteration.

Why this can run inside each host agent without notifications between hosts:
in every plan the paradigm builders produce, a task's input flows arrive at
its own host, its predecessor tasks run on that host, and a flow's producer
runs on the flow's source host (:func:`hostagent.scenario.parse` rejects
scenarios where this does not hold). The receiver thread reports completed
flows; everything else is local.

The rules are :mod:`echelon.lanes` (the packet-level model, :mod:`sim.packet`,
plays them too); this module is their wall-clock driver. Each ``(host, job)`` is
one *lane*: it runs that job's tasks on this host one at a time, in plan order,
iteration after iteration (different jobs on one host are different processes,
so their lanes run side by side -- as in the simulator, ``sim/core/engine.py``).
A lane enters iteration ``i + 1`` when it has finished its own iteration-``i``
tasks (a *local* barrier); entering releases the flows of that iteration it
sends that have no producer (a parameter server's pulls). The simulator instead
starts iteration ``i + 1`` of a job on every host when the whole iteration ``i``
has ended (a global barrier). For the demo's jobs the two coincide: the host
that ends an iteration last (the PS after its update, pipeline stage 0 after
its last backward step) is the one that starts the next, and the other hosts'
first tasks wait for its flows.

Times are seconds relative to the scenario's ``start_at``. A task's start is
computed from the instants its conditions held (kernel arrival stamps, the
virtual end of the previous task), not from when this process woke up, so
Python's scheduling latency does not pile up along the compute chain; only the
flows' real departure depends on the sender being awake.
"""

from __future__ import annotations

import queue
import time
from typing import Protocol

from echelon.lanes import Ended, Entered, Lanes
from hostagent.scenario import Scenario, TaskSpec

#: Longest the sender sleeps while waiting for something to release (re-checks stop_at).
MAX_WAIT_S = 0.05


class Releaser(Protocol):
    """What the sender asks: which flows are released, and when to look again."""

    def due(self, now: float) -> list[str]:
        """Flow uids released at or before ``now`` and not returned before."""
        ...

    def wait(self, now: float, limit: float) -> None:
        """Block until something may be due, at most until ``limit`` (relative times)."""
        ...

    def finished(self) -> bool:
        """Nothing more will ever be released (and, closed loop, every task ran)."""
        ...


class OpenLoop:
    """Every flow leaves at its fixed ``release`` time, whatever the network did."""

    def __init__(self, sc: Scenario, host: str) -> None:
        self.pending = sorted((f.release, e.uid(f)) for e, f in sc.flows_from(host))

    def due(self, now: float) -> list[str]:
        out = []
        while self.pending and self.pending[0][0] <= now:
            out.append(self.pending.pop(0)[1])
        return out

    def wait(self, now: float, limit: float) -> None:
        wake = self.pending[0][0] if self.pending else limit
        time.sleep(max(0.0, min(wake, limit) - now))

    def finished(self) -> bool:
        return not self.pending


class ClosedLoop:
    """One host's lanes: runs its tasks as their inputs arrive, releases what they produce.

    Pure bookkeeping plus a queue for arrivals: :meth:`arrive` may be called from
    the receiver thread; everything else runs in the sender's thread.
    """

    def __init__(self, sc: Scenario, host: str) -> None:
        self.host = host
        #: this host's lanes; a flow released is its uid
        self.loop: Lanes[TaskSpec, str] = Lanes()
        #: ``{task id: {job, iteration, start, end}}``: what the report needs.
        self.records: dict[str, dict[str, float | int | str]] = {}
        self._inbox: queue.Queue[tuple[str, float]] = queue.Queue()
        self._release: list[tuple[float, str]] = []  # (release instant, uid), not yet due
        # Flows this host sends with no producer task.
        produced = {uid for t in sc.tasks for uid in t.produces}
        unproduced = [(e, e.uid(f)) for e, f in sc.flows_from(host) if e.uid(f) not in produced]
        jobs = {e.job for e in sc.echelons} | {t.job for t in sc.tasks if t.host == host}
        for job in sorted(jobs):
            its = sorted({e.iteration for e in sc.echelons if e.job == job}
                         | {t.iteration for t in sc.tasks if t.job == job})  # fmt: skip
            mine = [t for t in sc.tasks if t.job == job and t.host == host]
            fresh = [(e.iteration, uid) for e, uid in unproduced if e.job == job]
            if not mine and not fresh:
                continue  # this host plays no part in the job
            lane = self.loop.lane(job, host, its)
            for t in mine:
                lane.tasks[t.iteration].append(t)
            for i, uid in fresh:
                lane.fresh[i].append(uid)
        self._advance(0.0)

    # -- called by the receiver thread
    def arrive(self, uid: str, t: float) -> None:
        """Flow ``uid`` fully arrived at this host at ``t`` (thread-safe)."""
        self._inbox.put((uid, t))

    # -- Releaser
    def due(self, now: float) -> list[str]:
        self._drain()
        self._advance(now)
        out = [uid for t, uid in self._release if t <= now]
        self._release = [(t, uid) for t, uid in self._release if t > now]
        return out

    def wait(self, now: float, limit: float) -> None:
        wakes = [t for t, _ in self._release] + [
            ln.running[2] for ln in self.loop.lanes.values() if ln.running is not None
        ]
        until = min([limit, now + MAX_WAIT_S, *wakes])
        try:
            item = self._inbox.get(timeout=max(0.0, until - now))
        except queue.Empty:
            return
        self._inbox.put(item)  # handled by the next due()

    def finished(self) -> bool:
        return not self._release and all(ln.done() for ln in self.loop.lanes.values())

    def iteration_starts(self) -> dict[str, dict[int, float]]:
        """``{job: {iteration: instant}}`` at which this host released the
        iteration's producer-less flows (its part of the iteration's start)."""
        out: dict[str, dict[int, float]] = {}
        for ln in self.loop.lanes.values():
            for i, t in ln.entered.items():
                if ln.fresh[i]:
                    out.setdefault(ln.job, {})[i] = t
        return out

    # -- internals
    def _drain(self) -> None:
        while True:
            try:
                uid, t = self._inbox.get_nowait()
            except queue.Empty:
                return
            self.loop.arrived.setdefault(uid, t)

    def _advance(self, now: float) -> None:
        """Run every lane as far as it can go by ``now``; queue what it releases."""
        for step in self.loop.advance(now, end_by=now):
            if isinstance(step, Entered):
                self._release += [(step.at, uid) for uid in step.lane.fresh[step.iteration]]
            elif isinstance(step, Ended):
                task = step.task
                self.records[task.id] = {"job": task.job, "iteration": task.iteration,
                                         "start": step.start, "end": step.end}  # fmt: skip
                self._release += [(step.end, uid) for uid in task.produces]


def releaser(sc: Scenario, host: str) -> OpenLoop | ClosedLoop:
    return ClosedLoop(sc, host) if sc.release == "closed" else OpenLoop(sc, host)

"""Online re-planning: progress reports in, changed entries out, at most once per interval.

``--replan online`` (``--replan static`` is the behaviour before: priorities
computed at registration from iteration 0, for good). One background thread:

1. A report that changes what is in flight (:mod:`controlplane.inflight`) calls
   :meth:`OnlinePlanner.kick` with the instant it arrived and wakes the thread.
2. The thread re-plans at once if the previous re-plan *started* at least
   ``interval`` ago, else when the interval ends; every report arriving meanwhile
   is covered by that one re-plan (a burst coalesces). This is the simulator's
   rule (``SimConfig.replan_interval``, ``sim/core/engine.py``), so the re-plan rate
   the evaluation reports is the rate this thread produces for the same events.
3. A re-plan, under the controller lock: the alive instances -> the core policy
   at ``now`` over exactly those groups and the bytes their hosts reported sent
   (:func:`controlplane.planning.plan_instances`:
   ``policy.schedule(echelons, network, remaining, now)`` on one policy object per planner, then
   ``echelon.quantize.quantize``) -> their :class:`GroupPlan` replaces the
   group's previous plan -> the controller writes only the entries that changed,
   inserts and modifies before deletes, through the same path as a registration
   (``apply_overlay``, :class:`Replannable`).

Groups not in flight keep the entries they have (their last online plan, or the
static plan if they were never in flight): no write is spent on a group that
finished, and a registered packet always matches some level >= 1.

Measured per re-plan: reaction time of every report it covers (arrival -> the
switches acknowledged the last write), the same without the deliberate wait for
the interval to end (``reaction_active``: from max(arrival, interval end)), and
its parts: wake-up (thread, lock), policy + quantiser, the switches' writes; its
duration, updates written; totals in :meth:`OnlinePlanner.stats` (``GET /progress``).
"""

from __future__ import annotations

import gc
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from controlplane.entries import GroupPlan
from controlplane.inflight import ProgressTracker
from controlplane.planning import plan_instances
from controlplane.registry import GroupIds
from echelon.errors import SpecError
from echelon.jobs import Description
from echelon.policies import get_policy
from echelon.schedule import Policy
from echelon.topology import TopologyNetwork

log = logging.getLogger(__name__)

MODES = ("static", "online")
#: What a group not in flight gets: ``keep`` its last levels (no writes), ``lowest``
#: level 1 everywhere (as the simulator ranks a flow not yet re-planned: last).
IDLE_MODES = ("keep", "lowest")
#: Seconds between two :func:`freeze_heap` calls of the re-plan thread (what the
#: re-plans cached since: plans, entries; each call collects only what is not frozen).
FREEZE_EVERY_S = 1.0
#: Reaction-time samples kept for the percentiles in ``GET /progress``.
SAMPLES = 20000


@dataclass(frozen=True)
class Written:
    """What a change wrote: updates (all switches) and the seconds the writes took."""

    updates: int
    seconds: float


class Replannable(Protocol):
    """What the re-planner needs of the controller (:class:`controlplane.controller.Controller`)."""

    @property
    def lock(self) -> AbstractContextManager[Any]: ...
    @property
    def progress(self) -> ProgressTracker: ...
    @property
    def policy(self) -> str: ...
    @property
    def network(self) -> TopologyNetwork: ...
    def registered(self) -> list[tuple[Description, tuple[GroupIds, ...]]]: ...
    def effective(self) -> list[GroupPlan]: ...
    def apply_overlay(self, plans: list[GroupPlan]) -> Written: ...


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise SpecError("replan", f"unknown re-plan mode {mode!r} (one of {list(MODES)})")


def freeze_heap() -> None:
    """Put every object alive now out of the cyclic collector's reach (``gc.freeze``).

    Why: a generation-2 collection scans every tracked object and holds the GIL
    while it does -- measured 60 ms with 100 jobs registered (their parsed
    descriptions, plans and cached entries), and 10-26 ms over what a few hundred
    re-plans cache -- so a re-plan that meets one reacts that much late. What is
    alive after a registration change, or has survived a second of re-plans, is
    long-lived state; frozen, an automatic collection only scans what was made
    since, and this call's own full collection likewise. Frozen objects are still
    freed by reference counting when dropped (a removed job's state, an evicted
    cache entry: the plans and entries are acyclic); only reference cycles among
    them would stay until the process ends. Called by the controller in online
    mode after every change of the registrations, and by the re-plan thread every
    :data:`FREEZE_EVERY_S` right after a re-plan.
    """
    gc.collect()  # what is garbage now is freed, not frozen
    gc.freeze()


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100: numpy's ``inverted_cdf``); ``None`` for
    no samples."""
    return float(np.percentile(values, q, method="inverted_cdf")) if values else None


def _ms(samples: Iterable[float], full: bool = False) -> dict[str, Any]:
    """p50 and p99 of ``samples`` (seconds) in ms; ``full``: also how many and the max."""
    ms = [s * 1e3 for s in samples]
    pcts = {"p50": percentile(ms, 50), "p99": percentile(ms, 99)}
    return {"n": len(ms), **pcts, "max": max(ms, default=None)} if full else pcts


class OnlinePlanner:
    """The re-planning thread of one controller."""

    def __init__(self, controller: Replannable, interval: float, idle: str = "keep") -> None:
        if not interval >= 0.0:
            raise SpecError("replan_interval", f"must be >= 0 seconds, got {interval!r}")
        if idle not in IDLE_MODES:
            raise SpecError("idle_level", f"unknown mode {idle!r} (one of {list(IDLE_MODES)})")
        self.ctl = controller
        self.interval = interval
        self.idle = idle
        self._cond = threading.Condition()
        self._pending: list[float] = []  # arrival instants of the reports not yet covered
        self._ticket = 0  # reports that asked for a re-plan
        self._done = 0  # highest ticket covered by a finished re-plan
        self._last_start = -float("inf")
        self._frozen_at = time.monotonic()
        self.freezes = 0
        self._stop = False
        #: the policy object every re-plan asks, by policy name: a policy may remember
        #: between re-plans, as it does between the simulator's within a run
        self._core: tuple[str, Policy] | None = None
        self._thread = threading.Thread(target=self._run, name="online-replan", daemon=True)
        # measurements
        self.replans = 0
        self.failures = 0
        self.updates = 0
        #: per covered report: arrival -> the switches acknowledged the last write
        self.reactions: deque[float] = deque(maxlen=SAMPLES)
        #: the same from max(arrival, end of the interval): without the deliberate wait
        self.active: deque[float] = deque(maxlen=SAMPLES)
        #: max(arrival, end of the interval) -> the re-plan started (thread wake-up,
        #: waiting for the controller lock or for a re-plan already running)
        self.wakes: deque[float] = deque(maxlen=SAMPLES)
        #: the switches' writes of each re-plan (RPCs until acknowledged)
        self.write_durations: deque[float] = deque(maxlen=SAMPLES)
        self.durations: deque[float] = deque(maxlen=SAMPLES)
        #: the policy + quantiser part of each re-plan (the rest is diff + writes)
        self.plan_durations: deque[float] = deque(maxlen=SAMPLES)
        self.started_at = time.monotonic()
        self.last_error: str | None = None
        self._last_result: dict[int, dict[str, Any]] = {}

    # ------------------------------------------------------------ control

    def start(self) -> None:
        self.started_at = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=10.0)

    def kick(self, received: float) -> int:
        """A report that arrived at ``received`` changed what is in flight; returns its
        ticket (for :meth:`wait`)."""
        with self._cond:
            self._ticket += 1
            self._pending.append(received)
            self._cond.notify_all()
            return self._ticket

    def wait(self, ticket: int, timeout: float) -> dict[str, Any]:
        """Block until a re-plan covering ``ticket`` finished; what it did."""
        with self._cond:
            ok = self._cond.wait_for(lambda: self._done >= ticket or self._stop, timeout)
            res = self._last_result.get(ticket, {})
        return {"covered": ok and self._done >= ticket, **res}

    # ------------------------------------------------------------ the thread

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stop:
                    now = time.monotonic()
                    due = self._last_start + self.interval
                    if self._pending and now >= due:
                        break
                    expiry = self.ctl.progress.next_expiry()
                    if expiry is not None and now >= expiry and now >= due:
                        break  # a silent job leaves the plan
                    waits = [due - now] if self._pending else []
                    if expiry is not None:
                        waits.append(max(expiry - now, due - now, 0.001))
                    self._cond.wait(min(waits) if waits else None)
                if self._stop:
                    return
                pending, self._pending = self._pending, []
                ticket = self._ticket
                due = self._last_start + self.interval
                self._last_start = time.monotonic()
            self._replan(pending, ticket, due)
            if time.monotonic() - self._frozen_at >= FREEZE_EVERY_S:
                # right after a re-plan: the next one is least likely to be due now
                self._frozen_at = time.monotonic()
                freeze_heap()
                self.freezes += 1

    def _replan(self, pending: list[float], ticket: int, due: float = -math.inf) -> None:
        """Re-plan what is in flight; ``pending`` are the covered reports' arrival
        instants, ``due`` when the interval allowed this re-plan to start."""
        t0 = t_plan = time.monotonic()
        t_write = 0.0
        written = 0
        error: str | None = None
        try:
            with self.ctl.lock:
                alive = self.ctl.progress.alive()
                jobs = {job.job_id: (job, ids) for job, ids in self.ctl.registered()}
                instances = []
                for inst in alive:
                    if inst.job not in jobs:
                        continue
                    job, ids = jobs[inst.job]
                    gid = next((g for g in ids if g.group == inst.group), None)
                    if gid is not None:
                        start = inst.iteration_start - self.started_at
                        instances.append((job, gid, start, inst.sent))
                now = t0 - self.started_at
                name = self.ctl.policy
                if self._core is None or self._core[0] != name:
                    self._core = (name, get_policy(name))
                plans = plan_instances(name, instances, self.ctl.network, now, self._core[1])
                if self.idle == "lowest" and name != "fifo":
                    plans += self._lowest({(j.job_id, g.group) for j, g, _, _ in instances})
                t_plan = time.monotonic()
                done = self.ctl.apply_overlay(plans)
                written, t_write = done.updates, done.seconds
        except Exception as exc:  # a switch that refuses must not kill the thread
            error = f"{type(exc).__name__}: {exc}"
            log.warning("online re-plan failed: %s", error)
        t1 = time.monotonic()
        with self._cond:
            self.replans += 1
            self.updates += written
            self.durations.append(t1 - t0)
            self.plan_durations.append(t_plan - t0)
            self.write_durations.append(t_write)
            if error is None:
                self.reactions.extend(t1 - r for r in pending)
                # the same, less the deliberate wait for the interval to end
                self.active.extend(t1 - max(r, due) for r in pending)
                self.wakes.extend(t0 - max(r, due) for r in pending)
            else:
                self.failures += 1
                self.last_error = error
            result = {
                "replan_ms": round((t1 - t0) * 1e3, 3),
                "plan_ms": round((t_plan - t0) * 1e3, 3),
                "reaction_ms": round((t1 - min(pending)) * 1e3, 3) if pending else None,
                "reaction_active_ms": (
                    round((t1 - max(min(pending), due)) * 1e3, 3) if pending else None
                ),
                "interval_wait_ms": (
                    round(max(0.0, due - min(pending)) * 1e3, 3) if pending else None
                ),
                "wake_ms": round((t0 - max(min(pending), due)) * 1e3, 3) if pending else None,
                "write_ms": round(t_write * 1e3, 3),
                "updates": written,
                "error": error,
            }
            self._last_result = {ticket: result}
            for t in range(self._done + 1, ticket):
                self._last_result[t] = result
            self._done = max(self._done, ticket)
            self._cond.notify_all()

    def _lowest(self, alive: set[tuple[str, str]]) -> list[GroupPlan]:
        """Every group not in flight at level 1 (range keys kept: modified in place)."""
        out = []
        for p in self.ctl.effective():
            if (p.job, p.group) in alive:
                continue
            if p.priority != 1 or any(r.priority != 1 for r in p.ranges):
                ranges = tuple(replace(r, priority=1) for r in p.ranges)
                out.append(replace(p, priority=1, ranges=ranges))
        return out

    # ------------------------------------------------------------ measurements

    def stats(self) -> dict[str, Any]:
        with self._cond:
            elapsed = max(time.monotonic() - self.started_at, 1e-9)
            return {
                "interval_s": self.interval,
                "replans": self.replans,
                "failures": self.failures,
                "updates": self.updates,
                "replans_per_s": self.replans / elapsed,
                "updates_per_s": self.updates / elapsed,
                "reaction_ms": _ms(self.reactions, full=True),
                "reaction_active_ms": _ms(self.active, full=True),
                "wake_ms": _ms(self.wakes),
                "replan_ms": _ms(self.durations),
                "plan_ms": _ms(self.plan_durations),
                "write_ms": _ms(self.write_durations),
                "heap_freezes": self.freezes,
                "last_error": self.last_error,
            }

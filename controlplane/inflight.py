"""What is in flight: the controller's side of the hosts' progress reports.

Which instance of each registered group is in flight right now.

Hosts tell the controller, per job and iteration, which groups they have started
sending (``released``) and which groups' flows addressed to them have all
arrived (``finished``). A report is a *snapshot*, not an event::

    {"job": "dp", "host": "h4", "iteration": 3, "session": "9f2c", "seq": 17,
     "released": ["push"], "finished": ["pull"], "sent": {"push": [[0, 65536]]}}

``released``/``finished`` list everything this host has seen of ``iteration`` so
far, so a report carries the whole state of its (job, host) and any later report
replaces a lost earlier one. That is how lost reports and restarts are tolerated:

* **Lost or reordered reports.** Per (job, host) the controller keeps the
  snapshot with the highest ``seq`` of the current ``session``; an older or
  repeated one is ignored (idempotent), a newer one replaces it whole. A lost
  "finished" is implied by that host's next report of a later iteration (closed
  loop: a host enters iteration ``i + 1`` only after it has received what it
  needed of iteration ``i``).
* **Reporter restart.** A new ``session`` string (the library draws a random one
  per process) resets that host's sequence.
* **Controller restart.** Progress is soft state, never persisted: the next
  report of each host rebuilds it. Until then the switch keeps the entries it has.
* **Job restart.** ``run`` numbers the times a job was started from the beginning
  (the host agent sends its scenario's start instant in ms; a training process its
  launch time). A report with a higher ``run`` than the job's makes the controller
  forget the job's progress (what was in flight is not any more) and rebuild it from
  the reports that follow; one with a lower ``run`` is stale and ignored. A reporter
  restarting in the middle of a run keeps the run's number.
* **Silent jobs.** A job with no report for ``timeout_s`` has nothing in flight
  (its reporter died or stopped reporting); its groups leave the re-plan.

From the snapshots, per (job, group): the current *instance* is the highest
iteration any host reported it in; it is **released** once any host lists it
(released or finished), and **finished** once every host that receives its flows
(the ``dst`` of its flows in the registration) has listed it as finished in that
iteration or reported a later iteration. Released and not finished = *alive*:
the set the policy re-plans, as in the simulator (``sim/core/engine.py``).

**Opening groups are anticipated.** A job's *opening* groups (released a fixed compute
time, or none, after every iteration's start: their release waits on no flow,
:func:`echelon.jobs.opening_groups`, ``Description.opening``) are alive
in iteration ``i`` as soon as any host of the job reports iteration ``i`` -- even a
snapshot with nothing in it, which a host sends when it *enters* the iteration
(``ProgressReporter.entered``). Why: a report that a group was released reaches the
controller with its first packets, and the re-plan lands a reaction time later
(3-12 ms); until then the packets carry the levels the group last had, and on a
slow port those already queued keep them (measured in docs/demo.md: 64 packets of a
pull queued at stale levels, 53 ms of a 10 Mbit/s port). A host that says "I am
starting iteration 0" before its first byte lets the controller plan the opening
groups before they send -- all of them at once: a group released on compute alone (a
pipeline's first activations) planned only at its release would change the levels
of the others a reaction time late, while their packets queue, and the outcome would
hang on the controller's latency (docs/measurements/demo.md). Such a report says
nothing of *when* the iteration starts: until a first real release of that iteration
sets its start, an anticipated group counts as starting at the moment of each re-plan
(it may start any moment; the report's own time would make the job look overdue and
rank it above jobs that did start).

**Bytes sent.** A snapshot also says, per released group, how many payload bytes each
of this host's flows has sent (``sent``); the host agent refreshes it every progress
period (50 ms by default) while it sends. Such a refresh changes nothing in flight, so it
starts no re-plan; the next re-plan an event starts reads the latest figures, and the
policy ranks each flow by the bytes it has left, as the simulator does. Without them
every flow in flight counts whole, and a group half sent loses its place to an equal one
just released: measured on two jobs that take turns on a link (docs/measurements/demo.md).

**When.** A group a snapshot lists first is dated when the host took the snapshot
(``at``, less transit than the arrival by 2-6 ms on the emulation, differing between
hosts), at most :data:`echelon.progress.MAX_REPORT_AGE_S` before its arrival: the
iteration's start, and with it every deadline of the job, then does not depend on
which host's report came through first.

Why hosts and not the switch's per-class counters (docs/controller.md, "Progress
signals"): counters tell that bytes of a class passed, not that a group was
released (bytes may queue at the sender) nor that it finished (a pause is not an
end); they mix the iterations of one group, and reading them is a poll whose
period adds to the reaction time.

Pure bookkeeping, thread-safe, no I/O; the controller feeds it registrations and
reports and asks :meth:`ProgressTracker.alive` at each re-plan.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controlplane.registry import UnknownJobError
from echelon.errors import SpecError, UnknownHostError
from echelon.progress import MAX_REPORT_AGE_S, ReportBody
from echelon.specs import validate

#: Default: a job silent for this long has nothing in flight (seconds).
DEFAULT_TIMEOUT_S = 30.0


def parse_report(data: Any, hosts: Iterable[str] | None = None) -> ReportBody:
    """Validate a report body (the schema both sides share); ``SpecError`` names the
    bad field."""
    if not isinstance(data, Mapping):
        raise SpecError("report", f"must be a mapping, got {type(data).__name__}")
    m = validate(ReportBody, data)
    if hosts is not None and m.host not in set(hosts):
        raise UnknownHostError("host", f"unknown host {m.host!r}")
    return m


@dataclass(frozen=True)
class Instance:
    """The in-flight instance of one (job, group): ``iteration``, when its release was
    first reported (controller clock) and the job's estimated iteration start."""

    job: str
    group: str
    iteration: int
    released_at: float
    iteration_start: float
    #: flow index -> payload bytes its sender has reported sent in ``iteration``
    #: (absent: nothing reported; the flow counts whole)
    sent: Mapping[int, int] = field(default_factory=dict)


@dataclass
class _Group:
    receivers: frozenset[str]
    t_ref: float
    opening: bool = False
    iteration: int = -1
    released_at: float = 0.0
    finished: bool = True
    #: alive because a host entered ``iteration``; no host has listed it there yet
    anticipated: bool = False


@dataclass
class _Job:
    groups: dict[str, _Group]
    snaps: dict[str, ReportBody] = field(default_factory=dict)
    last_report: float = 0.0
    run: int = 0
    #: iteration -> estimated start (min over its groups of release time - t_ref);
    #: absent while only an entering host told of the iteration
    starts: dict[int, float] = field(default_factory=dict)


class ProgressTracker:
    """Aggregates host snapshots into the alive instances of every registered group."""

    def __init__(
        self,
        clock: Callable[[], float],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """``clock``: the controller's (monotonic) clock; ``wall``: the clock a report's
        ``at`` is read against (Unix seconds)."""
        self._clock = clock
        self._wall = wall
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._jobs: dict[str, _Job] = {}
        self.reports = 0
        self.ignored = 0

    # ------------------------------------------------------------ registrations

    def add_job(
        self,
        job: str,
        groups: Mapping[str, tuple[frozenset[str], float]],
        opening: Collection[str] = (),
    ) -> None:
        """``groups``: group -> (hosts receiving its flows, its planned ``t_ref``);
        ``opening``: those whose release waits on no flow (anticipated)."""
        with self._lock:
            self._jobs[job] = _Job({g: _Group(r, t, g in opening) for g, (r, t) in groups.items()})

    def remove_job(self, job: str) -> None:
        with self._lock:
            self._jobs.pop(job, None)

    # ------------------------------------------------------------ reports

    def ingest(self, rep: ReportBody) -> bool:
        """Apply one snapshot; ``True`` when the alive set or an instance changed
        (a re-plan is due), ``False`` for a duplicate, stale or no-op report."""
        now = self._clock()
        with self._lock:
            job = self._jobs.get(rep.job)
            if job is None:
                raise UnknownJobError("job", f"no job {rep.job!r} is registered")
            for name in ("released", "finished", "sent"):
                for g in sorted(getattr(rep, name)):
                    if g not in job.groups:
                        raise SpecError(name, f"job {rep.job!r} has no group {g!r}")
            self.reports += 1
            if rep.run < job.run:  # from a run of the job that has been restarted since
                self.ignored += 1
                return False
            restarted = rep.run > job.run
            if restarted:
                self._restart(job, rep.run)
            old = job.snaps.get(rep.host)
            if old is not None and old.session == rep.session and rep.seq <= old.seq:
                self.ignored += 1
                return False
            job.snaps[rep.host] = rep
            job.last_report = now
            return self._update(job, now - self._transit(rep)) or restarted

    def _transit(self, rep: ReportBody) -> float:
        """How long ago the snapshot was taken, by its ``at`` (0 without one, or from a
        clock ahead of ours; at most :data:`MAX_REPORT_AGE_S`)."""
        if rep.at is None:
            return 0.0
        return min(max(self._wall() - rep.at, 0.0), MAX_REPORT_AGE_S)

    @staticmethod
    def _restart(job: _Job, run: int) -> None:
        """Forget a job's progress: it runs again from the start (restarted, or played
        again by the demo); what was in flight is not any more."""
        job.run = run
        job.snaps.clear()
        job.starts.clear()
        for g in job.groups.values():
            g.iteration, g.released_at, g.finished, g.anticipated = -1, 0.0, True, False

    def _update(self, job: _Job, now: float) -> bool:
        """Fold the job's snapshots in; ``now``: when the newest one was taken (a group
        it lists first is dated then)."""
        changed = False
        entered = max((s.iteration for s in job.snaps.values()), default=-1)
        for name, g in job.groups.items():
            seen = (s for s in job.snaps.values() if name in s.released or name in s.finished)
            listed = max((s.iteration for s in seen), default=-1)
            it = max(listed, entered) if g.opening else listed
            if it > g.iteration:
                g.iteration, g.released_at = it, now
                g.anticipated = listed < it
                if not g.anticipated:
                    self._estimate_start(job, it, now - g.t_ref)
                g.finished = False
                changed = True
            elif g.anticipated and listed == g.iteration:
                # the release we anticipated: it may set the iteration's start (the
                # plan's t_ref stops following "now": re-plan)
                g.anticipated = False
                g.released_at = now
                changed |= self._estimate_start(job, it, now - g.t_ref)
            if g.iteration < 0 or g.finished:
                continue
            if all(self._received(job.snaps.get(h), name, g.iteration) for h in g.receivers):
                g.finished = True
                changed = True
        for it in [i for i in job.starts if i < max(job.starts) - 1]:
            del job.starts[it]  # keep the current and the previous iteration only
        return changed

    @staticmethod
    def _estimate_start(job: _Job, it: int, start: float) -> bool:
        """Fold one release's estimate of iteration ``it``'s start in (the earliest
        wins); ``True`` if the estimate moved."""
        old = job.starts.get(it)
        if old is not None and old <= start:
            return False
        job.starts[it] = start
        return True

    @staticmethod
    def _received(snap: ReportBody | None, group: str, iteration: int) -> bool:
        if snap is None:
            return False
        return snap.iteration > iteration or (
            snap.iteration == iteration and group in snap.finished
        )

    @staticmethod
    def _sent(job: _Job, group: str, iteration: int) -> dict[int, int]:
        """Bytes sent per flow of ``group``'s instance: from each host's snapshot of that
        iteration (a flow has one sender; the largest figure wins should two disagree)."""
        out: dict[int, int] = {}
        for snap in job.snaps.values():
            if snap.iteration != iteration:
                continue
            for index, nbytes in snap.sent.get(group, ()):
                out[index] = max(out.get(index, 0), nbytes)
        return out

    # ------------------------------------------------------------ queries

    def alive(self) -> list[Instance]:
        """Released, unfinished instances of jobs heard from within ``timeout_s``."""
        now = self._clock()
        out = []
        with self._lock:
            for job_id, job in self._jobs.items():
                if now - job.last_report > self.timeout_s:
                    for g in job.groups.values():
                        g.finished = True  # silent: nothing of it is in flight any more
                    continue
                for name, g in job.groups.items():
                    if g.iteration >= 0 and not g.finished:
                        start = job.starts.get(g.iteration)
                        if start is None:
                            # anticipated, nothing of the iteration sent yet: it starts
                            # any moment, i.e. now
                            start = now if g.anticipated else g.released_at - g.t_ref
                        sent = self._sent(job, name, g.iteration)
                        out.append(Instance(job_id, name, g.iteration, g.released_at, start, sent))
        return out

    def next_expiry(self) -> float | None:
        """When the earliest job with something alive goes silent (controller clock)."""
        with self._lock:
            times = [
                j.last_report + self.timeout_s
                for j in self._jobs.values()
                if any(g.iteration >= 0 and not g.finished for g in j.groups.values())
            ]
        return min(times, default=None)

    def view(self) -> dict[str, Any]:
        """Per job: each host's last snapshot and each group's current instance."""
        now = self._clock()
        with self._lock:
            return {
                job_id: {
                    "silent_s": round(now - job.last_report, 3) if job.snaps else None,
                    "hosts": {
                        h: {"iteration": s.iteration, "seq": s.seq, "session": s.session}
                        for h, s in sorted(job.snaps.items())
                    },
                    "groups": {
                        name: {
                            "iteration": g.iteration if g.iteration >= 0 else None,
                            "alive": g.iteration >= 0 and not g.finished,
                        }
                        for name, g in job.groups.items()
                    },
                }
                for job_id, job in self._jobs.items()
            }

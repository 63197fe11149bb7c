"""Event-driven flow-level simulator of training jobs on a strict-priority network.

Model
-----
* A job runs ``iterations`` iterations back to back; iteration ``i`` is the
  core's :class:`echelon.model.IterationPlan` (``spec.plan(i, t0)`` with ``t0`` the
  moment the previous iteration ended), so late communication in one iteration
  delays every later one.
* Compute tasks run one at a time per (job, host), in plan order, once their
  ``after_tasks`` have finished and their ``after_flows`` have fully arrived.
  A flow is released when its producer task ends (at iteration start if it has none).
* Bandwidth between events is the fluid allocation of :mod:`sim.core.alloc` (compiled
  kernels; :mod:`sim.core.heads` when every flow has a rank of its own): strict
  priority across levels, max-min fair within a level, recomputed whenever the set
  of active flows or their levels change. The flows in flight live in
  :class:`sim.core.state.ActiveFlows`, kept sorted by rank between re-plans.
* Levels come from a policy (:func:`echelon.policies.get_policy`). The policy is
  asked again at *group events* only: when an EchelonFlow releases its first
  flow or finishes its last one (``rerank="flow"`` also re-asks at every flow
  release/finish). That keeps policy cost proportional to the number of groups,
  not flows; the ranks given to not-yet-released flows of a live group are kept
  until the next group event. With ``levels=None`` a flow's rank is its level
  ("ideal ranks"); with ``levels=K`` the ranks go through
  :func:`echelon.quantize.flow_levels` onto the K-1 echelon levels of a K-queue
  switch, exactly as the data plane would see them. The policy is asked through
  :class:`sim.core.ranking.Ranker`, which builds its flow table from arrays rather
  than objects (a coflow trace is one-group jobs of this engine:
  :mod:`sim.coflow.workload`).
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from echelon.errors import SpecError
from echelon.model import EchelonFlow, FlowKey, IterationPlan
from echelon.policies import get_policy
from echelon.schedule import Network
from sim.core.alloc import allocate
from sim.core.config import JobRun, Plannable, SimConfig, SimError, levels_label
from sim.core.ranking import UNRANKED, Ranker
from sim.core.results import (
    EchelonRecord,
    FlowRecord,
    IterationRecord,
    JobRecord,
    SimResult,
    TaskRecord,
)
from sim.core.state import ActiveFlows, GrowArray

__all__ = ["JobRun", "Plannable", "SimConfig", "SimError", "Simulator"]

#: A flow whose remaining transfer time is below this is finished (seconds).
_TIME_EPS = 1e-9
#: Events between two progress calls (cheap enough not to show in a run's wall time).
PROGRESS_EVERY = 2048


class _Job:
    """Run-time state of one job's current iteration."""

    def __init__(self, idx: int, run: JobRun) -> None:
        self.idx = idx
        self.run = run
        self.name = run.spec.job_id
        self.iteration = -1
        self.start = 0.0
        self.plan: IterationPlan | None = None
        self.tasks_left = 0
        self.flows_left = 0
        self.queues: dict[str, deque[str]] = {}
        self.busy: set[str] = set()
        self.deps: dict[str, int] = {}
        self.task_host: dict[str, str] = {}
        self.task_dur: dict[str, float] = {}
        self.task_start: dict[str, float] = {}
        self.children: dict[str, list[str]] = {}
        self.produces: dict[str, list[int]] = {}


class Simulator:
    """One simulation: ``Simulator(network, jobs, config).run() -> SimResult``."""

    def __init__(
        self,
        network: Network,
        jobs: Sequence[JobRun],
        config: SimConfig,
        progress: Callable[[int, int, float], None] | None = None,
    ) -> None:
        """``progress(iterations finished, iterations in all, simulated time)`` is called
        every :data:`PROGRESS_EVERY` events and at the end (a CLI's progress bar);
        it only reads, so results do not depend on it."""
        names = [j.spec.job_id for j in jobs]
        if len(set(names)) != len(names):
            raise SpecError("jobs", "job ids must be unique in one simulation")
        self.net = network
        self.cfg = config
        self.progress = progress
        policy = config.policy
        self.policy = get_policy(policy) if isinstance(policy, str) else policy
        self.link_ix = {name: i for i, name in enumerate(network.links)}
        self.capacity = np.array([network.links[n] for n in network.links], dtype=np.float64)
        self.jobs = [_Job(i, r) for i, r in enumerate(jobs)]
        self.now = 0.0
        self.heap: list[tuple[float, int, str, int, str]] = []
        self._seq = 0
        self.active = ActiveFlows(self.capacity, heads=not config.sender_round_robin)
        self.rank = GrowArray(np.int64)
        self.ranker = Ranker(self.policy, network, self.capacity, config.levels)
        # per-flow registry (global flow ids)
        self.f_key: list[FlowKey] = []
        self.f_ech: list[int] = []
        self.f_size: list[float] = []
        self.f_path: list[tuple[int, ...]] = []
        self.f_release: list[float] = []
        self.f_finish: list[float] = []
        #: per flow with consumers, the tasks that wait on it (sparse: most flows have none)
        self.f_consumers: dict[int, list[str]] = {}
        # per-echelon registry
        self.e_obj: list[EchelonFlow] = []
        self.e_job: list[int] = []
        self.e_iter: list[int] = []
        self.e_gids: list[list[int]] = []
        self.e_first: list[int] = []
        self.e_released: list[int] = []
        self.e_left: list[int] = []
        self.e_start: list[float] = []
        self.alive: dict[int, None] = {}
        self._path_cache: dict[tuple[str, str], tuple[int, ...]] = {}
        self._pending: list[int] = []
        self._group_event = False
        self._flow_event = False
        self._last_replan = -math.inf
        self._replan_pending = False
        self._replan_due = False
        self._levels_of: dict[int, bytes] = {}
        #: ``keep_levels``: per (job, group, flow index) the last rank a plan gave it
        self._kept: dict[tuple[str, str, int], int] = {}
        if config.keep_levels:
            if config.levels is None:
                raise SimError("keep_levels needs switch levels (levels=K)")
            for slot, level in (config.initial_levels or {}).items():
                self._kept[slot] = -int(level)
        self.result = SimResult(str(getattr(self.policy, "name", "?")), levels_label(config.levels))

    # ------------------------------------------------------------------ loop

    def run(self) -> SimResult:
        wall = time.perf_counter()
        for job in self.jobs:
            self._push(job.run.arrival, "arrive", job.idx, "")
            ideal = getattr(job.run.spec, "ideal_iteration_s", None)
            if isinstance(ideal, int | float):
                self.result.ideal_iteration[job.name] = float(ideal)
        events = 0
        while True:
            t_heap = self.heap[0][0] if self.heap else math.inf
            t_flow = self.now + self.active.time_to_next()
            t = min(t_heap, t_flow)
            if self.cfg.until is not None and t > self.cfg.until:
                self.now = max(self.now, self.cfg.until)  # stopped, nothing more completes
                break
            if t == math.inf:
                if len(self.active):
                    raise SimError("flows are active but none can make progress")
                break
            done = self.active.advance_and_pop(t - self.now, _TIME_EPS)
            self.now = t
            for gid in done:
                self._flow_done(gid)
            while self.heap and self.heap[0][0] <= self.now:
                _, _, kind, jidx, task = heapq.heappop(self.heap)
                if kind == "arrive":
                    self._start_iteration(self.jobs[jidx])
                elif kind == "replan":
                    self._replan_pending = False
                    self._replan_due = True
                else:
                    self._task_done(self.jobs[jidx], task)
            self._apply_changes()
            events += 1
            if self.progress is not None and not events % PROGRESS_EVERY:
                self.progress(len(self.result.iterations), self._total_iterations(), self.now)
        unfinished = [j.name for j in self.jobs if j.iteration < j.run.iterations]
        if unfinished and self.cfg.until is None:
            raise SimError(f"jobs never finished (dependency cycle?): {unfinished}")
        self.result.n_events = events
        self.result.n_flows = len(self.f_key)
        self.result.end_time = self.now
        self.result.wall_s = time.perf_counter() - wall
        if self.progress is not None:
            self.progress(len(self.result.iterations), self._total_iterations(), self.now)
        return self.result

    def _total_iterations(self) -> int:
        return sum(j.run.iterations for j in self.jobs)

    def _push(self, t: float, kind: str, jidx: int, task: str) -> None:
        self._seq += 1
        heapq.heappush(self.heap, (t, self._seq, kind, jidx, task))

    def _apply_changes(self) -> None:
        changed = bool(self._pending) or self._flow_event
        if self._pending:
            self.active.add(
                self._pending,
                [self.f_path[g] for g in self._pending],
                [self.f_size[g] for g in self._pending],
                self.rank.data[self._pending],
            )
            self._pending = []
        wants = self._group_event or (self.cfg.rerank == "flow" and changed)
        wants |= self._replan_due
        at = max(self._last_replan + self.cfg.replan_interval, self.now + self.cfg.replan_delay)
        early = self.now < at
        if wants and early and not self._replan_due:
            if not self._replan_pending:  # coalesce into one re-plan when it is due
                self._replan_pending = True
                self._push(at, "replan", -1, "")
        elif wants:
            self._rerank()
            self._last_replan = self.now
            self._replan_due = False
            changed = True
        self._group_event = self._flow_event = False
        if changed and len(self.active):
            if self.cfg.sender_round_robin:
                self.active.compact(force=True)
                self.active.set_rates(self._allocate_round_robin_senders(self.active.key))
            else:
                self.active.allocate()

    def _allocate_round_robin_senders(self, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Strict priority from the first switch on, an equal share of its host's first
        link per active flow before it (``SimConfig.sender_round_robin``): each flow
        crosses one more link of its own, of capacity ``first link / flows on it``, in
        place of that first link."""
        paths = self.active.paths
        n, pad = len(paths), len(self.capacity)
        first = paths[:, 0]
        share = self.capacity[first] / np.bincount(first, minlength=pad)[first]
        own = pad + np.arange(n, dtype=np.int64)
        rest = np.where(paths[:, 1:] == pad, pad + n, paths[:, 1:])
        return allocate(
            np.concatenate([own[:, None], rest], axis=1),
            keys,
            np.concatenate([self.capacity, share]),
        )

    # ------------------------------------------------------------ policies

    def _rerank(self) -> None:
        if not self.alive:
            return
        alive = list(self.alive)
        told = self.cfg.policy_sizes == "remaining"
        if told:  # the bytes in flight as the policy is told them: max(1, ceil(rem))
            gid, rem = self.active.live()
            self.ranker.remaining.data[gid] = np.maximum(np.ceil(rem), 1.0)
        gids, ranks = self.ranker.ranks(
            [self.e_obj[e] for e in alive], [self.e_first[e] for e in alive], told, self.now
        )
        self.rank.data[gids] = ranks
        if self.cfg.keep_levels:
            for g, r in zip(gids.tolist(), ranks.tolist(), strict=True):
                if r != UNRANKED:
                    self._kept[self._slot(g)] = r
        if self.cfg.levels is not None:
            for e in alive:
                self._count_updates(e)
        self.active.rekey(self.rank.data)
        self.result.n_reranks += 1

    def _count_updates(self, e: int) -> None:
        """A group whose levels changed since the last re-plan costs the controller
        table writes (its classify/range entries); count such groups."""
        a = self.e_first[e]  # a group's flow ids are consecutive
        levels = self.rank.data[a : a + len(self.e_gids[e])].tobytes()
        if self._levels_of.get(e) != levels:
            self._levels_of[e] = levels
            self.result.n_level_updates += 1

    # ------------------------------------------------------------ jobs/tasks

    def _start_iteration(self, job: _Job) -> None:
        job.iteration += 1
        job.start = self.now
        plan = job.run.spec.plan(job.iteration, self.now)
        job.plan = plan
        job.queues = {}
        job.busy = set()
        job.deps, job.children, job.produces = {}, {}, {}
        job.task_host, job.task_dur, job.task_start = {}, {}, {}
        ids = {t.id for t in plan.tasks}
        for t in plan.tasks:
            job.queues.setdefault(t.host, deque()).append(t.id)
            job.task_host[t.id] = t.host
            job.task_dur[t.id] = t.duration
            for dep in t.after_tasks:
                if dep not in ids:
                    raise SpecError(f"{plan.job}.tasks.{t.id}.after_tasks", f"unknown task {dep}")
                job.children.setdefault(dep, []).append(t.id)
            job.deps[t.id] = len(t.after_tasks) + len(t.after_flows)
        job.tasks_left = len(plan.tasks)
        new_flows: list[int] = []
        key_gid: dict[FlowKey, int] = {}
        for ef in plan.echelons:
            e = len(self.e_obj)
            self.e_obj.append(ef)
            self.e_job.append(job.idx)
            self.e_iter.append(job.iteration)
            self.e_released.append(0)
            self.e_left.append(len(ef.flows))
            self.e_start.append(math.nan)
            self.e_first.append(len(self.f_key))
            gids = self._new_flows(ef, e)
            key_gid.update(zip(self.f_key[self.e_first[e] :], gids, strict=True))
            self.e_gids.append(gids)
            new_flows += gids
        job.flows_left = len(new_flows)
        for t in plan.tasks:
            for fk in t.after_flows:
                if fk not in key_gid:
                    raise SpecError(f"{plan.job}.tasks.{t.id}.after_flows", f"unknown flow {fk}")
                self.f_consumers.setdefault(key_gid[fk], []).append(t.id)
        for fk, tid in plan.producer.items():
            if tid not in ids or fk not in key_gid:
                raise SpecError(f"{plan.job}.producer", f"bad producer {tid} for {fk}")
            job.produces.setdefault(tid, []).append(key_gid[fk])
        produced = {key_gid[fk] for fk in plan.producer}
        for g in new_flows:
            if g not in produced:
                self._release(g)
        for host in job.queues:
            self._try_start(job, host)
        self._maybe_end_iteration(job)

    def _new_flows(self, ef: EchelonFlow, e: int) -> list[int]:
        """Register the group's flows (consecutive ids, in flow order); returns the ids."""
        g0 = len(self.f_key)
        n = len(ef.flows)
        keys = [(ef.name, f.index) for f in ef.flows]
        sizes = [self.cfg.wire_bytes(f.size) for f in ef.flows]
        paths = [self._path(f.src, f.dst) for f in ef.flows]
        self.f_key += keys
        self.f_ech += [e] * n
        self.f_size += sizes
        self.f_path += paths
        self.ranker.add(keys, ef.flows, paths, sizes)
        self.f_release += [math.nan] * n
        self.f_finish += [math.nan] * n
        # lowest until a re-plan ranks it; ``keep_levels``: its slot's last level
        if self._kept:
            for g in range(g0, g0 + n):
                self.rank.append(self._kept.get(self._slot(g), UNRANKED))
        else:
            self.rank.extend(np.full(n, UNRANKED, dtype=np.int64))
        return list(range(g0, g0 + n))

    def _slot(self, g: int) -> tuple[str, str, int]:
        """(job, group, flow index): what keeps one entry on the switch across iterations."""
        e = self.e_obj[self.f_ech[g]]
        return (e.job, e.group, self.f_key[g][1])

    def _path(self, src: str, dst: str) -> tuple[int, ...]:
        key = (src, dst)
        p = self._path_cache.get(key)
        if p is None:
            try:
                p = tuple(self.link_ix[name] for name in self.net.path(src, dst))
            except KeyError as exc:
                raise SpecError("network", f"path {src}->{dst} uses unknown link {exc}") from exc
            self._path_cache[key] = p
        return p

    def _try_start(self, job: _Job, host: str) -> None:
        q = job.queues[host]
        if host in job.busy or not q or job.deps[q[0]] > 0:
            return
        tid = q[0]
        job.busy.add(host)
        job.task_start[tid] = self.now
        self._push(self.now + job.task_dur[tid], "task", job.idx, tid)

    def _task_done(self, job: _Job, tid: str) -> None:
        host = job.task_host[tid]
        job.queues[host].popleft()
        job.busy.discard(host)
        job.tasks_left -= 1
        if self.cfg.record_tasks:
            self.result.tasks.append(
                TaskRecord(job.name, job.iteration, host, tid, job.task_start[tid], self.now)
            )
        touched = {host}
        for child in job.children.get(tid, ()):
            job.deps[child] -= 1
            touched.add(job.task_host[child])
        for g in job.produces.get(tid, ()):
            self._release(g)
        for h in touched:
            self._try_start(job, h)
        self._maybe_end_iteration(job)

    def _release(self, g: int) -> None:
        self.f_release[g] = self.now
        e = self.f_ech[g]
        if self.e_released[e] == 0:
            self.e_start[e] = self.now
            self.alive[e] = None
            self._group_event = True
        self.e_released[e] += 1
        if not self.f_path[g] or self.f_size[g] <= 0:
            self._flow_done(g)
        else:
            self._pending.append(g)

    def _flow_done(self, g: int) -> None:
        self.f_finish[g] = self.now
        self.ranker.remaining.data[g] = 0.0
        self._flow_event = True
        e = self.f_ech[g]
        job = self.jobs[self.e_job[e]]
        consumers = self.f_consumers.pop(g, None)
        if consumers:
            touched = set()
            for tid in consumers:
                job.deps[tid] -= 1
                touched.add(job.task_host[tid])
            for h in touched:
                self._try_start(job, h)
        self.e_left[e] -= 1
        job.flows_left -= 1
        if self.e_left[e] == 0:
            self._echelon_done(e)
        if not job.flows_left:
            self._maybe_end_iteration(job)

    def _echelon_done(self, e: int) -> None:
        from echelon.model import completion_time, lateness

        self.alive.pop(e, None)
        self._group_event = True
        ef = self.e_obj[e]
        gids = self.e_gids[e]
        finish = {i: self.f_finish[g] for i, g in enumerate(gids)}
        late = lateness(ef, finish)
        job = self.jobs[self.e_job[e]]
        self.result.echelons.append(
            EchelonRecord(
                ef.name,
                job.name,
                self.e_iter[e],
                ef.group,
                len(ef.flows),
                ef.total_bytes,
                ef.t_ref,
                self.e_start[e],
                self.now,
                completion_time(ef, finish),
                sum(late.values()),
                max(late.values()),
            )
        )
        if self.cfg.record_flows:
            for f, g in zip(ef.flows, gids, strict=True):
                self.result.flows.append(
                    FlowRecord(
                        job.name,
                        self.e_iter[e],
                        ef.name,
                        ef.group,
                        f.index,
                        f.src,
                        f.dst,
                        f.size,
                        self.f_release[g],
                        self.f_finish[g],
                        ef.ideal_finish(f.index),
                    )
                )
        # Drop references we no longer need so long runs stay small in memory.
        self.e_gids[e] = []
        self._levels_of.pop(e, None)

    def _maybe_end_iteration(self, job: _Job) -> None:
        if job.plan is None or job.tasks_left or job.flows_left:
            return
        self.result.iterations.append(IterationRecord(job.name, job.iteration, job.start, self.now))
        if job.iteration + 1 < job.run.iterations:
            self._push(self.now, "arrive", job.idx, "")
            job.plan = None
        else:
            job.plan = None
            job.iteration = job.run.iterations
            self.result.jobs.append(
                JobRecord(job.name, job.run.arrival, self.now, job.run.iterations)
            )

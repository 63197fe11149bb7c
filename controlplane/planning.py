"""Planning: from the registered jobs to one :class:`GroupPlan` per (job, group).

The one module that asks the core for priorities. The controller's policy picks
what the switch enforces:

* ``echelon`` — the core's EchelonFlow policy, quantised to bands and deadline ranges;
* ``coflow`` — the core's coflow ordering, one level per group, no deadline ranges;
* ``fifo`` — no priority at all: every registered group is classified (so its
  counters still count) at level 0, best-effort — the "no priorities" baseline.

Two callers, one plan builder (:func:`group_plan`):

* **registrations** (:class:`Planner`): a change re-plans only what it changes.
  Re-planning every registered group from the EchelonFlow objects cost ~8 ms per
  registration with 1,000 jobs (walking them into the policy's flow table and
  quantising flow by flow in Python). The planner keeps, as arrays, the policy's
  flow table (a job's rows built once, appended, or cut out on removal: element
  for element the table ``build_table`` builds from the same jobs in the same
  order, so the core policy's ``decide`` — called unchanged, vectorised — sees
  exactly the input of a full re-plan); the quantiser's output (for interleaved
  schedules, the ``echelon`` policy, every flow's level computed with numpy — the
  same cut of the distinct ranks into ``K`` runs as :mod:`echelon.quantize` — and
  deadline ranges rebuilt only for EchelonFlows whose flows changed level; other
  policies go through ``echelon.quantize`` itself); and the plans, returning only
  those that differ (:class:`PlanChange`). Why not a bounded approximation: the
  policy's order is global (a group's virtual deadline depends on every group
  before it on its links, and the levels cut the distinct ranks of *all* flows),
  so ranking a new job "into" the old order would change results. The result is
  identical to a full re-plan (property test against the oracle
  ``tests/controlplane/oracle.py``: ``tests/controlplane/test_planner.py``).
* **online re-planning** (:func:`plan_instances`): the groups in flight, asked
  at ``now`` (:mod:`controlplane.online`).

Everything here is pure; it runs under the controller lock.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise

import numpy as np

from controlplane.entries import GroupPlan
from controlplane.registry import GroupIds
from echelon import policies as core_policies
from echelon import quantize as core_quantize
from echelon.constants import ECHELON_LEVELS, MAX_DEADLINE_US
from echelon.errors import SpecError
from echelon.jobs import Description
from echelon.model import EchelonFlow, FlowKey, offset_us
from echelon.policies.echelon import EchelonPolicy
from echelon.policies.table import Floats, FlowTable, Ints, TablePolicy, job_ids
from echelon.progress import bytes_left
from echelon.schedule import DeadlineRange, EchelonLevels, Policy, Schedule
from echelon.topology import TopologyNetwork

#: The core's policies that the switch can express on its strict-priority queues:
#: every group policy (bands and deadline ranges) and the per-flow ones whose ranks
#: map to levels. ``fair`` is refused (:func:`check_policy` says why); a plug-in
#: (``package.module:Class`` or an ``echelon.policies`` entry point) is accepted too.
POLICIES = (
    "echelon",
    "echelon-v1",
    "sebf-edf",
    "varys",
    "sincronia",
    "coflow",
    "fifo",
    "edf",
    "srpt",
)

GroupKey = tuple[str, str]


def check_policy(name: str) -> None:
    """Raise ``SpecError("policy")`` unless ``name`` resolves to a policy
    (:func:`echelon.policies.get_policy`: built-in, entry point or ``module:Class``)
    that the switch can express; a refusal says why."""
    if name in POLICIES:
        return
    why = core_policies.not_installable(core_policies.get_policy(name))
    if why:
        raise SpecError("policy", f"{name!r} cannot be installed on the switch: {why}")


def switch_schedule(schedule: Schedule) -> Schedule:
    """``schedule`` as the quantiser must read it for the switch: a per-flow policy
    (no group order) has its flow ranks mapped to levels flow by flow, like an
    interleaved schedule, rather than its groups banded by their best flow."""
    if schedule.echelon_order or schedule.interleaved:
        return schedule
    return replace(schedule, interleaved=True)


def group_plan(
    policy: str,
    job: Description,
    gid: GroupIds,
    levels: Mapping[str, EchelonLevels],
    fine: bool = False,
) -> GroupPlan:
    """The plan of one (job, group): the band's top level over its EchelonFlows'
    ``levels`` (keyed by name; none: 0, best effort) and, with one EchelonFlow, its
    deadline ranges (always under ``echelon``; otherwise when they split the band;
    ``fine``: split per offset, :func:`fine_ranges`)."""
    mine, _ = job.of_group(gid.group)
    lv = [levels[ef.name] for ef in mine if ef.name in levels]
    prio = max((x.priority for x in lv), default=0)
    ranges: tuple[DeadlineRange, ...] = ()
    if len(lv) == 1 and (policy == "echelon" or len(lv[0].ranges) > 1):
        ranges = lv[0].ranges
        if fine:
            ranges = fine_ranges(ranges, sorted({f.offset_us for f in mine[0].flows}))
    pairs = job.pairs(gid.group)
    return GroupPlan(job.job_id, gid.group, gid.echelon_id, gid.class_id, prio, ranges, pairs)


@dataclass(frozen=True)
class PlanChange:
    """One group whose plan differs: ``old`` is ``None`` for a new group, ``new``
    ``None`` for a removed one."""

    key: GroupKey
    old: GroupPlan | None
    new: GroupPlan | None


@dataclass
class _Job:
    """A registered job's rows, built once (what ``build_table`` would walk)."""

    parsed: Description
    ids: tuple[GroupIds, ...]
    echelons: tuple[EchelonFlow, ...]
    names: list[str]
    keys: list[FlowKey]
    weight: Floats
    t_ref: Floats
    ech: Ints  # local echelon position per flow
    index: Ints
    offset: Floats
    slack: Floats
    size: Floats
    us: Ints  # offset as the switch matches it, per flow
    inc_flow: Ints  # local flow position per incidence
    inc_link: Ints
    group_of: list[GroupKey] = field(default_factory=list)  # per echelon


@dataclass
class _State:
    """Everything a change replaces (never mutated in place: a snapshot is a reference)."""

    jobs: dict[str, _Job]
    names: list[str]
    sorted_names: list[str]
    keys: list[FlowKey]
    echelons: list[EchelonFlow]
    group_of: list[GroupKey]
    weight: Floats
    t_ref: Floats
    name_rank: Ints
    ech: Ints
    index: Ints
    offset: Floats
    slack: Floats
    size: Floats
    us: Ints
    inc_flow: Ints
    inc_link: Ints
    flow_level: Ints | None  # interleaved policies: every flow's level
    levels: dict[str, EchelonLevels]
    plans: dict[GroupKey, GroupPlan]


class Planner:
    """The plans of every registered group under one policy, updated per change.

    ``add``/``remove``/``set_policy`` return the groups whose plan changed;
    :meth:`snapshot` and :meth:`restore` undo a change the switches refused.
    ``plans()`` equals a full re-plan of the jobs in the order they were added (the
    registry's order; the oracle ``plan_groups`` in ``tests/controlplane/oracle.py``).
    """

    def __init__(self, policy: str, network: TopologyNetwork, now: float = 0.0) -> None:
        check_policy(policy)
        self.network = network
        self.now = now
        self._policy = policy
        self._links = {name: i for i, name in enumerate(network.links)}
        self._cap = np.array([network.links[x] for x in network.links], dtype=np.float64)
        self._paths: dict[tuple[str, str], list[int]] = {}
        self._desc = sorted(set(ECHELON_LEVELS), reverse=True)
        i0 = np.zeros(0, dtype=np.int64)
        f0 = np.zeros(0, dtype=np.float64)
        self._s = _State(
            {}, [], [], [], [], [], f0, f0, i0, i0, i0, f0, f0, f0, i0, i0, i0, None, {}, {}
        )

    # ------------------------------------------------------------ views

    @property
    def policy(self) -> str:
        return self._policy

    def plans(self) -> list[GroupPlan]:
        """Every group's plan, jobs in the order added, groups in their ID order."""
        return list(self._s.plans.values())

    def plan(self, job: str, group: str) -> GroupPlan:
        return self._s.plans[(job, group)]

    def jobs(self) -> list[tuple[Description, tuple[GroupIds, ...]]]:
        """Every planned job with its groups' IDs, in the order added."""
        return [(j.parsed, j.ids) for j in self._s.jobs.values()]

    def job(self, job_id: str) -> Description:
        """The parsed description of planned job ``job_id`` (``KeyError`` if unknown)."""
        return self._s.jobs[job_id].parsed

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._s.jobs

    def __len__(self) -> int:
        return len(self._s.jobs)

    def snapshot(self) -> object:
        """An opaque token for :meth:`restore` (cheap: states are never mutated)."""
        return (self._s, self._policy)

    def restore(self, token: object) -> None:
        assert isinstance(token, tuple)
        state, policy = token
        assert isinstance(state, _State) and isinstance(policy, str)
        self._s, self._policy = state, policy

    # ------------------------------------------------------------ changes

    def add(self, job: Description, ids: Sequence[GroupIds]) -> list[PlanChange]:
        """Register ``job`` with its groups' IDs (raises ``SpecError`` for a job
        already here); returns every group whose plan changed, the new ones included."""
        return self.add_many([(job, ids)])

    def add_many(self, jobs: Sequence[tuple[Description, Sequence[GroupIds]]]) -> list[PlanChange]:
        """:meth:`add` for several jobs, evaluated once (a restart's registry)."""
        s = self._s
        rows: list[_Job] = []
        seen: set[str] = set()
        for job, ids in jobs:
            if job.job_id in s.jobs or job.job_id in seen:
                raise SpecError("job", f"job {job.job_id!r} is already planned")
            seen.add(job.job_id)
            rows.append(self._rows(job, tuple(ids)))
        names = [n for j in rows for n in j.names]
        name_rank = s.name_rank
        sorted_names = list(s.sorted_names)
        if len(names) > 8:  # many (a restart): sort once
            sorted_names = sorted(sorted_names + names)
            pos = {n: i for i, n in enumerate(sorted_names)}
            name_rank = np.array([pos[n] for n in s.names + names], dtype=np.int64)
        else:  # one registration: shift the ranks after each insertion point
            new_ranks: list[int] = []
            for name in names:
                p = bisect_left(sorted_names, name)
                sorted_names.insert(p, name)
                name_rank = np.where(name_rank >= p, name_rank + 1, name_rank)
                new_ranks = [r + 1 if r >= p else r for r in new_ranks]
                new_ranks.append(p)
            name_rank = np.concatenate((name_rank, np.array(new_ranks, dtype=np.int64)))
        if len(set(sorted_names)) != len(sorted_names):
            dup = next(a for a, b in pairwise(sorted_names) if a == b)
            raise SpecError(f"{dup}.name", "two active EchelonFlows share this name")
        ne, nf = [len(s.names)], [len(s.keys)]
        for j in rows:
            ne.append(ne[-1] + len(j.names))
            nf.append(nf[-1] + len(j.keys))

        def cat(old: np.ndarray, part: str, base: list[int] | None = None) -> np.ndarray:
            arrs = [getattr(j, part) + (base[k] if base else 0) for k, j in enumerate(rows)]
            return np.concatenate((old, *arrs))

        levels_pad = [np.full(len(j.keys), -1, dtype=np.int64) for j in rows]
        new = _State(
            jobs={**s.jobs, **{j.parsed.job_id: j for j in rows}},
            names=s.names + names,
            sorted_names=sorted_names,
            keys=s.keys + [k for j in rows for k in j.keys],
            echelons=s.echelons + [ef for j in rows for ef in j.echelons],
            group_of=s.group_of + [g for j in rows for g in j.group_of],
            weight=cat(s.weight, "weight"),
            t_ref=cat(s.t_ref, "t_ref"),
            name_rank=name_rank,
            ech=cat(s.ech, "ech", ne),
            index=cat(s.index, "index"),
            offset=cat(s.offset, "offset"),
            slack=cat(s.slack, "slack"),
            size=cat(s.size, "size"),
            us=cat(s.us, "us"),
            inc_flow=cat(s.inc_flow, "inc_flow", nf),
            inc_link=cat(s.inc_link, "inc_link"),
            flow_level=None
            if s.flow_level is None
            else np.concatenate((s.flow_level, *levels_pad)),
            levels=s.levels,
            plans=s.plans,
        )
        touched: dict[GroupKey, None] = {}
        for job, ids in jobs:
            touched |= _keys(job, ids)
        return self._replan(new, touched)

    def remove(self, job_id: str) -> list[PlanChange]:
        """Forget ``job_id`` (``KeyError`` if unknown); returns every group whose plan
        changed, the removed ones (``new`` is ``None``) included."""
        s = self._s
        j = s.jobs[job_id]
        e0 = s.names.index(j.names[0]) if j.names else 0  # C-speed scan (identity first)
        f0 = int(np.searchsorted(s.ech, e0))  # flows and incidences are in echelon order
        i0 = int(np.searchsorted(s.inc_flow, f0))
        e1, f1, i1 = e0 + len(j.names), f0 + len(j.keys), i0 + len(j.inc_flow)
        sorted_names = list(s.sorted_names)
        name_rank = np.concatenate((s.name_rank[:e0], s.name_rank[e1:]))
        for p in sorted((int(r) for r in s.name_rank[e0:e1]), reverse=True):
            del sorted_names[p]
            name_rank = np.where(name_rank > p, name_rank - 1, name_rank)

        def cut(a: np.ndarray, lo: int, hi: int) -> np.ndarray:
            return np.concatenate((a[:lo], a[hi:]))

        ech = cut(s.ech, f0, f1)
        ech[f0:] -= e1 - e0
        inc_flow = cut(s.inc_flow, i0, i1)
        inc_flow[i0:] -= f1 - f0
        jobs = dict(s.jobs)
        del jobs[job_id]
        mine = [(job_id, g.group) for g in j.ids]
        gone = [PlanChange(k, s.plans[k], None) for k in mine if k in s.plans]
        plans = dict(s.plans)
        for k in mine:
            plans.pop(k, None)
        levels = dict(s.levels)
        for name in j.names:
            levels.pop(name, None)
        new = _State(
            jobs=jobs,
            names=s.names[:e0] + s.names[e1:],
            sorted_names=sorted_names,
            keys=s.keys[:f0] + s.keys[f1:],
            echelons=s.echelons[:e0] + s.echelons[e1:],
            group_of=s.group_of[:e0] + s.group_of[e1:],
            weight=cut(s.weight, e0, e1),
            t_ref=cut(s.t_ref, e0, e1),
            name_rank=name_rank,
            ech=ech,
            index=cut(s.index, f0, f1),
            offset=cut(s.offset, f0, f1),
            slack=cut(s.slack, f0, f1),
            size=cut(s.size, f0, f1),
            us=cut(s.us, f0, f1),
            inc_flow=inc_flow,
            inc_link=cut(s.inc_link, i0, i1),
            flow_level=None if s.flow_level is None else cut(s.flow_level, f0, f1),
            levels=levels,
            plans=plans,
        )
        return gone + self._replan(new, {})

    def set_policy(self, policy: str) -> list[PlanChange]:
        """Re-plan everything under ``policy``; returns the groups whose plan changed."""
        check_policy(policy)
        s = self._s
        self._policy = policy
        new = _State(**{**s.__dict__, "flow_level": None, "levels": {}})
        return self._replan(new, {k: None for k in s.plans})

    # ------------------------------------------------------------ internals

    def _rows(self, job: Description, ids: tuple[GroupIds, ...]) -> _Job:
        echelons = job.echelons  # build_table's order: the job's EchelonFlows as parsed
        flows = [f for ef in echelons for f in ef.flows]
        links: list[int] = []
        inc: list[int] = []
        for pos, f in enumerate(flows):
            path = self._paths.get((f.src, f.dst))
            if path is None:
                path = [self._links[x] for x in self.network.path(f.src, f.dst)]
                self._paths[(f.src, f.dst)] = path
            links += path
            inc += [pos] * len(path)
        return _Job(
            parsed=job,
            ids=ids,
            echelons=echelons,
            names=[ef.name for ef in echelons],
            keys=[(ef.name, f.index) for ef in echelons for f in ef.flows],
            weight=np.array([ef.weight for ef in echelons], dtype=np.float64),
            t_ref=np.array([ef.t_ref for ef in echelons], dtype=np.float64),
            ech=np.repeat(
                np.arange(len(echelons), dtype=np.int64), [len(ef.flows) for ef in echelons]
            ),
            index=np.array([f.index for f in flows], dtype=np.int64),
            offset=np.array([f.offset for f in flows], dtype=np.float64),
            slack=np.array([f.slack for f in flows], dtype=np.float64),
            size=np.array([f.size for f in flows], dtype=np.float64),
            us=np.array([min(offset_us(f.offset), MAX_DEADLINE_US) for f in flows], np.int64),
            inc_flow=np.array(inc, dtype=np.int64),
            inc_link=np.array(links, dtype=np.int64),
            group_of=[(job.job_id, ef.group) for ef in echelons],
        )

    def table(self) -> FlowTable:
        """The policy's input, as ``build_table`` makes it from the registered jobs."""
        s = self._s
        return _table(s, self._cap)

    def _replan(self, new: _State, touched: dict[GroupKey, None]) -> list[PlanChange]:
        """Evaluate the policy on ``new``; recompute the plans of ``touched`` groups and
        of every group with an EchelonFlow whose levels changed; install ``new``."""
        old_plans = self._s.plans
        for e in self._levels(new):
            touched[new.group_of[e]] = None
        plans = dict(new.plans)
        out = []
        for gk in touched:
            job_id, group = gk
            j = new.jobs.get(job_id)
            if j is None:
                continue
            gid = next(g for g in j.ids if g.group == group)
            plan = group_plan(self._policy, j.parsed, gid, new.levels)
            if old_plans.get(gk) != plan:
                out.append(PlanChange(gk, old_plans.get(gk), plan))
            plans[gk] = plan  # a new group goes last: registration order
        new.plans = plans
        self._s = new
        return out

    def _levels(self, s: _State) -> list[int]:
        """Fill ``s.levels`` (a fresh dict) for the policy; the positions of the
        EchelonFlows whose levels changed."""
        if self._policy == "fifo" or not s.names:
            s.levels, s.flow_level = {}, None
            return []
        policy = core_policies.get_policy(self._policy)
        ranks: Ints | None = None
        if isinstance(policy, EchelonPolicy) and policy.interleave:
            # the policy's own ranking, as arrays: what decide() puts in the Schedule
            ranks = policy.rank_flows(_table(s, self._cap), self.now)[1]
            schedule = Schedule(policy.name, (), {}, interleaved=True)
        elif isinstance(policy, TablePolicy):
            schedule = switch_schedule(policy.decide(_table(s, self._cap), self.now))
        else:  # a plug-in: the Policy protocol, on the registered EchelonFlows
            schedule = switch_schedule(policy.schedule(s.echelons, self.network, None, self.now))
        levels = dict(s.levels)
        k = len(self._desc)
        if not schedule.interleaved and len(schedule.echelon_order) == len(s.names) >= k:
            # group bands, more groups than levels: echelon.quantize gives the first
            # K-1 groups of the order one level each and the rest the lowest, one range
            changed = []
            pos = {n: i for i, n in enumerate(schedule.echelon_order)}
            for e, name in enumerate(s.names):
                top = self._desc[min(pos[name], k - 1)]
                was = levels.get(name)
                if was is None or was.priority != top or len(was.ranges) != 1:
                    full = (DeadlineRange(0, MAX_DEADLINE_US, top),)
                    levels[name] = EchelonLevels(name, top, full)
                    changed.append(e)
            s.levels, s.flow_level = levels, None
            return changed
        if not schedule.interleaved:
            q = core_quantize.quantize(schedule, s.echelons)
            s.levels, s.flow_level = q, None
            return [e for e, n in enumerate(s.names) if levels.get(n) != q[n]]
        if ranks is None:
            rank = schedule.flow_rank
            ranks = np.fromiter((rank.get(k, 0) for k in s.keys), np.int64, count=len(s.keys))
        flow_level = core_quantize.rank_levels(ranks, self._desc)
        if s.flow_level is None:
            moved = np.arange(len(s.names), dtype=np.int64)
        else:
            moved = np.unique(s.ech[flow_level != s.flow_level])
        starts = np.searchsorted(s.ech, np.arange(len(s.names) + 1, dtype=np.int64))
        changed = []
        for e in moved.tolist():
            lo, hi = int(starts[e]), int(starts[e + 1])
            lv = core_quantize.offset_levels(
                s.names[e], zip(s.us[lo:hi].tolist(), flow_level[lo:hi].tolist(), strict=True)
            )
            if levels.get(lv.echelon) != lv:
                levels[lv.echelon] = lv
                changed.append(e)
        s.levels, s.flow_level = levels, flow_level
        return changed


#: One group in flight: (job, group IDs, the instance's iteration start on the
#: controller clock, payload bytes sent per flow index as the hosts reported them).
InFlight = tuple[Description, GroupIds, float, Mapping[int, int]]


def plan_instances(
    policy: str,
    instances: Sequence[InFlight],
    network: TopologyNetwork,
    now: float,
    core: Policy | None = None,
) -> list[GroupPlan]:
    """Plans for the groups in flight (online re-planning, :mod:`controlplane.online`).

    Each instance's EchelonFlows get ``t_ref`` shifted by its iteration start,
    exactly as ``JobSpec.plan(i, t0)`` places iteration ``i`` in the simulator, and
    the policy is asked at ``now`` — the same call the simulator makes at a group
    event, over the same set (released, unfinished groups), with each flow's bytes
    left: its size less what its host reported sent
    (:func:`echelon.progress.bytes_left`). Deadline
    ranges are split per offset (:func:`fine_ranges`), so a re-plan only modifies
    entries. ``core``: the policy object to ask, kept by the caller across re-plans
    as the simulator keeps its own (a policy may remember between calls:
    :class:`echelon.schedule.Policy`); by default a fresh one.
    """
    check_policy(policy)
    efs = []
    remaining: dict[FlowKey, int] = {}
    for job, gid, start, sent in instances:
        for ef in job.shifted(gid.group, start):
            efs.append(ef)
            remaining.update(bytes_left(ef, sent))
    levels: dict[str, EchelonLevels] = {}
    if policy != "fifo" and efs:
        policy_obj = core or core_policies.get_policy(policy)
        schedule = policy_obj.schedule(efs, network, remaining or None, now)
        schedule = switch_schedule(schedule)
        levels = dict(core_quantize.quantize(schedule, efs))
    return [group_plan(policy, job, gid, levels, fine=True) for job, gid, _, _ in instances]


#: At most this many deadline ranges per group when split per offset (the
#: deadline_prio table holds 8 per class slot on average).
FINE_RANGES_MAX = 8


def fine_ranges(
    ranges: Sequence[DeadlineRange], offsets_us: Sequence[int]
) -> tuple[DeadlineRange, ...]:
    """The same levels as ``ranges``, split at every distinct offset of the group.

    Why: the quantiser merges runs of offsets with equal levels, so its range
    *boundaries* move whenever levels move, and a moved boundary is a new table
    key (an insert plus a delete, in two WriteRequests). Split at every offset, a
    group's range keys depend only on its offsets, which never change: a re-plan
    only MODIFYs levels in place, one request, no moment with two or no matching
    range. Groups with more than :data:`FINE_RANGES_MAX` offsets keep the merged
    ranges. ``offsets_us`` sorted; ``ranges`` cover ``0..2^32-1`` (quantize's).
    """
    if not ranges or len(offsets_us) > FINE_RANGES_MAX or len(offsets_us) <= len(ranges):
        return tuple(ranges)
    starts = [0, *offsets_us[1:]]
    ends = [*(o - 1 for o in offsets_us[1:]), ranges[-1].hi_us]
    out = []
    for lo, hi in zip(starts, ends, strict=True):
        level = next(r.priority for r in ranges if r.lo_us <= lo <= r.hi_us)
        out.append(DeadlineRange(lo, hi, level))
    return tuple(out)


def _keys(job: Description, ids: Sequence[GroupIds]) -> dict[GroupKey, None]:
    return {(job.job_id, g.group): None for g in ids}


def _table(s: _State, cap: Floats) -> FlowTable:
    job, job_names = job_ids(s.echelons)
    return FlowTable(
        keys=s.keys,
        names=s.names,
        weight=s.weight,
        t_ref=s.t_ref,
        name_rank=s.name_rank,
        ech=s.ech,
        index=s.index,
        offset=s.offset,
        slack=s.slack,
        remaining=np.maximum(s.size, 0.0),
        inc_flow=s.inc_flow,
        inc_link=s.inc_link,
        cap=cap,
        job=job,
        job_names=job_names,
    )

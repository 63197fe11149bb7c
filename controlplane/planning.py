"""From registered job descriptions to per-group plans: the one place that calls the core.

A registration is either a *paradigm job description* or an *explicit
EchelonFlow spec*, both parsed by the core (``echelon.jobs.load_description``,
typed models in ``echelon.jobs``)::

    {"job": "j1", "echelonflows": [
        {"group": "grads", "weight": 1.0,
         "flows": [{"src": "h1", "dst": "h4", "size": 100000, "offset": 0.0}, ...]}]}

The controller's policy picks what the switch enforces:

* ``echelon`` — the core's EchelonFlow policy, quantised to bands and deadline ranges;
* ``coflow`` — the core's coflow ordering, one level per group, no deadline ranges;
* ``fifo`` — no priority at all: every registered group is classified (so its
  counters still count) at level 0, best-effort — the "no priorities" baseline.

Everything here is pure; :func:`plan_groups` is called under the controller lock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from controlplane.entries import GroupPlan
from controlplane.registry import GroupIds
from echelon import jobs as core_jobs
from echelon import policies as core_policies
from echelon import quantize as core_quantize
from echelon.errors import SpecError
from echelon.model import EchelonFlow
from echelon.schedule import DeadlineRange, EchelonLevels
from echelon.topology import Topology, TopologyNetwork

POLICIES = ("echelon", "coflow", "fifo")


class UnknownHostError(SpecError):
    """A flow names a host the topology does not have (HTTP 422)."""


@dataclass(frozen=True)
class ParsedJob:
    """A validated registration: its job ID, the EchelonFlows of iteration 0 and
    the groups in first-appearance order (each gets one echelon ID)."""

    job_id: str
    echelons: tuple[EchelonFlow, ...]
    groups: tuple[str, ...]
    #: unit plausibility warnings (``field: message``), returned to the client
    warnings: tuple[str, ...] = ()
    #: the *opening* groups: released at the start of every iteration (a flow with no
    #: producer task), so in flight as soon as a host of the job enters an iteration
    #: (:mod:`controlplane.inflight`); an explicit spec has no tasks: its groups with
    #: ``t_ref`` 0
    opening: frozenset[str] = frozenset()

    def of_group(self, group: str) -> tuple[tuple[EchelonFlow, ...], tuple[str, ...]]:
        """The group's EchelonFlows and source hosts (cached: re-planned on every change)."""
        cache: dict[str, tuple[tuple[EchelonFlow, ...], tuple[str, ...]]]
        cache = self.__dict__.setdefault("_by_group", {})
        if group not in cache:
            mine = tuple(ef for ef in self.echelons if ef.group == group)
            cache[group] = (mine, tuple(sorted({f.src for ef in mine for f in ef.flows})))
        return cache[group]

    def shifted(self, group: str, start: float) -> tuple[EchelonFlow, ...]:
        """The group's EchelonFlows with ``t_ref`` moved by ``start`` (cached per
        group for the latest start: re-plans repeat it until the next iteration)."""
        cache: dict[str, tuple[float, tuple[EchelonFlow, ...]]]
        cache = self.__dict__.setdefault("_shifted", {})
        hit = cache.get(group)
        if hit is None or hit[0] != start:
            mine, _ = self.of_group(group)
            hit = (start, tuple(replace(ef, t_ref=ef.t_ref + start) for ef in mine))
            cache[group] = hit
        return hit[1]


# ---------------------------------------------------------------- parsing


def parse_job(desc: Any, topo: Topology) -> ParsedJob:
    """Validate a registration through the core's one parser
    (:func:`echelon.jobs.load_description`); raise ``SpecError``, and
    ``UnknownHostError`` for a host the topology does not have (HTTP 422)."""
    if not isinstance(desc, Mapping):
        raise SpecError("job", f"must be a mapping, got {type(desc).__name__}")
    raw_hosts = desc.get("hosts")
    if "echelonflows" not in desc and isinstance(raw_hosts, list | tuple):
        for i, h in enumerate(raw_hosts):
            if isinstance(h, str) and h not in topo.hosts:
                raise UnknownHostError(
                    f"hosts[{i}]", f"unknown host {h!r} (topology has {sorted(topo.hosts)})"
                )
    parsed = core_jobs.load_description(desc)
    for ef in parsed.echelons:
        for pos, f in enumerate(ef.flows):
            for end in ("src", "dst"):
                host = getattr(f, end)
                if host not in topo.hosts:
                    raise UnknownHostError(
                        f"{ef.group}.flows[{pos}].{end}",
                        f"unknown host {host!r} (topology has {sorted(topo.hosts)})",
                    )
    groups = tuple(dict.fromkeys(ef.group for ef in parsed.echelons))
    return ParsedJob(
        parsed.job_id,
        parsed.echelons,
        groups,
        tuple(str(w) for w in parsed.warnings),
        parsed.opening,
    )


# ---------------------------------------------------------------- planning


def check_policy(name: str) -> None:
    """Raise ``SpecError("policy")`` unless ``name`` is one of :data:`POLICIES`."""
    if name not in POLICIES:
        raise SpecError("policy", f"unknown policy {name!r} (one of {list(POLICIES)})")


def plan_groups(
    policy: str,
    jobs: Sequence[tuple[ParsedJob, Sequence[GroupIds]]],
    network: TopologyNetwork,
) -> list[GroupPlan]:
    """One :class:`GroupPlan` per registered (job, group) under ``policy``."""
    check_policy(policy)
    efs = [ef for job, _ in jobs for ef in job.echelons]
    levels = compute_levels(policy, efs, network) if policy != "fifo" and efs else {}
    out = []
    for job, ids in jobs:
        for gid in ids:
            mine, sources = job.of_group(gid.group)
            lv = [levels[ef.name] for ef in mine if ef.name in levels]
            prio = max((x.priority for x in lv), default=0)
            ranges: tuple[DeadlineRange, ...] = ()
            if policy == "echelon" and len(lv) == 1:
                ranges = lv[0].ranges
            out.append(
                GroupPlan(
                    job.job_id, gid.group, gid.echelon_id, gid.class_id, sources, prio, ranges
                )
            )
    return out


def compute_levels(
    policy: str, efs: Sequence[EchelonFlow], network: TopologyNetwork
) -> dict[str, EchelonLevels]:
    """Core policy -> schedule -> quantised levels, keyed by EchelonFlow name."""
    schedule = core_policies.get_policy(policy).schedule(efs, network)
    return dict(core_quantize.quantize(schedule, efs))


def plan_instances(
    policy: str,
    instances: Sequence[tuple[ParsedJob, GroupIds, float]],
    network: TopologyNetwork,
    now: float,
) -> list[GroupPlan]:
    """Plans for the groups in flight (online re-planning, :mod:`controlplane.online`).

    Each instance is (job, group IDs, the instance's iteration start on the
    controller clock): the group's EchelonFlows get ``t_ref`` shifted by that
    start, exactly as ``JobSpec.plan(i, t0)`` places iteration ``i`` in the
    simulator, and the policy is asked at ``now`` — the same call the simulator
    makes at a group event, over the same set (released, unfinished groups).
    Remaining bytes are not reported, so every flow counts whole.
    """
    check_policy(policy)
    shifted: list[tuple[ParsedJob, GroupIds, tuple[EchelonFlow, ...]]] = []
    for job, gid, start in instances:
        shifted.append((job, gid, job.shifted(gid.group, start)))
    efs = [ef for _, _, efs_ in shifted for ef in efs_]
    levels = compute_levels_at(policy, efs, network, now) if policy != "fifo" and efs else {}
    out = []
    for job, gid, mine in shifted:
        _, sources = job.of_group(gid.group)
        lv = [levels[ef.name] for ef in mine if ef.name in levels]
        prio = max((x.priority for x in lv), default=0)
        ranges: tuple[DeadlineRange, ...] = ()
        if policy == "echelon" and len(lv) == 1:
            ranges = fine_ranges(lv[0].ranges, sorted({f.offset_us for f in mine[0].flows}))
        out.append(
            GroupPlan(job.job_id, gid.group, gid.echelon_id, gid.class_id, sources, prio, ranges)
        )
    return out


def compute_levels_at(
    policy: str, efs: Sequence[EchelonFlow], network: TopologyNetwork, now: float
) -> dict[str, EchelonLevels]:
    """:func:`compute_levels` at ``now``: ``get_policy(p).schedule(efs, net, None, now)``."""
    schedule = core_policies.get_policy(policy).schedule(efs, network, None, now)
    return dict(core_quantize.quantize(schedule, efs))


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

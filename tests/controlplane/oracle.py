"""Slow references the product is tested against (never imported by the product).

:func:`plan_groups` re-plans every registered group from scratch through the core
(``get_policy(p).schedule`` then ``echelon.quantize.quantize``): what the
incremental :class:`controlplane.planning.Planner` must equal after any sequence
of changes. :func:`desired_entries` builds a switch's whole entry set from plans:
what the controller's incremental entry sets must equal; :func:`check_capacity`
the whole-set size check its incremental counts must agree with.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from controlplane.entries import (
    GroupPlan,
    TableFullError,
    count_by_table,
    forwarding_entries,
    group_entries,
)
from controlplane.planning import check_policy, group_plan, switch_schedule
from controlplane.registry import GroupIds
from echelon import policies as core_policies
from echelon import quantize as core_quantize
from echelon.jobs import Description
from echelon.schedule import EchelonLevels
from echelon.topology import Topology, TopologyNetwork
from p4client.p4info import P4Info, TableEntry


def plan_groups(
    policy: str,
    jobs: Sequence[tuple[Description, Sequence[GroupIds]]],
    network: TopologyNetwork,
) -> list[GroupPlan]:
    """One :class:`GroupPlan` per registered (job, group) under ``policy``, from scratch."""
    check_policy(policy)
    efs = [ef for job, _ in jobs for ef in job.echelons]
    levels: dict[str, EchelonLevels] = {}
    if policy != "fifo" and efs:
        schedule = switch_schedule(core_policies.get_policy(policy).schedule(efs, network))
        levels = dict(core_quantize.quantize(schedule, efs))
    return [group_plan(policy, job, gid, levels) for job, ids in jobs for gid in ids]


def desired_entries(
    p4info: P4Info, topo: Topology, switch: str, plans: Iterable[GroupPlan]
) -> set[TableEntry]:
    """Everything ``switch`` must hold: its routes plus the entries of every group
    whose packets cross it."""
    out = set(forwarding_entries(p4info, topo, switch))
    for plan in plans:
        out.update(group_entries(p4info, topo, plan).get(switch, ()))
    return out


def check_capacity(p4info: P4Info, entries: Iterable[TableEntry]) -> None:
    """Raise :class:`TableFullError` if any table would hold more than its P4Info size."""
    counts = count_by_table(entries)
    for table, n in sorted(counts.items()):
        size = p4info.table(table).size
        if size and n > size:
            raise TableFullError(table, n, size)

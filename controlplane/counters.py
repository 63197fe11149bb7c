"""What ``GET /stats`` reports: the switches' echelon counters per registered group,
the unprioritized packets by reason and each switch's live queues
(:mod:`controlplane.queues`), read from every in-sync switch. Kept apart from
:mod:`controlplane.controller`: it only reads, with no lock held."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controlplane.entries import GroupPlan
from controlplane.queues import read_queues
from controlplane.switchsync import SwitchSync
from echelon.constants import UNPRIO_COUNT, UNPRIO_NAMES

C_ECHELON = "EchelonIngress.echelon_pkts"
C_UNPRIO = "EchelonIngress.unprioritized_pkts"


def read_stats(agents: Mapping[str, SwitchSync], plans: Sequence[GroupPlan]) -> dict[str, Any]:
    """Per-group packets/bytes summed over switches (a switch that cannot be read is
    reported with its error, not as zeros), plus unprioritized packets by reason."""
    per_switch: dict[str, Any] = {}
    totals: dict[int, list[int]] = {}
    unprio = [[0, 0] for _ in range(UNPRIO_COUNT)]
    for name, a in agents.items():
        conn = a.conn
        if conn is None or not a.status.in_sync:
            per_switch[name] = {"error": a.status.last_error or "not connected"}
            continue
        try:
            ech = conn.read_counter(C_ECHELON)
            spc = conn.read_counter(C_UNPRIO)
        except Exception as exc:  # a dying switch must not break the endpoint
            per_switch[name] = {"error": str(exc)}
            continue
        per_switch[name] = {"unprioritized": _unprio_view(spc)}
        try:
            per_switch[name]["queues"] = read_queues(a.switch)
        except Exception as exc:  # counters without queues beat no answer
            per_switch[name]["queues_error"] = str(exc)
        for p in plans:
            pk, by = ech.get(p.class_id, (0, 0))
            t = totals.setdefault(p.class_id, [0, 0])
            t[0] += pk
            t[1] += by
        for i, (pk, by) in spc.items():
            if i < UNPRIO_COUNT:
                unprio[i][0] += pk
                unprio[i][1] += by
    groups = [
        {
            "job": p.job,
            "group": p.group,
            "echelon_id": p.echelon_id,
            "class_id": p.class_id,
            "priority": p.priority,
            "packets": totals.get(p.class_id, [0, 0])[0],
            "bytes": totals.get(p.class_id, [0, 0])[1],
        }
        for p in plans
    ]
    unprio_total = _unprio_view({i: (v[0], v[1]) for i, v in enumerate(unprio)})
    return {"groups": groups, "unprioritized": unprio_total, "switches": per_switch}


def _unprio_view(counts: Mapping[int, tuple[int, int]]) -> dict[str, dict[str, int]]:
    return {
        name: {"packets": counts.get(i, (0, 0))[0], "bytes": counts.get(i, (0, 0))[1]}
        for i, name in enumerate(UNPRIO_NAMES)
    }

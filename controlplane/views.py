"""JSON views for ``GET /status`` and ``GET /jobs/{id}``: one switch's connection and sync
state, an EchelonFlow as registered. Kept apart from :mod:`controlplane.controller`, whose
job is planning and writing: these only read what it holds and shape it for the API
(:mod:`controlplane.apimodels` declares the same shapes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlplane.switchsync import SwitchSync
from echelon.model import EchelonFlow


def switch_view(agent: SwitchSync, entries: Mapping[str, int]) -> dict[str, Any]:
    """A switch's address, every field of its :class:`~controlplane.syncstatus.SyncStatus`
    (mastership, pipeline, the last reconcile's numbers, the anti-entropy and
    arbitration counters), what only the live agent knows, and ``entries`` per table
    (the controller's count of what an in-sync switch holds)."""
    st, conn = agent.status, agent.conn
    return {
        "grpc": agent.switch.grpc,
        "device_id": agent.switch.device_id,
        **vars(st),
        "arbitration": list(st.arbitration),
        "primary": bool(conn is not None and conn.is_primary and st.connected),
        "entries": dict(entries) if st.in_sync else {},
        "agent_alive": agent.alive,
        "unavailable": agent.unavailable(),
        "primary_election_id": (
            list(conn.primary_election_id)
            if conn is not None and conn.primary_election_id
            else None
        ),
    }


def echelonflow_view(ef: EchelonFlow) -> dict[str, Any]:
    """An EchelonFlow with its flows' offsets ``A(j)`` in seconds and µs (the header's unit)."""
    return {
        "name": ef.name,
        "group": ef.group,
        "t_ref": ef.t_ref,
        "weight": ef.weight,
        "flows": [
            {
                "index": f.index,
                "src": f.src,
                "dst": f.dst,
                "size": f.size,
                "offset": f.offset,
                "offset_us": f.offset_us,
            }
            for f in ef.flows
        ],
    }

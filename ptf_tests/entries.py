"""The table entries the tests install by hand: exactly what the controller would.

Built by P4Info names (:meth:`SwitchConnection.table_entry`; an echelon's entries by
the controller's own builders in :mod:`controlplane.entries`), so a renamed table or
a wrong parameter width fails here with the field named, not as a silent miss on the
switch.
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Address

from controlplane.entries import classify_entry, ids_entry, range_entry
from p4client.p4info import TableEntry
from p4client.p4rt import SwitchConnection
from ptf_tests import packets as pk


def routes(sw: SwitchConnection) -> list[TableEntry]:
    """One /32 per PTF port: host h<p> behind port p, its MAC as next hop."""
    return [
        sw.table_entry(
            "EchelonIngress.ipv4_lpm",
            {"hdr.ipv4.dstAddr": (pk.host_ip(port), 32)},
            "EchelonIngress.ipv4_forward",
            {"dstAddr": pk.host_mac(port), "port": port},
        )
        for port in pk.PORTS
    ]


def echelon(
    sw: SwitchConnection,
    echelon_id: int,
    class_id: int,
    prio: int,
    sources: Sequence[int],
    ranges: Sequence[tuple[int, int, int]] = (),
) -> list[TableEntry]:
    """One registered echelon, by the controller's own entry builders: its ID, one
    classify entry per source port (band top level ``prio``), and deadline ranges
    ``(lo_us, hi_us, level)``."""
    p4info = sw.loaded_p4info()
    return [
        ids_entry(p4info, echelon_id),
        *(classify_entry(p4info, int(IPv4Address(pk.host_ip(src))), echelon_id, class_id, prio)
          for src in sources),
        *(range_entry(p4info, class_id, lo, hi, level) for lo, hi, level in ranges),
    ]  # fmt: skip

"""The table entries the tests install by hand: exactly what the controller would.

Built by P4Info names through :meth:`SwitchConnection.table_entry`, so a renamed
table or a wrong parameter width fails here with the field named, not as a
silent miss on the switch.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    """One registered echelon: its ID, one classify entry per source port (band top
    level ``prio``), and deadline ranges ``(lo_us, hi_us, level)``."""
    out = [
        sw.table_entry(
            "EchelonIngress.echelon_ids", {"hdr.echelon.echelon_id": echelon_id}, "NoAction"
        )
    ]
    for src in sources:
        out.append(
            sw.table_entry(
                "EchelonIngress.echelon_classify",
                {"hdr.ipv4.srcAddr": pk.host_ip(src), "hdr.echelon.echelon_id": echelon_id},
                "EchelonIngress.set_echelon",
                {"class_id": class_id, "prio": prio},
            )
        )
    for lo, hi, level in ranges:
        out.append(
            sw.table_entry(
                "EchelonIngress.deadline_prio",
                {"meta.class_id": class_id, "hdr.echelon.deadline_us": (lo, hi)},
                "EchelonIngress.set_deadline_prio",
                {"prio": level},
                priority=1,  # range tables need a P4Runtime priority > 0
            )
        )
    return out

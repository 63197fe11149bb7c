"""``p4src/echelon.p4`` in Python: the names it implements and its ingress control.

This module is the software twin of the P4 source, kept as close to it as the
language allows so that a reviewer can diff the two by eye. It declares what
it implements (match-field extractors, actions with parameter widths, tables
with their keys/actions/default, counters); :mod:`softswitch.pipeline` checks a
P4Info against these declarations in both directions before binding IDs to
them, so the P4Info stays the one source of IDs and sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

from echelon.constants import (
    IPV4_IHL_MIN,
    PRIO_BEST_EFFORT,
    SPECIAL_IPV4_OPTIONS,
    SPECIAL_MALFORMED,
    SPECIAL_NON_IPV4,
    SPECIAL_PLAIN,
    SPECIAL_SPOOFED,
    SPECIAL_TTL_EXPIRED,
    SPECIAL_UNKNOWN,
)
from softswitch.packet import DROP_PORT, NO_ERROR, Packet, deparse, parse
from softswitch.tables import EXACT, LPM, RANGE, ActionFn, Counter, Table

#: Match-field name -> (Packet attribute, bit width).
FIELDS: dict[str, tuple[str, int]] = {
    "hdr.ipv4.dstAddr": ("ipv4_dst", 32),
    "hdr.ipv4.srcAddr": ("ipv4_src", 32),
    "hdr.echelon.echelon_id": ("echelon_id", 16),
    "hdr.echelon.deadline_us": ("deadline_us", 32),
    "meta.class_id": ("class_id", 16),
}

NO_ACTION = "NoAction"
DROP = "EchelonIngress.drop"
IPV4_FORWARD = "EchelonIngress.ipv4_forward"
SET_ECHELON = "EchelonIngress.set_echelon"
SET_DEADLINE_PRIO = "EchelonIngress.set_deadline_prio"

#: Action name -> parameters (name, bit width) in declaration order.
ACTIONS: dict[str, tuple[tuple[str, int], ...]] = {
    NO_ACTION: (),
    DROP: (),
    IPV4_FORWARD: (("dstAddr", 48), ("port", 9)),
    SET_ECHELON: (("class_id", 16), ("prio", 3)),
    SET_DEADLINE_PRIO: (("prio", 3),),
}


@dataclass(frozen=True)
class TableSpec:
    """What the program needs of a table: key (field name, match kind), actions, default."""

    keys: tuple[tuple[str, str], ...]
    actions: tuple[str, ...]
    default: str


IPV4_LPM = "EchelonIngress.ipv4_lpm"
ECHELON_CLASSIFY = "EchelonIngress.echelon_classify"
ECHELON_IDS = "EchelonIngress.echelon_ids"
DEADLINE_PRIO = "EchelonIngress.deadline_prio"

TABLES: dict[str, TableSpec] = {
    IPV4_LPM: TableSpec((("hdr.ipv4.dstAddr", LPM),), (IPV4_FORWARD, DROP), DROP),
    ECHELON_CLASSIFY: TableSpec(
        (("hdr.ipv4.srcAddr", EXACT), ("hdr.echelon.echelon_id", EXACT)),
        (SET_ECHELON, NO_ACTION),
        NO_ACTION,
    ),
    ECHELON_IDS: TableSpec((("hdr.echelon.echelon_id", EXACT),), (NO_ACTION,), NO_ACTION),
    DEADLINE_PRIO: TableSpec(
        (("meta.class_id", EXACT), ("hdr.echelon.deadline_us", RANGE)),
        (SET_DEADLINE_PRIO, NO_ACTION),
        NO_ACTION,
    ),
}

ECHELON_PKTS = "EchelonIngress.echelon_pkts"
SPECIAL_PKTS = "EchelonIngress.special_pkts"
#: Counter name -> P4Info unit.
COUNTERS: dict[str, str] = {ECHELON_PKTS: "BOTH", SPECIAL_PKTS: "BOTH"}


class EchelonProgram:
    """One instance per committed pipeline: actions bound to its counters and tables."""

    def __init__(self, counters: dict[str, Counter]) -> None:
        self.echelon_pkts = counters[ECHELON_PKTS]
        self.special_pkts = counters[SPECIAL_PKTS]
        self._actions: dict[str, ActionFn] = {
            NO_ACTION: self.no_action,
            DROP: self.drop,
            IPV4_FORWARD: self.ipv4_forward,
            SET_ECHELON: self.set_echelon,
            SET_DEADLINE_PRIO: self.set_deadline_prio,
        }

    def action(self, name: str) -> ActionFn:
        return self._actions[name]

    def bind(self, tables: dict[str, Table]) -> None:
        self.ipv4_lpm = tables[IPV4_LPM]
        self.echelon_classify = tables[ECHELON_CLASSIFY]
        self.echelon_ids = tables[ECHELON_IDS]
        self.deadline_prio = tables[DEADLINE_PRIO]

    # ------------------------------------------------------------------ actions
    def no_action(self, p: Packet) -> None:
        pass

    def drop(self, p: Packet) -> None:
        p.egress_spec = DROP_PORT

    def ipv4_forward(self, p: Packet, dst_addr: int, port: int) -> None:
        p.egress_spec = port
        p.eth_src = p.eth_dst
        p.eth_dst = dst_addr
        p.mac_dirty = True
        p.ttl = (p.ttl - 1) & 0xFF

    def set_echelon(self, p: Packet, class_id: int, prio: int) -> None:
        p.class_id = class_id
        p.prio = prio
        self.echelon_pkts.count(class_id, p.length)

    def set_deadline_prio(self, p: Packet, prio: int) -> None:
        p.prio = prio

    # ------------------------------------------------------------------ control
    def ingress(self, p: Packet) -> None:
        """EchelonIngress.apply, line for line."""
        p.prio = PRIO_BEST_EFFORT
        if not p.ipv4_valid:
            self.special_pkts.count(SPECIAL_NON_IPV4, p.length)
            self.drop(p)
            return
        if p.ihl != IPV4_IHL_MIN:
            self.special_pkts.count(SPECIAL_IPV4_OPTIONS, p.length)
            self.drop(p)
            return
        if p.ttl <= 1:
            self.special_pkts.count(SPECIAL_TTL_EXPIRED, p.length)
            self.drop(p)
            return
        self.ipv4_lpm.apply(p)

        if p.parser_error != NO_ERROR:
            self.special_pkts.count(SPECIAL_MALFORMED, p.length)
        elif p.echelon_valid:
            if self.echelon_classify.apply(p):
                self.deadline_prio.apply(p)
            elif self.echelon_ids.apply(p):
                self.special_pkts.count(SPECIAL_SPOOFED, p.length)
            else:
                self.special_pkts.count(SPECIAL_UNKNOWN, p.length)
        else:
            self.special_pkts.count(SPECIAL_PLAIN, p.length)

        p.priority = p.prio
        p.dscp = p.prio << 3

    def process(self, data: bytearray, ingress_port: int) -> Packet:
        """Parser, ingress, (empty) egress, checksum and deparser over one frame.

        The returned packet's ``egress_spec`` is ``DROP_PORT`` if it was dropped;
        its ``data`` holds the egress bytes otherwise.
        """
        p = parse(data, ingress_port)
        self.ingress(p)
        if p.egress_spec != DROP_PORT:
            deparse(p)
        return p

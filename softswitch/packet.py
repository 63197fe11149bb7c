"""Parsed packet state, parser and deparser of ``p4src/include/parser.p4``.

The packet stays one ``bytearray``; the parser reads only the header fields the
program uses into slots, and the deparser writes back only the fields the
program can change (MAC addresses, DSCP, TTL, IPv4 checksum). That equals
BMv2's emit of the valid headers followed by the unparsed payload, because the
program never adds or removes a header.

Parser semantics mirrored from BMv2: an ``extract`` that runs past the end of
the frame sets ``parser_error = PacketTooShort`` and leaves that header invalid
(headers extracted before stay valid); ``verify(version == 1)`` fails *after*
the extract, so ``hdr.echelon`` stays valid with ``EchelonBadVersion``. Parser
errors never drop: ingress runs with ``parser_error`` set. As in the P4 source
the IPv4 header is a fixed 20 bytes (IHL is not used to find UDP).
"""

from __future__ import annotations

import struct

from echelon.constants import (
    ECHELON_HEADER_LEN,
    ECHELON_UDP_PORT,
    ECHELON_VERSION,
    IPV4_IHL_MIN,
)

#: v1model error codes (core.p4 order, then the program's own error).
NO_ERROR = 0
PACKET_TOO_SHORT = 1
ECHELON_BAD_VERSION = 7
ERROR_NAMES = {
    NO_ERROR: "NoError",
    PACKET_TOO_SHORT: "PacketTooShort",
    ECHELON_BAD_VERSION: "EchelonBadVersion",
}

#: simple_switch's drop port: mark_to_drop() sets egress_spec to it.
DROP_PORT = 511

ETH_LEN = 14
IPV4_OFF = ETH_LEN
IPV4_LEN = 20
UDP_OFF = IPV4_OFF + IPV4_LEN
UDP_LEN = 8
ECH_OFF = UDP_OFF + UDP_LEN

_IPV4 = struct.Struct("!BBHHHBBHII")
_UDP_DPORT = struct.Struct("!H")
_ECH = struct.Struct("!BBHI")
_CSUM_WORDS = struct.Struct("!10H")
_CSUM = struct.Struct("!H")


class Packet:
    """Headers, user metadata and standard_metadata of one packet in the pipeline."""

    __slots__ = (
        "class_id",
        "data",
        "deadline_us",
        "dscp",
        "echelon_id",
        "echelon_valid",
        "echelon_version",
        "egress_spec",
        "eth_dst",
        "eth_src",
        "eth_valid",
        "ihl",
        "ingress_port",
        "ipv4_dst",
        "ipv4_src",
        "ipv4_valid",
        "length",
        "mac_dirty",
        "parser_error",
        "prio",
        "priority",
        "ttl",
        "udp_valid",
    )

    def __init__(self, data: bytearray, ingress_port: int) -> None:
        self.data = data
        self.length = len(data)
        self.ingress_port = ingress_port
        self.parser_error = NO_ERROR
        self.eth_valid = False
        self.ipv4_valid = False
        self.ihl = 0
        self.udp_valid = False
        self.echelon_valid = False
        self.eth_dst = 0
        self.eth_src = 0
        self.mac_dirty = False
        self.dscp = 0
        self.ttl = 0
        self.ipv4_src = 0
        self.ipv4_dst = 0
        self.echelon_version = 0
        self.echelon_id = 0
        self.deadline_us = 0
        # metadata_t and standard_metadata (zero-initialised like BMv2)
        self.class_id = 0
        self.prio = 0
        self.egress_spec = 0
        self.priority = 0


def parse(data: bytearray, ingress_port: int) -> Packet:
    """Run EchelonParser over ``data``."""
    p = Packet(data, ingress_port)
    n = p.length
    if n < ETH_LEN:
        p.parser_error = PACKET_TOO_SHORT
        return p
    p.eth_valid = True
    p.eth_dst = int.from_bytes(data[0:6], "big")
    p.eth_src = int.from_bytes(data[6:12], "big")
    if data[12] != 0x08 or data[13] != 0x00:
        return p
    if n < UDP_OFF:
        p.parser_error = PACKET_TOO_SHORT
        return p
    _vi, tos, _tl, _id, _ff, ttl, proto, _cs, src, dst = _IPV4.unpack_from(data, IPV4_OFF)
    p.ipv4_valid = True
    p.ihl = _vi & 0x0F
    p.dscp = tos >> 2
    p.ttl = ttl
    p.ipv4_src = src
    p.ipv4_dst = dst
    if p.ihl != IPV4_IHL_MIN or proto != 17:
        return p
    if n < ECH_OFF:
        p.parser_error = PACKET_TOO_SHORT
        return p
    p.udp_valid = True
    if _UDP_DPORT.unpack_from(data, UDP_OFF + 2)[0] != ECHELON_UDP_PORT:
        return p
    if n < ECH_OFF + ECHELON_HEADER_LEN:
        p.parser_error = PACKET_TOO_SHORT
        return p
    vf, _r0, eid, deadline = _ECH.unpack_from(data, ECH_OFF)
    p.echelon_valid = True
    p.echelon_version = vf >> 4
    p.echelon_id = eid
    p.deadline_us = deadline
    if p.echelon_version != ECHELON_VERSION:
        p.parser_error = ECHELON_BAD_VERSION
    return p


def ipv4_checksum(data: bytearray | bytes, offset: int = IPV4_OFF) -> int:
    """csum16 over the 20-byte IPv4 header at ``offset`` with the checksum field as zero."""
    words = _CSUM_WORDS.unpack_from(data, offset)
    s = sum(words) - words[5]
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return int(~s & 0xFFFF)


def deparse(p: Packet) -> bytearray:
    """EchelonComputeChecksum + EchelonDeparser: write changed fields back, fix the checksum."""
    data = p.data
    if p.mac_dirty:
        data[0:6] = p.eth_dst.to_bytes(6, "big")
        data[6:12] = p.eth_src.to_bytes(6, "big")
    if p.ipv4_valid:
        data[15] = (p.dscp << 2) | (data[15] & 0x03)
        data[22] = p.ttl
        _CSUM.pack_into(data, IPV4_OFF + 10, ipv4_checksum(data))
    return data

"""Frames the PTF suite sends, and the exact bytes the switch must send back.

Pure functions, no PTF: the expected egress frame is derived from the *bytes*
of the sent frame, not by re-dissecting it with scapy, so that malformed
echelon headers (a truncated header scapy would mis-parse) are predicted the
same way as good ones. The switch is a router for these frames: it rewrites
the MACs, decrements the TTL, writes DSCP = prio << 3 (keeping ECN) and
recomputes the IPv4 header checksum; every other byte must come back
unchanged (the UDP checksum covers neither TTL nor DSCP).
"""

from __future__ import annotations

import struct

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Packet, Raw
from scapy.utils import checksum

from echelon.constants import (
    ECHELON_UDP_PORT,
    ETHERNET_HEADER_LEN,
    IPV4_HEADER_LEN,
    dscp_for_priority,
)
from echelon.wire import Echelon

#: The MAC address hosts send to (the switch's "router" MAC). The P4 program
#: moves the incoming destination MAC into the source MAC of the forwarded frame.
SWITCH_MAC = "02:ec:00:00:00:fe"
#: PTF port numbers, one host per port; port ``p`` is host ``h<p>``.
PORTS = (1, 2, 3, 4)
#: A destination no route covers.
UNROUTED_IP = "10.9.9.9"

#: where the IPv4 header and the fields these helpers rewrite start in a frame
_IP_OFF = ETHERNET_HEADER_LEN
_TOS_OFF = _IP_OFF + 1
_TTL_OFF = _IP_OFF + 8
_CSUM_OFF = _IP_OFF + 10


def host_ip(port: int) -> str:
    return f"10.0.0.{port}"


def host_mac(port: int) -> str:
    return f"00:00:0a:00:00:{port:02x}"


def _ip(src: int, dst: int | str, dscp: int, ecn: int, ttl: int, ident: int) -> IP:
    dst_ip = host_ip(dst) if isinstance(dst, int) else dst
    return IP(src=host_ip(src), dst=dst_ip, tos=(dscp << 2) | ecn, ttl=ttl, id=ident)


def plain_udp(
    src: int,
    dst: int | str,
    *,
    dscp: int = 0,
    ecn: int = 0,
    ttl: int = 64,
    size: int = 100,
    ident: int = 1,
) -> bytes:
    """An IPv4/UDP frame without an echelon header, padded to ``size`` bytes."""
    head = Ether(src=host_mac(src), dst=SWITCH_MAC) / _ip(src, dst, dscp, ecn, ttl, ident)
    pkt = head / UDP(sport=1234, dport=5001)
    return _padded(pkt, size)


def echelon(
    src: int,
    dst: int | str,
    echelon_id: int,
    deadline_us: int,
    *,
    seq: int = 0,
    flow_index: int = 0,
    version: int = 1,
    dscp: int = 0,
    ecn: int = 0,
    ttl: int = 64,
    size: int = 100,
) -> bytes:
    """An echelon-tagged frame; ``seq`` also goes into the IP ID to tell frames apart."""
    hdr = Echelon(
        version=version,
        echelon_id=echelon_id,
        deadline_us=deadline_us,
        flow_index=flow_index,
        seq=seq,
    )
    ip = _ip(src, dst, dscp, ecn, ttl, seq & 0xFFFF)
    pkt = Ether(src=host_mac(src), dst=SWITCH_MAC) / ip / UDP(sport=40000, dport=ECHELON_UDP_PORT)
    return _padded(pkt / hdr, size)


def truncated_echelon(src: int, dst: int, echelon_id: int, keep: int = 8) -> bytes:
    """A frame to the echelon port whose payload holds only the first ``keep`` header bytes."""
    full = bytes(Echelon(echelon_id=echelon_id, deadline_us=0))[:keep]
    ip = _ip(src, dst, 0, 0, 64, 77)
    pkt = Ether(src=host_mac(src), dst=SWITCH_MAC) / ip / UDP(sport=40000, dport=ECHELON_UDP_PORT)
    return bytes(pkt / Raw(full))


def arp_request(src: int, dst: int) -> bytes:
    """A non-IPv4 frame (the program drops it and counts it as non-IPv4)."""
    pkt = Ether(src=host_mac(src), dst="ff:ff:ff:ff:ff:ff") / ARP(
        hwsrc=host_mac(src), psrc=host_ip(src), pdst=host_ip(dst)
    )
    return _padded(pkt, 60)


def _padded(pkt: Packet, size: int) -> bytes:
    raw = bytes(pkt)
    if len(raw) >= size:
        return raw
    # Padding inside the UDP payload (not after the IP packet) keeps lengths honest.
    if UDP in pkt:
        return bytes(pkt / Raw(b"\x00" * (size - len(raw))))
    return raw + b"\x00" * (size - len(raw))


def forwarded(frame: bytes, out_port: int, prio: int) -> bytes:
    """The exact frame the switch sends out of ``out_port`` for ``frame`` at ``prio``."""
    out = bytearray(frame)
    out[0:6] = bytes.fromhex(host_mac(out_port).replace(":", ""))
    out[6:12] = frame[0:6]
    out[_TOS_OFF] = (dscp_for_priority(prio) << 2) | (frame[_TOS_OFF] & 0x3)
    out[_TTL_OFF] = frame[_TTL_OFF] - 1
    ihl = (frame[_IP_OFF] & 0xF) * 4
    out[_CSUM_OFF : _CSUM_OFF + 2] = b"\x00\x00"
    csum = checksum(bytes(out[_IP_OFF : _IP_OFF + ihl]))
    out[_CSUM_OFF : _CSUM_OFF + 2] = struct.pack("!H", csum)
    return bytes(out)


def with_ip_byte(frame: bytes, offset: int, value: int, fix_checksum: bool = True) -> bytes:
    """``frame`` with byte ``offset`` of its IPv4 header set to ``value``; the header
    checksum is recomputed (so only that byte is wrong) unless ``fix_checksum`` is False."""
    out = bytearray(frame)
    out[_IP_OFF + offset] = value
    if fix_checksum:
        out[_CSUM_OFF : _CSUM_OFF + 2] = b"\x00\x00"
        csum = checksum(bytes(out[_IP_OFF : _IP_OFF + IPV4_HEADER_LEN]))
        out[_CSUM_OFF : _CSUM_OFF + 2] = struct.pack("!H", csum)
    return bytes(out)


def fragment(frame: bytes, offset_units: int, more: bool = False) -> bytes:
    """``frame`` re-labelled as an IPv4 fragment at ``offset_units`` x 8 bytes (checksum fixed).

    Its bytes after the IPv4 header are unchanged, so a non-first fragment made from
    an echelon frame carries bytes that *look* like UDP to 0xEC00 and an echelon header.
    """
    flags_frag = (0x2000 if more else 0) | offset_units
    out = with_ip_byte(frame, 6, flags_frag >> 8, fix_checksum=False)
    return with_ip_byte(out, 7, flags_frag & 0xFF)


def ipv4_checksum_ok(frame: bytes) -> bool:
    """True if the IPv4 header checksum of ``frame`` verifies (sums to 0xffff)."""
    ihl = (frame[_IP_OFF] & 0xF) * 4
    return checksum(frame[_IP_OFF : _IP_OFF + ihl]) == 0


def describe(frame: bytes) -> str:
    """A one-line summary for assertion messages: who, DSCP, TTL, echelon fields."""
    p = Ether(frame)
    if IP not in p:
        return p.summary()
    ip = p[IP]
    text = f"{ip.src}->{ip.dst} dscp={ip.tos >> 2} ttl={ip.ttl}"
    if Echelon in p:
        e = p[Echelon]
        text += f" echelon={e.echelon_id} deadline={e.deadline_us} seq={e.seq}"
    return text

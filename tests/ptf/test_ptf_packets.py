"""The suite's model of a forwarded frame (``ptf_tests.packets.forwarded``), checked
against scapy's independent dissection, so a wrong model cannot make the PTF
suite pass or fail for the wrong reason. No switch, no root."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from echelon.constants import dscp_for_priority
from echelon.wire import Echelon
from ptf_tests import packets as pk


@pytest.mark.parametrize("prio", range(8))
@pytest.mark.parametrize("ecn", range(4))
def test_forwarded_rewrites_exactly_the_router_fields(prio: int, ecn: int) -> None:
    sent = pk.echelon(1, 4, 77, 1500, seq=3, dscp=46, ecn=ecn, ttl=9)
    out = pk.forwarded(sent, 4, prio)
    a, b = Ether(sent), Ether(out)
    assert (b.src, b.dst) == (pk.SWITCH_MAC, pk.host_mac(4))
    assert b[IP].ttl == a[IP].ttl - 1 == 8
    assert b[IP].tos == (dscp_for_priority(prio) << 2) | ecn
    recomputed = Ether(out)
    del recomputed[IP].chksum
    assert Ether(bytes(recomputed))[IP].chksum == b[IP].chksum
    assert pk.ipv4_checksum_ok(out) and pk.ipv4_checksum_ok(sent)
    assert b[UDP].chksum == a[UDP].chksum and bytes(b[UDP]) == bytes(a[UDP])
    assert b[Echelon].echelon_id == 77 and b[Echelon].deadline_us == 1500


def test_only_router_bytes_differ() -> None:
    sent = pk.plain_udp(2, 3, dscp=10, size=120)
    out = pk.forwarded(sent, 3, 0)
    changed = {i for i, (x, y) in enumerate(zip(sent, out, strict=True)) if x != y}
    router_bytes = set(range(12)) | {15, 22, 24, 25}  # MACs, ToS, TTL, checksum
    assert changed and changed <= router_bytes
    assert len(out) == len(sent) == 120


def test_truncated_header_is_shorter_than_an_echelon_header() -> None:
    for keep in (0, 8, 15):
        frame = pk.truncated_echelon(1, 2, 100, keep=keep)
        assert len(frame) == 14 + 20 + 8 + keep
        assert Ether(frame)[UDP].dport == 0xEC00
        assert pk.ipv4_checksum_ok(pk.forwarded(frame, 2, 0))


def test_checksum_check_detects_corruption() -> None:
    out = bytearray(pk.forwarded(pk.plain_udp(1, 2), 2, 3))
    out[22] ^= 0x01  # flip a TTL bit without fixing the checksum
    assert not pk.ipv4_checksum_ok(bytes(out))

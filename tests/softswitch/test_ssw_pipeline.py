"""The soft switch running p4c's echelon.json, branch by branch, on egress bytes."""

from __future__ import annotations

import pytest
from finsy.proto import p4r
from scapy.layers.inet import IP, TCP, UDP, IPOption_Router_Alert
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw

from echelon.constants import (
    UNPRIO_DROP_IHL_NOT_5,
    UNPRIO_DROP_IPV4_CHECKSUM,
    UNPRIO_DROP_IPV4_VERSION,
    UNPRIO_DROP_NOT_IPV4,
    UNPRIO_DROP_TTL_EXPIRED,
    UNPRIO_MALFORMED_ECHELON,
    UNPRIO_PLAIN,
    UNPRIO_SPOOFED_SOURCE,
    UNPRIO_UNKNOWN_ID,
    dscp_for_priority,
)
from echelon.wire import Echelon
from softswitch import p4rt_codec as codec
from softswitch.bm.pipeline import Pipeline
from softswitch.tables import Counter
from tests.softswitch.helpers import Names, load_config, load_p4info

H1, H2, H3 = "10.0.0.1", "10.0.0.2", "10.0.0.3"
NEXT_HOP_MAC = 0x0000000000B2
SWITCH_MAC = "00:00:00:00:00:5a"
EID, CLASS, BAND = 7, 11, 4


def ip_int(a: str) -> int:
    return int.from_bytes(bytes(int(x) for x in a.split(".")), "big")


@pytest.fixture
def names() -> Names:
    return Names(load_p4info())


@pytest.fixture
def pl(names: Names) -> Pipeline:
    p = Pipeline(names.p4info, load_config(), 0)
    install(
        p,
        names.entry(
            "EchelonIngress.ipv4_lpm",
            {"hdr.ipv4.dstAddr": (ip_int(H2), 32)},
            "EchelonIngress.ipv4_forward",
            {"dstAddr": NEXT_HOP_MAC, "port": 2},
        ),
    )
    install(
        p,
        names.entry(
            "EchelonIngress.echelon_classify",
            {"hdr.ipv4.srcAddr": ip_int(H1), "hdr.echelon.echelon_id": EID},
            "EchelonIngress.set_echelon",
            {"class_id": CLASS, "prio": BAND},
        ),
    )
    install(
        p, names.entry("EchelonIngress.echelon_ids", {"hdr.echelon.echelon_id": EID}, "NoAction")
    )
    for lo, hi, prio, pri in ((0, 999, 6, 1), (1000, 1999, 5, 1)):
        install(
            p,
            names.entry(
                "EchelonIngress.deadline_prio",
                {"meta.class_id": CLASS, "hdr.echelon.deadline_us": (lo, hi)},
                "EchelonIngress.set_deadline_prio",
                {"prio": prio},
                priority=pri,
            ),
        )
    return p


def install(p: Pipeline, te: p4r.TableEntry) -> None:
    d = codec.decoder(p).table_entry(te, needs_action=True)
    assert d.call is not None
    d.info.table.insert(d.key, d.priority, d.call, d.proto)


def counter(p: Pipeline, name: str) -> Counter:
    return next(ci.counter for ci in p.counters.values() if ci.name == name)


def unprio(p: Pipeline, index: int) -> tuple[int, int]:
    c = counter(p, "EchelonIngress.unprioritized_pkts")
    return c.packets[index], c.bytes[index]


def echelon_pkt(
    src: str = H1,
    eid: int = EID,
    deadline: int = 5000,
    tos: int = 0,
    ttl: int = 64,
    version: int = 1,
) -> Ether:
    return (
        Ether(dst=SWITCH_MAC, src="00:00:00:00:00:01")
        / IP(src=src, dst=H2, tos=tos, ttl=ttl)
        / UDP(sport=1234, dport=0xEC00)
        / Echelon(version=version, echelon_id=eid, deadline_us=deadline, seq=9)
        / Raw(b"x" * 20)
    )


def expected_egress(frame: bytes, prio: int) -> bytes:
    """What the P4 program emits: router MAC rewrite, TTL-1, DSCP=CS<prio>, ECN kept, csum."""
    pkt = Ether(frame)
    pkt.src = pkt.dst
    pkt.dst = "00:00:00:00:00:b2"
    pkt[IP].ttl -= 1
    pkt[IP].tos = (dscp_for_priority(prio) << 2) | (pkt[IP].tos & 0x3)
    del pkt[IP].chksum
    return bytes(pkt)


def run(p: Pipeline, pkt: Ether | bytes) -> tuple[int, int, bytes] | None:
    return p.process(bytes(pkt), 1)


def ipv4_checksum(frame: bytes) -> int:
    """RFC 791 header checksum of the 20-byte IPv4 header at offset 14, field zeroed."""
    hdr = bytearray(frame[14:34])
    hdr[10:12] = b"\0\0"
    s = sum(int.from_bytes(hdr[i : i + 2], "big") for i in range(0, 20, 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def test_plain_ipv4_goes_best_effort_and_dscp_is_overwritten(pl: Pipeline) -> None:
    pkt = Ether(dst=SWITCH_MAC) / IP(src=H3, dst=H2, tos=(46 << 2) | 1) / TCP() / Raw(b"p" * 9)
    out = run(pl, pkt)
    assert out is not None
    port, prio, data = out
    assert (port, prio) == (2, 0)
    assert bytes(data) == expected_egress(bytes(pkt), 0)
    assert Ether(bytes(data))[IP].tos & 3 == 1  # ECN preserved
    assert unprio(pl, UNPRIO_PLAIN) == (1, len(pkt))


def test_registered_uses_deadline_range_and_counts_class(pl: Pipeline) -> None:
    for deadline, want in (
        (10, 6),
        (999, 6),
        (1000, 5),
        (1999, 5),
        (2000, BAND),
        (2**32 - 1, BAND),
    ):
        pkt = echelon_pkt(deadline=deadline, tos=0xB8)
        out = run(pl, pkt)
        assert out is not None
        assert out[1] == want, deadline
        assert bytes(out[2]) == expected_egress(bytes(pkt), want)
    c = counter(pl, "EchelonIngress.echelon_pkts")
    assert c.packets[CLASS] == 6
    assert c.bytes[CLASS] == 6 * len(echelon_pkt())


def test_spoofed_source_is_best_effort(pl: Pipeline) -> None:
    out = run(pl, echelon_pkt(src=H3, deadline=10))
    assert out is not None and out[1] == 0
    assert unprio(pl, UNPRIO_SPOOFED_SOURCE)[0] == 1
    assert unprio(pl, UNPRIO_UNKNOWN_ID)[0] == 0


def test_unknown_echelon_id(pl: Pipeline) -> None:
    out = run(pl, echelon_pkt(eid=EID + 1, deadline=10))
    assert out is not None and out[1] == 0
    assert unprio(pl, UNPRIO_UNKNOWN_ID)[0] == 1


def test_truncated_echelon_header_is_malformed_but_forwarded(pl: Pipeline) -> None:
    full = bytes(echelon_pkt(deadline=10))
    cut = full[: 14 + 20 + 8 + 7]  # 7 of 16 header bytes
    out = run(pl, cut)
    assert out is not None
    assert out[1] == 0
    assert bytes(out[2]) == expected_egress(cut, 0)
    assert unprio(pl, UNPRIO_MALFORMED_ECHELON) == (1, len(cut))


def test_truncated_udp_header_is_malformed(pl: Pipeline) -> None:
    full = bytes(echelon_pkt())
    out = run(pl, full[: 14 + 20 + 3])
    assert out is not None and out[1] == 0
    assert unprio(pl, UNPRIO_MALFORMED_ECHELON)[0] == 1


def test_bad_version_is_malformed_even_if_registered(pl: Pipeline) -> None:
    pkt = echelon_pkt(deadline=10, version=2)
    out = run(pl, pkt)
    assert out is not None and out[1] == 0
    assert bytes(out[2]) == expected_egress(bytes(pkt), 0)
    assert unprio(pl, UNPRIO_MALFORMED_ECHELON)[0] == 1
    assert counter(pl, "EchelonIngress.echelon_pkts").packets[CLASS] == 0


@pytest.mark.parametrize("ttl", [0, 1])
def test_ttl_expiry_drops(pl: Pipeline, ttl: int) -> None:
    assert run(pl, echelon_pkt(ttl=ttl)) is None
    assert unprio(pl, UNPRIO_DROP_TTL_EXPIRED)[0] == 1
    assert unprio(pl, UNPRIO_MALFORMED_ECHELON)[0] == 0


def test_ttl_two_is_forwarded_with_ttl_one(pl: Pipeline) -> None:
    out = run(pl, echelon_pkt(ttl=2))
    assert out is not None and Ether(bytes(out[2]))[IP].ttl == 1


@pytest.mark.parametrize(
    "frame",
    [
        bytes(Ether(dst=SWITCH_MAC) / ARP(pdst=H2)),
        bytes(Ether(type=0x0800)) + b"\x45" * 10,
        b"\x01\x02\x03",
    ],
    ids=["arp", "truncated-ipv4", "runt"],
)
def test_non_ipv4_dropped(pl: Pipeline, frame: bytes) -> None:
    assert run(pl, frame) is None
    assert unprio(pl, UNPRIO_DROP_NOT_IPV4) == (1, len(frame))


def test_ipv4_options_dropped_and_counted(pl: Pipeline) -> None:
    # A router-alert option: ihl = 6. Even a registered echelon frame gains nothing.
    pkt = echelon_pkt()
    pkt[IP].options = [IPOption_Router_Alert()]
    frame = bytes(pkt)
    assert Ether(frame)[IP].ihl == 6
    assert run(pl, frame) is None
    assert unprio(pl, UNPRIO_DROP_IHL_NOT_5) == (1, len(frame))
    assert counter(pl, "EchelonIngress.echelon_pkts").packets[CLASS] == 0


def test_ihl_below_five_dropped_as_ihl_not_5(pl: Pipeline) -> None:
    frame = bytearray(bytes(echelon_pkt()))
    frame[14] = 0x44  # version 4, ihl 4: not even a whole header
    assert run(pl, bytes(frame)) is None
    assert unprio(pl, UNPRIO_DROP_IHL_NOT_5) == (1, len(frame))


@pytest.mark.parametrize("version", [0, 6, 15])
def test_ip_version_other_than_4_dropped_and_counted(pl: Pipeline, version: int) -> None:
    pkt = echelon_pkt()
    pkt[IP].version = version
    frame = bytes(pkt)
    assert run(pl, frame) is None
    assert unprio(pl, UNPRIO_DROP_IPV4_VERSION) == (1, len(frame))
    assert counter(pl, "EchelonIngress.echelon_pkts").packets[CLASS] == 0


def test_bad_ipv4_checksum_dropped_and_counted(pl: Pipeline) -> None:
    frame = bytearray(bytes(echelon_pkt()))
    frame[24] ^= 0xFF  # corrupt the header checksum
    assert run(pl, bytes(frame)) is None
    assert unprio(pl, UNPRIO_DROP_IPV4_CHECKSUM) == (1, len(frame))
    assert unprio(pl, UNPRIO_PLAIN)[0] == 0


@pytest.mark.parametrize("frag", [1, 185, 8191])
def test_non_first_fragment_is_plain_traffic(pl: Pipeline, frag: int) -> None:
    # Bytes after the IPv4 header that would read as UDP to 0xEC00 + a registered
    # echelon header: a later fragment carries payload, never headers.
    pkt = echelon_pkt(deadline=10)
    pkt[IP].frag = frag
    frame = bytes(pkt)
    out = run(pl, frame)
    assert out is not None and out[1] == 0
    assert bytes(out[2]) == expected_egress(frame, 0)
    assert unprio(pl, UNPRIO_PLAIN) == (1, len(frame))
    assert counter(pl, "EchelonIngress.echelon_pkts").packets[CLASS] == 0


def test_first_fragment_is_still_classified(pl: Pipeline) -> None:
    pkt = echelon_pkt(deadline=10)
    pkt[IP].flags = "MF"
    out = run(pl, pkt)
    assert out is not None and out[1] == 6


def test_no_route_drops_but_still_classifies(pl: Pipeline) -> None:
    pkt = Ether() / IP(src=H1, dst="10.9.9.9") / UDP(dport=5)
    assert run(pl, pkt) is None
    assert unprio(pl, UNPRIO_PLAIN)[0] == 1


def test_lpm_longest_prefix_wins(pl: Pipeline, names: Names) -> None:
    install(
        pl,
        names.entry(
            "EchelonIngress.ipv4_lpm",
            {"hdr.ipv4.dstAddr": (ip_int("10.1.0.0"), 16)},
            "EchelonIngress.ipv4_forward",
            {"dstAddr": 1, "port": 3},
        ),
    )
    install(
        pl,
        names.entry(
            "EchelonIngress.ipv4_lpm",
            {"hdr.ipv4.dstAddr": (ip_int("10.1.2.0"), 24)},
            "EchelonIngress.ipv4_forward",
            {"dstAddr": 1, "port": 4},
        ),
    )
    for dst, port in (("10.1.2.3", 4), ("10.1.3.3", 3), (H2, 2)):
        out = run(pl, Ether() / IP(dst=dst) / UDP())
        assert out is not None and out[0] == port, dst


def test_checksum_matches_scapy(pl: Pipeline) -> None:
    pkt = echelon_pkt(deadline=1500)
    out = run(pl, pkt)
    assert out is not None
    ip = Ether(bytes(out[2]))[IP]
    claimed = ip.chksum
    del ip.chksum
    assert IP(bytes(ip)).chksum == claimed
    assert ipv4_checksum(bytes(out[2])) == claimed

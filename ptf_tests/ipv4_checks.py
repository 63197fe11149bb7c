"""IPv4 sanity in the data plane: fragments, version, header checksum, class slots.

Each case runs on both targets (BMv2 and the soft switch execute the same
p4c output), checks what leaves (or that nothing does) and the exact
``unprioritized_pkts`` slot that counted it.
"""

from __future__ import annotations

from ipaddress import IPv4Address

from controlplane.entries import classify_entry
from echelon.constants import (
    ECHELON_CLASSES,
    UNPRIO_DROP_IPV4_CHECKSUM,
    UNPRIO_DROP_IPV4_VERSION,
    UNPRIO_PLAIN,
)
from p4client.p4rt import P4RuntimeWriteError
from ptf_tests import packets as pk
from ptf_tests.base import EchelonTest

OUT = 2


class NonFirstFragmentIsPlain(EchelonTest):
    """A later fragment's bytes are payload, not UDP/echelon headers: it is forwarded at
    level 0 and counted as plain, even when those bytes look like a registered echelon
    header; the first fragment (offset 0) is still classified."""

    def runTest(self) -> None:
        self.register(100, class_id=1, prio=5, sources=[1])
        plain0 = self.counter("unprioritized_pkts", UNPRIO_PLAIN)
        class0 = self.counter("echelon_pkts", 1)
        frame = pk.echelon(1, OUT, 100, deadline_us=10, seq=3, size=120)
        later = [pk.fragment(frame, off, more=off < 185) for off in (1, 185, 8191)]
        for f in later:
            self.send(1, f)
        self.expect(OUT, [pk.forwarded(f, OUT, 0) for f in later])
        want = (plain0[0] + len(later), plain0[1] + sum(map(len, later)))
        self.assertEqual(self.counter("unprioritized_pkts", UNPRIO_PLAIN), want)
        self.assertEqual(self.counter("echelon_pkts", 1), class0)
        first = pk.fragment(frame, 0, more=True)
        self.send(1, first)
        self.expect(OUT, [pk.forwarded(first, OUT, 5)])
        self.assertEqual(self.counter("echelon_pkts", 1), (class0[0] + 1, class0[1] + len(first)))
        self.expect_nothing_else()


class Ipv4VersionNot4Dropped(EchelonTest):
    """An IPv4-ethertype frame whose version field is not 4 (checksum otherwise valid):
    dropped and counted, whatever it carries."""

    def runTest(self) -> None:
        self.register(100, class_id=1, prio=5, sources=[1])
        before = self.counter("unprioritized_pkts", UNPRIO_DROP_IPV4_VERSION)
        frames = [
            pk.with_ip_byte(pk.echelon(1, OUT, 100, deadline_us=10), 0, 0x65),  # version 6
            pk.with_ip_byte(pk.plain_udp(1, OUT, size=90), 0, 0x05),  # version 0
            pk.with_ip_byte(pk.plain_udp(1, OUT, size=130), 0, 0xF5),  # version 15
        ]
        for f in frames:
            self.send(1, f)
        want = (before[0] + len(frames), before[1] + sum(map(len, frames)))
        self.wait_for(
            lambda: self.counter("unprioritized_pkts", UNPRIO_DROP_IPV4_VERSION) == want,
            f"unprioritized_pkts[DROP_IPV4_VERSION] == {want}",
        )
        self.assertEqual(self.counter("echelon_pkts", 1), (0, 0))
        self.expect_nothing_else()


class BadIpv4ChecksumDropped(EchelonTest):
    """A wrong incoming IPv4 header checksum (verify_checksum -> checksum_error):
    dropped and counted; the same frame with a good checksum is forwarded."""

    def runTest(self) -> None:
        self.register(100, class_id=1, prio=5, sources=[1])
        before = self.counter("unprioritized_pkts", UNPRIO_DROP_IPV4_CHECKSUM)
        good = pk.echelon(1, OUT, 100, deadline_us=10, size=110)
        bad = [
            pk.with_ip_byte(good, 10, good[24] ^ 0x01, fix_checksum=False),
            pk.with_ip_byte(pk.plain_udp(1, OUT), 11, 0x00, fix_checksum=False),
        ]
        self.assertNotEqual(bad[1], pk.plain_udp(1, OUT))
        for f in bad:
            self.send(1, f)
        want = (before[0] + len(bad), before[1] + sum(map(len, bad)))
        self.wait_for(
            lambda: self.counter("unprioritized_pkts", UNPRIO_DROP_IPV4_CHECKSUM) == want,
            f"unprioritized_pkts[DROP_IPV4_CHECKSUM] == {want}",
        )
        self.expect_nothing_else()
        self.send(1, good)
        self.expect(OUT, [pk.forwarded(good, OUT, 5)])
        self.expect_nothing_else()


class ClassSlotBoundedByWidth(EchelonTest):
    """class_id is exactly as wide as echelon_pkts is long: the last slot is usable, one
    past it cannot even be written, so the data plane can never count out of range."""

    def runTest(self) -> None:
        last = ECHELON_CLASSES - 1
        self.register(100, class_id=last, prio=4, sources=[1])
        frame = pk.echelon(1, OUT, 100, deadline_us=10, size=100)
        self.send(1, frame)
        self.expect(OUT, [pk.forwarded(frame, OUT, 4)])
        self.assertEqual(self.counter("echelon_pkts", last), (1, len(frame)))
        src = int(IPv4Address(pk.host_ip(2)))
        entry = classify_entry(self.sw.loaded_p4info(), src, 100, last, 4)
        (update,) = self.sw.updates("INSERT", [entry])
        param = next(p for p in update.entity.table_entry.action.action.params if p.param_id == 1)
        param.value = ECHELON_CLASSES.to_bytes(2, "big")  # 1024 needs 11 bits
        with self.assertRaises(P4RuntimeWriteError):
            self.sw.write([update])
        self.expect_nothing_else()

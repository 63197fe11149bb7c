"""L3 forwarding: the switch is a correct IPv4 router for plain and echelon traffic.

Each test checks the exact egress frame (port, MACs, TTL, DSCP, checksum, every
other byte unchanged) and that nothing else came out of any port.
"""

from __future__ import annotations

from scapy.layers.inet import IP, UDP, IPOption_Router_Alert
from scapy.layers.l2 import Ether

from echelon.constants import (
    UNPRIO_DROP_IHL_NOT_5,
    UNPRIO_DROP_NOT_IPV4,
    UNPRIO_DROP_TTL_EXPIRED,
    UNPRIO_PLAIN,
)
from echelon.wire import Echelon
from ptf_tests import packets as pk
from ptf_tests.base import EchelonTest


class PlainForwarding(EchelonTest):
    """Plain IPv4/UDP: routed by /32, MACs rewritten, TTL - 1, checksum valid, DSCP 0."""

    def runTest(self) -> None:
        for src, dst in ((1, 2), (2, 3), (3, 4), (4, 1)):
            frame = pk.plain_udp(src, dst, ident=10 * src + dst)
            self.send(src, frame)
            self.expect(dst, [pk.forwarded(frame, dst, 0)])
        self.expect_nothing_else()
        # The model above is also checked field by field on one decoded frame.
        frame = pk.plain_udp(1, 4, ttl=17)
        self.send(1, frame)
        out = Ether(self.receive(4)[0])
        self.assertEqual((out.src, out.dst), (pk.SWITCH_MAC, pk.host_mac(4)))
        self.assertEqual((out[IP].ttl, out[IP].tos), (16, 0))
        self.assertEqual(out[UDP].chksum, Ether(frame)[UDP].chksum)
        self.expect_nothing_else()


class EchelonForwarding(EchelonTest):
    """A registered echelon frame is routed the same way; its header arrives intact."""

    def runTest(self) -> None:
        self.register(100, class_id=1, prio=5, sources=[1])
        frame = pk.echelon(1, 3, 100, deadline_us=1234, seq=9, flow_index=2)
        self.send(1, frame)
        self.expect(3, [pk.forwarded(frame, 3, 5)])
        self.expect_nothing_else()
        self.send(1, frame)
        out = Ether(self.receive(3)[0])
        self.assertEqual((out.src, out.dst, out[IP].ttl), (pk.SWITCH_MAC, pk.host_mac(3), 63))
        self.assertEqual(bytes(out[Echelon])[:16], bytes(Ether(frame)[Echelon])[:16])
        self.expect_nothing_else()


class TtlExpiry(EchelonTest):
    """TTL 0 or 1 on arrival: dropped and counted (packets and bytes); TTL 2 still leaves."""

    def runTest(self) -> None:
        self.register(100, class_id=1, prio=5, sources=[1])
        before = self.counter("unprioritized_pkts", UNPRIO_DROP_TTL_EXPIRED)
        dead = [
            pk.plain_udp(1, 2, ttl=1, size=90),
            pk.plain_udp(1, 2, ttl=0, size=120),
            pk.echelon(1, 2, 100, 0, ttl=1, size=150),
        ]
        for frame in dead:
            self.send(1, frame)
        want = (before[0] + len(dead), before[1] + sum(map(len, dead)))
        self.wait_for(
            lambda: self.counter("unprioritized_pkts", UNPRIO_DROP_TTL_EXPIRED) == want,
            f"unprioritized_pkts[DROP_TTL_EXPIRED] == {want}",
        )
        self.expect_nothing_else()
        alive = pk.plain_udp(1, 2, ttl=2)
        self.send(1, alive)
        self.expect(2, [pk.forwarded(alive, 2, 0)])
        self.expect_nothing_else()
        self.assertEqual(self.counter("unprioritized_pkts", UNPRIO_DROP_TTL_EXPIRED), want)


class NoRoute(EchelonTest):
    """No route (or not IPv4): dropped, nothing leaves; counted where the program counts it."""

    def runTest(self) -> None:
        plain0 = self.counter("unprioritized_pkts", UNPRIO_PLAIN)
        arp0 = self.counter("unprioritized_pkts", UNPRIO_DROP_NOT_IPV4)
        unrouted = pk.plain_udp(1, pk.UNROUTED_IP, size=110)
        arp = pk.arp_request(1, 2)
        self.send(1, unrouted)
        self.send(1, arp)
        # The route miss drops; classification still runs and counts it as plain.
        want_plain = (plain0[0] + 1, plain0[1] + len(unrouted))
        want_arp = (arp0[0] + 1, arp0[1] + len(arp))
        self.wait_for(
            lambda: (
                self.counter("unprioritized_pkts", UNPRIO_PLAIN) == want_plain
                and self.counter("unprioritized_pkts", UNPRIO_DROP_NOT_IPV4) == want_arp
            ),
            "the unrouted and the ARP frame to be counted",
        )
        self.expect_nothing_else()


class Ipv4Options(EchelonTest):
    """IPv4 with options (ihl > 5): dropped and counted, even for a registered echelon,
    because the checksum update covers the 20-byte header only. An IHL below 5 (not a
    valid header at all) is dropped and counted in the same slot."""

    def runTest(self) -> None:
        self.register(100, class_id=1, prio=5, sources=[1])
        before = self.counter("unprioritized_pkts", UNPRIO_DROP_IHL_NOT_5)
        class_before = self.counter("echelon_pkts", 1)
        pkt = Ether(pk.echelon(1, 2, 100, deadline_us=10))
        pkt[IP].options = [IPOption_Router_Alert()]
        del pkt[IP].ihl, pkt[IP].len, pkt[IP].chksum
        frame = bytes(pkt)
        self.assertEqual(Ether(frame)[IP].ihl, 6)
        self.send(1, frame)
        want = (before[0] + 1, before[1] + len(frame))
        self.wait_for(
            lambda: self.counter("unprioritized_pkts", UNPRIO_DROP_IHL_NOT_5) == want,
            "the frame with IPv4 options to be counted",
        )
        self.assertEqual(self.counter("echelon_pkts", 1), class_before)
        self.expect_nothing_else()
        short = pk.with_ip_byte(pk.echelon(1, 2, 100, deadline_us=10), 0, 0x44)
        self.send(1, short)
        want = (want[0] + 1, want[1] + len(short))
        self.wait_for(
            lambda: self.counter("unprioritized_pkts", UNPRIO_DROP_IHL_NOT_5) == want,
            "the frame with IHL 4 to be counted",
        )
        self.expect_nothing_else()

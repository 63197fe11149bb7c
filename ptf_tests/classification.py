"""The per-packet decision: the DSCP of every egress frame is the priority assigned.

Echelon A (ID 100, from h1, band top 6) splits its deadlines into levels 6 and
5; echelon B (ID 200, from h2, band top 3) into 3 and 2. A deadline no range
covers gets the band's top level. Whatever DSCP the sender wrote is replaced;
ECN bits are kept. Frames are sent one at a time, so each leaves at once and the
egress order is the send order.
"""

from __future__ import annotations

from echelon.constants import MAX_DEADLINE_US
from ptf_tests import packets as pk
from ptf_tests.base import EchelonTest

OUT = 3
A_RANGES = ((0, 999, 6), (1000, 1999, 5))
B_RANGES = ((0, 499, 3), (500, 999, 2))

#: (source port, echelon ID, deadline_us, DSCP written by the sender, priority expected)
CASES = (
    (1, 100, 0, 0, 6),
    (1, 100, 999, 46, 6),
    (1, 100, 1000, 0, 5),
    (1, 100, 1999, 10, 5),
    (1, 100, 2000, 0, 6),  # no range: band top
    (1, 100, MAX_DEADLINE_US, 63, 6),
    (2, 200, 0, 0, 3),
    (2, 200, 499, 0, 3),
    (2, 200, 500, 46, 2),
    (2, 200, 999, 0, 2),
    (2, 200, 1000, 0, 3),  # no range: band top
)


class DecisionPerPacket(EchelonTest):
    """Each band and each deadline range gives its exact level; DSCP follows it."""

    def runTest(self) -> None:
        self.register(100, class_id=1, prio=6, sources=[1], ranges=A_RANGES)
        self.register(200, class_id=2, prio=3, sources=[2], ranges=B_RANGES)
        before = {c: self.counter("echelon_pkts", c) for c in (1, 2)}
        sent = {1: [0, 0], 2: [0, 0]}
        for seq, (src, eid, deadline, dscp, prio) in enumerate(CASES):
            frame = pk.echelon(src, OUT, eid, deadline, seq=seq, dscp=dscp, ecn=seq % 4)
            self.send(src, frame)
            self.expect(OUT, [pk.forwarded(frame, OUT, prio)])
            cls = 1 if eid == 100 else 2
            sent[cls][0] += 1
            sent[cls][1] += len(frame)
        self.expect_nothing_else()
        for cls, (n, nbytes) in sent.items():
            got = self.counter("echelon_pkts", cls)
            self.assertEqual(got, (before[cls][0] + n, before[cls][1] + nbytes), f"class {cls}")


class SenderDscpOverwritten(EchelonTest):
    """Plain traffic marked EF (46) by its sender leaves as CS0; ECN survives."""

    def runTest(self) -> None:
        for ecn in range(4):
            frame = pk.plain_udp(1, OUT, dscp=46, ecn=ecn, ident=ecn)
            self.send(1, frame)
            self.expect(OUT, [pk.forwarded(frame, OUT, 0)])
            self.assertEqual(self.receive_tos_of(frame), ecn)
        self.expect_nothing_else()

    def receive_tos_of(self, frame: bytes) -> int:
        """Send ``frame`` again and return the ToS byte of what leaves."""
        self.send(1, frame)
        return self.receive(OUT)[0][15]

"""``echelon_pkts[class]`` counts exactly the frames and bytes of its class."""

from __future__ import annotations

from echelon.constants import UNPRIO_COUNT
from ptf_tests import packets as pk
from ptf_tests.base import EchelonTest

OUT = 3
A_SIZES = (60, 100, 200, 500, 1000)
B_SIZES = (80, 300, 1400)


class EchelonCounters(EchelonTest):
    """A known burst of two classes: per-class packets and bytes exact, others untouched."""

    def runTest(self) -> None:
        self.register(100, class_id=1, prio=6, sources=[1])
        self.register(200, class_id=2, prio=3, sources=[1])
        slots = (0, 1, 2, 3)
        before = {c: self.counter("echelon_pkts", c) for c in slots}
        unprio = {i: self.counter("unprioritized_pkts", i) for i in range(UNPRIO_COUNT)}
        a = [pk.echelon(1, OUT, 100, 0, seq=i, size=n) for i, n in enumerate(A_SIZES)]
        b = [pk.echelon(1, OUT, 200, 0, seq=i, size=n) for i, n in enumerate(B_SIZES)]
        # One ingress port keeps arrival order = send order; all of A is queued
        # before any of B, so A (the higher level) leaves first in every case.
        for frame in a + b:
            self.send(1, frame)
        want_frames = [pk.forwarded(f, OUT, 6) for f in a] + [pk.forwarded(f, OUT, 3) for f in b]
        self.expect(OUT, want_frames)
        self.expect_nothing_else()
        want = {
            0: before[0],
            1: (before[1][0] + len(a), before[1][1] + sum(A_SIZES)),
            2: (before[2][0] + len(b), before[2][1] + sum(B_SIZES)),
            3: before[3],
        }
        self.assertEqual({c: self.counter("echelon_pkts", c) for c in slots}, want)
        after = {i: self.counter("unprioritized_pkts", i) for i in range(UNPRIO_COUNT)}
        self.assertEqual(after, unprio)

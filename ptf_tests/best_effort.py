"""Traffic that earns no priority: forwarded at priority 0 (DSCP 0), counted, never dropped.

Echelon ID 100 is registered for h1 only. Untagged frames, an ID nobody
registered, h2 claiming ID 100 (spoofed) and malformed echelon headers
(truncated, or a version other than 1, even with ID 100 from h1) must all
leave at CS0, each counted in exactly one ``special_pkts`` slot, and must
never touch ``echelon_pkts[1]``.
"""

from __future__ import annotations

from echelon.constants import (
    SPECIAL_COUNT,
    SPECIAL_MALFORMED,
    SPECIAL_PLAIN,
    SPECIAL_SPOOFED,
    SPECIAL_UNKNOWN,
)
from ptf_tests import packets as pk
from ptf_tests.base import EchelonTest

OUT = 4


class _BestEffort(EchelonTest):
    """Sends ``(port, frame, special slot)`` one by one and checks frames and counters."""

    def check(self, cases: list[tuple[int, bytes, int]]) -> None:
        self.register(100, class_id=1, prio=7, sources=[1], ranges=((0, 10**6, 7),))
        before = {i: self.counter("special_pkts", i) for i in range(SPECIAL_COUNT)}
        cls_before = self.counter("echelon_pkts", 1)
        want = {i: list(v) for i, v in before.items()}
        for port, frame, slot in cases:
            self.send(port, frame)
            self.expect(OUT, [pk.forwarded(frame, OUT, 0)])
            want[slot][0] += 1
            want[slot][1] += len(frame)
        self.expect_nothing_else()
        for i in range(SPECIAL_COUNT):
            self.assertEqual(self.counter("special_pkts", i), tuple(want[i]), f"special_pkts[{i}]")
        self.assertEqual(self.counter("echelon_pkts", 1), cls_before, "echelon_pkts[1] moved")


class Unregistered(_BestEffort):
    """Untagged, unknown-ID and spoofed frames: CS0, exact special_pkts counts."""

    def runTest(self) -> None:
        self.check(
            [
                (1, pk.plain_udp(1, OUT, dscp=46, size=80), SPECIAL_PLAIN),
                (2, pk.plain_udp(2, OUT, size=300), SPECIAL_PLAIN),
                (1, pk.echelon(1, OUT, 999, 0, seq=1, dscp=56), SPECIAL_UNKNOWN),
                (2, pk.echelon(2, OUT, 999, 0, seq=2, size=90), SPECIAL_UNKNOWN),
                (3, pk.echelon(3, OUT, 1, 0, seq=3, size=200), SPECIAL_UNKNOWN),
                (2, pk.echelon(2, OUT, 100, 0, seq=4, dscp=56), SPECIAL_SPOOFED),
                (3, pk.echelon(3, OUT, 100, 5, seq=5, size=400), SPECIAL_SPOOFED),
            ]
        )


class Malformed(_BestEffort):
    """Truncated headers and unknown versions: CS0 even with a registered (source, ID)."""

    def runTest(self) -> None:
        self.check(
            [
                (1, pk.truncated_echelon(1, OUT, 100, keep=0), SPECIAL_MALFORMED),
                (1, pk.truncated_echelon(1, OUT, 100, keep=8), SPECIAL_MALFORMED),
                (1, pk.truncated_echelon(1, OUT, 100, keep=15), SPECIAL_MALFORMED),
                (1, pk.echelon(1, OUT, 100, 0, seq=1, version=2, dscp=56), SPECIAL_MALFORMED),
                (1, pk.echelon(1, OUT, 100, 0, seq=2, version=0), SPECIAL_MALFORMED),
                (1, pk.echelon(1, OUT, 100, 0, seq=3, version=15, size=300), SPECIAL_MALFORMED),
            ]
        )

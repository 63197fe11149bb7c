"""Traffic that earns no priority: forwarded at priority 0 (DSCP 0), counted, never dropped.

Echelon ID 100 is registered for h1 only. Untagged frames, an ID nobody
registered, h2 claiming ID 100 (spoofed) and malformed echelon headers
(truncated, or a version other than 1, even with ID 100 from h1) must all
leave at CS0, each counted in exactly one ``unprioritized_pkts`` slot, and must
never touch ``echelon_pkts[1]``.
"""

from __future__ import annotations

from echelon.constants import (
    UNPRIO_COUNT,
    UNPRIO_MALFORMED_ECHELON,
    UNPRIO_PLAIN,
    UNPRIO_SPOOFED_SOURCE,
    UNPRIO_UNKNOWN_ID,
)
from ptf_tests import packets as pk
from ptf_tests.base import EchelonTest

OUT = 4


class _BestEffort(EchelonTest):
    """Sends ``(port, frame, unprioritized_pkts slot)`` one by one; checks frames, counters."""

    def check(self, cases: list[tuple[int, bytes, int]]) -> None:
        self.register(100, class_id=1, prio=7, sources=[1], ranges=((0, 10**6, 7),))
        before = {i: self.counter("unprioritized_pkts", i) for i in range(UNPRIO_COUNT)}
        cls_before = self.counter("echelon_pkts", 1)
        want = {i: list(v) for i, v in before.items()}
        for port, frame, slot in cases:
            self.send(port, frame)
            self.expect(OUT, [pk.forwarded(frame, OUT, 0)])
            want[slot][0] += 1
            want[slot][1] += len(frame)
        self.expect_nothing_else()
        for i in range(UNPRIO_COUNT):
            self.assertEqual(
                self.counter("unprioritized_pkts", i), tuple(want[i]), f"unprioritized_pkts[{i}]"
            )
        self.assertEqual(self.counter("echelon_pkts", 1), cls_before, "echelon_pkts[1] moved")


class Unregistered(_BestEffort):
    """Untagged, unknown-ID and spoofed frames: CS0, exact unprioritized_pkts counts."""

    def runTest(self) -> None:
        self.check(
            [
                (1, pk.plain_udp(1, OUT, dscp=46, size=80), UNPRIO_PLAIN),
                (2, pk.plain_udp(2, OUT, size=300), UNPRIO_PLAIN),
                (1, pk.echelon(1, OUT, 999, 0, seq=1, dscp=56), UNPRIO_UNKNOWN_ID),
                (2, pk.echelon(2, OUT, 999, 0, seq=2, size=90), UNPRIO_UNKNOWN_ID),
                (3, pk.echelon(3, OUT, 1, 0, seq=3, size=200), UNPRIO_UNKNOWN_ID),
                (2, pk.echelon(2, OUT, 100, 0, seq=4, dscp=56), UNPRIO_SPOOFED_SOURCE),
                (3, pk.echelon(3, OUT, 100, 5, seq=5, size=400), UNPRIO_SPOOFED_SOURCE),
            ]
        )


class Malformed(_BestEffort):
    """Truncated headers and unknown versions: CS0 even with a registered (source, ID)."""

    def runTest(self) -> None:
        self.check(
            [
                (1, pk.truncated_echelon(1, OUT, 100, keep=0), UNPRIO_MALFORMED_ECHELON),
                (1, pk.truncated_echelon(1, OUT, 100, keep=8), UNPRIO_MALFORMED_ECHELON),
                (1, pk.truncated_echelon(1, OUT, 100, keep=15), UNPRIO_MALFORMED_ECHELON),
                (
                    1,
                    pk.echelon(1, OUT, 100, 0, seq=1, version=2, dscp=56),
                    UNPRIO_MALFORMED_ECHELON,
                ),
                (1, pk.echelon(1, OUT, 100, 0, seq=2, version=0), UNPRIO_MALFORMED_ECHELON),
                (
                    1,
                    pk.echelon(1, OUT, 100, 0, seq=3, version=15, size=300),
                    UNPRIO_MALFORMED_ECHELON,
                ),
            ]
        )

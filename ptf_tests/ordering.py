"""Ordering under contention, made deterministic by :mod:`ptf_tests.burst`.

Inter-echelon: echelon A (ID 100, from h1) is ordered above echelon B (ID 200,
from h2); both send to h4. Whatever the send order, after each queue's first
frame (which leaves at once) every remaining A frame leaves before any B frame.
Intra-echelon: inside one echelon, an earlier deadline leaves first. And the
rate reset every burst relies on: ``set_queue_rate 0`` means unlimited.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from echelon.constants import dscp_for_priority as cs
from ptf_tests import packets as pk
from ptf_tests.base import EchelonTest
from ptf_tests.burst import burst

OUT = 4
N = 3  # frames per queue: the freeze lasts (N - 1) s


def dscps(frames: Sequence[bytes]) -> list[int]:
    return [f[15] >> 2 for f in frames]


class InterEchelonOrdering(EchelonTest):
    """A (level 6) beats B (level 3) on one port, for two send orders that favour B."""

    def runTest(self) -> None:
        self.register(100, class_id=1, prio=6, sources=[1])
        self.register(200, class_id=2, prio=3, sources=[2])
        a = [pk.echelon(1, OUT, 100, 0, seq=i) for i in range(N)]
        b = [pk.echelon(2, OUT, 200, 0, seq=i) for i in range(N)]
        interleaved = [x for pair in zip(b, a, strict=True) for x in pair]  # B first each time
        for order in (interleaved, b + a):
            sends = [(1 if f in a else 2, f, 6 if f in a else 3) for f in order]
            first, rest = burst(self, OUT, sends, {1: N, 2: N})
            self.assertEqual(set(first), {pk.forwarded(a[0], OUT, 6), pk.forwarded(b[0], OUT, 3)})
            self.assertEqual(dscps(rest), [cs(6)] * (N - 1) + [cs(3)] * (N - 1))
            want = [pk.forwarded(f, OUT, 6) for f in a[1:]]
            want += [pk.forwarded(f, OUT, 3) for f in b[1:]]
            self.assertEqual([pk.describe(f) for f in rest], [pk.describe(f) for f in want])
            self.assertEqual(rest, want)


class IntraEchelonOrdering(EchelonTest):
    """One echelon, three deadline ranges: earliest deadline leaves first, sent latest-first."""

    def runTest(self) -> None:
        ranges = ((0, 999, 6), (1000, 1999, 5), (2000, 2999, 4))
        self.register(100, class_id=1, prio=6, sources=[1], ranges=ranges)
        deadlines = (2500, 1500, 500)  # latest first: the order that favours the wrong one
        frames = {d: [pk.echelon(1, OUT, 100, d, seq=d + i) for i in range(N)] for d in deadlines}
        level = {2500: 4, 1500: 5, 500: 6}
        sends = [(1, frames[d][i], level[d]) for i in range(N) for d in deadlines]
        first, rest = burst(self, OUT, sends, {1: N * len(deadlines)})
        self.assertEqual(set(first), {pk.forwarded(frames[d][0], OUT, level[d]) for d in deadlines})
        self.assertEqual(dscps(rest), [cs(6)] * (N - 1) + [cs(5)] * (N - 1) + [cs(4)] * (N - 1))
        want = [pk.forwarded(f, OUT, level[d]) for d in sorted(deadlines) for f in frames[d][1:]]
        self.assertEqual([pk.describe(f) for f in rest], [pk.describe(f) for f in want])
        self.assertEqual(rest, want)


class QueueRateReset(EchelonTest):
    """``set_queue_rate 0`` removes the limit (it does not mean "0 packets/s"): after a
    1 packet/s limit and its reset, a burst leaves in far less than 1 s per packet."""

    def runTest(self) -> None:
        self.register(100, class_id=1, prio=6, sources=[1])
        frames = [pk.echelon(1, OUT, 100, 0, seq=i) for i in range(6)]
        self.set_queue_rate(OUT, 1)
        self.send(1, frames[0])
        self.expect(OUT, [pk.forwarded(frames[0], OUT, 6)])  # an idle queue sends at once
        self.set_queue_rate(OUT, 0)
        started = time.time()
        for f in frames[1:]:
            self.send(1, f)
        got = [self.receive(OUT) for _ in frames[1:]]
        self.assertEqual([f for f, _ in got], [pk.forwarded(f, OUT, 6) for f in frames[1:]])
        # Still limited, the 5th would leave >= 5 s after the first; allow half of that.
        self.assertLess(got[-1][1] - started, 2.5)
        self.expect_nothing_else()

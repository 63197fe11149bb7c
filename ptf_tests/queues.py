"""Queue telemetry: a burst at one priority shows up in that priority's registers only.

The egress records, per (egress port, priority), the depth the last departing
packet left, the most packets the queue held and the last sojourn
(``EchelonEgress.queue_*``, read over the target's Thrift runtime port as the
controller reads them). To make the queue fill the same way on both targets,
the out port is limited to ``RATE_PPS`` and one *pacer* frame of the burst's
priority is sent and received first: it leaves its idle queue at once and
fixes the next departure 1/RATE_PPS later, so the whole burst, sent right
after, is queued before anything of it leaves (see
tests/p4/differential/queueing.py, which checks the same rule against BMv2).
"""

from __future__ import annotations

from echelon.constants import (
    NUM_PRIORITIES,
    QUEUE_TELEMETRY_CELLS,
    REG_QUEUE_DEPTH,
    REG_QUEUE_DEPTH_MAX,
    REG_QUEUE_SOJOURN,
)
from p4client.bmruntime import RuntimeClient
from ptf_tests import packets as pk
from ptf_tests.base import EchelonTest

OUT = 4
#: 5 packets/s: 200 ms between departures, time enough to read the registers mid-burst.
RATE_PPS = 5
BURST = 6
HIGH, LOW = 5, 2


def cell(port: int, prio: int) -> int:
    return port * NUM_PRIORITIES + prio


class BurstShowsInItsOwnQueue(EchelonTest):
    """A burst of BURST frames at level HIGH to port OUT; one frame at level LOW."""

    def registers(self) -> dict[str, list[int]]:
        with RuntimeClient(int(self.p["thrift_port"])) as rt:
            return {
                r: rt.read_register_all(r)
                for r in (REG_QUEUE_DEPTH, REG_QUEUE_DEPTH_MAX, REG_QUEUE_SOJOURN)
            }

    def runTest(self) -> None:
        with RuntimeClient(int(self.p["thrift_port"])) as rt:
            for r in (REG_QUEUE_DEPTH, REG_QUEUE_DEPTH_MAX, REG_QUEUE_SOJOURN):
                rt.reset_register(r)
        self.register(100, class_id=1, prio=HIGH, sources=[1])
        self.register(200, class_id=2, prio=LOW, sources=[2])
        self.set_queue_rate(OUT, RATE_PPS)
        pacer = pk.echelon(1, OUT, 100, 0, seq=999)
        self.send(1, pacer)
        self.expect(OUT, [pk.forwarded(pacer, OUT, HIGH)])
        low = pk.echelon(2, OUT, 200, 0, seq=1)
        self.send(2, low)  # an idle queue of its own: leaves at once, ahead of the burst
        frames = [pk.echelon(1, OUT, 100, 0, seq=i) for i in range(BURST)]
        for f in frames:
            self.send(1, f)
        self.expect(OUT, [pk.forwarded(low, OUT, LOW), pk.forwarded(frames[0], OUT, HIGH)])
        # The first of the burst left BURST - 1 behind it; the next leaves 200 ms later.
        mid = self.registers()
        self.assertIn(mid[REG_QUEUE_DEPTH][cell(OUT, HIGH)], (BURST - 1, BURST - 2))
        self.assertEqual(mid[REG_QUEUE_DEPTH_MAX][cell(OUT, HIGH)], BURST)
        self.expect(OUT, [pk.forwarded(f, OUT, HIGH) for f in frames[1:]])
        self.expect_nothing_else()
        after = self.registers()
        high, other = cell(OUT, HIGH), cell(OUT, LOW)
        # drained: depth 0; the most it held: the whole burst; the last waited ~BURST slots
        self.assertEqual(after[REG_QUEUE_DEPTH][high], 0)
        self.assertEqual(after[REG_QUEUE_DEPTH_MAX][high], BURST)
        self.assertGreater(after[REG_QUEUE_SOJOURN][high], (BURST - 2) * 1e6 / RATE_PPS)
        # the other priority's queue only ever held its one frame, which did not wait
        self.assertEqual(after[REG_QUEUE_DEPTH][other], 0)
        self.assertEqual(after[REG_QUEUE_DEPTH_MAX][other], 1)
        self.assertLess(after[REG_QUEUE_SOJOURN][other], 0.5e6 / RATE_PPS)
        # and no other queue of any port recorded anything
        for name, values in after.items():
            self.assertEqual(len(values), QUEUE_TELEMETRY_CELLS)
            touched = {i for i, v in enumerate(values) if v}
            self.assertLessEqual(touched, {high, other}, name)

"""Deterministic strict-priority ordering on a switch whose clock we do not control.

BMv2 (and the soft switch, which copies it) gives every priority queue of a
port its own rate limiter and no port shaper: a packet's departure time is
fixed when it is enqueued, ``max(now, previous departure + 1/rate)``, and among
packets that are due the highest priority leaves first. So with the rate at
``RATE_PPS``:

1. the first packet into each idle queue is due at once (they leave in arrival
   order if the switch keeps up, else by priority: compare them as a set);
2. the others are due at 1 s, 2 s, ... after their queue's first;
3. if the switch is frozen (SIGSTOP) until every departure time has passed,
   then on SIGCONT *all* remaining packets are due together and leave strictly
   by priority, FIFO within a priority, whatever order they were sent in.

That turns a timing-dependent scheduler into an exact, assertable sequence.
The freeze length is computed from when the first packets were seen, not
guessed; waiting on the wall clock there is the point of the test (the
switch's departure times are wall-clock times), not a synchronisation sleep.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from ptf_tests.base import EchelonTest

#: Queue rate during a burst. 1 packet/s keeps every departure a whole second
#: apart, far more than the jitter of a loaded two-core machine.
RATE_PPS = 1
#: Extra freeze time after the last computed departure.
MARGIN_S = 0.4


def burst(
    test: EchelonTest,
    out_port: int,
    sends: Sequence[tuple[int, bytes, int]],
    class_counts: Mapping[int, int],
) -> tuple[list[bytes], list[bytes]]:
    """Send ``(in_port, frame, prio)`` in order towards ``out_port``; return what left
    at once (one frame per queue) and what left after the freeze, in egress order.

    ``class_counts`` maps ``echelon_pkts`` slots to how many of the frames they
    count: the ingestion barrier (every frame classified before the freeze).
    Compare the first list as a set: those frames are all due on arrival, and
    if the switch has not sent one before the next arrives, the two compete by
    priority, so their relative order depends on the switch's speed.
    """
    queues: dict[int, int] = {}
    for _, _, prio in sends:
        queues[prio] = queues.get(prio, 0) + 1
    before = {c: test.counter("echelon_pkts", c)[0] for c in class_counts}
    test.set_queue_rate(out_port, RATE_PPS)
    for in_port, frame, _ in sends:
        test.send(in_port, frame)
    test.wait_for(
        lambda: all(
            test.counter("echelon_pkts", c)[0] - before[c] == n for c, n in class_counts.items()
        ),
        "the switch to classify the whole burst",
    )
    # One packet per queue leaves at once; their arrival bounds every departure time.
    first = [test.receive(out_port) for _ in queues]
    last_due = max(t for _, t in first) + (max(queues.values()) - 1) / RATE_PPS
    test.freeze()
    try:
        while (left := last_due + MARGIN_S - time.time()) > 0:
            time.sleep(left)
    finally:
        test.thaw()
    rest = [test.receive(out_port)[0] for _ in range(len(sends) - len(first))]
    test.expect_nothing_else()
    test.set_queue_rate(out_port, 0)
    return [f for f, _ in first], rest

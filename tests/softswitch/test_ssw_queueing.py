"""QueueingLogicPriRL rules with a fake clock (times are plain floats in seconds)."""

from __future__ import annotations

import pytest

from softswitch.errors import UsageError
from softswitch.queueing import Departure, PriorityRateQueues


def _items(out: list[Departure[str]]) -> list[tuple[int, int, str]]:
    """(port, priority, item) of each departure, without the queueing metadata."""
    return [(port, prio, item) for port, prio, item, *_meta in out]


def test_departure_time_rule() -> None:
    q: PriorityRateQueues[str] = PriorityRateQueues(8)
    q.set_rate(10.0)  # 100 ms apart
    for i in range(3):
        assert q.push(1, 3, f"p{i}", now=0.0)
    # first into an idle queue leaves at once, then last + 1/rate
    assert _items(q.pop_due(0.0)) == [(1, 3, "p0")]
    assert q.next_departure() == pytest.approx(0.1)
    assert _items(q.pop_due(0.0999)) == []
    assert _items(q.pop_due(0.1)) == [(1, 3, "p1")]
    assert _items(q.pop_due(0.25)) == [(1, 3, "p2")]
    # an arrival long after the last departure is due immediately (max(now, ...))
    q.push(1, 3, "late", now=5.0)
    assert _items(q.pop_due(5.0)) == [(1, 3, "late")]


def test_departure_fixed_at_enqueue_not_changed_by_later_rate() -> None:
    q: PriorityRateQueues[str] = PriorityRateQueues(2)
    q.set_rate(1.0)
    q.push(0, 0, "a", now=0.0)
    q.push(0, 0, "b", now=0.0)  # departs at 1.0
    q.set_rate(0.0)
    q.push(0, 0, "c", now=0.0)  # max(now, 1.0 + 0)
    assert _items(q.pop_due(0.5)) == [(0, 0, "a")]
    assert _items(q.pop_due(1.0)) == [(0, 0, "b"), (0, 0, "c")]


def test_depth_tail_drop_per_queue() -> None:
    q: PriorityRateQueues[int] = PriorityRateQueues(2)
    q.set_depth(3, 1, 0)
    q.set_rate(1.0)
    results = [q.push(1, 0, i, now=0.0) for i in range(5)]
    assert results == [True, True, True, False, False]
    assert q.stats.dropped_full == 2
    assert q.push(1, 1, 99, now=0.0)  # the other priority queue keeps depth 64
    assert q.push(2, 0, 98, now=0.0)  # and so does the same priority on another port


def test_priority_beyond_queue_count_dropped() -> None:
    q: PriorityRateQueues[int] = PriorityRateQueues(1)
    assert not q.push(1, 1, 0, now=0.0)
    assert q.push(1, 0, 0, now=0.0)
    assert q.stats.dropped_priority == 1


def test_strict_priority_among_due_packets() -> None:
    q: PriorityRateQueues[str] = PriorityRateQueues(8)
    for prio in (0, 3, 7, 1):
        q.push(1, prio, f"x{prio}", now=0.0)
    assert [p for _port, p, *_ in q.pop_due(0.0)] == [7, 3, 1, 0]


def test_not_yet_due_high_priority_does_not_block_lower() -> None:
    q: PriorityRateQueues[str] = PriorityRateQueues(8)
    q.set_rate(1.0, 1, 7)
    q.push(1, 7, "h0", now=0.0)
    q.push(1, 7, "h1", now=0.0)  # due at 1.0
    q.push(1, 0, "l0", now=0.0)
    assert [i for *_x, i in _items(q.pop_due(0.0))] == ["h0", "l0"]
    assert [i for *_x, i in _items(q.pop_due(1.0))] == ["h1"]


def test_sigstop_burst_order() -> None:
    """Rate 1 pps, a burst of 2 per priority, interleaved by priority."""
    q: PriorityRateQueues[str] = PriorityRateQueues(8)
    q.set_rate(1.0)
    for rnd in range(2):
        for prio in range(8):
            q.push(1, prio, f"{prio}.{rnd}", now=100.0)
    # First packet of every queue leaves at once (strict priority among them) ...
    first = q.pop_due(100.0)
    assert [i for *_x, i in _items(first)] == [f"{p}.0" for p in range(7, -1, -1)]
    # ... and when the thread runs late, all due packets go 7 7 6 6 ... 0 0.
    q2: PriorityRateQueues[str] = PriorityRateQueues(8)
    q2.set_rate(1.0)
    for rnd in range(2):
        for prio in range(8):
            q2.push(1, prio, f"{prio}.{rnd}", now=100.0)
    late = q2.pop_due(105.0)
    assert [p for _port, p, *_i in late] == [7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0]
    assert [i for *_x, i in _items(late)][:2] == ["7.0", "7.1"]  # FIFO inside a queue


def test_set_commands_scope() -> None:
    q: PriorityRateQueues[int] = PriorityRateQueues(4)
    q.add_port(1)
    q.add_port(2)
    q.set_rate(5.0, 2)
    assert [x.rate for x in q.ports[2]] == [5.0] * 4
    assert [x.rate for x in q.ports[1]] == [0.0] * 4
    q.set_rate(7.0, 1, 3)
    assert [x.rate for x in q.ports[1]] == [0.0, 0.0, 0.0, 7.0]
    q.set_depth(9)
    assert all(x.depth == 9 for qs in q.ports.values() for x in qs)
    q.add_port(3)  # a port seen later gets the all-ports setting
    assert all(x.depth == 9 for x in q.ports[3])
    with pytest.raises(UsageError, match="priority"):
        q.set_rate(1.0, 1, 4)
    with pytest.raises(UsageError, match="rate"):
        q.set_rate(-1.0)


def test_depth_zero_drops_every_packet_as_bmv2_does() -> None:
    """``set_queue_depth 0`` is accepted and the queue then drops every packet: BMv2's
    ``QueueingLogicPriRL::push_front`` refuses an item when ``size >= capacity``, so a
    capacity of 0 drops all (checked against bmv2's queueing.h, not a guess)."""
    q: PriorityRateQueues[int] = PriorityRateQueues(2)
    q.add_port(1)
    q.set_depth(0, 1)
    assert [q.push(1, p, p, now=0.0) for p in (0, 1)] == [False, False]
    assert q.stats.dropped_full == 2
    q.set_depth(5, 1)
    assert q.push(1, 0, 7, now=0.0)  # and a depth set again restores the queue


def test_queueing_metadata_is_the_own_priority_queue_depth() -> None:
    """simple_switch's ``enq_qdepth``/``deq_qdepth``: packets in the port's queue of the
    packet's priority before its push / after its pop; other queues do not count."""
    q: PriorityRateQueues[str] = PriorityRateQueues(8)
    q.set_rate(10.0)  # 100 ms apart per queue
    for i in range(3):
        q.push(1, 5, f"h{i}", now=0.01 * i)
    q.push(1, 2, "l0", now=0.05)  # an empty queue of another priority: depth 0
    first = q.pop_due(0.05)
    assert [(item, t, enq, deq) for _p, _q, item, t, enq, deq in first] == [
        ("h0", 0.0, 0, 2),
        ("l0", 0.05, 0, 0),
    ]
    assert [(i, enq, deq) for _p, _q, i, _t, enq, deq in q.pop_due(0.1)] == [("h1", 1, 1)]
    assert [(i, enq, deq) for _p, _q, i, _t, enq, deq in q.pop_due(0.2)] == [("h2", 2, 0)]

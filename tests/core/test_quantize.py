"""Quantisation of ranks onto the switch's strict-priority levels."""

from __future__ import annotations

import pytest

from echelon.constants import ECHELON_LEVELS, MAX_DEADLINE_US
from echelon.errors import SpecError
from echelon.model import EchelonFlow, Flow
from echelon.network import BigSwitch
from echelon.policies import get_policy
from echelon.quantize import flow_levels, level_of, quantize
from echelon.schedule import EchelonLevels, Schedule

NET = BigSwitch.uniform(["h1", "h2"], 1.0)


def ef(name: str, offs: list[float], t_ref: float = 0.0) -> EchelonFlow:
    flows = tuple(Flow(i, "h1", "h2", 1, o) for i, o in enumerate(offs))
    return EchelonFlow(name, name, "g", flows, t_ref)


def check_ranges(q: EchelonLevels) -> None:
    assert q.ranges[0].lo_us == 0 and q.ranges[-1].hi_us == MAX_DEADLINE_US
    for r1, r2 in zip(q.ranges, q.ranges[1:], strict=False):
        assert r2.lo_us == r1.hi_us + 1 and r1.priority > r2.priority
    assert q.priority == q.ranges[0].priority


def test_spare_levels_go_to_top_echelons() -> None:
    """2 echelons with 4 distinct offsets each, 7 levels: 5 spare, dealt round
    robin top first: a gets 4 levels (7..4), b the remaining 3 (3..1)."""
    a, b = ef("a", [0, 1, 2, 3], t_ref=0), ef("b", [0, 1, 2, 3], t_ref=100)
    sched = get_policy("echelon-v1").schedule([a, b], NET)
    assert sched.echelon_order == ("a", "b")
    q = quantize(sched, [a, b])
    assert [r.priority for r in q["a"].ranges] == [7, 6, 5, 4]
    assert [r.priority for r in q["b"].ranges] == [3, 2, 1]
    assert [r.lo_us for r in q["a"].ranges] == [0, 1_000_000, 2_000_000, 3_000_000]
    # b's 4 offsets in 3 levels: the first chunk takes two offsets
    assert [r.lo_us for r in q["b"].ranges] == [0, 2_000_000, 3_000_000]
    for x in q.values():
        check_ranges(x)
    levels = flow_levels(sched, [a, b])
    assert [levels[("b", j)] for j in range(4)] == [3, 3, 2, 1]


def test_tail_shares_lowest_level() -> None:
    efs = [ef(f"e{i}", [0, 1], t_ref=float(i)) for i in range(10)]
    sched = get_policy("echelon-v1").schedule(efs, NET)
    q = quantize(sched, efs)
    tops = [q[n].priority for n in sched.echelon_order]
    assert tops[:6] == [7, 6, 5, 4, 3, 2] and set(tops[6:]) == {1}
    assert all(len(x.ranges) == 1 for x in q.values())


def test_fewer_levels_and_validation() -> None:
    a = ef("a", [0, 1, 2])
    sched = get_policy("echelon-v1").schedule([a], NET)
    assert [r.priority for r in quantize(sched, [a], levels=[2, 5])["a"].ranges] == [5, 2]
    for bad in ([], [0, 1], [8], [3, 3]):
        with pytest.raises(SpecError) as info:
            quantize(sched, [a], levels=bad)
        assert info.value.field == "levels"


def test_huge_offsets_clamp_to_wire_range() -> None:
    a = ef("a", [0, 5000.0, 6000.0])  # > 2^32 µs (about 71.6 min)
    sched = get_policy("echelon-v1").schedule([a], NET)
    q = quantize(sched, [a])["a"]
    check_ranges(q)
    assert level_of(q, 2**40) == q.ranges[-1].priority
    lv = flow_levels(sched, [a])
    assert lv[("a", 1)] == lv[("a", 2)] < lv[("a", 0)]


def test_per_flow_policies_get_flow_levels() -> None:
    efs = [ef("a", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])]
    edf = get_policy("edf").schedule(efs, NET)
    lv = flow_levels(edf, efs)
    seq = [lv[("a", j)] for j in range(10)]
    assert seq == sorted(seq, reverse=True) and seq[0] == 7 and seq[-1] == 1
    fair = get_policy("fair").schedule(efs, NET)
    assert set(flow_levels(fair, efs).values()) == {max(ECHELON_LEVELS)}
    # the data-plane view of a per-flow schedule still covers every echelon
    q = quantize(edf, efs)
    check_ranges(q["a"])


def test_missing_from_order_goes_last() -> None:
    a, b = ef("a", [0]), ef("b", [0])
    sched = Schedule("manual", ("b",), {("a", 0): 0, ("b", 0): 1})
    q = quantize(sched, [a, b])
    assert q["b"].priority > q["a"].priority


def test_finished_flows_cost_no_level() -> None:
    """Ten flows ranked by EDF; once the first five have finished, the five live
    ones get five distinct levels instead of sharing levels with finished ones."""
    efs = [ef("a", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])]
    remaining = {("a", j): (0 if j < 5 else 1) for j in range(10)}
    edf = get_policy("edf").schedule(efs, NET, remaining)
    assert edf.live == frozenset(("a", j) for j in range(5, 10))
    lv = flow_levels(edf, efs)
    live_levels = [lv[("a", j)] for j in range(5, 10)]
    assert live_levels == [7, 6, 5, 4, 3]
    # every flow still has a level, and the order is kept (finished flows above)
    assert all(lv[("a", j)] >= 7 for j in range(5))
    # nothing finished: the schedule says so and all ten flows share the 7 levels
    fresh = get_policy("edf").schedule(efs, NET, {("a", j): 1 for j in range(10)})
    assert fresh.live is None and len(set(flow_levels(fresh, efs).values())) == 7


def test_finished_flows_leave_group_classes() -> None:
    """Group bands split offsets among live flows only: a group whose early flows
    have finished needs one level, and the spare levels go to the next group."""
    a, b = ef("a", [0, 1, 2]), ef("b", [0, 1, 2])
    rank = {("a", 0): 0, ("a", 1): 1, ("a", 2): 2, ("b", 0): 3, ("b", 1): 4, ("b", 2): 5}
    live = frozenset(k for k in rank if k not in {("a", 0), ("a", 1)})
    levels = (1, 2, 3, 4)
    all_live = quantize(Schedule("manual", ("a", "b"), rank), [a, b], levels=levels)
    some = quantize(Schedule("manual", ("a", "b"), rank, live=live), [a, b], levels=levels)
    assert [len(all_live[n].ranges) for n in "ab"] == [2, 2]
    assert [r.priority for r in some["a"].ranges] == [4]
    assert [r.priority for r in some["b"].ranges] == [3, 2, 1]
    for q in (*all_live.values(), *some.values()):
        check_ranges(q)

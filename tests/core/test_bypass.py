"""The starvation guard's memory (echelon.policies.bypass): who passed an overdue group."""

from __future__ import annotations

import numpy as np

from echelon.model import EchelonFlow, Flow
from echelon.network import BigSwitch
from echelon.policies.bypass import Passers
from echelon.policies.table import FlowTable, build_table

NET = BigSwitch.uniform(["h1", "h2", "h3", "h4"], 1.0)


def group(name: str, src: str = "h1", dst: str = "h2") -> EchelonFlow:
    return EchelonFlow(name, name, "g", (Flow(0, src, dst, 1, 0.0),), 0.0)


def table(*groups: EchelonFlow) -> FlowTable:
    return build_table(list(groups), NET)


def counts(p: Passers, t: FlowTable, rank: list[int], overdue: list[str], now: float) -> dict:
    od = np.array([int(t.names[e] in overdue) for e in t.ech.tolist()], dtype=np.int64)
    got = p.count(t, np.array(rank, dtype=np.int64), od, now)
    return dict(zip(t.names, got.tolist(), strict=True))


def test_counts_distinct_groups_ranked_ahead_on_a_shared_link_while_overdue() -> None:
    p = Passers()
    t = table(group("big"), group("a"), group("far", "h3", "h4"))
    # a is ahead of big on h1 -> h2; far (h3 -> h4) shares no link, ahead or not
    assert counts(p, t, [2, 1, 0], ["big"], 1.0) == {"big": 1, "a": 0, "far": 0}
    # the same passer again is not a second one
    assert counts(p, t, [2, 1, 0], ["big"], 2.0)["big"] == 1
    t2 = table(group("big"), group("b"))
    assert counts(p, t2, [1, 0], ["big"], 3.0)["big"] == 2  # a is remembered, b is new


def test_passes_before_the_group_is_overdue_do_not_count() -> None:
    p = Passers()
    t = table(group("big"), group("a"))
    assert counts(p, t, [1, 0], [], 1.0)["big"] == 0
    assert counts(p, t, [1, 0], ["big"], 2.0)["big"] == 1


def test_a_group_behind_the_overdue_one_does_not_count() -> None:
    p = Passers()
    t = table(group("big"), group("a"))
    assert counts(p, t, [0, 1], ["big"], 1.0)["big"] == 0


def test_an_earlier_now_starts_a_new_run_and_gone_groups_are_forgotten() -> None:
    p = Passers()
    t = table(group("big"), group("a"))
    assert counts(p, t, [1, 0], ["big"], 5.0)["big"] == 1
    assert counts(p, table(group("big")), [0], ["big"], 6.0)["big"] == 1  # a is gone: kept
    assert counts(p, table(group("x")), [0], [], 7.0) == {"x": 0}  # big is gone: forgotten
    assert counts(p, table(group("big"), group("b")), [1, 0], ["big"], 8.0)["big"] == 1
    # a new run (now back to 0): nothing carried over from the last one
    assert counts(p, table(group("big"), group("c")), [0, 1], ["big"], 0.0)["big"] == 0


def test_a_group_at_the_limit_is_not_looked_at_again() -> None:
    """The guard asks only whether the count reached BYPASS: past the limit the passes
    are not recorded (what keeps a long-overdue group from costing every re-plan)."""
    p = Passers(limit=1)
    assert counts(p, table(group("big"), group("a")), [1, 0], ["big"], 1.0)["big"] == 1
    assert counts(p, table(group("big"), group("b")), [1, 0], ["big"], 2.0)["big"] == 1
    free = Passers()
    assert counts(free, table(group("big"), group("a")), [1, 0], ["big"], 1.0)["big"] == 1
    assert counts(free, table(group("big"), group("b")), [1, 0], ["big"], 2.0)["big"] == 2

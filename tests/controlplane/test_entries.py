"""Desired entries and update planning (pure)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.entries import (
    T_CLASSIFY,
    T_DEADLINE,
    T_IDS,
    T_LPM,
    GroupPlan,
    TableFullError,
    apply_steps,
    count_by_table,
    forwarding_entries,
    group_entries,
    plan_delta,
    plan_updates,
)
from echelon.schedule import DeadlineRange
from echelon.topology import load
from p4client.p4info import P4Info, TableEntry
from tests.controlplane.oracle import check_capacity, desired_entries

ROOT = Path(__file__).resolve().parents[2]
INFO = P4Info.load(ROOT / "p4src" / "build" / "echelon.p4info.txtpb")
STAR = load(ROOT / "topo" / "star.yaml")


def _plan(eid: int = 5, prio: int = 6, ranges: tuple[DeadlineRange, ...] = ()) -> GroupPlan:
    return GroupPlan("j", "g", eid, eid - 1, prio, ranges, (("h1", "h4"), ("h2", "h4")))


def test_desired_entries_for_one_group() -> None:
    rg = (DeadlineRange(0, 999, 6), DeadlineRange(1000, 5000, 5))
    got = desired_entries(INFO, STAR, "s1", [_plan(ranges=rg)])
    by_table: dict[str, list[TableEntry]] = {}
    for e in got:
        by_table.setdefault(e.table, []).append(e)
    assert len(by_table[T_LPM]) == len(STAR.hosts)
    assert [e.match_dict() for e in by_table[T_IDS]] == [{"hdr.echelon.echelon_id": 5}]
    classify = sorted(by_table[T_CLASSIFY])
    assert [e.match_dict()["hdr.ipv4.srcAddr"] for e in classify] == [0x0A000001, 0x0A000002]
    assert all(e.params_dict() == {"class_id": 4, "prio": 6} for e in classify)
    ranges = sorted(by_table[T_DEADLINE])
    assert [e.match_dict()["hdr.echelon.deadline_us"] for e in ranges] == [(0, 999), (1000, 5000)]
    assert all(e.priority > 0 for e in ranges)
    h4 = next(e for e in by_table[T_LPM] if e.match_dict()["hdr.ipv4.dstAddr"] == (0x0A000004, 32))
    assert h4.params_dict() == {"dstAddr": 0x00000A000004, "port": 4}


def test_a_group_goes_only_to_the_switches_its_flows_cross() -> None:
    """On the leaf-spine fabric, h1 -> h2 stays on leaf1 and h3 -> h1 crosses leaf2,
    spine1 and leaf1: the ids and range entries go to those three switches, a source's
    classify entry only where its own flows pass, and nothing of a leaf1-only group
    leaves leaf1."""
    fabric = load(ROOT / "topo" / "leafspine.yaml")
    rg = (DeadlineRange(0, 999, 6),)
    pairs = (("h1", "h2"), ("h3", "h1"))
    plan = GroupPlan("j", "g", 5, 4, 6, rg, pairs)
    got = group_entries(INFO, fabric, plan)

    def sources(switch: str) -> set[int]:
        return {
            int(e.match_dict()["hdr.ipv4.srcAddr"]) for e in got[switch] if e.table == T_CLASSIFY
        }

    assert set(got) == {"leaf1", "spine1", "leaf2"}
    h1, h3 = 0x0A000101, 0x0A000201
    assert sources("leaf1") == {h1, h3}
    assert sources("spine1") == sources("leaf2") == {h3}
    for entries in got.values():
        assert {e.table for e in entries if e.table != T_CLASSIFY} == {T_IDS, T_DEADLINE}
    local = replace(plan, pairs=(("h1", "h2"),))
    assert set(group_entries(INFO, fabric, local)) == {"leaf1"}
    assert desired_entries(INFO, fabric, "leaf2", [local]) == set(
        forwarding_entries(INFO, fabric, "leaf2")
    )


def test_plan_updates_is_minimal_and_inserts_before_deletes() -> None:
    old = desired_entries(INFO, STAR, "s1", [_plan(prio=6, ranges=(DeadlineRange(0, 10, 6),))])
    new = desired_entries(INFO, STAR, "s1", [_plan(prio=4, ranges=(DeadlineRange(0, 20, 4),))])
    assert plan_updates(old, old) == []
    steps = plan_updates(old, new)
    kinds = [s.kind for s in steps]
    assert kinds == sorted(kinds, key=["INSERT", "MODIFY", "DELETE"].index)
    assert kinds.count("MODIFY") == 2  # two classify entries change prio in place
    assert kinds.count("INSERT") == 1 and kinds.count("DELETE") == 1  # the range key changed
    assert apply_steps(old, steps) == new


def test_tight_table_deletes_first() -> None:
    old = desired_entries(INFO, STAR, "s1", [_plan(ranges=(DeadlineRange(0, 10, 6),))])
    new = desired_entries(INFO, STAR, "s1", [_plan(ranges=(DeadlineRange(0, 20, 6),))])
    steps = plan_updates(old, new, {T_DEADLINE: 1})
    assert [(s.kind, s.entry.table) for s in steps] == [
        ("DELETE", T_DEADLINE),
        ("INSERT", T_DEADLINE),
    ]


def test_capacity_check_names_the_table() -> None:
    # class_id is 10 bits wide (the echelon_pkts counter has 1024 slots): wrap it.
    plans = [GroupPlan("j", f"g{i}", i + 1, i % 1024, 3, (), (("h1", "h2"),)) for i in range(1025)]
    entries = desired_entries(INFO, STAR, "s1", plans)
    with pytest.raises(TableFullError) as ei:
        check_capacity(INFO, entries)
    assert ei.value.table == T_IDS and ei.value.needed == 1025 and ei.value.size == 1024


_entries = st.builds(
    lambda eid, prio, src: INFO.table_entry(
        T_CLASSIFY,
        {"hdr.ipv4.srcAddr": src, "hdr.echelon.echelon_id": eid},
        "EchelonIngress.set_echelon",
        {"class_id": eid, "prio": prio},
    ),
    st.integers(1, 6),
    st.integers(0, 7),
    st.integers(1, 3),
)


@settings(max_examples=200, deadline=None)
@given(st.sets(_entries), st.sets(_entries))
def test_plan_and_inverse_round_trip(a: set[TableEntry], b: set[TableEntry]) -> None:
    # sets may hold two entries with one key: keep the last per key, like a switch
    a = set({e.key: e for e in sorted(a)}.values())
    b = set({e.key: e for e in sorted(b)}.values())
    steps = plan_updates(a, b)
    assert apply_steps(a, steps) == b
    assert len(steps) == len({e.key for e in a} ^ {e.key for e in b}) + sum(
        1 for e in b if e.key in {x.key for x in a} and e not in a
    )
    undo = [s.inverse() for s in reversed(steps)]
    assert apply_steps(b, undo) == a


@settings(max_examples=200, deadline=None)
@given(st.sets(_entries), st.sets(_entries), st.sets(_entries), st.integers(1, 12))
def test_plan_delta_equals_plan_updates(
    a: set[TableEntry], gone: set[TableEntry], new: set[TableEntry], size: int
) -> None:
    """The controller's O(change) diff gives the steps of the full diff, in order."""
    a = set({e.key: e for e in sorted(a)}.values())
    new = set({e.key: e for e in sorted(new)}.values())
    want = (a - gone) | new
    sizes = {T_CLASSIFY: size}  # small: the tight-table ordering is exercised too
    assert plan_delta(a, gone, new, count_by_table(a), sizes) == plan_updates(a, want, sizes)

"""Table semantics beyond the echelon program: ternary, priorities, LPM with exact, concurrency."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from softswitch.errors import AlreadyExists, InvalidArgument, NotFound, ResourceExhausted
from softswitch.tables import EXACT, LPM, RANGE, TERNARY, ActionCall, KeyField, MatchKey, Table


def tag(name: str) -> ActionCall:
    def fn(v: list[Any], *args: int) -> None:
        v[2] = name

    return fn, ()


MISS = tag("miss")


def hit(t: Table, a: int = 0, b: int = 0) -> str:
    """The name of the action the table runs for a packet state with fields a (slot 0)
    and b (slot 1): the hit's, else the default's."""
    v: list[Any] = [a, b, ""]
    fn, args = t.lookup_fn()(v) or t.default
    fn(v, *args)
    return str(v[2])


def test_ternary_highest_priority_wins() -> None:
    t = Table("t", (KeyField("a", 8, TERNARY, 0),), 16, MISS)
    t.insert(((0x10, 0xF0),), 5, tag("low"), None)
    t.insert(((0x12, 0xFF),), 9, tag("high"), None)
    t.insert(((0x00, 0x00),), 1, tag("any"), None)
    assert hit(t, a=0x12) == "high"
    assert hit(t, a=0x1F) == "low"
    assert hit(t, a=0x20) == "any"
    t.delete(((0x12, 0xFF),), 9)
    assert hit(t, a=0x12) == "low"


def test_range_with_exact_group_and_priority_order() -> None:
    t = Table("t", (KeyField("a", 16, EXACT, 0), KeyField("b", 32, RANGE, 1)), 16, MISS)
    t.insert((1, (0, 100)), 1, tag("wide"), None)
    t.insert((1, (40, 60)), 2, tag("narrow"), None)
    t.insert((2, (0, 100)), 1, tag("other-class"), None)
    assert hit(t, a=1, b=50) == "narrow"
    assert hit(t, a=1, b=70) == "wide"
    assert hit(t, a=2, b=50) == "other-class"
    assert hit(t, a=1, b=101) == "miss"
    assert hit(t, a=3, b=50) == "miss"
    t.modify((1, (40, 60)), 2, tag("changed"), None)
    assert hit(t, a=1, b=45) == "changed"


def test_lpm_with_exact_field() -> None:
    t = Table("t", (KeyField("a", 8, EXACT, 0), KeyField("b", 32, LPM, 1)), 16, MISS)
    t.insert((1, (0x0A000000, 8)), 0, tag("a1/8"), None)
    t.insert((1, (0x0A010000, 16)), 0, tag("a1/16"), None)
    t.insert((2, (0x0A000000, 8)), 0, tag("a2/8"), None)
    assert hit(t, a=1, b=0x0A010203) == "a1/16"
    assert hit(t, a=1, b=0x0A020203) == "a1/8"
    assert hit(t, a=2, b=0x0A010203) == "a2/8"
    t.delete((1, (0x0A010000, 16)), 0)
    assert hit(t, a=1, b=0x0A010203) == "a1/8"


def test_errors_and_default() -> None:
    t = Table("t", (KeyField("a", 8, EXACT, 0),), 1, MISS)
    t.insert((1,), 0, tag("one"), None)
    with pytest.raises(AlreadyExists):
        t.insert((1,), 0, tag("one"), None)
    with pytest.raises(ResourceExhausted):
        t.insert((2,), 0, tag("two"), None)
    with pytest.raises(NotFound):
        t.modify((2,), 0, tag("two"), None)
    with pytest.raises(NotFound):
        t.delete((2,), 0)
    t.set_default(tag("dflt"), None)
    assert hit(t, a=5) == "dflt"
    t.set_default(None, None)
    assert hit(t, a=5) == "miss"


@pytest.mark.parametrize("kind", [EXACT, LPM, RANGE])
def test_lookups_stay_consistent_while_writer_churns(kind: str) -> None:
    """A reader thread sees either hit or miss for a churned key, never an exception,
    and always hits a key that is never touched."""
    fields = (KeyField("a", 32, kind, 0),)
    t = Table("t", fields, 4096, MISS)

    def key(v: int) -> MatchKey:
        return ((v, 32),) if kind == LPM else ((v, v),) if kind == RANGE else (v,)

    pri = 1 if kind == RANGE else 0
    t.insert(key(7), pri, tag("stable"), None)
    stop = threading.Event()
    errors: list[BaseException] = []
    seen: set[str] = set()

    def reader() -> None:
        try:
            while not stop.is_set():
                assert hit(t, a=7) == "stable"
                seen.add(hit(t, a=1000))
        except BaseException as exc:
            errors.append(exc)

    th = threading.Thread(target=reader)
    th.start()
    try:
        for _round in range(200):
            for v in range(1000, 1020):
                t.insert(key(v), pri, tag("churn"), None)
            for v in range(1000, 1020):
                t.delete(key(v), pri)
    finally:
        stop.set()
        th.join()
    assert not errors
    assert seen <= {"churn", "miss"} and "miss" in seen


_LAYOUTS = {
    "exact": (KeyField("a", 8, EXACT, 0),),
    "exact2": (KeyField("a", 8, EXACT, 0), KeyField("b", 8, EXACT, 1)),
    "lpm": (KeyField("a", 8, LPM, 0),),
    "lpm+exact": (KeyField("a", 8, EXACT, 0), KeyField("b", 8, LPM, 1)),
    "range+exact": (KeyField("a", 8, EXACT, 0), KeyField("b", 8, RANGE, 1)),
    "ternary": (KeyField("a", 8, TERNARY, 0),),
    "keyless": (),
}


def _key(layout: str, x: int, y: int) -> MatchKey:
    """A small key space, so that batches collide with the table and with themselves."""
    return {
        "exact": (x,),
        "exact2": (x, y),
        "lpm": ((x << 4, 4),),
        "lpm+exact": (x, (y << 6, 2)),
        "range+exact": (x, (y, y + 3)),
        "ternary": ((x, 0x0F),),
        "keyless": (),
    }[layout]


@given(
    st.sampled_from(sorted(_LAYOUTS)),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=6),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(1, 2)), max_size=8),
    st.integers(1, 10),
)
def test_deferred_inserts_end_like_immediate_ones(
    layout: str,
    before: list[tuple[int, int]],
    batch: list[tuple[int, int, int]],
    size: int,
) -> None:
    """A WriteRequest's inserts (``defer=True``, then :meth:`Table.flush`) give the same
    errors, entries, read order and lookups as inserts that index at once: duplicates
    in the table or in the batch, a table that fills up, a keyless table."""
    fields = _LAYOUTS[layout]
    prio = any(f.kind in (RANGE, TERNARY) for f in fields)
    tables = [Table("t", fields, size, MISS) for _ in range(2)]
    old = [tag(f"b{i}") for i in range(len(before))]
    for t in tables:
        for (x, y), call in zip(before, old, strict=True):
            with contextlib.suppress(AlreadyExists, ResourceExhausted, InvalidArgument):
                t.insert(_key(layout, x, y), 1 if prio else 0, call, None)
    keys = [_key(layout, x, y) for x, y, _p in batch]
    prios = [p if prio else 0 for _x, _y, p in batch]
    calls = [tag(f"n{i}") for i in range(len(batch))]
    one, many = tables
    errors: list[dict[int, tuple[type, str]]] = [{}, {}]
    for t, defer, errs in ((one, False, errors[0]), (many, True, errors[1])):
        for i, (key, p, call) in enumerate(zip(keys, prios, calls, strict=True)):
            try:
                t.insert(key, p, call, i, defer=defer)
            except (AlreadyExists, ResourceExhausted, InvalidArgument) as err:
                errs[i] = (type(err), str(err))
    many.flush()
    assert errors[0] == errors[1]
    assert [(e.key, e.priority, e.call, e.payload) for e in one] == [
        (e.key, e.priority, e.call, e.payload) for e in many
    ]
    for a in range(16):
        for b in range(16):
            assert hit(one, a << 4 if layout == "lpm" else a, b) == hit(
                many, a << 4 if layout == "lpm" else a, b
            )

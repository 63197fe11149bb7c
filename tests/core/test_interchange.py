"""The adjacent interchange of the echelon policy: its local bookkeeping is exact and it
only ever lowers the interleaved layout's total formation delay."""

from __future__ import annotations

import random
from typing import Any, Literal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from echelon.model import EchelonFlow, Flow
from echelon.network import BigSwitch
from echelon.policies.echelon import counted_lateness, group_keys, lateness_grace, size_class
from echelon.policies.interchange import flow_interchange, interchange
from echelon.policies.table import (
    Floats,
    FlowTable,
    Ints,
    _int_lexsort,
    bottlenecks,
    build_table,
    contested_groups,
    group_lateness,
    group_paths,
    layout_finish,
    path_ids,
    serial_finish,
)

HOSTS = ["h1", "h2", "h3", "h4", "h5"]
NET = BigSwitch.uniform(HOSTS, 1.0)  # 1 byte/s: sizes are seconds


def random_groups(rng: random.Random) -> tuple[list[EchelonFlow], dict[tuple[str, int], int]]:
    """3-9 groups of 1-4 flows between random hosts (several links, partly shared), some
    flows already finished."""
    groups, left = [], {}
    for g in range(rng.randint(3, 9)):
        flows, offset = [], 0.0
        for j in range(rng.randint(1, 4)):
            src, dst = rng.sample(HOSTS, 2)
            flows.append(Flow(j, src, dst, rng.randint(1, 9), offset))
            offset += rng.randint(0, 4)
        name = f"g{g}"
        groups.append(EchelonFlow(name, f"job{g % 3}", "g", tuple(flows), rng.uniform(0, 6)))
        for f in flows:
            left[(name, f.index)] = 0 if rng.random() < 0.15 else f.size
    return groups, left


def setup(t: FlowTable, now: float) -> tuple[Ints, Ints, Floats, Floats]:
    """What the policy hands the interchange: (class, key) order, classes, latest
    finish, grace."""
    p_gamma = bottlenecks(t)
    key = group_keys(t, now, t.slack, p_gamma)
    cls = size_class(key)
    order = np.lexsort((t.name_rank, t.t_ref, key, cls))
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    alive = np.zeros(len(t.names), dtype=bool)
    alive[t.ech[t.remaining > 0]] = True
    return position, cls, t.deadline + t.slack, lateness_grace(p_gamma[0], cls, alive)


def full_lateness(t: FlowTable, position: Ints, cls: Ints, due: Floats, grace: Floats) -> Floats:
    """Per group, lateness on the interleaved layout of ``position``, recomputed from
    scratch (serial layout -> virtual deadlines -> interleaved layout)."""
    serial = group_lateness(t, serial_finish(t, position, 0.0), due)
    virtual = due + counted_lateness(serial, grace, 0.25)[t.ech]
    return group_lateness(
        t, layout_finish(t, (position[t.ech], due, virtual, cls[t.ech]), 0.0), due
    )


RELAYOUTS: tuple[Literal["whole", "local"], ...] = ("whole", "local")


def judge(
    t: FlowTable, position: Ints, cls: Ints, due: Floats, grace: Floats, **kw: Any
) -> tuple[Ints, Floats]:
    """The interchange with the policy's virtual deadlines (grace, β = 1/4)."""

    def virtual_of(late: Floats) -> Floats:
        return due + counted_lateness(late, grace, 0.25)[t.ech]

    return interchange(t, position, cls, due, virtual_of, 0.0, **kw)


@pytest.mark.parametrize("pairs", ["nested", "any"])
@pytest.mark.parametrize("seed", range(200))
def test_local_bookkeeping_matches_a_full_recomputation(
    seed: int, pairs: Literal["nested", "any"]
) -> None:
    """The lateness the interchange returns for its order is what laying that order out
    from scratch gives, and its total is never above the starting order's; its local
    bookkeeping and laying the whole table out for every trial decide alike."""
    rng = random.Random(seed)
    groups, left = random_groups(rng)
    t = build_table(groups, NET, left)
    position, cls, due, grace = setup(t, 0.0)
    before = float((t.weight * full_lateness(t, position, cls, due, grace)).sum())
    got = {r: judge(t, position, cls, due, grace, pairs=pairs, relayout=r) for r in RELAYOUTS}
    new_position, late = got["local"]
    assert sorted(new_position.tolist()) == sorted(position.tolist())  # a permutation
    assert late == pytest.approx(full_lateness(t, new_position, cls, due, grace))
    assert got["whole"][0].tolist() == new_position.tolist()
    assert got["whole"][1] == pytest.approx(late)
    assert float((t.weight * late).sum()) <= before + 1e-9


def test_a_swap_is_found_and_kept() -> None:
    """docs/model.md's inter-group example: a (5 s, due now) before b (1 s due at 4,
    2 s due at 12) is the key order; b's first flow before a is better (total 6, not 7)."""
    a = EchelonFlow("a", "a", "g", (Flow(0, "h1", "h2", 5, 0.0),), 0.0)
    b = EchelonFlow("b", "b", "g", (Flow(0, "h1", "h2", 1, 0.0), Flow(1, "h1", "h2", 2, 8.0)), 4.0)
    t = build_table([a, b], NET)
    position, cls, due, grace = setup(t, 0.0)
    assert position.tolist() == [0, 1]  # key order: a, b
    assert full_lateness(t, position, cls, due, grace).sum() == pytest.approx(7.0)
    for relayout in RELAYOUTS:
        new_position, late = judge(t, position, cls, due, grace, relayout=relayout)
        assert new_position.tolist() == [1, 0], relayout
        assert late.tolist() == pytest.approx([6.0, 0.0])
    # with no trials allowed the order stays
    kept, _ = judge(t, position, cls, due, grace, trials=0)
    assert kept.tolist() == [0, 1]


def test_only_nested_pairs_swap_by_default() -> None:
    """The same two groups with a sent from h4: a and b share only h2's downlink, where
    the layout still finds the swap better, but each also crosses an uplink the other
    does not (partly shared paths), so the default interchange keeps the key order and
    ``pairs="any"`` swaps (interchange.py says why)."""
    a = EchelonFlow("a", "a", "g", (Flow(0, "h4", "h2", 5, 0.0),), 0.0)
    b = EchelonFlow("b", "b", "g", (Flow(0, "h1", "h2", 1, 0.0), Flow(1, "h1", "h2", 2, 8.0)), 4.0)
    t = build_table([a, b], NET)
    position, cls, due, grace = setup(t, 0.0)
    assert position.tolist() == [0, 1]
    for relayout in RELAYOUTS:
        kept, late = judge(t, position, cls, due, grace, relayout=relayout)
        assert kept.tolist() == [0, 1], relayout
        assert late == pytest.approx(full_lateness(t, position, cls, due, grace))
        swapped, _ = judge(t, position, cls, due, grace, pairs="any", relayout=relayout)
        assert swapped.tolist() == [1, 0], relayout
    with pytest.raises(ValueError, match="pairs"):
        judge(t, position, cls, due, grace, pairs="some")
    with pytest.raises(ValueError, match="relayout"):
        judge(t, position, cls, due, grace, relayout="partial")


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 40).flatmap(
        lambda n: st.lists(
            st.lists(st.integers(0, 6), min_size=n, max_size=n)
            | st.lists(st.floats(0.0, 3.0), min_size=n, max_size=n),
            min_size=1,
            max_size=4,
        )
    )
)
def test_the_layouts_integer_order_is_lexsorts(columns: list[list[float]]) -> None:
    """The layouts' incidence order (one argsort of combined integer keys, lexsort for
    float keys) is exactly ``np.lexsort``'s, ties in input order included."""
    keys = [np.array(c, dtype=np.int64 if all(isinstance(x, int) for x in c) else float)
            for c in columns]  # fmt: skip
    assert _int_lexsort(*keys).tolist() == np.lexsort(keys).tolist()


def moved(t: FlowTable, rank: list[int], **kw: Any) -> list[int]:
    """flow_interchange at 0 with the groups' input order as the tie."""
    return flow_interchange(
        t, np.array(rank, dtype=np.int64), t.ech.copy(), t.deadline + t.slack, 0.0, **kw
    ).tolist()


def layout_cost(t: FlowTable, rank: Ints) -> float:
    """Total weighted formation delay of the flows laid out in (rank, group) order."""
    return float((t.weight * full_layout_lateness(t, rank)).sum())


def full_layout_lateness(t: FlowTable, rank: Ints) -> Floats:
    return group_lateness(t, layout_finish(t, (t.ech, rank), 0.0), t.deadline + t.slack)


def test_a_flow_moves_ahead_of_a_later_flow_with_time_to_spare() -> None:
    """docs/model.md §5.1 step 7 (single-flow moves): ``a`` is already 5 s late by its second flow,
    so its third (due at 4) may finish as late as 9 at no cost; ``b``'s first flow is due at 4.
    Serving ``a`` whole makes ``b`` 2 s late (total 7); ``b``'s first flow ahead of ``a``'s third
    makes it 1 s late and leaves ``a`` at 5 (total 6)."""
    a = EchelonFlow("a", "a", "g", (Flow(0, "h1", "h2", 1, 0.0), Flow(1, "h1", "h2", 2, 1.0),
                                    Flow(2, "h1", "h2", 1, 7.0)), -3.0)  # fmt: skip
    b = EchelonFlow("b", "b", "g", (Flow(0, "h1", "h2", 2, 0.0), Flow(1, "h1", "h2", 5, 12.0),
                                    Flow(2, "h1", "h2", 3, 12.0)), 4.0)  # fmt: skip
    t = build_table([a, b], NET)
    rank = [0, 1, 2, 3, 4, 4]
    assert layout_cost(t, np.array(rank)) == pytest.approx(7.0)
    got = moved(t, rank)
    assert got == [0, 1, 3, 2, 4, 4]  # b's first flow between a's second and third; b's
    # last two keep sharing a rank
    assert layout_cost(t, np.array(got)) == pytest.approx(6.0)
    assert moved(t, rank, trials=0) == rank


def test_a_flow_moves_behind_the_late_groups_run() -> None:
    """``a``'s second flow (its first is sent) is due at 14; ``b``'s two flows at 3 and
    10. Neither of ``b``'s flows alone ahead of ``a``'s gains anything (``b`` stays 5 s
    late by its second), ``a``'s flow behind both does: ``b`` 2 s, ``a`` 1 s late."""
    a = EchelonFlow("a", "a", "g", (Flow(0, "h1", "h2", 1, 0.0), Flow(1, "h1", "h2", 3, 10.0)), 4.0)
    b = EchelonFlow("b", "b", "g", (Flow(0, "h1", "h2", 5, 0.0), Flow(1, "h1", "h2", 7, 7.0)), 3.0)
    t = build_table([a, b], NET, {("a", 0): 0})
    rank = [0, 0, 1, 2]
    assert layout_cost(t, np.array(rank)) == pytest.approx(5.0)
    got = moved(t, rank)
    assert got[2] < got[3] < got[1]  # b's two flows, then a's
    assert layout_cost(t, np.array(got)) == pytest.approx(3.0)


def test_flows_move_only_between_groups_on_one_path() -> None:
    """The first example with ``b`` also sending from h3: ``b`` is on two paths, so the
    layout cannot time the move exactly and none is made."""
    a = EchelonFlow("a", "a", "g", (Flow(0, "h1", "h2", 1, 0.0), Flow(1, "h1", "h2", 2, 1.0),
                                    Flow(2, "h1", "h2", 1, 7.0)), -3.0)  # fmt: skip
    b = EchelonFlow("b", "b", "g", (Flow(0, "h1", "h2", 2, 0.0), Flow(1, "h1", "h2", 5, 12.0),
                                    Flow(2, "h3", "h2", 3, 12.0)), 4.0)  # fmt: skip
    t = build_table([a, b], NET)
    assert group_paths(t, path_ids(t)).tolist() == [0, -1]
    assert moved(t, [0, 1, 2, 3, 4, 4]) == [0, 1, 2, 3, 4, 4]


def test_path_ids_follow_the_links_of_the_bytes_left() -> None:
    """Flows between the same hosts share a path id, others do not; a finished flow has
    none and does not stop its group being on one path."""
    a = EchelonFlow("a", "a", "g", (Flow(0, "h1", "h2", 1, 0.0), Flow(1, "h3", "h2", 2, 1.0),
                                    Flow(2, "h1", "h2", 1, 7.0)), 0.0)  # fmt: skip
    t = build_table([a], NET, {("a", 1): 0})
    path = path_ids(t)
    assert path[1] == -1 and path[0] == path[2] >= 0
    assert group_paths(t, path).tolist() == [path[0]]
    t2 = build_table([a], NET)
    assert path_ids(t2)[1] != path_ids(t2)[0]
    assert group_paths(t2, path_ids(t2)).tolist() == [-1]


@pytest.mark.parametrize("seed", range(100))
def test_flow_moves_never_raise_the_layouts_formation_delay(seed: int) -> None:
    """On random groups (some on one path, some not, some flows sent) the moves keep the
    ranks dense, leave every flow not of a one-path group where it was relative to the
    others, and never raise the layout's total formation delay."""
    rng = random.Random(seed)
    groups, left = random_groups(rng)
    t = build_table(groups, NET, left)
    rank = np.array([rng.randint(0, 6) for _ in t.keys], dtype=np.int64)
    rank = np.unique(rank, return_inverse=True)[1].astype(np.int64)
    got = np.array(moved(t, rank.tolist()))
    assert sorted(set(got.tolist())) == list(range(int(got.max()) + 1))
    assert layout_cost(t, got) <= layout_cost(t, rank) + 1e-9
    path = path_ids(t)
    fixed = np.flatnonzero(group_paths(t, path)[t.ech] < 0)
    before, after = rank[fixed], got[fixed]
    assert (
        np.sign(before[:, None] - before[None, :]) == np.sign(after[:, None] - after[None, :])
    ).all()


@pytest.mark.parametrize("seed", range(30))
def test_path_ids_number_paths_in_the_order_of_their_links(seed: int) -> None:
    """The one-integer encoding numbers paths as ``np.unique`` of the padded link rows
    does (first hop most significant), so the moves' order of candidates is the same."""
    rng = random.Random(seed)
    groups, left = random_groups(rng)
    t = build_table(groups, NET, left)
    path = path_ids(t)
    rows: dict[int, tuple[int, ...]] = {}
    for f, lk in zip(t.inc_flow.tolist(), t.inc_link.tolist(), strict=True):
        if t.remaining[f] > 0:
            rows[f] = (*rows.get(f, ()), lk)
    distinct = sorted(set(rows.values()))
    assert {f: distinct[int(path[f])] for f in rows} == rows
    assert all(path[f] == -1 for f in range(len(t.keys)) if f not in rows)


@pytest.mark.parametrize("seed", range(30))
def test_contested_groups_are_those_sharing_a_link_with_another_groups_bytes(seed: int) -> None:
    """Against the definition, flow-link pair by pair: a group is contested where one of its
    flows with bytes left crosses a link that another group's flow with bytes left crosses."""
    groups, left = random_groups(random.Random(seed))
    t = build_table(groups, NET, left)
    live = t.remaining[t.inc_flow] > 0
    on_link: dict[int, set[int]] = {}
    for f, lk in zip(t.inc_flow[live].tolist(), t.inc_link[live].tolist(), strict=True):
        on_link.setdefault(lk, set()).add(int(t.ech[f]))
    want = [int(any(g in s and len(s) > 1 for s in on_link.values())) for g in range(len(t.names))]
    assert contested_groups(t).tolist() == want

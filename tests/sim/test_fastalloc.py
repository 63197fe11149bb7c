"""The compiled allocator: same answers as the reference and as the numpy oracle, and the
general engine gives the same results with either allocator."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import sim.core.state
from sim.core import alloc as fastalloc
from sim.core.config import SimConfig
from sim.core.engine import Simulator
from sim.core.ranking import UNRANKED
from sim.core.state import ActiveFlows
from sim.topology import hosts_of, make_network
from sim.workloads import generate_mix
from tests.sim import numpy_alloc as alloc
from tests.sim.test_alloc import instances, reference


def _arr(paths: list[list[int]], pad: int) -> np.ndarray:
    width = max(len(p) for p in paths)
    return np.array([p + [pad] * (width - len(p)) for p in paths], dtype=np.int64)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(instances())
def test_matches_reference_and_numpy_allocator(
    inst: tuple[list[list[int]], list[int], list[float]],
) -> None:
    paths, keys, cap = inst
    arr = _arr(paths, len(cap))
    k = np.array(keys, dtype=np.int64)
    got = fastalloc.allocate(arr, k, np.array(cap))
    np.testing.assert_allclose(got, reference(paths, keys, cap), rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(got, alloc.allocate(arr, k, np.array(cap)), rtol=1e-12)
    load = np.zeros(len(cap))
    for p, r in zip(paths, got, strict=True):
        load[p] += r
    assert (load <= np.array(cap) * (1 + 1e-9)).all()


def test_sorted_entry_point_needs_no_sort() -> None:
    paths = np.array([[0, 2], [1, 2], [0, 3]], dtype=np.int64)
    keys = np.array([0, 1, 1], dtype=np.int64)
    cap = np.array([1.0, 1.0, 1.0, 1.0])
    # flow 0 takes link 2; flow 1 is blocked there; flow 2 shares nothing left on 0
    assert fastalloc.allocate_sorted(paths, keys, cap).tolist() == [1.0, 0.0, 0.0]
    cap = np.array([2.0, 1.0, 2.0, 1.0])
    assert fastalloc.allocate_sorted(paths, keys, cap).tolist() == [2.0, 0.0, 0.0]


def test_advance_and_mark_marks_the_finished_in_place() -> None:
    gid = np.array([5, 6, 7, 8], dtype=np.int64)
    rem = np.array([1.0, 4.0, 2.0, 8.0])
    rate = np.array([1.0, 1.0, 2.0, 1.0])
    dead = np.zeros(4, dtype=np.bool_)
    done = np.empty(4, dtype=np.int64)
    nd = fastalloc.advance_and_mark(gid, rem, rate, dead, 1.0, 1e-9, done)
    assert nd == 2 and done[:nd].tolist() == [5, 7]
    assert dead.tolist() == [True, False, True, False] and rem[[1, 3]].tolist() == [3.0, 7.0]
    assert rate.tolist() == [0.0, 1.0, 0.0, 1.0]
    assert fastalloc.time_to_next(rem, rate) == 3.0


def _oracle_live(
    paths: np.ndarray,
    keys: np.ndarray,
    cap: np.ndarray,
    dead: np.ndarray,
    rem: np.ndarray,
    rates: np.ndarray,
) -> float:
    """``allocate_live`` done by the numpy oracle on the live flows."""
    live = ~dead
    rates[:] = 0.0
    rates[live] = alloc.allocate(paths[live], keys[live], cap)
    moving = rates > 0
    return float((rem[moving] / rates[moving]).min()) if moving.any() else float("inf")


@pytest.mark.parametrize(
    ("mix", "policy", "levels"),
    [("pipeline", "echelon", None), ("dp", "fair", 8), ("mixed", "fifo", None)],
)
def test_engine_results_do_not_depend_on_the_allocator(
    monkeypatch: pytest.MonkeyPatch, mix: str, policy: str, levels: int | None
) -> None:
    """Old (numpy) vs new (compiled) allocator on whole runs: equal to rounding."""
    spec = {"kind": "leafspine", "gbit": 100, "oversubscription": 2, "leaves": 4}
    spec |= {"hosts_per_leaf": 4, "spines": 2}
    net = make_network(spec)
    jobs = generate_mix(mix, hosts_of(net), 100e9 / 8, 4, None, 2, 0)
    runs = [j.to_run(hosts_of(net)) for j in jobs]
    cfg = SimConfig(policy=policy, levels=levels)
    new = Simulator(net, runs, cfg).run()
    monkeypatch.setattr(sim.core.state, "allocate_live", _oracle_live)
    monkeypatch.setattr(sim.core.state, "_MAX_PAIRS", 0)  # no pair-head kernels either
    old = Simulator(net, runs, cfg).run()
    assert new.n_events == old.n_events and len(new.flows) == len(old.flows)
    np.testing.assert_allclose(
        [f.finish for f in new.flows], [f.finish for f in old.flows], rtol=1e-9, atol=1e-12
    )
    np.testing.assert_allclose(
        [i.end for i in new.iterations], [i.end for i in old.iterations], rtol=1e-9
    )


def test_a_level_of_one_live_flow_is_served_as_a_lone_flow() -> None:
    """Finished flows left in the arrays must not change the rates: the level {a (dead),
    b} is b alone, which leaves link 1 its 1e-12 (the filling would round it to 0)."""
    cap = np.array([1.0, 1.0 + 1e-12])
    paths = np.array([[0, 1], [0, 1], [1, 2]], dtype=np.int64)
    keys = np.array([0, 0, 1], dtype=np.int64)
    dead = np.array([True, False, False])
    rates = np.zeros(3)
    fastalloc.allocate_live(paths, keys, cap, dead, np.ones(3), rates)
    compacted = fastalloc.allocate(paths[1:], keys[1:], cap)
    assert rates.tolist() == [0.0, *compacted.tolist()] and rates[2] > 0.0


def test_active_flows_serve_a_new_ranked_flow_before_an_unranked_one() -> None:
    """Keys span int64 (unranked = its max, switch levels negative): order by comparing."""
    act = ActiveFlows(np.array([1.0, 1.0]))
    act.add([0], [(0, 1)], [5.0], np.array([UNRANKED], dtype=np.int64))
    act.allocate()
    assert act.rate.tolist() == [1.0]
    act.add([1], [(0, 1)], [5.0], np.array([-7], dtype=np.int64))
    act.allocate()
    assert dict(zip(act.gid.tolist(), act.rate.tolist(), strict=True)) == {0: 0.0, 1: 1.0}

"""A coflow trace on the fluid engine: hand-checked cases, the array-built policy
table against the policy protocol, the pair-head kernels against the general allocator."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import sim.core.heads
import sim.core.state
from echelon.policies import get_policy
from echelon.schedule import Schedule
from sim.coflow.trace import MB, CoflowTrace, flow_arrays, parse_coflow_trace
from sim.coflow.workload import arrangement, simulate_coflows

B = float(MB)  # port speed: one MB per second, so times are in MB


def _trace(lines: list[str], ports: int = 4) -> CoflowTrace:
    return parse_coflow_trace(f"{ports} {len(lines)}\n" + "\n".join(lines) + "\n")


def _cct(tr: CoflowTrace, policy: str) -> dict[str, float]:
    res = simulate_coflows(flow_arrays(tr), policy, B)
    return dict(zip(res.names, res.cct.tolist(), strict=True))


class ProtocolOnly:
    """A policy seen only through the ``Policy`` protocol (``schedule()``), so the
    engine cannot build its flow table from arrays and must hand it objects."""

    def __init__(self, name: str) -> None:
        self._inner = get_policy(name)
        self.name = name

    def schedule(self, *args: Any, **kwargs: Any) -> Schedule:
        return self._inner.schedule(*args, **kwargs)


def test_one_flow_takes_size_over_port_speed() -> None:
    assert _cct(_trace(["a 0 1 0 1 1:3"]), "fair") == pytest.approx({"a": 3.0})


def test_a_port_to_itself_still_crosses_the_port() -> None:
    # two flows out of port 0, one of them to port 0 itself: they share up:0
    assert _cct(_trace(["a 0 1 0 2 0:1 1:1"]), "fair") == pytest.approx({"a": 2.0})


def test_fair_shares_and_varys_serves_the_smaller_coflow_first() -> None:
    tr = _trace(["a 0 1 0 1 2:1", "b 0 1 1 1 2:2"])  # both into port 2
    assert _cct(tr, "fair") == pytest.approx({"a": 2.0, "b": 3.0})
    assert _cct(tr, "varys") == pytest.approx({"a": 1.0, "b": 3.0})
    assert _cct(tr, "fifo") == pytest.approx({"a": 2.0, "b": 3.0})  # same arrival: shared
    tr = _trace(["a 0 1 0 1 2:2", "b 1 1 1 1 2:1"])  # b 1 ms later
    assert _cct(tr, "fifo") == pytest.approx({"a": 2.0, "b": 2.999})


def test_arrivals_are_respected() -> None:
    tr = _trace(["a 0 1 0 1 2:2", "b 1000 1 1 1 2:1"])
    # b arrives at 1 s, shares port 2 fairly: a has 1 MB left at 1/2 MB/s
    assert _cct(tr, "fair") == pytest.approx({"a": 3.0, "b": 2.0})
    # Varys at 1 s: both have 1 s of bottleneck left; the earlier arrival goes first
    assert _cct(tr, "varys") == pytest.approx({"a": 2.0, "b": 2.0})


def test_reducers_in_order_arrangement() -> None:
    fa = flow_arrays(_trace(["a 0 2 0 1 2 2:2 3:4"]))
    t_ref, off = arrangement(fa, "reducers-in-order", B)
    # reducer 0 gets 2 MB (2 s through one port), then reducer 1
    assert t_ref.tolist() == [2.0]
    assert off.tolist() == [0.0, 0.0, 2.0, 2.0]
    t_ref, off = arrangement(fa, "coflow", B)
    assert t_ref.tolist() == [0.0] and off.tolist() == [0.0] * 4


RANDOM_POLICIES = ["fair", "fifo", "varys", "sincronia", "echelon", "coflow", "srpt", "edf"]


def _random_trace(seed: int, ports: int = 6, n: int = 12) -> CoflowTrace:
    rng = np.random.default_rng(seed)
    lines = []
    t = 0.0
    for c in range(n):
        t += float(rng.exponential(400.0))
        m = rng.choice(ports, size=int(rng.integers(1, 4)), replace=False)
        r = rng.choice(ports, size=int(rng.integers(1, 4)), replace=False)
        reds = " ".join(f"{p}:{rng.integers(1, 9)}" for p in r)
        lines.append(f"c{c} {t:.0f} {len(m)} {' '.join(map(str, m))} {len(r)} {reds}")
    return _trace(lines, ports)


@pytest.mark.parametrize("policy", RANDOM_POLICIES)
@pytest.mark.parametrize("model", ["coflow", "reducers-in-order"])
def test_table_fast_path_equals_the_policy_protocol(policy: str, model: str) -> None:
    fa = flow_arrays(_random_trace(1))
    fast = simulate_coflows(fa, policy, B, model=model)
    slow = simulate_coflows(fa, ProtocolOnly(policy), B, model=model)
    assert fast.n_events == slow.n_events and fast.n_reranks == slow.n_reranks > 0
    np.testing.assert_array_equal(fast.finish, slow.finish)


@pytest.mark.parametrize("policy", ["echelon", "varys", "fifo"])
def test_levels_fast_path_equals_the_policy_protocol(policy: str) -> None:
    fa = flow_arrays(_random_trace(2))
    fast = simulate_coflows(fa, policy, B, levels=4, rerank="flow")
    slow = simulate_coflows(fa, ProtocolOnly(policy), B, levels=4, rerank="flow")
    assert fast.n_events == slow.n_events
    np.testing.assert_array_equal(fast.finish, slow.finish)


def test_k_queue_levels_run_through_the_quantiser() -> None:
    fa = flow_arrays(_random_trace(3))
    res = simulate_coflows(fa, "echelon", B, levels=8)
    assert np.all(np.isfinite(res.finish)) and np.all(res.cct > 0)
    # the total work is conserved: the last finish is no earlier than the bytes allow
    assert res.finish.max() >= fa.size.sum() / (B * fa.ports) - 1e-9


def _shared_pairs_trace(seed: int, ports: int = 4, n: int = 30) -> CoflowTrace:
    """Many coflows on few ports: most (mapper, reducer) pairs carry several flows
    in flight at once, so pair heads finish and hand over to their successors."""
    rng = np.random.default_rng(seed)
    lines = []
    t = 0.0
    for c in range(n):
        t += float(rng.exponential(150.0))
        m = rng.choice(ports, size=int(rng.integers(1, ports + 1)), replace=False)
        r = rng.choice(ports, size=int(rng.integers(1, ports + 1)), replace=False)
        reds = " ".join(f"{p}:{rng.integers(1, 9)}" for p in r)
        lines.append(f"c{c} {t:.0f} {len(m)} {' '.join(map(str, m))} {len(r)} {reds}")
    return _trace(lines, ports)


@pytest.mark.parametrize("policy", ["fifo", "edf", "srpt", "fair", "varys"])
@pytest.mark.parametrize("seed", [4, 5, 6])
def test_pair_heads_equal_the_general_allocator(policy: str, seed: int) -> None:
    """Distinct ranks take the pair-head kernels (fifo always; the others whenever the
    coflows in flight happen to have distinct ranks, e.g. one flow left); the finish
    times must be those of the general allocator bit for bit."""
    fa = flow_arrays(_shared_pairs_trace(seed))
    calls: list[int] = []
    heads = sim.core.heads.allocate_heads

    def counted(*args: Any) -> int:
        calls.append(1)
        return int(heads(*args))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sim.core.state, "allocate_heads", counted)
        fast = simulate_coflows(fa, policy, B)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sim.core.state, "_MAX_PAIRS", 0)  # no pair heads
        slow = simulate_coflows(fa, policy, B)
    assert fast.n_events == slow.n_events
    np.testing.assert_array_equal(fast.finish, slow.finish)
    if policy == "fifo":  # arrivals are distinct, so fifo's ranks are: the heads ran
        assert calls


def test_pair_heads_serve_the_first_flow_of_a_pair_then_its_successor() -> None:
    # two coflows on the same pair 0 -> 1, plus one on 2 -> 1 sharing the downlink.
    # FIFO: a (3 MB) first; b (2 MB, same pair, arriving 1 ms later) waits for a;
    # c (1 MB, 2 ms) waits on downlink 1 too. One downlink: a 0-3 s, b 3-5 s, c 5-6 s.
    tr = _trace(["a 0 1 0 1 1:3", "b 1 1 0 1 1:2", "c 2 1 2 1 1:1"])
    got = _cct(tr, "fifo")
    assert got == pytest.approx({"a": 3.0, "b": 5.0 - 0.001, "c": 6.0 - 0.002})

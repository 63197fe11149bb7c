"""The one-link brute force (echelon.oracle) and where the echelon policy stands against it
(played by the simulator's engine, sim.eval.headline.policy_cost)."""

from __future__ import annotations

import itertools
import random

import pytest

from echelon.errors import SpecError
from echelon.model import EchelonFlow, Flow
from echelon.oracle import Instance, MyopicOptimum, formation_delay, optimum, random_instance
from echelon.policies import get_policy
from sim.eval.headline import ORACLE_MAX_TARGET, policy_cost, ratios


def group(name: str, flows: list[tuple[int, float]], t_ref: float) -> EchelonFlow:
    fs = tuple(Flow(j, "a", "b", size, off) for j, (size, off) in enumerate(flows))
    return EchelonFlow(name, name, "g", fs, t_ref)


def inst(*groups: EchelonFlow, release: dict[str, float] | None = None) -> Instance:
    return Instance(groups, release or {g.name: 0.0 for g in groups})


def by_hand(instance: Instance) -> float:
    """Every non-preemptive order of whole flows from time 0 (all released at 0):
    enough for the optimum when nothing arrives later (no reason to preempt)."""
    pairs = instance.flows()
    best = float("inf")
    for perm in itertools.permutations(range(len(pairs))):
        clock, finish = 0.0, {}
        for i in perm:
            ef, f = pairs[i]
            clock += f.size
            finish[(ef.name, f.index)] = clock
        best = min(best, formation_delay(instance, finish))
    return best


#: Groups that must interleave: x's second flow is needed long after y's, so the
#: best schedule is x0, y, x1 -- no order of whole groups achieves it.
INTERLEAVE = [
    inst(group("x", [(1, 0.0), (1, 10.0)], 1.0), group("y", [(3, 0.0)], 4.0)),
    inst(
        group("x", [(2, 0.0), (2, 3.0), (2, 9.0)], 2.0),
        group("y", [(2, 0.0), (1, 5.0)], 4.0),
    ),
    inst(
        group("x", [(1, 0.0), (4, 12.0)], 1.0),
        group("y", [(2, 0.0)], 3.0),
        group("z", [(2, 0.0)], 5.0),
    ),
]


@pytest.mark.parametrize("case", INTERLEAVE)
def test_interleaving_cases_need_interleaving(case: Instance) -> None:
    best = optimum(case)
    assert best == pytest.approx(by_hand(case))
    whole = min(
        formation_delay(case, _serve_whole(case, order))
        for order in itertools.permutations(case.groups)
    )
    assert whole > best + 1e-9  # no order of whole groups is optimal
    assert policy_cost(case, get_policy("echelon")) == pytest.approx(best)
    assert policy_cost(case, get_policy("echelon-v1")) > best + 1e-9


def _serve_whole(case: Instance, order: tuple[EchelonFlow, ...]) -> dict[tuple[str, int], float]:
    clock, finish = 0.0, {}
    for ef in order:
        for f in ef.flows:
            clock += f.size
            finish[(ef.name, f.index)] = clock
    return finish


def test_optimum_with_releases_by_hand() -> None:
    """a (size 4, due 4) at 0; b (size 1, due 2) released at 1: preempt a for b.
    b done at 2, a at 5: a is 1 late."""
    case = inst(group("a", [(4, 0.0)], 4.0), group("b", [(1, 0.0)], 2.0), release={"a": 0, "b": 1})
    assert optimum(case) == pytest.approx(1.0)


def test_optimum_never_beaten() -> None:
    rng = random.Random(7)
    for _ in range(40):
        case = random_instance(rng, max_flows=6)
        best = optimum(case)
        for name in ("echelon", "echelon-v1", "fair", "edf", "fifo"):
            assert policy_cost(case, get_policy(name)) >= best - 1e-9


def test_too_large_refused() -> None:
    big = inst(group("a", [(1, float(j)) for j in range(9)], 0.0))
    with pytest.raises(SpecError) as info:
        optimum(big)
    assert info.value.field == "instance"


@pytest.mark.slow
def test_ratio_on_the_random_set() -> None:
    """The numbers docs/evaluation.md reports (300 instances, seed 0), kept from sliding. The
    single-flow moves (docs/model.md §5.1 step 7) close the size-class boundary class (without them,
    ``echelon-nomove``: 6 instances above 1.05, max 1.167); the starvation guard's sharing only
    where a lifted group contends closes the last two (lifted groups alone on the link, whose
    flows it shared: 1.119 and 1.103 before): echelon is at 1.0004 / 1.050, as without the guard.
    The grace is what closes most of the gap, echelon-v1 within 2 %, the myopic optimum within
    0.1 % (what an online policy could reach)."""
    r = ratios(get_policy("echelon"), 300, seed=0)
    assert min(r) >= 1.0
    assert sum(r) / len(r) <= 1.0005 and max(r) <= ORACLE_MAX_TARGET + 1e-9
    nomove = ratios(get_policy("echelon-nomove"), 300, seed=0)
    assert sum(nomove) / len(nomove) > sum(r) / len(r) and max(nomove) > 1.15
    noguard = ratios(get_policy("echelon-noguard"), 300, seed=0)
    assert min(noguard) >= 1.0 and max(noguard) <= 1.05 + 1e-9
    # on one link every pair of groups is nested: restricting the interchange to nested
    # pairs costs nothing there
    assert ratios(get_policy("echelon-swapany"), 300, seed=0) == r
    nograce = ratios(get_policy("echelon-nograce"), 300, seed=0)
    assert sum(nograce) / len(nograce) > 1.05  # the grace is what closes most of the gap
    v1 = ratios(get_policy("echelon-v1"), 300, seed=0)
    assert sum(v1) / len(v1) < 1.02
    myopic = ratios(MyopicOptimum(), 300, seed=0)
    assert sum(myopic) / len(myopic) < 1.001


def test_myopic_optimum_is_exact_without_arrivals_and_a_reference_with_them() -> None:
    """With every group released at 0 there is no future to be blind to: the myopic
    optimum reaches the optimum. With releases it can only lose to the optimum."""
    rng = random.Random(3)
    for _ in range(30):
        case = random_instance(rng, max_flows=6)
        offline = Instance(case.groups, {name: 0.0 for name in case.release})
        assert policy_cost(offline, MyopicOptimum()) == pytest.approx(optimum(offline), abs=1e-6)
        assert policy_cost(case, MyopicOptimum()) >= optimum(case) - 1e-9


def test_policies_are_told_finished_flows_are_done() -> None:
    """The engine passes finished flows as 0 bytes: a
    policy that saw them as unsent would count their bytes in a group's bottleneck."""
    seen: list[dict[tuple[str, int], int]] = []

    class Spy(MyopicOptimum):
        def schedule(self, echelons, network, remaining=None, now=0.0):  # type: ignore[no-untyped-def]
            seen.append(dict(remaining or {}))
            return super().schedule(echelons, network, remaining, now)

    two = inst(group("a", [(1, 0.0), (1, 1.0)], 0.0), group("b", [(1, 0.0)], 5.0),
               release={"a": 0.0, "b": 1.5})  # fmt: skip
    policy_cost(two, Spy())
    at_b = seen[1]  # asked again when b arrives at 1.5: a's first flow is done
    assert at_b[("a", 0)] == 0 and at_b[("a", 1)] > 0


def test_myopic_ties_do_not_depend_on_the_order_groups_come_in() -> None:
    """The engine lists groups in release order, a caller may list them otherwise:
    among equally good orders the myopic optimum picks the same one either way."""
    a, b = group("a", [(2, 0.0)], 2.0), group("b", [(2, 0.0)], 2.0)  # a tie: either first
    one = MyopicOptimum().schedule([a, b], None).flow_rank
    other = MyopicOptimum().schedule([b, a], None).flow_rank
    assert one == other == {("a", 0): 0, ("b", 0): 1}

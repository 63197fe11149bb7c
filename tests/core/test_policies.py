"""Policies on small instances whose right answer follows from the definitions."""

from __future__ import annotations

import pytest

from echelon.errors import SpecError
from echelon.model import EchelonFlow, Flow
from echelon.network import BigSwitch
from echelon.policies import POLICIES, get_policy
from echelon.policies.table import bottlenecks, build_table
from echelon.schedule import Policy

NET = BigSwitch.uniform(["h1", "h2", "h3", "h4"], 1.0)  # 1 byte/s: sizes are seconds


def ef(
    name: str,
    sizes: list[int],
    offs: list[float] | None = None,
    t_ref: float = 0.0,
    weight: float = 1.0,
    src: str = "h1",
    dst: str = "h2",
) -> EchelonFlow:
    offs = offs or [0.0] * len(sizes)
    flows = tuple(Flow(i, src, dst, s, o) for i, (s, o) in enumerate(zip(sizes, offs, strict=True)))
    return EchelonFlow(name, name, "g", flows, t_ref, weight)


def test_registry() -> None:
    assert set(POLICIES) >= {"echelon", "fair", "fifo", "srpt", "edf", "varys", "sincronia"}
    for name in POLICIES:
        pol = get_policy(name)
        assert isinstance(pol, Policy) and pol.name == name
    with pytest.raises(SpecError) as info:
        get_policy("lottery")
    assert info.value.field == "policy"


def test_effective_bottleneck_uses_slack() -> None:
    """Flows of 2 and 3 s on one link, the second needed 4 s later:
    Γ = max(2 - 0, 5 - 4) = 2, while the coflow view needs 5."""
    t = build_table([ef("a", [2, 3], [0.0, 4.0])], NET)
    p, gamma = bottlenecks(t)
    assert gamma.tolist() == [2.0]
    assert p.tolist() == [5.0]
    done = build_table([ef("a", [2, 3], [0.0, 4.0])], NET, remaining={("a", 0): 0, ("a", 1): 0})
    assert [x.tolist() for x in bottlenecks(done)] == [[0.0], [0.0]]


def test_echelon_v1_uses_the_slack_of_a_formation() -> None:
    """a: a 5-byte Coflow due now; b: 1 + 2 bytes, the second needed 8 s later,
    reference time 4. b's formation completes 1 s after it starts (Γ=1), so it can
    start as late as 3: keys a = 5, b = 3 + (4 - 1) = 6. Varys only sees b's 3
    bytes against a's 5 and serves b first."""
    a = ef("a", [5])
    b = ef("b", [1, 2], [0.0, 8.0], t_ref=4.0)
    sched = get_policy("echelon-v1").schedule([b, a], NET)
    assert sched.echelon_order == ("a", "b")
    assert get_policy("varys").schedule([b, a], NET).echelon_order == ("b", "a")
    # treating b as a Coflow (Γ = p = 3) it would go first too: key 3 + (4 - 3) = 4 < 5
    assert get_policy("coflow").schedule([b, a], NET).echelon_order == ("b", "a")
    # inside b: earliest ideal finish first; a's flows come before b's
    assert sched.flow_rank[("a", 0)] < sched.flow_rank[("b", 0)] < sched.flow_rank[("b", 1)]


def test_echelon_v1_defers_groups_with_future_deadlines() -> None:
    late_big = ef("big", [8], t_ref=0.0)
    early_small = ef("small", [1], t_ref=20.0)
    assert get_policy("echelon-v1").schedule(
        [early_small, late_big], NET, now=0.0
    ).echelon_order == (
        "big",
        "small",
    )
    assert get_policy("varys").schedule([early_small, late_big], NET).echelon_order == (
        "small",
        "big",
    )


def test_weights() -> None:
    heavy, light = ef("heavy", [2], weight=4.0), ef("light", [1])
    for name in ("varys", "sincronia", "echelon", "echelon-v1", "sebf-edf"):
        assert get_policy(name).schedule([light, heavy], NET).echelon_order == ("heavy", "light")


def test_sincronia_bottleneck_port() -> None:
    """BSSI by hand on three groups sharing two ports (loads in the comments)."""
    a = ef("a", [3], src="h1", dst="h2")
    b = ef("b", [1], src="h1", dst="h2")
    c = EchelonFlow("c", "c", "g", (Flow(0, "h3", "h2", 1, 0.0), Flow(1, "h3", "h4", 6, 0.0)))
    # loads: up:h1 4 (a3,b1); down:h2 5 (a3,b1,c1); up:h3 7 (c); down:h4 6 (c).
    # step 1: bottleneck up:h3, only c there -> c last. Then down:h2 4 (a3,b1) vs up:h1 4:
    # argmax takes the first listed link (up:h1); ratios a 1/3 < b 1/1 -> a last.
    order = get_policy("sincronia").schedule([a, b, c], NET).echelon_order
    assert order == ("b", "a", "c")


def test_per_flow_baselines() -> None:
    e1 = ef("e1", [5, 1], [0.0, 3.0], t_ref=2.0)
    e2 = ef("e2", [2], t_ref=1.0, src="h3", dst="h4")
    fifo = get_policy("fifo").schedule([e1, e2], NET).flow_rank
    assert fifo[("e2", 0)] < fifo[("e1", 0)] < fifo[("e1", 1)]
    edf = get_policy("edf").schedule([e1, e2], NET).flow_rank  # deadlines 2, 5, 1
    assert edf[("e2", 0)] < edf[("e1", 0)] < edf[("e1", 1)]
    srpt = get_policy("srpt").schedule([e1, e2], NET, remaining={("e1", 0): 1}).flow_rank
    assert srpt[("e1", 0)] == srpt[("e1", 1)] < srpt[("e2", 0)]
    fair = get_policy("fair").schedule([e1, e2], NET)
    assert set(fair.flow_rank.values()) == {0} and fair.echelon_order == ()


def test_duplicate_names_rejected() -> None:
    with pytest.raises(SpecError):
        get_policy("echelon").schedule([ef("a", [1]), ef("a", [2])], NET)


def test_empty_input() -> None:
    for name in POLICIES:
        sched = get_policy(name).schedule([], NET)
        assert sched.flow_rank == {} and sched.echelon_order == ()

"""Property tests: what theory says the policies and the quantiser must satisfy."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from echelon.constants import MAX_DEADLINE_US
from echelon.model import EchelonFlow, Flow, max_tardiness, offset_us
from echelon.network import BigSwitch
from echelon.policies import POLICIES, get_policy
from echelon.quantize import flow_levels, level_of, quantize, us_of

HOSTS = ["h1", "h2", "h3", "h4"]
NET = BigSwitch.uniform(HOSTS, 1.0)
FAST = settings(max_examples=60, deadline=None)

sizes = st.integers(min_value=1, max_value=50)
offs = st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=6)


@st.composite
def echelon(
    draw: st.DrawFn, name: str, coflow: bool = False, one_link: bool = False
) -> EchelonFlow:
    n = draw(st.integers(min_value=1, max_value=5))
    steps = (
        [0] * n
        if coflow
        else [0, *sorted(draw(st.lists(st.integers(0, 30), min_size=n - 1, max_size=n - 1)))]
    )
    flows = []
    for j in range(n):
        src, dst = (
            ("h1", "h2")
            if one_link
            else draw(st.sampled_from(list(itertools.permutations(HOSTS, 2))))
        )
        flows.append(Flow(j, src, dst, draw(sizes), float(steps[j])))
    t_ref = float(draw(st.integers(0, 20)))
    return EchelonFlow(name, name, "g", tuple(flows), t_ref)


@st.composite
def echelon_sets(
    draw: st.DrawFn, coflow: bool = False, one_link: bool = False
) -> list[EchelonFlow]:
    k = draw(st.integers(min_value=1, max_value=8))
    return [draw(echelon(f"e{i}", coflow, one_link)) for i in range(k)]


@FAST
@given(echelon_sets(coflow=True))
def test_coflow_special_case_matches_varys(efs: list[EchelonFlow]) -> None:
    """With A == 0 and every group already released (t_ref <= now), the effective
    bottleneck is Varys' bottleneck and echelon-v1's modified due date is Γ: same order."""
    now = 100.0
    ours = get_policy("echelon-v1").schedule(efs, NET, now=now)
    varys = get_policy("varys").schedule(efs, NET, now=now)
    coflow = get_policy("coflow").schedule(efs, NET, now=now)
    assert ours.echelon_order == varys.echelon_order == coflow.echelon_order


@FAST
@given(echelon_sets(coflow=True, one_link=True))
def test_single_link_sincronia_is_smith_rule(efs: list[EchelonFlow]) -> None:
    """On one bottleneck BSSI reduces to Smith's rule (shortest first with unit
    weights), i.e. SEBF; so Sincronia, Varys and echelon-v1 agree there."""
    totals = [e.total_bytes for e in efs]
    assume(len(set(totals)) == len(totals))
    orders = {
        get_policy(p).schedule(efs, NET, now=100.0).echelon_order
        for p in ("sincronia", "varys", "echelon-v1")
    }
    assert len(orders) == 1


def max_lateness(ef: EchelonFlow, order: tuple[int, ...]) -> float:
    """Serve flows one after another at capacity 1 from time 0; max (C_j - d_j)."""
    clock, worst = 0.0, float("-inf")
    for j in order:
        clock += ef.flows[j].size
        worst = max(worst, clock - ef.ideal_finish(j))
    return worst


@FAST
@given(st.lists(st.tuples(sizes, st.integers(0, 60)), min_size=1, max_size=6), st.integers(0, 30))
def test_edf_minimises_max_lateness_on_one_link(spec: list[tuple[int, int]], t_ref: int) -> None:
    """Jackson's rule: for one EchelonFlow on one link, serving in the policy's
    intra-group order (EDF on t_ref + A(j)) achieves the minimum max lateness
    over all permutations."""
    spec = sorted(spec, key=lambda x: x[1])
    base = spec[0][1]
    flows = tuple(Flow(j, "h1", "h2", s, float(o - base)) for j, (s, o) in enumerate(spec))
    ef = EchelonFlow("e", "e", "g", flows, float(t_ref))
    rank = get_policy("echelon").schedule([ef], NET).flow_rank
    ours = tuple(sorted(range(len(flows)), key=lambda j: (rank[("e", j)], j)))
    best = min(max_lateness(ef, p) for p in itertools.permutations(range(len(flows))))
    assert max_lateness(ef, ours) == best


@settings(max_examples=80, deadline=None)
@given(
    echelon_sets(),
    st.sampled_from(POLICIES),
    st.sets(st.integers(1, 7), min_size=1, max_size=7),
)
def test_quantisation_preserves_order(
    efs: list[EchelonFlow], policy: str, levels: set[int]
) -> None:
    sched = get_policy(policy).schedule(efs, NET)
    lv = flow_levels(sched, efs, sorted(levels))
    rank = sched.flow_rank
    keys = list(rank)
    assert set(lv) == set(keys)
    assert set(lv.values()) <= levels  # never best-effort, only the given levels
    for a in keys:
        for b in keys:
            if rank[a] < rank[b]:
                assert lv[a] >= lv[b], (a, b)
    if not sched.echelon_order:
        return
    # group schedules: flow_levels is exactly what the data plane does
    q = quantize(sched, efs, sorted(levels))
    for ef in efs:
        ranges = q[ef.name].ranges
        assert ranges[0].lo_us == 0 and ranges[-1].hi_us == MAX_DEADLINE_US
        for r1, r2 in itertools.pairwise(ranges):
            assert r2.lo_us == r1.hi_us + 1
            # bands: levels fall with the offset; interleaved: adjacent ranges differ
            assert (
                r1.priority > r2.priority if not sched.interleaved else r1.priority != r2.priority
            )
        for f in ef.flows:
            assert lv[ef.key(f)] == level_of(q[ef.name], f.offset_us)
    if not sched.interleaved:
        tops = [q[n].priority for n in sched.echelon_order]
        assert tops == sorted(tops, reverse=True)


@settings(max_examples=80, deadline=None)
@given(
    echelon_sets(),
    st.sampled_from(POLICIES),
    st.sets(st.integers(1, 7), min_size=1, max_size=7),
    st.lists(st.booleans(), min_size=40, max_size=40),
)
def test_flow_levels_are_the_data_planes_with_finished_flows(
    efs: list[EchelonFlow], policy: str, levels: set[int], finished: list[bool]
) -> None:
    """With some flows finished (``Schedule.live``), the simulator's per-flow levels
    (:func:`flow_levels`, computed over arrays) are still what the switch's deadline
    ranges give each flow's offset."""
    keys = [ef.key(f) for ef in efs for f in ef.flows]
    remaining = {k: 0 for k, done in zip(keys, finished, strict=False) if done}
    sched = get_policy(policy).schedule(efs, NET, remaining)
    lv = flow_levels(sched, efs, sorted(levels))
    assert list(lv) == keys and set(lv.values()) <= levels
    if not sched.echelon_order:
        return
    q = quantize(sched, efs, sorted(levels))
    for ef in efs:
        for f in ef.flows:
            assert lv[ef.key(f)] == level_of(q[ef.name], f.offset_us)


@FAST
@given(st.lists(st.floats(0.0, 5000.0) | st.integers(0, 10**7).map(lambda n: n / 2e6)))
def test_offsets_round_as_the_wire_does(offsets: list[float]) -> None:
    """``us_of`` (arrays) rounds offsets to whole µs exactly as ``offset_us`` (half to
    even, clamped to the field), halves of a µs included."""
    got = us_of(np.array(offsets, dtype=np.float64)).tolist()
    assert got == [min(offset_us(x), MAX_DEADLINE_US) for x in offsets]


def serve_groups(groups: list[EchelonFlow], order: tuple[str, ...]) -> float:
    """Total group tardiness ``Σ max(0, ECT)`` when groups hold one link (capacity 1)
    one after another from time 0, EDF inside each group."""
    by_name = {g.name: g for g in groups}
    clock, total = 0.0, 0.0
    for name in order:
        g = by_name[name]
        finish = {}
        for f in sorted(g.flows, key=lambda f: (f.offset, f.index)):
            clock += f.size
            finish[f.index] = clock
        total += max_tardiness(g, finish)
    return total


@FAST
@given(echelon("a", one_link=True), echelon("b", one_link=True))
def test_two_groups_mdd_is_optimal(a: EchelonFlow, b: EchelonFlow) -> None:
    """For two groups sharing a link, the modified due date rule is the adjacent
    pairwise-interchange test, so its order has the smaller total tardiness."""
    order = get_policy("echelon-v1").schedule([a, b], NET, now=0.0).echelon_order
    other = tuple(reversed(order))
    assert serve_groups([a, b], order) <= serve_groups([a, b], other) + 1e-9

"""The echelon policy (v2) and its job-tier variant: the documented keys, computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from echelon.model import EchelonFlow, Flow
from echelon.network import BigSwitch
from echelon.policies import ABLATIONS, get_policy
from echelon.policies.echelon import (
    LATENESS_GRACE,
    LATENESS_SHARE,
    LIFT_MEMORY,
    OVERDUE,
    OVERDUE_AGAIN,
    TIER_SHARE,
    EchelonPolicy,
    counted_lateness,
    job_tiers,
    job_work,
    lateness_grace,
    size_class,
)
from echelon.policies.table import build_table
from echelon.quantize import flow_levels, level_of, quantize

NET = BigSwitch.uniform(["h1", "h2", "h3", "h4"], 1.0)  # 1 byte/s: sizes are seconds


def ef(
    name: str,
    sizes: list[int],
    offs: list[float],
    t_ref: float,
    slack: list[float] | None = None,
    job: str | None = None,
    src: str = "h1",
    dst: str = "h2",
) -> EchelonFlow:
    sl = slack or [0.0] * len(sizes)
    flows = tuple(
        Flow(i, src, dst, s, o, x) for i, (s, o, x) in enumerate(zip(sizes, offs, sl, strict=True))
    )
    return EchelonFlow(name, job or name, "g", flows, t_ref)


def test_job_work_is_the_busiest_link_over_all_the_jobs_groups() -> None:
    """Job a: 3 s h1->h2 and 4 s h1->h3 (uplink h1: 7 s); job b: 5 s h3->h4."""
    a1 = ef("a/0/x", [3], [0.0], 0.0, job="a")
    a2 = ef("a/0/y", [4], [0.0], 0.0, job="a", dst="h3")
    b = ef("b/0/x", [5], [0.0], 0.0, job="b", src="h3", dst="h4")
    t = build_table([b, a1, a2], NET)
    assert job_work(t).tolist() == [7.0, 5.0]  # job ids in name order: a, b
    # half of a's bytes already sent: the busiest link is now b's
    t = build_table([b, a1, a2], NET, {("a/0/x", 0): 1, ("a/0/y", 0): 2})
    assert job_work(t).tolist() == [3.0, 5.0]


def test_tier_zero_is_the_smallest_jobs_up_to_the_documented_share() -> None:
    """Largest job 100: the smallest jobs go to tier 0 while their running sum stays
    at most 0.3 x 100 (10, then 10 + 15 = 25; + 20 = 45 is over)."""
    assert TIER_SHARE == 0.3
    assert job_tiers(np.array([20.0, 100.0, 10.0, 15.0, 60.0])).tolist() == [1, 1, 0, 0, 1]
    assert job_tiers(np.array([50.0])).tolist() == [1]  # one job: nothing to put ahead
    assert job_tiers(np.array([0.0, 8.0])).tolist() == [0, 1]  # a finished job costs nothing


def test_job_tier_small_job_goes_first_however_late_a_large_one_is() -> None:
    """``echelon-jobtier``: job big (50 s, due 100 s ago) and job small (1 s, due in
    1 s): small's work is 1/50 of big's, so small is tier 0 and goes first. With one
    class for all (``echelon-noclass``) the overdue group's rank is first (virtual
    deadline 0 vs 101); the single-flow move then puts small ahead, as that cuts
    the total formation delay from 200 (150 + 50) to 151."""
    big, small = ef("big", [50], [0.0], t_ref=0.0), ef("small", [1], [0.0], t_ref=101.0)
    tier = EchelonPolicy(tiers="job", grace=False, overdue=None)  # jobtier without the guard
    r = tier.schedule([big, small], NET, now=100.0).flow_rank
    assert r[("small", 0)] < r[("big", 0)]
    r = EchelonPolicy(tiers="none", moves=0).schedule([big, small], NET, now=100.0).flow_rank
    assert r[("big", 0)] < r[("small", 0)]
    r = get_policy("echelon-noclass").schedule([big, small], NET, now=100.0).flow_rank
    assert r[("small", 0)] < r[("big", 0)]


def test_large_jobs_share_one_tier_by_deadline() -> None:
    """Three jobs of comparable size (none under 0.3 of the largest): ``echelon-jobtier``
    puts them in one tier, ranked by latest finish across jobs, so each job's early flow
    passes the others' late ones. The size classes without the grace (keys 4 s, 6 s,
    7 s: one decade) agree here."""
    a = ef("a", [2, 2], [0.0, 6.0], t_ref=2.0)
    b = ef("b", [2, 3], [0.0, 6.0], t_ref=3.0)
    c = ef("c", [3, 3], [0.0, 6.0], t_ref=4.0)
    for name in ("echelon-nograce", "echelon-jobtier"):
        r = get_policy(name).schedule([a, b, c], NET).flow_rank
        firsts = [r[(n, 0)] for n in "abc"]
        lasts = [r[(n, 1)] for n in "abc"]
        assert firsts == sorted(firsts) and max(firsts) < min(lasts), name


def test_grace_keeps_peers_in_serial_order_with_interleaving() -> None:
    """The same three groups under the policy. Serially (key order a, b, c) they are
    0, 3 and 8 s late, all within the grace (3 x the class's median bottleneck, 5 s),
    so the lateness counts whole: virtual deadlines a 2, 8; b 6, 12; c 12, 18. On the
    interleaved layout those give (a0, b0, a1, c0 tie-broken by the earlier latest
    finish, b1, c1) c is only 5 s late: c 9, 15. a's late flow goes before c's early
    one (peers one after another, which is what minimises their summed delay); only
    flows with time to spare yield."""
    a = ef("a", [2, 2], [0.0, 6.0], t_ref=2.0)
    b = ef("b", [2, 3], [0.0, 6.0], t_ref=3.0)
    c = ef("c", [3, 3], [0.0, 6.0], t_ref=4.0)
    assert LATENESS_GRACE * 5.0 > 8.0  # the case is about lateness inside the grace
    r = get_policy("echelon").schedule([a, b, c], NET).flow_rank
    order = sorted(r, key=r.__getitem__)
    assert order == [("a", 0), ("b", 0), ("a", 1), ("c", 0), ("b", 1), ("c", 1)]
    assert len(set(r.values())) == 6


def test_lateness_beyond_the_grace_counts_by_the_share() -> None:
    """``counted_lateness``: whole up to the grace, β of the rest; the grace is the
    documented multiple of the median bottleneck of the class's live groups."""
    late = np.array([0.0, 2.0, 10.0, 30.0])
    assert counted_lateness(late, np.full(4, 10.0), 0.25).tolist() == [0.0, 2.0, 10.0, 15.0]
    p = np.array([1.0, 2.0, 9.0, 100.0, 7.0])
    cls = np.array([3, 3, 3, 5, 3])
    alive = np.array([True, True, True, True, False])  # the dead group's p is ignored
    g = lateness_grace(p, cls, alive)
    assert g.tolist() == [LATENESS_GRACE * 2.0] * 3 + [LATENESS_GRACE * 100.0, LATENESS_GRACE * 2.0]


def test_size_classes_are_decades_of_the_key() -> None:
    keys = [0.0, 0.0009, 0.001, 0.0099, 0.01, 0.5, 2.0, 9.99, 10.0, 1e5]
    assert size_class(np.array(keys)).tolist() == [0, 0, 0, 0, 1, 2, 3, 3, 4, 8]


def test_overdue_peer_goes_first_where_v1_starves_it() -> None:
    """Where aging matters. now = 100. x: 5 s of bytes, due at 0 (100 s overdue);
    y: 2 s of bytes, due at 103. Keys (v1's modified due date): x 5, y 2 + (103-2-100) = 3:
    one class (1 s..10 s), serial order y, x. Serially y ends at 102 (on time), x at 107,
    107 s late. The grace is 3 x the class's median bottleneck (3.5 s): x's virtual
    deadline is 0 + 10.5 + β·96.5 ≈ 34.6, y's 103 + 0: x first. v1 serves y first.
    (The single-flow move, judged on total formation delay alone, puts y first: 107 against
    109; the ranks checked here are those of steps 1-6.)"""
    x, y = ef("x", [5], [0.0], t_ref=0.0), ef("y", [2], [0.0], t_ref=103.0)
    rem = {("x", 0): 5, ("y", 0): 2}
    moved = get_policy("echelon").schedule([x, y], NET, rem, now=100.0)
    assert moved.flow_rank[("y", 0)] < moved.flow_rank[("x", 0)]
    ours = EchelonPolicy(moves=0).schedule([x, y], NET, rem, now=100.0)
    assert LATENESS_GRACE * 3.5 + LATENESS_SHARE * (107 - LATENESS_GRACE * 3.5) < 103
    assert ours.flow_rank[("x", 0)] < ours.flow_rank[("y", 0)]
    assert ours.echelon_order == ("y", "x")  # the serial (key) order is still y, x
    v1 = get_policy("echelon-v1").schedule([x, y], NET, rem, now=100.0)
    assert v1.flow_rank[("y", 0)] < v1.flow_rank[("x", 0)]
    # with the whole serial lateness (β = 1) y goes first: x is seen for the first time,
    # so the starvation guard has not watched it starve yet
    serial = get_policy("echelon-serial")
    assert serial.schedule([x, y], NET, rem, now=100.0).flow_rank[("y", 0)] == 0
    # x was seen at 100 and alone would have finished at 105: its reference is
    # 105 + 5 = 110; once it is more than its bottleneck time (5 s) past that and still
    # has bytes left, the guard puts it first
    y2 = ef("y2", [2], [0.0], t_ref=117.0)  # key 3 at 114, 2 at 116: ahead of x (5)
    rem2 = {("x", 0): 5, ("y2", 0): 2}
    r = serial.schedule([x, y2], NET, rem2, now=114.0).flow_rank
    assert r[("y2", 0)] < r[("x", 0)]
    r = serial.schedule([x, y2], NET, rem2, now=116.0).flow_rank
    assert r[("x", 0)] < r[("y2", 0)]
    # without the guard it waits again
    r = EchelonPolicy(share=1.0, overdue=None).schedule([x, y2], NET, rem2, now=116.0).flow_rank
    assert r[("y2", 0)] < r[("x", 0)]


def test_classes_keep_small_groups_first_until_the_starvation_guard() -> None:
    """A 50 s group (key 50: class 4) does not pass 1 s ones (key 1: class 3):
    different decades. It was first seen at 0 (its reference: alone it would have
    finished at 50, so 50 + 50 = 100); once it is overdue by more than its own
    bottleneck time past that (:data:`OVERDUE` = 1 x 50 s) it leaves its class and goes
    on top; without the guard (``echelon-noguard``, the policy before it) it would wait
    for as long as small groups keep coming."""
    big = ef("big", [50], [0.0], t_ref=0.0)
    ours, noguard = get_policy("echelon"), get_policy("echelon-noguard")
    ours.schedule([big], NET, now=0.0)
    for now, big_first in ((140.0, False), (160.0, True)):
        small = ef(f"small{now:g}", [1], [0.0], t_ref=now + 1.0)
        r = ours.schedule([big, small], NET, now=now).flow_rank
        assert (r[("big", 0)] < r[(small.name, 0)]) == big_first, now
        r = noguard.schedule([big, small], NET, now=now).flow_rank
        assert r[(small.name, 0)] < r[("big", 0)]
    assert OVERDUE == 1.0


def test_a_job_lifted_once_is_lifted_at_the_tighter_bound_for_a_while() -> None:
    """Job b's 50 s groups beside a stream of 1 s groups of job s (a higher class). b/1,
    first seen at 0 (reference 50 + 50 = 100), is lifted only past 100 + 1 x 50 = 150. b/2,
    first seen at 200 (reference 300), is then lifted past 300 + 1/2 x 50 = 325: the guard
    lifted b at 160, within :data:`LIFT_MEMORY` x 50 s. A policy that did not watch b/1
    starve waits until 350. Once the last lift is more than that window ago, the loose
    bound is back (b/3, reference 1100: not lifted at 1130)."""
    ours, fresh = get_policy("echelon"), get_policy("echelon")

    def big_first(p: EchelonPolicy, big: EchelonFlow, now: float) -> bool:
        small = ef(f"s/{now:g}", [1], [0.0], t_ref=now + 1.0, job="s")
        r = p.schedule([big, small], NET, now=now).flow_rank
        return bool(r[(big.name, 0)] < r[(small.name, 0)])

    b1 = ef("b/1", [50], [0.0], t_ref=0.0, job="b")
    ours.schedule([b1], NET, now=0.0)
    assert not big_first(ours, b1, 140.0) and big_first(ours, b1, 160.0)
    b2 = ef("b/2", [50], [0.0], t_ref=200.0, job="b")
    for p in (ours, fresh):
        p.schedule([b2], NET, now=200.0)
    assert OVERDUE_AGAIN * 50 < 30 < OVERDUE * 50 and LIFT_MEMORY * 50 > 330 - 160
    assert big_first(ours, b2, 330.0)
    assert not big_first(fresh, b2, 330.0)
    b3 = ef("b/3", [50], [0.0], t_ref=1000.0, job="b")
    ours.schedule([b3], NET, now=1000.0)
    assert LIFT_MEMORY * 50 < 1130 - 330
    assert not big_first(ours, b3, 1130.0)


def test_a_job_held_by_its_own_traffic_is_not_lifted() -> None:
    """Job f: two 100 s groups needed at 0 (the infinite-bandwidth timeline), on one
    link, so b queues behind a with nobody else in its way; job s: a 1 s group. At 150,
    a done and b half sent, b is 150 s past its latest finish -- three of its bottleneck
    times -- but its own pace (seen at 0: alone it finishes at 200, reference 400) says
    it is not starved: the small group keeps its class's place ahead of it. Measured
    from the latest finish (the guard before) b would go on top."""
    a = ef("f/a", [100], [0.0], t_ref=0.0, job="f")
    b = ef("f/b", [100], [0.0], t_ref=0.0, job="f")
    ours = get_policy("echelon")
    assert ours.schedule([a, b], NET, now=0.0).flow_rank[("f/a", 0)] == 0
    s = ef("s/x", [1], [0.0], t_ref=151.0, job="s")
    rem = {("f/a", 0): 0, ("f/b", 0): 50, ("s/x", 0): 1}
    r = ours.schedule([a, b, s], NET, rem, now=150.0).flow_rank
    assert r[("s/x", 0)] < r[("f/b", 0)]
    # still there at 460 (more than 50 s, its bottleneck time, past 400) behind a new
    # small group: starved, on top
    s2 = ef("s/y", [1], [0.0], t_ref=461.0, job="s")
    r = ours.schedule([a, b, s2], NET, {**rem, ("s/y", 0): 1}, now=460.0).flow_rank
    assert r[("f/b", 0)] < r[("s/y", 0)]


def test_a_lifted_group_alone_on_its_links_keeps_its_own_order() -> None:
    """Job e: one echelon of three 20 s flows due 0, 10, 20 after t_ref 0, seen at 0
    (own-pace reference of its first flow 20 + 20 = 40; bottleneck 60 s), still unsent at
    150: overdue by more than 60 s. Beside a small group on its link it is lifted: its
    flows share one rank above the small one. Alone on its link the lifting orders it
    against nobody; its flows keep their order (first-due first), which is what the
    one-link optimum does (sharing them made the first-due flow finish last of the three
    but together with them)."""
    e = ef("e/x", [20, 20, 20], [0.0, 10.0, 20.0], t_ref=0.0, job="e")
    ours = get_policy("echelon")
    ours.schedule([e], NET, now=0.0)
    small = ef("s/x", [1], [0.0], t_ref=151.0, job="s")
    r = ours.schedule([e, small], NET, now=150.0).flow_rank
    assert r[("e/x", 0)] == r[("e/x", 1)] == r[("e/x", 2)] < r[("s/x", 0)]
    r = ours.schedule([e], NET, now=150.0).flow_rank
    assert r[("e/x", 0)] < r[("e/x", 1)] < r[("e/x", 2)]
    # a group on another link is no competitor
    apart = ef("s/y", [1], [0.0], t_ref=151.0, job="s", src="h3", dst="h4")
    r = ours.schedule([e, apart], NET, now=150.0).flow_rank
    assert r[("e/x", 0)] < r[("e/x", 1)] < r[("e/x", 2)]


def test_slack_lets_a_transfer_wait() -> None:
    """Same size and ideal finish; a has 5 s of slack, b none: b first. Without
    slack (the ablation) the tie goes by name: a first, b virtually 1/4 s late."""
    a = ef("a", [2], [0.0], t_ref=3.0, slack=[5.0])
    b = ef("b", [2], [0.0], t_ref=3.0)
    r = get_policy("echelon").schedule([a, b], NET).flow_rank
    assert r[("b", 0)] < r[("a", 0)]
    r0 = get_policy("echelon-noslack").schedule([a, b], NET).flow_rank
    assert r0[("a", 0)] < r0[("b", 0)]


def test_interleaved_levels_are_what_the_switch_does() -> None:
    """x's second flow ranks below y's flow: x's deadline ranges go 2 levels, down
    and the data plane's level_of agrees with the simulator's flow_levels."""
    x = ef("x", [1, 1], [0.0, 10.0], t_ref=1.0)
    y = ef("y", [3], [0.0], t_ref=4.0)
    sched = get_policy("echelon").schedule([x, y], NET)
    assert sched.interleaved
    r = sched.flow_rank
    assert r[("x", 0)] < r[("y", 0)] < r[("x", 1)]
    lv = flow_levels(sched, [x, y], [1, 2, 3])
    assert (lv[("x", 0)], lv[("y", 0)], lv[("x", 1)]) == (3, 2, 1)
    q = quantize(sched, [x, y], [1, 2, 3])
    assert [(rg.lo_us, rg.priority) for rg in q["x"].ranges] == [(0, 3), (10_000_000, 1)]
    for e in (x, y):
        for f in e.flows:
            assert level_of(q[e.name], f.offset_us) == lv[(e.name, f.index)]


@pytest.mark.parametrize("name", sorted(ABLATIONS))
def test_ablations_are_named_policies(name: str) -> None:
    pol = get_policy(name)
    assert pol.name == name
    x = ef("x", [1, 1], [0.0, 10.0], t_ref=1.0)
    assert set(pol.schedule([x], NET).flow_rank) == {("x", 0), ("x", 1)}

"""The starvation guard's own-pace reference (echelon/policies/pace.py), by hand."""

from __future__ import annotations

import numpy as np

from echelon.model import EchelonFlow, Flow
from echelon.network import BigSwitch
from echelon.policies.pace import OwnPace, own_pace_finish
from echelon.policies.table import build_table

NET = BigSwitch.uniform(["h1", "h2", "h3"], 1.0)  # 1 byte/s: sizes are seconds


def ef(name: str, job: str, sizes: list[int], t_ref: float, dst: str = "h2") -> EchelonFlow:
    flows = tuple(Flow(i, "h1", dst, s, 0.0, 0.0) for i, s in enumerate(sizes))
    return EchelonFlow(name, job, "g", flows, t_ref)


def test_each_job_is_laid_out_alone_by_latest_finish() -> None:
    """Job a: 3 s due at 5 and 4 s due at 1 on h1 -> h2; job b: 10 s on the same link.
    Alone, a's second group (due first) ends at 4, its first at 7; b's ends at 10, as if a
    were not there. A finished flow ends now."""
    a1, a2 = ef("a/1", "a", [3], 5.0), ef("a/2", "a", [4], 1.0)
    b = ef("b/1", "b", [10], 0.0)
    t = build_table([a1, a2, b], NET, {("a/1", 0): 3, ("a/2", 0): 4, ("b/1", 0): 10})
    got = dict(zip(t.keys, own_pace_finish(t, t.latest, 0.0).tolist(), strict=True))
    assert got == {("a/1", 0): 7.0, ("a/2", 0): 4.0, ("b/1", 0): 10.0}
    t = build_table([a1, a2, b], NET, {("a/1", 0): 3, ("a/2", 0): 0, ("b/1", 0): 10})
    got = dict(zip(t.keys, own_pace_finish(t, t.latest, 2.0).tolist(), strict=True))
    assert got == {("a/1", 0): 5.0, ("a/2", 0): 2.0, ("b/1", 0): 12.0}


def test_the_reference_is_fixed_when_a_flow_is_first_seen() -> None:
    """x: 4 s due at 0, seen at 10: alone it ends at 14, reference 14 + 4 = 18. Later
    calls keep 18 whatever x's bytes; a flow first seen later gets its own; a flow with
    the latest finish after its own-pace finish keeps the latest finish plus its pace."""
    pace = OwnPace()
    x = ef("x", "x", [4], 0.0)
    t = build_table([x], NET)
    assert pace.reference(t, t.latest, 10.0).tolist() == [18.0]
    t = build_table([x], NET, {("x", 0): 1})
    assert pace.reference(t, t.latest, 30.0).tolist() == [18.0]
    y = ef("y", "y", [2], 100.0, dst="h3")
    t = build_table([x, y], NET, {("x", 0): 1})
    ref = dict(zip(t.keys, pace.reference(t, t.latest, 40.0).tolist(), strict=True))
    assert ref == {("x", 0): 18.0, ("y", 0): 100.0 + 2.0}


def test_a_new_run_forgets() -> None:
    """An earlier ``now`` is a new run; so is the same name with another latest finish;
    a flow that left the table is forgotten."""
    pace, x = OwnPace(), ef("x", "x", [4], 0.0)
    t = build_table([x], NET)
    assert pace.reference(t, t.latest, 10.0).tolist() == [18.0]
    assert pace.reference(t, t.latest, 5.0).tolist() == [13.0]  # new run: seen at 5
    moved = ef("x", "x", [4], 1.0)
    tm = build_table([moved], NET)
    assert pace.reference(tm, tm.latest, 6.0).tolist() == [14.0]  # max(1, 10) + 4
    y = ef("y", "y", [1], 0.0)
    ty = build_table([y], NET)
    pace.reference(ty, ty.latest, 7.0)
    assert np.array_equal(pace.reference(t, t.latest, 8.0), [16.0])  # x seen anew at 8


def test_the_bound_is_tighter_for_a_job_lifted_within_the_window() -> None:
    """Bound per echelon: ``again`` for a job lifted less than ``window`` of the group's
    bottleneck times ago, ``loose`` otherwise; a new run forgets the lifts."""
    pace = OwnPace()
    a, b = ef("a/1", "a", [4], 0.0), ef("b/1", "b", [2], 0.0, dst="h3")
    t = build_table([a, b], NET)
    p = np.array([4.0, 2.0])
    pace.reference(t, t.latest, 10.0)
    assert pace.limits(t, p, 10.0, 1.0, 0.5, 10.0).tolist() == [1.0, 1.0]
    pace.lift(t, np.array([0, 1]), 10.0)  # b's one flow: b/1 lifted
    assert pace.limits(t, p, 29.0, 1.0, 0.5, 10.0).tolist() == [1.0, 0.5]
    assert pace.limits(t, p, 31.0, 1.0, 0.5, 10.0).tolist() == [1.0, 1.0]  # 21 > 10 x 2
    pace.reference(t, t.latest, 5.0)  # earlier: a new run
    assert pace.limits(t, p, 6.0, 1.0, 0.5, 10.0).tolist() == [1.0, 1.0]

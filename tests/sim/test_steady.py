"""Steady state (sim.eval.steady): the window rules, the stop time, and the two
properties the echelon policy must keep there: no starvation in the network-bound
regime, and compatible jobs interleaved at their contention-free speed."""

from __future__ import annotations

import json

import pytest

from echelon.jobs import load_job
from echelon.network import BigSwitch
from sim.core.engine import JobRun, SimConfig, Simulator
from sim.core.results import IterationRecord
from sim.eval import interleave, steady
from sim.eval.experiments import NETWORK, REPLAN_INTERVAL_S
from sim.points import Point, load_inputs, point_jobs
from sim.topology import hosts_of


def test_a_job_iterating_every_second_has_a_one_second_steady_time() -> None:
    assert steady.per_job_time([float(e) for e in range(1, 21)], 5.0, 20.0) == (1.0, 16)


def test_an_iteration_still_open_at_the_stop_counts_as_at_least_its_age() -> None:
    # two quick iterations in the window, then nothing for 30 s: starved, not fast
    t, n = steady.per_job_time([10.0, 11.0, 12.0], 5.0, 42.0)
    assert (t, n) == (30.0, 3)


def test_window_opens_at_a_quarter_unless_a_job_is_still_warming_up() -> None:
    assert steady.window_start({"a": [1.0, 2.0], "b": [1.0, 3.0]}, 40.0) == 10.0
    assert steady.window_start({"a": [1.0, 2.0], "b": [15.0, 16.0]}, 40.0) == 16.0
    assert steady.window_start({"a": [1.0, 2.0], "b": [30.0]}, 40.0) == 20.0


def test_measure_reports_the_worst_job_and_jain() -> None:
    iterations = [IterationRecord("a", k, float(k), float(k + 1)) for k in range(40)]  # 1 s
    iterations += [IterationRecord("b", k, 4.0 * k, 4.0 * (k + 1)) for k in range(10)]  # 4 s
    m = steady.measure_iterations(iterations, {"a": 1.0, "b": 2.0}, 40.0)
    assert m["jobs"]["a"]["steady_s"] == pytest.approx(1.0)
    assert m["jobs"]["b"]["steady_s"] == pytest.approx(4.0)
    assert m["worst_slowdown"] == pytest.approx(2.0)
    assert m["steady_mean"] == pytest.approx(2.5)
    # rates 1 and 0.5: (1.5)^2 / (2 * 1.25)
    assert m["jain"] == pytest.approx(0.9)
    assert m["censored"] == 0 and m["half_gap"] == pytest.approx(0.0)


def test_until_stops_a_run_of_endless_jobs() -> None:
    run = load_job(interleave.job("a", "h1", 1.0, 0.5))
    net = BigSwitch.uniform(interleave.HOSTS, interleave.CAP)
    res = Simulator(net, [JobRun(run, 0.0, steady.FOREVER)], SimConfig(until=10.0)).run()
    assert res.end_time == 10.0
    assert 5 <= len(res.iterations) <= 10
    assert all(r.end <= 10.0 for r in res.iterations)


def test_cached_plans_are_the_plans_the_job_builds() -> None:
    """A steady run's jobs reuse each iteration's plan moved in time (CachedPlans):
    equal to what the job builds at that start, echelons in the same order, also at
    starts where float rounding ties two groups' ``t_ref``."""
    (point,) = steady.points([0], ["fair"], ["hybrid"], [25.0])
    net, jobs = point_jobs(point, load_inputs(point))
    for job in jobs[:3]:
        spec = job.to_run(hosts_of(net)).spec
        steady._PLANS.clear()
        cached = steady.CachedPlans(spec, repr(spec.to_dict()))
        for i, t0 in ((0, 0.0), (1, 0.37), (2, 1e9 + 0.1), (1, 12.345678901234)):
            assert cached.plan(i, t0) == spec.plan(i, t0)
        assert steady._PLANS[repr(spec.to_dict())].keys() == {0, 1, 2}


@pytest.mark.slow
def test_echelon_does_not_starve_a_job_in_the_network_bound_regime() -> None:
    """Four hybrid jobs at 10 Gbit/s (seed 3): under the size-class policy without a
    starvation guard the largest job's iterations took 2.6x as long as under fair
    sharing (worst slowdown 5.0 against 1.9)."""
    net = json.dumps({**NETWORK, "gbit": 10.0})
    worst = {}
    for pol in ("echelon", "fair"):
        point = Point("hybrid", pol, 8, None, 3, 4, steady.FOREVER, net,
                      replan_interval=REPLAN_INTERVAL_S)  # fmt: skip
        worst[pol] = steady.run_steady(point, horizon=10.0)["worst_slowdown"]
    assert worst["echelon"] <= 1.05 * worst["fair"], worst


def test_compatible_jobs_interleave_under_echelon_but_not_under_fair_sharing() -> None:
    scenario = next(s for s in interleave.SCENARIOS if s.key == "compatible-2")
    ours = interleave.run(scenario, "echelon", horizon=10.0)
    fair = interleave.run(scenario, "fair", horizon=10.0)
    assert interleave.worst_ratio(ours) <= 1.10, ours["jobs"]
    assert interleave.worst_ratio(fair) > 1.2, fair["jobs"]

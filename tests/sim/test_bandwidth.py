"""The bandwidth sweep runs the requested host-link speeds and nothing else."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from sim.eval import bandwidth
from sim.eval.experiments import NETWORK, POLICIES, PROFILES, SWEEP_GBIT, network_at
from sim.points import run_point


def test_sweep_points_cover_requested_bandwidths_once() -> None:
    prof = PROFILES["full"]
    pts = bandwidth.points(prof)
    nets = [json.loads(p.network) for p in pts]
    wanted = {g for g in prof.bandwidths if g != NETWORK["gbit"]}
    assert {n["gbit"] for n in nets} == wanted
    # only the host links change: same topology and oversubscription as the main grid
    assert all({**n, "gbit": NETWORK["gbit"]} == NETWORK for n in nets)
    assert {p.mix for p in pts} == set(bandwidth.MIXES)
    assert {p.levels for p in pts} == {None, 8} and all(p.load is None for p in pts)
    per_cell = len(bandwidth.MIXES) * len(POLICIES) * 2 * len(prof.seeds)
    assert len(pts) == per_cell * len(wanted)
    assert set(SWEEP_GBIT) <= set(bandwidth.SOURCES)  # every swept speed has a source


@pytest.mark.slow
def test_slower_links_do_not_speed_up_a_run() -> None:
    """Tagging reads the bandwidth back, and a 10x slower network is not faster."""
    slow_pt = next(p for p in bandwidth.points(PROFILES["tiny"]) if p.policy == "fair")
    fast_pt = replace(slow_pt, network=json.dumps(network_at(100)))
    slow, fast = bandwidth.tag([run_point(slow_pt), run_point(fast_pt)])
    assert (slow["gbit"], fast["gbit"]) == (10.0, 100.0)
    assert slow["iter_mean"] >= fast["iter_mean"] * (1 - 1e-9)
    assert slow["slowdown_mean"] > fast["slowdown_mean"]

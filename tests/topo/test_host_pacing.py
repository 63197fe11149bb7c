"""Each host is paced at the demo's rate or its own link's, whichever is lower."""

from __future__ import annotations

from pathlib import Path

from echelon.topology import load
from topo.demo import host_pacing

ROOT = Path(__file__).resolve().parents[2]


def test_a_host_behind_a_slower_link_is_paced_at_that_link() -> None:
    topo = load(ROOT / "topo" / "star.yaml")
    rates = host_pacing(topo, 40.0)
    assert rates == {"h1": 40.0, "h2": 40.0, "h3": 40.0, "h4": 10.0}


def test_a_rate_below_every_link_paces_every_host_at_it() -> None:
    topo = load(ROOT / "topo" / "star.yaml")
    assert set(host_pacing(topo, 8.0).values()) == {8.0}


def test_a_host_with_a_faster_uplink_is_paced_at_its_uplink() -> None:
    topo = load(ROOT / "topo" / "interleave-uplink.yaml")
    assert host_pacing(topo, 40.0) == {"h0": 27.0, "h1": 9.0, "h2": 9.0, "h3": 9.0}
    assert host_pacing(topo, 12.0)["h0"] == 12.0

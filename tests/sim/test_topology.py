"""Leaf-spine, fat-tree and topology-file networks: capacities and paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from echelon.errors import SpecError
from echelon.topology import TopologyNetwork
from sim.topology import FatTree, LeafSpine, hosts_of, make_network

ROOT = Path(__file__).resolve().parents[2]


def test_leafspine_capacity_and_paths() -> None:
    ls = LeafSpine(
        leaves=3, hosts_per_leaf=4, spines=2, host_bytes_per_s=100.0, oversubscription=2.0
    )
    assert len(ls.hosts) == 12
    assert ls.links["l0>s1"] == pytest.approx(4 * 100.0 / (2 * 2.0))
    assert ls.path("h0", "h3") == ("up:h0", "down:h3")  # same leaf
    p = ls.path("h0", "h11")
    assert len(p) == 4 and p[0] == "up:h0" and p[-1] == "down:h11"
    assert p[1].startswith("l0>") and p[2].endswith(">l2")
    assert all(link in ls.links for link in p)
    assert ls.path("h5", "h5") == ()


def test_fattree_k4() -> None:
    ft = FatTree(k=4, host_bytes_per_s=10.0)
    assert len(ft.hosts) == 16
    assert len(ft.path("h0", "h1")) == 2  # same edge switch
    assert len(ft.path("h0", "h2")) == 4  # same pod
    far = ft.path("h0", "h15")
    assert len(far) == 6 and all(link in ft.links for link in far)
    with pytest.raises(SpecError):
        FatTree(k=3)


def test_topology_file_network() -> None:
    net = make_network({"kind": "file", "path": str(ROOT / "topo" / "star.yaml")})
    assert isinstance(net, TopologyNetwork)
    assert net.path("h1", "h4") == ("h1>s1", "s1>h4")
    assert net.links["s1>h4"] == pytest.approx(10e6 / 8)
    assert net.links["h1>s1"] == pytest.approx(100e6 / 8)
    assert hosts_of(net) == ["h1", "h2", "h3", "h4"]
    with pytest.raises(SpecError):
        net.path("h1", "nope")


def test_make_network_errors() -> None:
    with pytest.raises(SpecError) as err:
        make_network({"kind": "torus"})
    assert err.value.field == "network.kind"
    with pytest.raises(SpecError):
        make_network({"kind": "leafspine", "leaves": 0})
    assert len(hosts_of(make_network({"kind": "bigswitch", "hosts": 5}))) == 5

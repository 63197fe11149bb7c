"""Topology files: validation names the bad field; routes follow shortest paths."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from echelon.errors import SpecError
from echelon.topology import TopologyNetwork, load, parse

ROOT = Path(__file__).resolve().parents[2]

BASE: dict[str, Any] = {
    "name": "t",
    "switches": {"s1": {"grpc": "127.0.0.1:50001"}, "s2": {"grpc": "127.0.0.1:50002"}},
    "hosts": {
        "h1": {"ip": "10.0.0.1", "mac": "00:00:00:00:00:01"},
        "h2": {"ip": "10.0.0.2", "mac": "00:00:00:00:00:02"},
    },
    "links": [
        {"a": "h1", "b": "s1", "b_port": 1},
        {"a": "s1", "a_port": 2, "b": "s2", "b_port": 1, "bw_mbit": 10},
        {"a": "h2", "b": "s2", "b_port": 2},
    ],
}


def test_shipped_topologies_load_and_route_every_host() -> None:
    for name in ("star", "leafspine"):
        topo = load(ROOT / "topo" / f"{name}.yaml")
        for sw in topo.switches:
            assert {r.host for r in topo.routes(sw)} == set(topo.hosts)


def test_routes_use_the_next_switch_then_the_host_mac() -> None:
    topo = parse(copy.deepcopy(BASE))
    r1 = {r.host: r for r in topo.routes("s1")}
    r2 = {r.host: r for r in topo.routes("s2")}
    assert (r1["h1"].port, r1["h1"].next_hop_mac) == (1, "00:00:00:00:00:01")
    assert r1["h2"].port == 2 and r1["h2"].next_hop_mac != "00:00:00:00:00:02"
    assert (r2["h2"].port, r2["h2"].next_hop_mac) == (2, "00:00:00:00:00:02")
    assert r1["h2"].prefix == "10.0.0.2/32"
    assert topo.path("h1", "h2") == ["h1", "s1", "s2", "h2"]


def test_switch_path_is_the_walk_along_the_installed_routes() -> None:
    """The switches a packet crosses, found independently: leave ``src`` on its link,
    then at every switch take the port its ``ipv4_lpm`` route for ``dst`` names."""
    topo = load(ROOT / "topo" / "leafspine.yaml")
    assert topo.switch_path("h1", "h3") == ("leaf1", "spine1", "leaf2")
    assert topo.switch_path("h4", "h2") == ("leaf2", "spine1", "leaf1")
    assert topo.switch_path("h1", "h2") == ("leaf1",)
    assert topo.switch_path("h1", "h1") == ()
    for src in topo.hosts:
        for dst in topo.hosts:
            if src == dst:
                continue
            walk, node = [], topo.neighbours(src)[0][1]
            while node != dst:
                walk.append(node)
                port = next(r.port for r in topo.routes(node) if r.host == dst)
                node = next(o for lk, o in topo.neighbours(node) if lk.port_of(node) == port)
            assert topo.switch_path(src, dst) == tuple(walk), (src, dst)


def test_network_view_has_directed_links_with_capacities() -> None:
    net = TopologyNetwork(parse(copy.deepcopy(BASE)), unshaped_bytes_s=1e9)
    assert net.path("h1", "h2") == ("h1>s1", "s1>s2", "s2>h2")
    assert net.links["s1>s2"] == net.links["s2>s1"] == 10e6 / 8
    assert net.links["h1>s1"] == 1e9
    with pytest.raises(SpecError) as err:
        net.path("h1", "h9")
    assert err.value.field == "hosts"


def test_a_host_end_sends_at_host_bw_mbit_and_receives_at_bw_mbit() -> None:
    data = copy.deepcopy(BASE)
    data["links"][0].update(bw_mbit=9, host_bw_mbit=18)
    net = TopologyNetwork(parse(data), unshaped_bytes_s=1e9)
    assert net.links["h1>s1"] == 18e6 / 8
    assert net.links["s1>h1"] == 9e6 / 8
    assert net.links["h2>s2"] == net.links["s2>h2"] == 1e9


def test_the_uplink_experiments_topology_frees_h0s_uplink_only() -> None:
    topo = load(ROOT / "topo" / "interleave-uplink.yaml")
    net = TopologyNetwork(topo)
    assert net.links["h0>s1"] == 3 * net.links["s1>h0"]
    assert {net.links[f"s1>{h}"] for h in ("h0", "h1", "h2", "h3")} == {net.links["s1>h0"]}


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["hosts"]["h2"].update(ip="10.0.0.1"), "hosts.*.ip"),
        (lambda d: d["hosts"]["h2"].update(ip="10.0.0.300"), "hosts.h2.ip"),
        (lambda d: d["hosts"]["h1"].update(mac="zz"), "hosts.h1.mac"),
        (lambda d: d["links"][0].update(b="s9"), "links[0].b"),
        (lambda d: d["links"][0].pop("b_port"), "links[0].b_port"),
        (lambda d: d["links"][0].update(a_port=3), "links[0].a_port"),
        (lambda d: d["links"][2].update(b_port=1), "links[2]"),
        (lambda d: d["links"][1].update(bw_mbit=-1), "links[1].bw_mbit"),
        (lambda d: d["links"][0].update(host_bw_mbit=0), "links[0].host_bw_mbit"),
        (lambda d: d["links"][1].update(host_bw_mbit=20), "links[1].host_bw_mbit"),
        (lambda d: d["links"].append({"a": "h1", "b": "s2", "b_port": 3}), "hosts.h1"),
        (lambda d: d["links"].pop(1), "links"),
        (lambda d: d["switches"]["s1"].update(grpc="nope"), "switches.s1.grpc"),
        (lambda d: d["switches"]["s1"].update(device_id=-1), "switches.s1.device_id"),
        (lambda d: d.pop("hosts"), "hosts"),
    ],
)
def test_bad_files_name_the_field(mutate: Any, field: str) -> None:
    data = copy.deepcopy(BASE)
    mutate(data)
    with pytest.raises(SpecError) as err:
        parse(data)
    assert err.value.field == field


def test_unreadable_file_is_a_spec_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts: [unclosed")
    with pytest.raises(SpecError) as err:
        load(bad)
    assert err.value.field == str(bad) and "not valid YAML/JSON" in err.value.message
    with pytest.raises(SpecError, match="cannot read"):
        load(tmp_path / "missing.yaml")

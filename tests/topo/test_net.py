"""The Mininet launcher: what it builds, and that teardown leaves nothing behind."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from echelon.topology import load
from echelon.waiting import wait_until
from targets.process import TargetError
from topo import net as netmod
from topo.net import EchelonNet, NetError, root_links

from .helpers import alive, needs_root, topo_on_free_ports

pytestmark = [pytest.mark.root, pytest.mark.skipif(needs_root, reason="needs root")]
PREFIX = f"t6n{os.getpid() % 1000}"  # unique per test process: parallel runs never collide


def ours() -> set[str]:
    return {n for n in root_links() if n.startswith(PREFIX)}


@pytest.fixture
def star(tmp_path: Path) -> Iterator[EchelonNet]:
    n = EchelonNet(load(topo_on_free_ports("topo/star.yaml", tmp_path / "star.yaml")),
                   kind="soft", prefix=PREFIX, log_dir=tmp_path / "logs")  # fmt: skip
    try:
        yield n
    finally:
        n.stop()


def test_star_is_built_and_torn_down(star: EchelonNet) -> None:
    star.start()
    assert star.mn is not None
    # every process the network started: host/wire/switch shells, the switch target
    pids = [n.pid for n in (*star.mn.hosts, *star.mn.switches) if n.pid]
    pids += [s.target.pid for s in star.switches() if s.target is not None]
    assert len(pids) >= 4 + 1 + 1 + 1  # host shells, wire, switch shell, soft switch
    assert ours() == {f"{PREFIX}s1-{p}" for p in (1, 2, 3, 4)}
    sw = next(star.switches())
    assert sw.target is not None and sw.target.alive()
    assert sw.port_map == {p: f"{PREFIX}s1-{p}" for p in (1, 2, 3, 4)}
    h1 = star["h1"]
    addr = h1.cmd("ip -4 -o addr show dev h1-eth0")
    assert "10.0.0.1/32" in addr
    neigh = h1.cmd("ip neigh show 10.0.0.4")
    assert "00:00:0a:00:00:04" in neigh and "PERMANENT" in neigh
    assert "dev h1-eth0" in h1.cmd("ip route get 10.0.0.4")
    assert "tx-checksumming: off" in h1.cmd("ethtool -k h1-eth0")
    # The bottleneck (h4's link) has a wire namespace with the strict-priority shaper.
    wire = star["w3"]
    qd = wire.cmd("tc qdisc show dev wa")
    assert ("htb 1:" in qd) or ("tbf 1:" in qd)
    assert wire.cmd("ip -o link show wb").count("00:00:0a:00:00:04") == 1
    star.stop()
    assert ours() == set()
    wait_until(lambda: not any(alive(p) for p in pids), 10, "launcher processes to exit")
    star.stop()  # idempotent


def test_refuses_to_touch_existing_interfaces(star: EchelonNet) -> None:
    name = f"{PREFIX}s1-2"
    subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", f"{PREFIX}zz"],
                   check=True)  # fmt: skip
    try:
        with pytest.raises(NetError, match=name):
            star.start()
        assert name in root_links()  # still there: not ours to delete
    finally:
        subprocess.run(["ip", "link", "del", name], capture_output=True)
    assert ours() == set()


def test_failure_during_start_cleans_up(star: EchelonNet, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise TargetError("switch refused to start (test)")

    monkeypatch.setattr(netmod, "start_target", broken)
    with pytest.raises(TargetError):
        star.start()
    assert ours() == set()
    assert star.mn is None


def test_name_too_long_is_an_error(tmp_path: Path) -> None:
    n = EchelonNet(load(topo_on_free_ports("topo/leafspine.yaml", tmp_path / "ls.yaml")),
                   kind="soft", prefix="toolongpfx")  # fmt: skip
    with pytest.raises(NetError, match="15 characters"):
        n.start()
    assert not {x for x in root_links() if x.startswith("toolongpfx")}


def test_switch_switch_wire_routes_both_directions(tmp_path: Path) -> None:
    """Both routed directions keep their next hop: setting one side's MAC once flushed
    the other direction's permanent neighbour, and leaf2 -> leaf1 lost every packet."""
    topo = load(topo_on_free_ports("topo/leafspine.yaml", tmp_path / "ls.yaml"))
    n = EchelonNet(topo, kind="soft", prefix=PREFIX, log_dir=tmp_path / "logs")
    try:
        n.start()
        i, lk = next((i, lk) for i, lk in enumerate(topo.links) if lk.bottleneck)
        assert lk.a in topo.switches and lk.b in topo.switches and lk.b_port is not None
        wire = n[f"w{i}"]
        for dev, (far, port) in {"wa": (lk.b, lk.b_port), "wb": (lk.a, lk.a_port)}.items():
            assert port is not None
            neigh = wire.cmd(f"ip neigh show 169.254.0.1 dev {dev}")
            assert n.next_hop_mac(far, port) in neigh and "PERMANENT" in neigh, (dev, neigh)
    finally:
        n.stop()
    assert ours() == set()

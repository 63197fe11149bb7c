"""The demo's per-port view: counts from the switches' pcaps, per priority from DSCP."""

from __future__ import annotations

from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether

from echelon.constants import dscp_for_priority
from echelon.pcap import PcapWriter
from topo import portview
from topo.portview import PortView, egress_priority


def ip_frame(prio: int) -> bytes:
    return bytes(Ether() / IP(tos=dscp_for_priority(prio) << 2) / UDP(dport=60416) / b"x")


def test_counts_per_port_and_priority_grow_as_the_pcaps_do(tmp_path: Path) -> None:
    d = tmp_path / "s1"
    d.mkdir()
    w_in, w_out = PcapWriter(d / "ecs1-4_in.pcap"), PcapWriter(d / "ecs1-4_out.pcap")
    view = PortView(tmp_path, {"s1": {4: "ecs1-4", 1: "ecs1-1"}})  # port 1: no files yet
    for prio in (7, 7, 3, 0):
        w_out.write(ip_frame(prio))
    w_out.write(bytes(Ether() / ARP()))  # not IPv4: counted out, no priority
    w_in.write(ip_frame(0))
    w_in.flush()
    w_out.flush()
    first = view.poll()
    assert (first[("s1", 4)].rx, first[("s1", 4)].tx) == (1, 5)
    assert dict(first[("s1", 4)].out_prio) == {7: 2, 3: 1, 0: 1}
    assert (first[("s1", 1)].rx, first[("s1", 1)].tx) == (0, 0)
    w_out.write(ip_frame(3))
    w_out.flush()
    later = view.poll()
    step = portview.delta(later, first)
    assert (step[("s1", 4)].tx, dict(step[("s1", 4)].out_prio)) == (1, {3: 1})
    text = portview.table(later).splitlines()
    assert text[0].split() == ["switch", "port", "in", "pkts", "out", "pkts", "out", "p7",
                               "out", "p3", "out", "p0"]  # fmt: skip
    assert text[2].split() == ["s1", "4", "1", "6", "2", "2", "1"]
    assert portview.as_json(later)[1]["out_pkts_by_priority"] == {"0": 1, "3": 2, "7": 2}
    assert portview.one_line(later) == "ports in/out pkts: s1 p1 0/0  s1 p4 1/6"


def test_egress_priority_reads_class_selectors_only() -> None:
    assert egress_priority(ip_frame(5)) == 5
    assert egress_priority(bytes(Ether() / IP(tos=0x2E << 2))) is None  # EF, not CSn
    assert egress_priority(bytes(Ether() / ARP())) is None

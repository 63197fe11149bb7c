"""``start_target(..., pcap_dir=DIR)``: both targets write BMv2's per-port captures,
``IFACE_in.pcap`` (what the port received) and ``IFACE_out.pcap`` (what it sent),
readable while the switch runs; the echelon header is in them as sent, with the
switch's DSCP on the way out."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from echelon.constants import ECHELON_UDP_PORT, dscp_for_priority
from echelon.pcap import PcapTail, pcap_names
from echelon.waiting import wait_until
from echelon.wire import Echelon, unpack_header
from p4client.p4rt import SwitchConnection
from targets.process import free_port
from targets.switch import command_line, start_target
from tests.core.test_wireshark_dissector import tshark_fields
from tests.softswitch.helpers import in_netns, raw_socket, veth_hosts
from tests.softswitch.p4json import bmv2_json
from tests.targets.kinds import KINDS

ROOT = Path(__file__).resolve().parents[2]
P4INFO = ROOT / "p4src" / "build" / "echelon.p4info.txtpb"
H1, H2 = "10.0.7.1", "10.0.7.2"
PREFIX = f"tpc{os.getpid() % 10000}"


def test_command_line_passes_pcap_with_equals() -> None:
    """BMv2's --pcap has an optional value (boost implicit value): only ``--pcap=DIR``
    sets the directory; the soft switch accepts both forms."""
    argv = command_line("soft", {1: "a"}, "127.0.0.1:1", 2, pcap_dir="/tmp/x")
    assert "--pcap=/tmp/x" in argv and argv.index("--pcap=/tmp/x") < argv.index("--")
    assert not any(a.startswith("--pcap") for a in command_line("bmv2", {}, "127.0.0.1:1", 2))


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for netns and raw sockets")
@pytest.mark.parametrize("kind", KINDS)
def test_per_port_pcaps(kind: str, tmp_path: Path) -> None:
    n = 12
    prio = 6
    pcaps = tmp_path / "pcap"
    with veth_hosts(f"{PREFIX}{kind[0]}", 2) as hosts:
        (p1, ns1), (p2, _ns2) = hosts
        grpc_addr = f"127.0.0.1:{free_port()}"
        target = start_target(
            kind,  # type: ignore[arg-type]
            {1: p1, 2: p2},
            grpc_addr,
            free_port(),
            log_path=tmp_path / "sw.log",
            pcap_dir=pcaps,
        )
        try:
            assert target.pcap_dir is not None and target.pcap_dir.resolve() == pcaps.resolve()
            with SwitchConnection(grpc_addr) as sw:
                sw.set_pipeline(P4INFO, bmv2_json(tmp_path).read_bytes())
                sw.insert(
                    [
                        sw.table_entry(
                            "ipv4_lpm",
                            {"hdr.ipv4.dstAddr": (H2, 32)},
                            "ipv4_forward",
                            {"dstAddr": "00:00:0a:00:07:02", "port": 2},
                        ),
                        sw.table_entry(
                            "echelon_classify",
                            {"hdr.ipv4.srcAddr": H1, "hdr.echelon.echelon_id": 9},
                            "set_echelon",
                            {"class_id": 4, "prio": prio},
                        ),
                    ]
                )
            base = Ether(dst="00:00:00:00:07:aa", src="00:00:0a:00:07:01") / IP(src=H1, dst=H2)
            sent = [
                bytes(
                    base
                    / UDP(sport=4000, dport=ECHELON_UDP_PORT)
                    / Echelon(echelon_id=9, deadline_us=1000 + i, flow_index=2, seq=i)
                    / (b"x" * 20)
                )
                for i in range(n)
            ]

            def send() -> None:
                s = raw_socket("eth0")
                try:
                    for f in sent:
                        s.send(f)
                finally:
                    s.close()

            in_netns(ns1, send)
            name_in, _ = pcap_names(p1)
            _, name_out = pcap_names(p2)
            # Readable while the switch runs: the per-port view of the demo relies on it.
            wait_until(
                lambda: (
                    len(PcapTail(pcaps / name_in).read_new()) >= n
                    and len(PcapTail(pcaps / name_out).read_new()) >= n
                ),
                15.0,
                f"{n} frames in {name_in} and {name_out}",
            )
        finally:
            target.stop()
    assert sorted(p.name for p in pcaps.iterdir()) == sorted([*pcap_names(p1), *pcap_names(p2)])
    received = [r.data for r in PcapTail(pcaps / name_in).read_new()]
    assert [f for f in received if f in sent] == sent  # the port's own traffic, as sent
    out = [r for r in PcapTail(pcaps / name_out).read_new() if r.data[12:14] == b"\x08\x00"]
    seqs = []
    for r in out:
        pkt = Ether(r.data)
        assert pkt[IP].tos >> 2 == dscp_for_priority(prio)
        assert r.orig_len == len(r.data)
        seqs.append(unpack_header(bytes(pkt[UDP].payload))[4])
    assert seqs == list(range(n))
    if shutil.which("tshark"):  # the dissector on the switch's own capture
        rows = tshark_fields(pcaps / name_out, ("echelon.id", "echelon.seq"), "echelon")
        assert rows == [["9", str(i)] for i in range(n)]
    back = [r.data for r in PcapTail(pcaps / pcap_names(p2)[0]).read_new()]
    assert not [f for f in back if f in sent]  # in and out are not mixed up

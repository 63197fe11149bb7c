"""``python -m topo.run --pcap --cli before|during``: the Mininet CLI before and while the
traffic runs (``ping`` works, ``ports`` shows per-port counts), per-port pcaps of the
switch, per-port/per-priority counts in the output and the results, and the echelon
dissector on the demo's own capture."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from echelon.pcap import PcapTail
from targets.process import free_port, stop_process
from tests.core.test_wireshark_dissector import tshark_fields
from topo.interactive import resolve_cli
from topo.net import root_links
from topo.portview import egress_priority

from .helpers import ROOT, needs_root, topo_on_free_ports

PREFIX = f"t6i{os.getpid() % 1000}"


def test_cli_modes() -> None:
    assert resolve_cli("auto", headless=False, tty=True) == "after"
    assert resolve_cli("auto", headless=False, tty=False) == "never"
    assert resolve_cli("before", headless=False, tty=False) == "before"  # commands from a pipe
    assert resolve_cli("during", headless=True, tty=True) == "never"


def demo(tmp_path: Path, cli: str, commands: str, policy: str) -> tuple[str, dict[str, Any], Path]:
    topo = topo_on_free_ports("topo/star.yaml", tmp_path / "star.yaml")
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "topo.run", "--target", "soft", "--topo", str(topo),
            "--out-dir", str(out), "--prefix", PREFIX, "--api-port", str(free_port()),
            "--iterations", "1", "--policies", policy, "--pcap", "--port-view", "0.5",
            "--cli", cli]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        text, _ = proc.communicate(commands.encode(), timeout=200)
    finally:
        stop_process(proc, 60)
    log = text.decode(errors="replace")
    assert proc.returncode == 0, log
    assert not {n for n in root_links() if n.startswith(PREFIX)}, "interfaces left behind"
    return (
        log,
        json.loads((out / "latest" / "demo-results.json").read_text()),
        out / "latest" / "pcap",
    )


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.skipif(needs_root, reason="root")
@pytest.mark.skipif(shutil.which("ping") is None, reason="ping missing (make deps: iputils-ping)")
def test_cli_before_traffic_pings_and_pcaps(tmp_path: Path) -> None:
    # commands from a pipe: each line is a CLI command, none is poured into h1's shell
    # while its ping runs (Mininet forwards stdin to a busy node only from a terminal)
    commands = "h1 ping -c 2 -W 3 h4\nh2 echo marker-$((40+2))\nports\nexit\n"
    log, results, pcap = demo(tmp_path, "before", commands, "echelon")
    assert "marker-42" in log, log
    # The CLI came before the traffic, and ping through the P4 switch works.
    assert log.index("Mininet CLI (exit the CLI to start the traffic") < log.index(
        "*** echelon: done"
    )
    assert "2 packets transmitted, 2 received" in log, log
    # Per-port pcaps under pcap/<switch>/, BMv2's names, in and out for each port.
    names = sorted(p.name for p in (pcap / "s1").iterdir())
    assert names == sorted(f"{PREFIX}s1-{p}_{d}.pcap" for p in (1, 2, 3, 4) for d in ("in", "out"))
    # The ICMP echo to h4 is in port 1's input capture (h1) and port 4's output (h4).
    icmp_in = [
        r
        for r in PcapTail(pcap / "s1" / f"{PREFIX}s1-1_in.pcap").read_new()
        if r.data[23:24] == b"\x01"
    ]
    assert len(icmp_in) >= 2
    # Live per-port lines during the run, then the table per policy.
    assert "ports in/out pkts: s1 p1" in log
    assert "*** echelon: packets per switch port" in log
    ports = {p["port"]: p for p in results["policies"]["echelon"]["ports"]}
    assert set(ports) == {1, 2, 3, 4}
    out4 = pcap / "s1" / f"{PREFIX}s1-4_out.pcap"
    assert ports[4]["out_pkts"] > 0 and ports[4]["out_pkts"] <= len(PcapTail(out4).read_new())
    # The jobs' flows into h4 left on echelon priorities (>= 1), per the pcap and the table.
    prios = {egress_priority(r.data) for r in PcapTail(out4).read_new()}
    assert any(p is not None and p >= 1 for p in prios)
    by_prio = ports[4]["out_pkts_by_priority"]
    assert sum(n for p, n in by_prio.items() if int(p) >= 1) > 0
    if shutil.which("tshark"):  # the dissector on the demo's capture
        rows = tshark_fields(out4, ("echelon.id", "echelon.version"), "echelon")
        assert rows and all(v == "1" for _, v in rows)
        assert all(f"{int(i)}" in log.split("echelon IDs")[1].split("\n")[0] for i, _ in rows)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.skipif(needs_root, reason="root")
def test_cli_during_traffic(tmp_path: Path) -> None:
    """The CLI is usable while the jobs run; closing it waits for the run to finish."""
    log, results, _ = demo(tmp_path, "during", "ports\nh2 ping -c 1 -W 3 h1\n", "fifo")
    assert "Mininet CLI (traffic is running" in log
    assert "1 packets transmitted, 1 received" in log, log
    assert "in pkts" in log.split("Mininet CLI (traffic is running")[1]  # `ports` answered
    assert results["policies"]["fifo"]["jobs"]["pipe"]["complete"]
    assert {p["port"] for p in results["policies"]["fifo"]["ports"]} == {1, 2, 3, 4}

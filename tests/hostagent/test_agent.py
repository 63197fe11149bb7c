"""The agent plays a scenario over loopback: packets carry the header, finish times are recorded."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from echelon.constants import ECHELON_UDP_PORT
from echelon.errors import EchelonError, SpecError
from echelon.waiting import wait_until
from echelon.wire import unpack_header
from hostagent.agent import main, wait_go
from hostagent.receiver import Receiver
from hostagent.report import formation_report
from hostagent.scenario import parse
from hostagent.sender import Sender
from targets.process import stop_process

# Loopback addresses unique to this test process (all of 127/8 is local), so parallel
# runs of the suite never compete for the echelon port on the same address.
_NET = f"127.{1 + os.getpid() // 250 % 250}.{os.getpid() % 250}"
HOSTS = {"h1": f"{_NET}.1", "h2": f"{_NET}.2", "h3": f"{_NET}.3"}


def scenario_dict(start_at: float, **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "start_at": start_at,
        "hosts": HOSTS,
        "packet_bytes": 500,
        "default_rate_mbit": 8.0,
        "timeout_s": 20.0,
        "release": "open",  # fixed release times; closed loop: test_closedloop.py
        "echelons": [
            {
                "name": "pipe/0/fwd", "job": "pipe", "group": "fwd", "echelon_id": 7,
                "t_ref": 0.05,
                "flows": [
                    {"index": 0, "src": "h1", "dst": "h2", "size": 20000, "offset": 0.0,
                     "release": 0.0, "sport": 20000},
                    {"index": 1, "src": "h1", "dst": "h2", "size": 20000, "offset": 0.1,
                     "release": 0.1, "sport": 20001},
                ],
            },
            {
                "name": "dp/0/grad", "job": "dp", "group": "grad", "echelon_id": 9, "t_ref": 0.2,
                "flows": [
                    {"index": 0, "src": "h3", "dst": "h2", "size": 4900, "offset": 0.0,
                     "release": 0.0, "sport": 20000},
                ],
            },
        ],
    }  # fmt: skip
    base.update(over)
    return base


def test_sender_packets_carry_header_and_are_paced() -> None:
    sc = parse(scenario_dict(time.time() + 0.2))
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind((HOSTS["h2"], ECHELON_UDP_PORT))
    rx.settimeout(5)
    try:
        report = Sender(sc, "h1").run(time.time() + 10)
        got: list[tuple[tuple[str, int], bytes]] = []
        while len(got) < 84:
            data, addr = rx.recvfrom(2048)
            got.append((addr, data))
    finally:
        rx.close()
    assert (
        report["pipe/0/fwd#0"]["packets"] == sc.packets(sc.echelons[0].flows[0]) == -(-20000 // 484)
    )
    by_port: dict[int, list[tuple[int, int, int, int, int]]] = {}
    for addr, data in got:
        assert addr[0] == HOSTS["h1"]
        seq = unpack_header(data)[4]
        # 41 full packets (16-byte header + 484), then what is left of 20,000 bytes
        assert len(data) == (500 if seq < 41 else 16 + 20000 - 41 * 484)
        by_port.setdefault(addr[1], []).append(unpack_header(data))
    first, second = by_port[20000], by_port[20001]
    assert [h[4] for h in first] == list(range(42))
    assert {(h[0], h[1], h[2], h[3]) for h in first} == {(1, 7, 0, 0)}
    assert {(h[1], h[2], h[3]) for h in second} == {(7, 100000, 1)}
    # 84 packets of 542 wire bytes at 8 Mbit/s take ~44 ms; the second flow is
    # released at 0.1 s. Pacing means the sender spent at least the wire time.
    r0, r1 = report["pipe/0/fwd#0"], report["pipe/0/fwd#1"]
    assert r0["end"] is not None and r0["start"] is not None
    assert r0["end"] - r0["start"] >= 40 * 542 * 8 / 8e6 * 0.9
    assert r1["start"] is not None and r1["start"] >= 0.1


def test_receiver_records_finish_and_ignores_duplicates_and_strangers() -> None:
    sc = parse(scenario_dict(time.time()))
    rcv = Receiver(sc, "h2", bind_ip=HOSTS["h2"])
    rcv.sock.close()  # feed packets directly
    from echelon.wire import pack_header

    key = (HOSTS["h3"], 20000)  # dp flow: 4900 B / 484 B chunks = 11 packets
    total = sc.packets(sc.echelons[1].flows[0])
    for seq in range(total):
        rcv._record(key, pack_header(9, 0, 0, seq), 1.0 + seq)
        rcv._record(key, pack_header(9, 0, 0, seq), 50.0)  # duplicate: no effect
    rcv._record(("127.0.0.9", 1), pack_header(9, 0, 0, 0), 2.0)
    rcv._record(key, pack_header(8, 0, 0, 0), 2.0)  # wrong echelon id
    rep = rcv.report()["dp/0/grad#0"]
    assert rep["packets"] == total == 11
    assert rep["finish"] == 1.0 + total - 1
    assert rep["mismatched"] == 1
    assert rcv.unknown == 1
    assert rcv.pending == 2 and not rcv.done.is_set()


def test_scenario_validation_names_the_field() -> None:
    d = scenario_dict(0.0)
    d["echelons"][0]["flows"][1]["sport"] = 20000
    with pytest.raises(SpecError) as e:
        parse(d)
    assert "sport" in e.value.field
    d = scenario_dict(0.0)
    d["echelons"][1]["flows"][0]["dst"] = "h9"
    with pytest.raises(SpecError) as e:
        parse(d)
    assert e.value.field == "echelons[1].flows[0].dst"


def run_agent(args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "hostagent", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        stop_process(p, 5)


def play(
    tmp_path: Path,
    scenario: dict[str, Any],
    hosts: list[str],
    extra: tuple[str, ...] = (),
    exit_code: int = 0,
) -> list[dict[str, Any]]:
    """Run one agent process per host on ``scenario`` over loopback (``extra``: more
    ``play`` options), release them together, wait for each to exit with ``exit_code``
    (1: incomplete) and return their records."""
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    go = tmp_path / "go"
    procs = []
    try:
        for h in hosts:
            procs.append(run_agent(["play", "--scenario", str(path), "--host", h,
                                    "--out", str(tmp_path / f"{h}.json"), "--bind", HOSTS[h],
                                    "--go", str(go), *extra]))  # fmt: skip
        ready = [tmp_path / f"{h}.ready" for h in hosts]
        wait_until(lambda: all(r.exists() for r in ready), 30, "agents ready")
        go.write_text(repr(time.time() + 0.2))
        for p in procs:
            p.wait(30)
            assert p.returncode == exit_code, p.stderr.read() if p.stderr else ""
    finally:
        stop(procs)
    return [json.loads((tmp_path / f"{h}.json").read_text()) for h in hosts]


@pytest.mark.slow
def test_agents_play_scenario_end_to_end(tmp_path: Path) -> None:
    """Three agent processes over loopback: every flow completes, the report is consistent."""
    records = play(tmp_path, scenario_dict(0.0), list(HOSTS))
    path = tmp_path / "scenario.json"
    assert all(r["complete"] for r in records)
    res = run_agent(
        ["report", "--scenario", str(path), *(str(tmp_path / f"{h}.json") for h in HOSTS)]
    )
    stdout, stderr = res.communicate(timeout=30)
    assert res.returncode == 0, stderr
    report = json.loads(stdout)
    pipe = report["jobs"]["pipe"]
    assert pipe["complete"] and not pipe["missing"]
    flows = pipe["echelons"][0]["flows"]
    # Uncontended loopback: flow 1 (released at 0.1 s) finishes after flow 0 and after 0.1 s.
    assert flows[0]["actual"] < flows[1]["actual"]
    assert flows[1]["actual"] > 0.1
    direct = formation_report(parse(scenario_dict(report["start_at"])), records)
    assert direct["jobs"]["pipe"]["ect_max"] == pytest.approx(pipe["ect_max"])
    ect = max(f["actual"] - (f["ideal"] - 0.05) for f in flows) - 0.05
    assert pipe["ect_max"] == pytest.approx(ect, abs=1e-9)


def test_cli_bad_scenario_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(scenario_dict(0.0, packet_bytes=9000)))
    p = run_agent(["play", "--scenario", str(bad), "--host", "h1"])
    _, err = p.communicate(timeout=30)
    assert p.returncode == 2
    assert err.decode().startswith("error: packet_bytes")


@pytest.mark.parametrize("bad", ["-0.1", "soon", "inf"])
def test_cli_bad_progress_period_is_named(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["play", "--scenario", "x.json", "--host", "h1", "--progress-period", bad])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "error: argument --progress-period: " in err and repr(bad) in err
    assert "Traceback" not in err


def test_flows_released_together_are_interleaved_packet_by_packet() -> None:
    """Why it matters: under one priority level (a Coflow) a FIFO queue serves what
    arrives in arrival order, so how a host interleaves its concurrent flows decides
    their finish times. The agent shares its NIC round-robin, like parallel transfers."""
    d = scenario_dict(time.time() + 0.2)
    for f in d["echelons"][0]["flows"]:
        f["release"] = 0.0  # both released at once (offsets stay staggered)
    sc = parse(d)
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind((HOSTS["h2"], ECHELON_UDP_PORT))
    rx.settimeout(5)
    try:
        report = Sender(sc, "h1").run(time.time() + 10)
        ports = [rx.recvfrom(2048)[1][1] for _ in range(84)]
    finally:
        rx.close()
    # Strict alternation: neither flow ever sends two packets in a row.
    assert ports[:2] in ([20000, 20001], [20001, 20000])
    assert all(a != b for a, b in pairwise(ports))
    r0, r1 = report["pipe/0/fwd#0"], report["pipe/0/fwd#1"]
    assert r0["end"] is not None and r1["end"] is not None
    assert abs(r0["end"] - r1["end"]) < 0.01  # same size, same share: end together


def three_flow_sender() -> tuple[Sender, list[str]]:
    """h1's sender of three 4,000-byte flows (9 packets of 484 bytes) at 1 Mbit/s (~4 ms a
    packet: one per burst), and their uids: flows 0 and 1 of the scenario and a third."""
    d = scenario_dict(time.time(), default_rate_mbit=1.0)
    flows = d["echelons"][0]["flows"]
    flows.append({**flows[1], "index": 2, "offset": 0.2, "sport": 20002})
    for f in flows:
        f["size"] = 4000
    sc = parse(d)
    return Sender(sc, "h1"), [e.uid(f) for e, f in sc.flows_from("h1")]


class _ReleaseAfter:
    """Releases ``first`` at once and ``late`` once ``sender`` has sent ``after``
    packets; records how many it had sent then (a burst may pass ``after``)."""

    def __init__(self, sender: Sender, first: list[str], late: str, after: int) -> None:
        self.sender, self.pending, self.late, self.after = sender, list(first), late, after
        self.sent_at_release: int | None = None

    def due(self, now: float) -> list[str]:
        out, self.pending = self.pending, []
        sent = sum(a.sent for a in self.sender.flows)
        if self.sent_at_release is None and sent >= self.after:
            self.sent_at_release = sent
            out.append(self.late)
        return out

    def wait(self, now: float, limit: float) -> None:
        time.sleep(0.001)

    def finished(self) -> bool:
        return not self.pending and self.sent_at_release is not None


def test_a_flow_released_mid_round_waits_for_every_flow_already_in_it() -> None:
    """Two flows share h1's pacing round; a third, released after a few packets, sends
    its first packet only after each of the two has sent once more, as the packet model
    (sim.packet) plays a host's round. Slotting it in at the sender's current position
    started it up to a round early, and on the demo's h4 that moved later flows by tens of
    ms (docs/measurements/demo.md)."""
    sender, uids = three_flow_sender()
    rel = _ReleaseAfter(sender, uids[:2], uids[2], after=5)
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind((HOSTS["h2"], ECHELON_UDP_PORT))
    rx.settimeout(5)
    try:
        sender.run(time.time() + 10, rel)
        ports = [rx.recvfrom(2048)[1][1] for _ in range(27)]
    finally:
        rx.close()
    k = rel.sent_at_release
    assert k is not None
    # the two packets after the release: one of each earlier flow, then the new one
    assert sorted(ports[k : k + 2]) == [20000, 20001], (k, ports)
    assert ports.index(20002) == k + 2, (k, ports)


@pytest.mark.slow
def test_an_agent_waiting_for_packets_that_never_come_gives_up_when_idle(
    tmp_path: Path,
) -> None:
    """h2 expects flows from h1 and h3, whose agents never run (as if every packet were
    lost): with ``idle_timeout_s`` it ends about that long after the start, not at the
    scenario's 20-s timeout, and says it stalled."""
    t0 = time.monotonic()
    (rec,) = play(tmp_path, scenario_dict(0.0, idle_timeout_s=0.5), ["h2"], exit_code=1)
    assert time.monotonic() - t0 < 10.0
    assert rec["stalled"] and not rec["complete"]
    assert all(r["packets"] == 0 for r in rec["received"].values())


@pytest.mark.slow
def test_an_idle_timeout_does_not_cut_a_run_that_progresses(tmp_path: Path) -> None:
    """The same three agents as the end-to-end test, with an idle timeout shorter than
    the run: packets keep moving, so nobody stalls and every flow completes."""
    records = play(tmp_path, scenario_dict(0.0, idle_timeout_s=0.3), list(HOSTS))
    assert all(r["complete"] and not r["stalled"] for r in records)


def test_the_agent_reads_the_start_instant_once_the_go_file_holds_it(tmp_path: Path) -> None:
    go = tmp_path / "go"
    go.write_text("")  # created before it is written: still waiting
    later = threading.Timer(0.05, lambda: go.write_text("1234.5\n"))
    later.start()
    try:
        assert wait_go(go, 10) == 1234.5
    finally:
        later.cancel()


def test_the_agent_names_its_go_file_on_timeout_and_on_bad_content(tmp_path: Path) -> None:
    go = tmp_path / "go"
    with pytest.raises(EchelonError, match=f"go: no start signal in {go} within 0s"):
        wait_go(go, 0.05)
    go.write_text("soon")
    with pytest.raises(EchelonError, match=f"go: {go} does not hold a time"):
        wait_go(go, 5)

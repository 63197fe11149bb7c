"""The real process on veth pairs into network namespaces, and p4runtime-shell against it."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from finsy.proto import p4r
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from echelon.constants import priority_for_dscp
from echelon.waiting import wait_until
from echelon.wire import Echelon
from p4client.bmruntime import RuntimeApiError, RuntimeClient
from targets.process import free_port
from targets.switch import start_target
from tests.softswitch.helpers import (
    INSERT,
    PYTHON,
    ROOT,
    Client,
    Names,
    in_netns,
    load_p4info,
    raw_socket,
    veth_hosts,
)

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for netns and raw sockets"),
]
PREFIX = f"sswp{os.getpid() % 10000}"
H1, H2 = "10.0.1.1", "10.0.1.2"


def ip_int(a: str) -> int:
    return int.from_bytes(socket.inet_aton(a), "big")


@pytest.fixture
def switch(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A switch process on two ports whose host ends live in namespaces."""
    with veth_hosts(PREFIX, 2) as hosts:
        log = tmp_path / "switch.log"
        grpc_addr = f"127.0.0.1:{free_port()}"
        target = start_target(
            "soft", {1: hosts[0][0], 2: hosts[1][0]}, grpc_addr, free_port(), log_path=log
        )
        info: dict[str, Any] = {
            "target": target,
            "grpc": grpc_addr,
            "thrift": target.thrift_port,
            "ns": [h[1] for h in hosts],
            "log": log,
            "rc": None,
        }
        try:
            yield info
        finally:
            info["rc"] = target.stop()
            assert info["rc"] == 0, log.read_text()


def program(c: Client, names: Names) -> None:
    c.push_pipeline(names.p4info)
    c.send_write(
        (
            INSERT,
            names.entry(
                "EchelonIngress.ipv4_lpm",
                {"hdr.ipv4.dstAddr": (ip_int(H2), 32)},
                "EchelonIngress.ipv4_forward",
                {"dstAddr": 0x02, "port": 2},
            ),
        ),
        (
            INSERT,
            names.entry(
                "EchelonIngress.echelon_classify",
                {"hdr.ipv4.srcAddr": ip_int(H1), "hdr.echelon.echelon_id": 3},
                "EchelonIngress.set_echelon",
                {"class_id": 3, "prio": 7},
            ),
        ),
    )


def frames(n_plain: int, n_echelon: int) -> list[bytes]:
    base = Ether(dst="00:00:00:00:00:aa", src="00:00:00:00:00:01") / IP(src=H1, dst=H2, ttl=9)
    out = [bytes(base / UDP(dport=7000) / (b"p%03d" % i)) for i in range(n_plain)]
    out += [
        bytes(base / UDP(dport=0xEC00) / Echelon(echelon_id=3, seq=i)) for i in range(n_echelon)
    ]
    return out


def receive(sock: socket.socket, count: int, timeout: float = 5.0) -> list[tuple[float, bytes]]:
    got: list[tuple[float, bytes]] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        if len(data) > 33 and data[12:14] == b"\x08\x00" and data[26:30] == socket.inet_aton(H1):
            got.append((time.monotonic(), data))
    return got


def counts_bytes(c: Client) -> int:
    """Bytes of ``echelon_pkts[3]`` as P4Runtime reads them (the Thrift read must agree)."""
    cid = Names(load_p4info()).counter_id("EchelonIngress.echelon_pkts")
    cells = c.read(p4r.CounterEntry(counter_id=cid, index=p4r.Index(index=3)))
    return int(cells[0].counter_entry.data.byte_count)


def test_forwards_classifies_and_stops_cleanly(switch: dict[str, Any]) -> None:
    names = Names(load_p4info())
    c = Client(switch["grpc"], election=1)
    try:
        assert c.arbitrate().arbitration.status.code == 0
        program(c, names)
        tx = in_netns(switch["ns"][0], lambda: raw_socket("eth0"))
        rx = in_netns(switch["ns"][1], lambda: raw_socket("eth0"))
        with tx, rx:
            for f in frames(3, 4):
                tx.send(f)
            got = receive(rx, 7)
            assert len(got) == 7
            prios = sorted(priority_for_dscp(Ether(d)[IP].tos >> 2) for _t, d in got)
            assert prios == [0, 0, 0, 7, 7, 7, 7]
            assert all(
                Ether(d)[IP].ttl == 8 and Ether(d).dst == "00:00:00:00:00:02" for _t, d in got
            )
            cid = names.counter_id("EchelonIngress.echelon_pkts")
            counts = {
                e.counter_entry.index.index: e.counter_entry.data.packet_count
                for e in c.read(p4r.CounterEntry(counter_id=cid))
            }
            assert counts[3] == 4

            # Thrift runtime: rate-limit port 2, check it paces a burst; a bad priority raises.
            with RuntimeClient(switch["thrift"]) as rt:
                rt.set_queue_rate(20, 2)
                with pytest.raises(RuntimeApiError):
                    rt.set_queue_rate(1, 2, 9)
                assert rt.read_counter("EchelonIngress.echelon_pkts", 3) == (4, counts_bytes(c))
            for f in frames(5, 0):
                tx.send(f)
            paced = receive(rx, 5)
            assert len(paced) == 5
            assert paced[-1][0] - paced[0][0] >= 4 * 0.05 * 0.8  # 20 pps: >= ~200 ms
    finally:
        c.close()


def test_bad_interface_exits_2(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            PYTHON,
            "-m",
            "softswitch",
            "-i",
            "1@sswnonexist0",
            "--thrift-port",
            str(free_port()),
            "--",
            "--grpc-server-addr",
            f"127.0.0.1:{free_port()}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
    )
    assert r.returncode == 2
    assert r.stderr.startswith("error: interface: sswnonexist0")
    assert "Traceback" not in r.stderr


def _rmem(ifname: str) -> int:
    """Bytes waiting in packet sockets bound to ``ifname`` (/proc/net/packet)."""
    idx = socket.if_nametoindex(ifname)
    total = 0
    for line in Path("/proc/net/packet").read_text().splitlines()[1:]:
        cols = line.split()
        if int(cols[4]) == idx:
            total += int(cols[6])
    return total


def test_frozen_switch_releases_burst_in_priority_order(switch: dict[str, Any]) -> None:
    """SIGSTOP, send 2 packets per priority interleaved, SIGCONT: out 7 7 6 6 ... 0 0."""
    names = Names(load_p4info())
    c = Client(switch["grpc"], election=1)
    target = switch["target"]
    try:
        assert c.arbitrate().arbitration.status.code == 0
        program(c, names)
        c.send_write(
            *[
                (
                    INSERT,
                    names.entry(
                        "EchelonIngress.deadline_prio",
                        {"meta.class_id": 3, "hdr.echelon.deadline_us": (k * 100, k * 100 + 99)},
                        "EchelonIngress.set_deadline_prio",
                        {"prio": 7 - k},
                        priority=1,
                    ),
                )
                for k in range(7)
            ]
        )
        base = Ether(dst="00:00:00:00:00:aa") / IP(src=H1, dst=H2, ttl=9)
        burst = []
        for rnd in range(2):
            burst.append(bytes(base / UDP(dport=7000) / b"plain"))
            burst += [
                bytes(base / UDP(dport=0xEC00) / Echelon(echelon_id=3, deadline_us=k * 100 + rnd))
                for k in range(7)
            ]
        # One size for every frame, so each takes the same socket memory (truesize)
        # and the switch's queue can be checked to hold the whole burst.
        burst = [f + bytes(120 - len(f)) for f in burst]
        tx = in_netns(switch["ns"][0], lambda: raw_socket("eth0"))
        rx = in_netns(switch["ns"][1], lambda: raw_socket("eth0"))
        with tx, rx:
            target.freeze()
            try:
                sw_if = f"{PREFIX}p1"
                tx.send(burst[0])
                one = wait_until(
                    lambda: _rmem(sw_if), 5, "the first frame queued at the frozen switch"
                )
                for f in burst[1:]:
                    tx.send(f)
                # All of it must be waiting before the switch resumes, or a loaded
                # machine lets it read (and send) the first frames on their own: wait
                # for 16 frames' worth of socket memory, or (should the kernel account
                # some frame differently) for the queue to stop growing for 0.3 s.
                seen: list[int] = []

                def all_queued() -> bool:
                    seen.append(_rmem(sw_if))
                    return seen[-1] >= len(burst) * one or (
                        len(seen) > 30 and seen[-30] == seen[-1] > 0
                    )

                wait_until(
                    all_queued, 10, "the whole burst queued at the frozen switch", interval=0.01
                )
            finally:
                target.thaw()
            got = receive(rx, len(burst))
        prios = [priority_for_dscp(Ether(d)[IP].tos >> 2) for _t, d in got]
        assert prios == [p for p in range(7, -1, -1) for _ in range(2)]
    finally:
        c.close()

"""``python -m softswitch.bench``: throughput, latency and table-size cost of a switch target.

    sudo .venv/bin/python -m softswitch.bench [--target soft|bmv2|both] [--rates ...]

Builds two host namespaces (``sswbh1``, ``sswbh2``) joined to a switch process
(the soft switch or BMv2 ``simple_switch_grpc``, started with the same command
line; ports 1 and 2, ``--priority-queues 8``, pinned to one CPU), programs it with
p4c's echelon.json and P4Info over
P4Runtime, and drives traffic with :mod:`softswitch.benchtraffic` from the
namespaces (on the other CPUs). Reports, as markdown:

* latency at low load (median / p99 one-way, sender to receiver, µs);
* offered vs delivered packets/s per offered rate, with 10 and with 10,000
  installed table entries; "loss-free" is the highest rate delivering all;
* in-process pipeline cost per packet (µs) with 10 and 10,000 entries.

``--target both`` runs the same sweep, with the same sender, on BMv2 then on the
soft switch and ends with a table of both loss-free rates and their ratio.
Needs root. Everything it creates is removed on exit. This is a command, not
a test: numbers depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from p4.config.v1 import p4info_pb2

from softswitch import benchtraffic as bt
from softswitch.main import load_p4info
from softswitch.p4rt_client import SimpleClient
from topo.targets import command_line

ROOT = Path(__file__).resolve().parents[1]
P4INFO = ROOT / "p4src" / "build" / "echelon.p4info.txtpb"
BMV2_JSON = ROOT / "p4src" / "build" / "echelon.json"
PREFIX = "sswb"
PY = sys.executable


def _ip(a: str) -> int:
    return int.from_bytes(socket.inet_aton(a), "big")


def _sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


def setup_net() -> list[tuple[str, str]]:
    made = []
    for i in (1, 2):
        ns, sw, peer = f"{PREFIX}h{i}", f"{PREFIX}p{i}", f"{PREFIX}e{i}"
        _sh("ip", "netns", "add", ns)
        made.append((sw, ns))
        _sh("ip", "link", "add", sw, "type", "veth", "peer", "name", peer)
        _sh("ip", "link", "set", peer, "netns", ns)
        _sh("ip", "-n", ns, "link", "set", peer, "name", "eth0")
        _sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        _sh("ip", "-n", ns, "link", "set", "eth0", "up")
        _sh("sysctl", "-qw", f"net.ipv6.conf.{sw}.disable_ipv6=1")
        _sh("ip", "link", "set", sw, "up")
    return made


def teardown_net() -> None:
    for i in (1, 2):
        subprocess.run(["ip", "link", "del", f"{PREFIX}p{i}"], capture_output=True)
        subprocess.run(["ip", "netns", "del", f"{PREFIX}h{i}"], capture_output=True)


def base_entries(c: SimpleClient) -> list[Any]:
    """Ten entries: route, echelon id, classify, seven deadline ranges (queues 7..1)."""
    out = [
        c.entry(
            "EchelonIngress.ipv4_lpm",
            {"hdr.ipv4.dstAddr": (_ip(bt.DST_IP), 32)},
            "EchelonIngress.ipv4_forward",
            {"dstAddr": 0x0902, "port": 2},
        ),
        c.entry(
            "EchelonIngress.echelon_ids", {"hdr.echelon.echelon_id": bt.ECHELON_ID}, "NoAction", {}
        ),
        c.entry(
            "EchelonIngress.echelon_classify",
            {"hdr.ipv4.srcAddr": _ip(bt.SRC_IP), "hdr.echelon.echelon_id": bt.ECHELON_ID},
            "EchelonIngress.set_echelon",
            {"class_id": 1, "prio": 1},
        ),
    ]
    for k in range(7):
        out.append(
            c.entry(
                "EchelonIngress.deadline_prio",
                {"meta.class_id": 1, "hdr.echelon.deadline_us": (1000 * k, 1000 * k + 999)},
                "EchelonIngress.set_deadline_prio",
                {"prio": 7 - k},
                priority=1,
            )
        )
    return out


def filler_entries(c: SimpleClient) -> list[Any]:
    """9,990 more entries that never match the benchmark traffic (10,000 in total)."""
    out = []
    for i in range(999):  # routes of mixed prefix lengths under 172.16/12
        plen = (32, 24, 20)[i % 3]
        addr = (_ip("172.16.0.0") + (i << 12)) & ~((1 << (32 - plen)) - 1) & 0xFFFFFFFF
        out.append(
            c.entry(
                "EchelonIngress.ipv4_lpm",
                {"hdr.ipv4.dstAddr": (addr, plen)},
                "EchelonIngress.ipv4_forward",
                {"dstAddr": 1, "port": 1},
            )
        )
    for i in range(999):
        out.append(
            c.entry(
                "EchelonIngress.echelon_ids", {"hdr.echelon.echelon_id": 100 + i}, "NoAction", {}
            )
        )
    for i in range(3999):
        out.append(
            c.entry(
                "EchelonIngress.echelon_classify",
                {
                    "hdr.ipv4.srcAddr": _ip("10.200.0.0") + i,
                    "hdr.echelon.echelon_id": 100 + i % 999,
                },
                "EchelonIngress.set_echelon",
                {"class_id": 2 + i % 1000, "prio": 3},
            )
        )
    for i in range(3993):
        cls, k = 2 + i // 4, i % 4
        out.append(
            c.entry(
                "EchelonIngress.deadline_prio",
                {"meta.class_id": cls, "hdr.echelon.deadline_us": (k * 500, k * 500 + 499)},
                "EchelonIngress.set_deadline_prio",
                {"prio": 4 - k},
                priority=1,
            )
        )
    return out


def traffic(rate: float, duration: float, cpus: str) -> dict[str, Any]:
    pin = ["taskset", "-c", cpus] if cpus else []
    rx = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            f"{PREFIX}h2",
            *pin,
            PY,
            "-m",
            "softswitch.benchtraffic",
            "recv",
            "--duration",
            str(duration + 10),
            "--idle",
            "0.5",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert rx.stdout is not None
        if rx.stdout.readline().strip() != "ready":
            raise RuntimeError("receiver did not start")
        tx = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                f"{PREFIX}h1",
                *pin,
                PY,
                "-m",
                "softswitch.benchtraffic",
                "send",
                "--rate",
                str(rate),
                "--duration",
                str(duration),
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=duration + 30,
            check=True,
        )
        out, _ = rx.communicate(timeout=duration + 30)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
    sent = json.loads(tx.stdout.strip().splitlines()[-1])
    got = json.loads(out.strip().splitlines()[-1])
    return {"rate": rate, **sent, **got, "loss": sent["sent"] - got["received"]}


def pipeline_cost(p4info: p4info_pb2.P4Info, fill: bool, n: int = 20000) -> float:
    """µs per packet through Pipeline.process (no sockets, no queues)."""
    from softswitch import p4rt_codec as codec
    from softswitch.bm.pipeline import Pipeline

    pl = Pipeline(p4info, BMV2_JSON.read_bytes(), 0)

    class Dummy(SimpleClient):
        def __init__(self) -> None:  # only the entry builder is used
            self.p4info = p4info
            self._tables = {t.preamble.name: t for t in p4info.tables}
            self._actions = {a.preamble.name: a for a in p4info.actions}

    d = Dummy()
    for te in base_entries(d) + (filler_entries(d) if fill else []):
        e = codec.decode_table_entry(pl, te, needs_action=True)
        assert e.call is not None
        e.info.table.insert(e.key, e.priority, e.call, e.proto)
    frames = [bytes(bt.frame(k)) for k in range(bt.KINDS)]
    gc.collect()  # do not bill the previous run's garbage to this one
    t0 = time.perf_counter()
    for i in range(n):
        pl.process(frames[i % bt.KINDS], 1)
    return (time.perf_counter() - t0) / n * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m softswitch.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--target", choices=("soft", "bmv2", "both"), default="soft")
    ap.add_argument(
        "--rates", default="1000,2000,3000,5000,10000,15000,20000,25000,30000,35000,40000"
    )
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--latency-rate", type=float, default=1000.0)
    ap.add_argument("--grpc-port", type=int, default=29559)
    ap.add_argument("--thrift-port", type=int, default=29090)
    args = ap.parse_args(argv)
    try:
        rates = sorted(float(r) for r in args.rates.split(","))
    except ValueError:
        print("error: rates: expected comma-separated numbers", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("error: privileges: the benchmark needs root (netns, raw sockets)", file=sys.stderr)
        return 2
    kinds = ["bmv2", "soft"] if args.target == "both" else [args.target]
    if "bmv2" in kinds and shutil.which("simple_switch_grpc") is None:
        print("error: target: simple_switch_grpc (BMv2) is not installed", file=sys.stderr)
        return 2
    cpus = sorted(os.sched_getaffinity(0))
    switch_cpu, traffic_cpus = cpus[-1], ",".join(str(c) for c in cpus[:-1])
    p4info = load_p4info(str(P4INFO))
    summary = {}
    for kind in kinds:
        summary[kind] = run_target(kind, args, rates, p4info, switch_cpu, traffic_cpus)
    if len(kinds) == 2:
        print("\n## summary (same run, same sender, switch pinned to one CPU)\n")
        print(
            "| entries | BMv2 loss-free | soft loss-free | soft / BMv2 "
            "| BMv2 max delivered | soft max delivered | soft / BMv2 |"
        )
        print("|---|---|---|---|---|---|---|")
        for n in (10, 10000):
            (b, bmax), (s_, smax) = summary["bmv2"][n], summary["soft"][n]
            ratio = f"{s_ / b:.1f}x" if b else "n/a"
            print(
                f"| {n} | {b:.0f} | {s_:.0f} | {ratio} | {bmax:.0f} | {smax:.0f} "
                f"| {smax / bmax:.1f}x |"
            )
    return 0


def run_target(
    kind: str,
    args: argparse.Namespace,
    rates: list[float],
    p4info: p4info_pb2.P4Info,
    switch_cpu: int,
    traffic_cpus: str,
) -> dict[int, tuple[float, float]]:
    """The whole sweep on one target; per entry count, the loss-free rate (the highest
    offered rate such that it and every lower one delivered every packet; 0 if the
    lowest lost) and the highest delivered rate."""
    teardown_net()
    proc = None
    lossfree: dict[int, tuple[float, float]] = {}
    try:
        setup_net()
        ports = {1: f"{PREFIX}p1", 2: f"{PREFIX}p2"}
        grpc = f"127.0.0.1:{args.grpc_port}"
        cmd = ["taskset", "-c", str(switch_cpu)]
        cmd += command_line(kind, ports, grpc, args.thrift_port)  # type: ignore[arg-type]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        client = None
        deadline = time.monotonic() + 20
        while client is None:
            try:
                client = SimpleClient(grpc, p4info)
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        # Both targets run p4c's BMv2 JSON (the soft switch compiles it to closures).
        client.set_pipeline(BMV2_JSON.read_bytes())
        client.insert(base_entries(client))
        print(f"# {kind} switch benchmark (switch on CPU {switch_cpu}, traffic on {traffic_cpus})")
        lat = traffic(args.latency_rate, args.duration, traffic_cpus)
        print(
            f"\nLatency at {lat['pps']:.0f} pkt/s: median {lat['p50_us']:.0f} µs, "
            f"p99 {lat['p99_us']:.0f} µs (lost {lat['loss']})"
        )
        for n_entries in (10, 10000):
            if n_entries == 10000:
                filler = filler_entries(client)
                t0 = time.monotonic()
                client.insert(filler)
                dt = time.monotonic() - t0
                print(
                    f"\nInstalled {len(filler)} more entries over P4Runtime in {dt:.2f} s "
                    f"({len(filler) / dt:.0f} entries/s, batches of 1000)"
                )
            rows = [traffic(r, args.duration, traffic_cpus) for r in rates]
            print(
                f"\n## {kind}, {n_entries} entries\n\n| target pps | offered pps | delivered pps |"
                " lost | p50 µs | p99 µs | per-queue (0..7) |\n|---|---|---|---|---|---|---|"
            )
            for r in rows:
                dpps = r["received"] / r["elapsed"]
                print(
                    f"| {r['rate']:.0f} | {r['pps']:.0f} | {dpps:.0f} | {r['loss']} | "
                    f"{r['p50_us']:.0f} | {r['p99_us']:.0f} | {r['per_prio']} |"
                )
            clean = 0.0
            for r in rows:  # rates ascend: stop at the first that lost anything
                if r["loss"]:
                    break
                clean = r["pps"]
            best = max(r["received"] / r["elapsed"] for r in rows)
            lossfree[n_entries] = (clean, best)
            print(f"\nloss-free up to: {clean:.0f} pkt/s; most delivered: {best:.0f} pkt/s")
        client.close()
        if kind == "soft":
            print("\n## pipeline cost in-process (µs/packet, median of 3 alternating runs)\n")
            small, big = [], []
            for _ in range(3):
                small.append(pipeline_cost(p4info, False))
                big.append(pipeline_cost(p4info, True))
            print(
                f"10 entries: {statistics.median(small):.2f}; "
                f"10000 entries: {statistics.median(big):.2f}"
            )
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        teardown_net()
    return lossfree


if __name__ == "__main__":
    sys.exit(main())

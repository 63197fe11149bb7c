"""``python -m bench.softswitch``: throughput, latency and table-size cost of a switch target.

    sudo .venv/bin/python -m bench.softswitch [--target soft|bmv2|both] [--rates ...]

Builds two host namespaces (``sswbh1``, ``sswbh2``) joined to a switch process
(the soft switch or BMv2 ``simple_switch_grpc``, started with the same command
line; ports 1 and 2, ``--priority-queues 8``, pinned to one CPU), programs it with
p4c's echelon.json and P4Info over
P4Runtime, and drives traffic with :mod:`bench.softswitch_traffic` from the
namespaces (on the other CPUs). Reports, as markdown:

* latency at low load (median / p99 one-way, sender to receiver, µs);
* offered vs delivered packets/s per offered rate, with 10 and with 10,000
  installed table entries; "loss-free" is the highest rate delivering all;
* in-process pipeline cost per packet (µs) with 10 and 10,000 entries.

``--cost-only`` measures only that cost (no root); ``--against DIR`` measures it
for the soft switch of another checkout too (e.g. ``git archive main`` unpacked in
DIR), each run in a fresh process, the two trees alternated, and prints the ratio
of the medians: an A/B of a change to the packet path under the same load.

``--target both`` runs the same sweep, with the same sender, on BMv2 then on the
soft switch and ends with a table of both loss-free rates and their ratio.
Needs root. Everything it creates is removed on exit. This is a command, not
a test: numbers depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench import softswitch_traffic as bt
from bench.softswitch_inserts import insert_rates, report
from controlplane.entries import classify_entry, ids_entry, range_entry
from p4client.codec import entry_to_proto
from p4client.p4info import P4Info, TableEntry
from p4client.p4rt import SwitchConnection
from targets.process import free_port
from targets.switch import start_target

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


@contextlib.contextmanager
def veth_switch(
    kind: str, info: P4Info, entries: Sequence[TableEntry], cpu: int
) -> Iterator[SwitchConnection]:
    """The two host namespaces joined to a ``kind`` switch (ports 1 and 2) pinned to
    ``cpu``, given p4c's echelon.json and ``entries``: a connection to it, open; the
    switch stopped and the namespaces removed on exit (this benchmark's and
    ``bench.read_bound --packets``'s)."""
    teardown_net()
    target = None
    try:
        setup_net()
        addr = f"127.0.0.1:{free_port()}"
        ports = {1: f"{PREFIX}p1", 2: f"{PREFIX}p2"}
        target = start_target(kind, ports, addr, free_port(), cpus=str(cpu))  # type: ignore[arg-type]
        with SwitchConnection(addr, p4info=info) as sw:
            # Both targets run p4c's BMv2 JSON (the soft switch executes it).
            sw.set_pipeline(info, BMV2_JSON.read_bytes())
            sw.write(sw.updates("INSERT", entries), chunk=1000)
            yield sw
    finally:
        if target is not None:
            target.stop()
        teardown_net()


def base_entries(c: P4Info) -> list[TableEntry]:
    """Ten entries: route, echelon id, classify, seven deadline ranges (queues 7..1)."""
    return [
        c.table_entry(
            "EchelonIngress.ipv4_lpm",
            {"hdr.ipv4.dstAddr": (_ip(bt.DST_IP), 32)},
            "EchelonIngress.ipv4_forward",
            {"dstAddr": 0x0902, "port": 2},
        ),
        ids_entry(c, bt.ECHELON_ID),
        classify_entry(c, _ip(bt.SRC_IP), bt.ECHELON_ID, 1, 1),
        *(range_entry(c, 1, 1000 * k, 1000 * k + 999, 7 - k) for k in range(7)),
    ]


def filler_entries(c: P4Info) -> list[TableEntry]:
    """9,990 more entries that never match the benchmark traffic (10,000 in total)."""
    out = []
    for i in range(999):  # routes of mixed prefix lengths under 172.16/12
        plen = (32, 24, 20)[i % 3]
        addr = (_ip("172.16.0.0") + (i << 12)) & ~((1 << (32 - plen)) - 1) & 0xFFFFFFFF
        out.append(
            c.table_entry(
                "EchelonIngress.ipv4_lpm",
                {"hdr.ipv4.dstAddr": (addr, plen)},
                "EchelonIngress.ipv4_forward",
                {"dstAddr": 1, "port": 1},
            )
        )
    out += [ids_entry(c, 100 + i) for i in range(999)]
    ip0 = _ip("10.200.0.0")
    out += [classify_entry(c, ip0 + i, 100 + i % 999, 2 + i % 1000, 3) for i in range(3999)]
    for i in range(3993):
        cls, k = 2 + i // 4, i % 4
        out.append(range_entry(c, cls, k * 500, k * 500 + 499, 4 - k))
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
            "bench.softswitch_traffic",
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
                "bench.softswitch_traffic",
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


def pipeline_cost(info: P4Info, fill: bool, n: int = 20000) -> float:
    """CPU µs per packet through Pipeline.process (no sockets, no queues); CPU time, so
    that other processes on a loaded machine do not count."""
    from softswitch import p4rt_codec as codec
    from softswitch.bm.pipeline import Pipeline

    pl = Pipeline(info.proto, BMV2_JSON.read_bytes(), 0)
    decoder = codec.Decoder(pl)
    for entry in base_entries(info) + (filler_entries(info) if fill else []):
        te = entry_to_proto(info, entry)
        e = decoder.table_entry(te, needs_action=True)
        assert e.call is not None
        e.info.table.insert(e.key, e.priority, e.call, e.proto)
    frames = [bytes(bt.frame(k)) for k in range(bt.KINDS)]
    gc.collect()  # do not bill the previous run's garbage to this one
    t0 = time.process_time()
    for i in range(n):
        pl.process(frames[i % bt.KINDS], 1)
    return (time.process_time() - t0) / n * 1e6


def cost_runs(trees: list[str], runs: int) -> list[list[tuple[float, float]]]:
    """Per tree, ``runs`` x (µs/packet with 10, with 10,000 entries), each run a fresh
    process importing the soft switch of that tree; the trees alternate."""
    # imported here: the worker runs this file's top level against the other tree,
    # which may predate this helper
    from targets.process import pythonpath

    out: list[list[tuple[float, float]]] = [[] for _ in trees]
    for _ in range(runs):
        for i, tree in enumerate(trees):
            # this file's worker, run with that tree's packages first on the path
            code = (
                "import runpy, sys; sys.argv[1:] = ['--cost-worker']; "
                f"runpy.run_path({__file__!r}, run_name='__main__')"
            )
            env = {**os.environ, "PYTHONPATH": pythonpath(tree)}
            run = subprocess.run(
                [PY, "-c", code], env=env, cwd=tree, capture_output=True, text=True
            )
            if run.returncode:
                raise RuntimeError(f"{tree}: cost worker failed: {run.stderr.strip()}")
            small, big = json.loads(run.stdout.strip().splitlines()[-1])
            out[i].append((small, big))
    return out


def cost_report(args: argparse.Namespace, info: P4Info) -> int:
    """``--cost-only``: the per-packet cost table (and ratio to ``--against``)."""
    trees = [str(ROOT)] + ([str(Path(args.against).resolve())] if args.against else [])
    results = cost_runs(trees, args.cost_runs)
    runs = args.cost_runs
    print(f"## pipeline cost in-process (CPU µs/packet, median of {runs} alternating runs)\n")
    print("| tree | 10 entries | 10,000 entries |\n|---|---|---|")
    medians = []
    for tree, rows in zip(trees, results, strict=True):
        m = (statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows))
        medians.append(m)
        print(f"| {tree} | {m[0]:.2f} | {m[1]:.2f} |")
    if len(medians) == 2:
        (a, b), (c, d) = medians
        print(f"\nratio this / against: {a / c:.3f} (10 entries), {b / d:.3f} (10,000 entries)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.softswitch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--target", choices=("soft", "bmv2", "both"), default="soft")
    ap.add_argument(
        "--rates", default="1000,2000,3000,5000,10000,15000,20000,25000,30000,35000,40000"
    )
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--latency-rate", type=float, default=1000.0)
    ap.add_argument("--insert-rounds", type=int, default=3)
    ap.add_argument(
        "--inserts-only",
        action="store_true",
        help="only the P4Runtime insert rate, soft switch vs BMv2 (no root needed)",
    )
    ap.add_argument(
        "--cost-only",
        action="store_true",
        help="only the in-process per-packet cost of the echelon program (no root needed)",
    )
    ap.add_argument("--against", metavar="DIR", help="with --cost-only: A/B against DIR's tree")
    ap.add_argument("--cost-runs", type=int, default=7)
    ap.add_argument("--cost-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.cost_worker:
        info = P4Info.load(P4INFO)
        print(json.dumps([pipeline_cost(info, False), pipeline_cost(info, True)]))
        return 0
    if args.cost_only:
        return cost_report(args, P4Info.load(P4INFO))
    try:
        rates = sorted(float(r) for r in args.rates.split(","))
    except ValueError:
        print("error: rates: expected comma-separated numbers", file=sys.stderr)
        return 2
    cpus = sorted(os.sched_getaffinity(0))
    switch_cpu, traffic_cpus = cpus[-1], ",".join(str(c) for c in cpus[:-1])
    info = P4Info.load(P4INFO)
    filler = filler_entries(info)
    if args.inserts_only:
        ins = insert_rates(filler, args.insert_rounds, cpus=str(switch_cpu))
        print(report(ins, len(filler), 1000))
        return 0
    if os.geteuid() != 0:
        print("error: privileges: the benchmark needs root (netns, raw sockets)", file=sys.stderr)
        return 2
    kinds = ["bmv2", "soft"] if args.target == "both" else [args.target]
    if "bmv2" in kinds and shutil.which("simple_switch_grpc") is None:
        print("error: target: simple_switch_grpc (BMv2) is not installed", file=sys.stderr)
        return 2
    summary = {}
    for kind in kinds:
        summary[kind] = run_target(kind, args, rates, info, filler, switch_cpu, traffic_cpus)
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
    print("\n## P4Runtime insert rate, soft switch vs BMv2\n")
    ins = insert_rates(filler, args.insert_rounds, cpus=str(switch_cpu))
    print(report(ins, len(filler), 1000))
    return 0


def run_target(
    kind: str,
    args: argparse.Namespace,
    rates: list[float],
    info: P4Info,
    filler: list[TableEntry],
    switch_cpu: int,
    traffic_cpus: str,
) -> dict[int, tuple[float, float]]:
    """The whole sweep on one target; per entry count, the loss-free rate (the highest
    offered rate such that it and every lower one delivered every packet; 0 if the
    lowest lost) and the highest delivered rate."""
    lossfree: dict[int, tuple[float, float]] = {}
    with veth_switch(kind, info, base_entries(info), switch_cpu) as sw:
        print(f"# {kind} switch benchmark (switch on CPU {switch_cpu}, traffic on {traffic_cpus})")
        lat = traffic(args.latency_rate, args.duration, traffic_cpus)
        print(
            f"\nLatency at {lat['pps']:.0f} pkt/s: median {lat['p50_us']:.0f} µs, "
            f"p99 {lat['p99_us']:.0f} µs (lost {lat['loss']})"
        )
        for n_entries in (10, 10000):
            if n_entries == 10000:
                t0 = time.monotonic()
                sw.write(sw.updates("INSERT", filler), chunk=1000)
                dt = time.monotonic() - t0
                print(
                    f"\nInstalled {len(filler)} more entries over P4Runtime in {dt:.2f} s "
                    f"({len(filler) / dt:.0f} entries/s, batches of 1000)"
                )
            rows = [traffic(r, args.duration, traffic_cpus) for r in rates]
            print(
                f"\n## {kind}, {n_entries} entries\n\n| target pps | offered pps |"
                " delivered pps | lost | p50 µs | p99 µs | per-queue (0..7) |"
                "\n|---|---|---|---|---|---|---|"
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
    if kind == "soft":
        print("\n## pipeline cost in-process (CPU µs/packet, median of 3 alternating runs)\n")
        small, big = [], []
        for _ in range(3):
            small.append(pipeline_cost(info, False))
            big.append(pipeline_cost(info, True))
        print(
            f"10 entries: {statistics.median(small):.2f}; "
            f"10000 entries: {statistics.median(big):.2f}"
        )
    return lossfree


if __name__ == "__main__":
    sys.exit(main())

"""``python -m bench.read_bound``: what a huge P4Runtime Read costs the soft switch.

Starts a soft switch and the controller daemon (as ``bench.controller`` does),
registers ``--jobs`` jobs, then times ``--probes`` registrations (each removed
again) through the HTTP API twice: alone, and while a second client sends Reads
without pause, alternating

* the hostile one: a ``ReadRequest`` of 1,000 empty ``counter_entry`` entities
  (4 KB; it used to answer 1.04 M entities and grow the switch by 1.17 GB), and
* the largest Read the bound allows with the switch's table contents: ``k``
  wildcard ``table_entry`` entities (k = min(1000, limit / entries)), streamed.

Prints the switch's resident memory (VmRSS) and peak (VmHWM) before and after,
each Read's outcome and time, and the registration latency p50 / p99 / max alone
and under the Reads. A command, not a test: numbers depend on the machine.

``--packets`` (root: veth pairs and namespaces, as ``bench.softswitch``) measures
instead whether packets keep flowing while a Read runs: a soft switch with data
ports on veths (pinned to one CPU), the ten benchmark entries plus 9,990 filler
entries, and a steady stream of echelon-tagged packets (``--rate`` pkt/s, below
the loss-free rate) for ``--duration`` s in three phases: alone, while a second
client sends the hostile Read back to back (refused), and while it sends the
largest allowed table Read back to back (streamed). Per phase: packets sent,
received, lost, and one-way latency p50 / p99.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from finsy.proto import p4r

from bench import softswitch as ssb
from bench.controller import Bench
from bench.harness import pct, run_cli
from echelon.waiting import wait_until
from p4client.p4info import P4Info
from p4client.p4rt import SwitchConnection
from softswitch.grpc_limits import Limits

#: Seconds the first Read may take to answer before the bench gives up.
READ_START_TIMEOUT_S = 30.0


def mem_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def stats(xs: list[float]) -> str:
    p50, p99 = statistics.median(xs), pct(xs, 0.99)
    return f"p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms, max {max(xs) * 1e3:.1f} ms"


class Reader:
    """A second P4Runtime client sending ``kinds`` of Read in turn until stopped."""

    def __init__(
        self,
        addr: str,
        k: int,
        election_low: int = 0,
        kinds: tuple[str, ...] = ("hostile", "big"),
    ) -> None:
        self.addr = addr
        self.kinds = kinds
        self.election_low = election_low
        self.hostile = p4r.ReadRequest(
            device_id=0, entities=[p4r.Entity(counter_entry=p4r.CounterEntry())] * 1000
        )
        self.big = p4r.ReadRequest(
            device_id=0, entities=[p4r.Entity(table_entry=p4r.TableEntry())] * k
        )
        self.out: dict[str, list[tuple[str, int, float]]] = {"hostile": [], "big": []}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def once(self, stub: Any, which: str) -> None:
        req = self.hostile if which == "hostile" else self.big
        t0 = time.perf_counter()
        try:
            n = sum(len(r.entities) for r in stub.Read(req, timeout=60))
            code = "OK"
        except grpc.RpcError as exc:
            n, code = 0, exc.code().name
        self.out[which].append((code, n, time.perf_counter() - t0))

    def _run(self) -> None:
        with SwitchConnection(self.addr, election_id=(0, self.election_low)) as sw:
            while not self._stop.is_set():
                for which in self.kinds:
                    self.once(sw.stub, which)

    def start(self) -> None:
        """Start, and return once the first Read answered (the Reads are going on)."""
        self._thread.start()
        wait_until(
            lambda: any(self.out.values()) or not self._thread.is_alive(),
            READ_START_TIMEOUT_S,
            "the first Read's answer",
        )

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)


def probe(bench: Bench, prefix: str, probes: int) -> list[float]:
    """Registration times of ``probes`` jobs, each removed again (the switch's entry
    count, hence the big Read's size, stays what it was)."""
    out = []
    for i in range(probes):
        out.append(bench.register(f"{prefix}{i}"))
        bench.remove(f"{prefix}{i}")
    return out


def run(jobs: int, probes: int) -> int:
    with tempfile.TemporaryDirectory(prefix="echelon-read-") as d:
        bench = Bench(Path(d), "soft")
        try:
            bench.start_switch()
            bench.start_daemon()
            assert bench.switch is not None
            pid = bench.switch.pid
            for i in range(jobs):
                bench.register(f"bg{i}")
            entries = sum(bench.status()["switches"]["s1"]["entries"].values())
            k = max(1, min(1000, Limits().max_read_entities // max(1, entries)))
            print(f"switch: {entries} table entries; big Read = {k} table wildcards")
            rss0 = mem_mb(pid)
            alone = probe(bench, "a", probes)
            reader = Reader(f"127.0.0.1:{bench.grpc}", k)
            reader.start()
            loaded = probe(bench, "b", probes)
            reader.stop()
            rss1 = mem_mb(pid)
            for which, got in reader.out.items():
                codes = sorted({c for c, _, _ in got})
                print(
                    f"{which} Read: {len(got)} sent, outcome {codes}, "
                    f"{max(n for _, n, _ in got)} entities, {stats([t for _, _, t in got])}"
                )
            print(f"switch memory before: RSS {rss0[0]:.0f} MB (peak {rss0[1]:.0f} MB)")
            print(f"switch memory after:  RSS {rss1[0]:.0f} MB (peak {rss1[1]:.0f} MB)")
            print(f"registration alone:       {stats(alone)}")
            print(f"registration under Reads: {stats(loaded)}")
            delay = max(loaded) - statistics.median(alone)
            grew = rss1[1] - rss0[0]
            print(f"worst delay {delay * 1e3:.1f} ms; peak growth {grew:.0f} MB")
            return 0 if delay < 0.1 and grew < 100 else 1
        finally:
            bench.close()


def run_packets(rate: float, duration: float) -> int:
    """Packets through the soft switch alone and under each kind of Read (see above)."""
    cpus = sorted(os.sched_getaffinity(0))
    switch_cpu, traffic_cpus = cpus[-1], ",".join(str(c) for c in cpus[:-1])
    info = P4Info.load(ssb.P4INFO)
    entries = ssb.base_entries(info) + ssb.filler_entries(info)
    k = max(1, min(1000, Limits().max_read_entities // len(entries)))
    with ssb.veth_switch("soft", info, entries, switch_cpu) as sw:
        print(
            f"soft switch on CPU {switch_cpu}, traffic on {traffic_cpus}; {len(entries)} "
            f"table entries; big Read = {k} table wildcards; {rate:.0f} pkt/s for {duration} s"
        )
        print(
            "\n| phase | sent | received | lost | p50 µs | p99 µs | Reads (outcome, entities, "
            "time) |\n|---|---|---|---|---|---|---|"
        )
        failed = False
        phases: list[tuple[str, tuple[str, ...]]] = [
            ("alone", ()),
            ("hostile Reads", ("hostile",)),
            ("big Reads", ("big",)),
        ]
        for phase, kinds in phases:
            reader = Reader(sw.grpc_addr, k, kinds=kinds) if kinds else None
            if reader is not None:
                reader.start()
            try:
                r = ssb.traffic(rate, duration, traffic_cpus)
            finally:
                if reader is not None:
                    reader.stop()
            reads = "-"
            if reader is not None:
                got = reader.out[kinds[0]]
                codes = sorted({c for c, _, _ in got})
                reads = (
                    f"{len(got)} × {codes}, {max(n for _, n, _ in got)}, "
                    f"{stats([t for _, _, t in got])}"
                )
            failed |= bool(r["loss"])
            print(
                f"| {phase} | {r['sent']} | {r['received']} | {r['loss']} | {r['p50_us']:.0f} "
                f"| {r['p99_us']:.0f} | {reads} |"
            )
        return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.read_bound", description=__doc__)
    p.add_argument("--jobs", type=int, default=10, help="jobs registered first")
    p.add_argument("--probes", type=int, default=50, help="registrations timed per phase")
    p.add_argument(
        "--packets", action="store_true", help="packet flow during Reads instead (needs root)"
    )
    p.add_argument("--rate", type=float, default=3000.0, help="--packets: offered pkt/s")
    p.add_argument("--duration", type=float, default=4.0, help="--packets: seconds per phase")
    args = p.parse_args(argv)
    if args.jobs < 0 or args.probes < 1:
        print("error: --jobs >= 0, --probes >= 1", file=sys.stderr)
        return 2
    if args.packets:
        if args.rate <= 0 or args.duration <= 0:
            print("error: --rate and --duration must be > 0", file=sys.stderr)
            return 2
        if os.geteuid() != 0:
            print("error: privileges: --packets needs root (netns, raw sockets)", file=sys.stderr)
            return 2
        return run_cli(lambda: run_packets(args.rate, args.duration))
    return run_cli(lambda: run(args.jobs, args.probes))


if __name__ == "__main__":
    sys.exit(main())

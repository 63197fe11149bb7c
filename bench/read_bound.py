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
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from finsy.proto import p4r

from bench.controller import Bench
from p4client.p4rt import SwitchConnection
from softswitch.grpc_limits import MAX_READ_ENTITIES


def mem_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def stats(xs: list[float]) -> str:
    xs = sorted(xs)
    p99 = xs[min(len(xs) - 1, int(0.99 * len(xs)))]
    p50 = statistics.median(xs)
    return f"p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms, max {xs[-1] * 1e3:.1f} ms"


class Reader:
    """A second P4Runtime client sending the two Reads in turn until stopped."""

    def __init__(self, addr: str, k: int, election_low: int = 0) -> None:
        self.addr = addr
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
                self.once(sw.stub, "hostile")
                self.once(sw.stub, "big")

    def start(self) -> None:
        self._thread.start()

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
            k = max(1, min(1000, MAX_READ_ENTITIES // max(1, entries)))
            print(f"switch: {entries} table entries; big Read = {k} table wildcards")
            rss0 = mem_mb(pid)
            alone = probe(bench, "a", probes)
            reader = Reader(f"127.0.0.1:{bench.grpc}", k)
            reader.start()
            while len(reader.out["big"]) < 1:  # the Reads are going on (poll, bench only)
                time.sleep(0.01)
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.read_bound", description=__doc__)
    p.add_argument("--jobs", type=int, default=10, help="jobs registered first")
    p.add_argument("--probes", type=int, default=50, help="registrations timed per phase")
    args = p.parse_args(argv)
    if args.jobs < 0 or args.probes < 1:
        print("error: --jobs >= 0, --probes >= 1", file=sys.stderr)
        return 2
    return run(args.jobs, args.probes)


if __name__ == "__main__":
    sys.exit(main())

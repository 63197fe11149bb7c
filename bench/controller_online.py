"""``python -m bench.controller_online``: online re-planning, end to end.

Starts a switch (``--target soft|bmv2``) and the controller daemon with
``--replan online``, registers ``--jobs`` explicit two-group jobs, then drives
progress reports through the HTTP API (``POST /progress``):

* **isolated events** (``--events``): one report at a time, each after the
  previous re-plan's interval has passed, with ``wait=true`` (the API answers
  after the re-plan it caused was acknowledged by the switch). ``--alive`` jobs
  are in flight at any time: each event releases one job's iteration (both groups)
  or finishes the oldest in-flight one. Reaction time = report arrival at the
  controller -> the switch acknowledged the re-plan's last write (the controller
  measures it; the client's round trip, which adds HTTP and JSON, is printed too).
* **burst** (``--burst-s``): ``--threads`` clients report as fast as they can
  without waiting: re-plans/s, updates/s, reaction p50/p99 (now including the wait
  for the re-plan interval: coalescing), controller CPU (utime + stime of the
  daemon process over the phase, from /proc).
* **counters**: how long one read of every ``echelon_pkts`` counter takes (what
  polling the switch for progress would cost per poll; docs/controller.md).

Afterwards every job's classify entries on the switch are read back and compared
with the levels ``GET /jobs/{job}`` reports (the re-plans really reached the switch).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from bench.controller import Bench
from bench.harness import pct, run_cli
from p4client.p4rt import SwitchConnection

CLK_TCK = os.sysconf("SC_CLK_TCK")


def job(name: str, k: int) -> dict[str, Any]:
    """Two groups into h4: ``a`` small and staggered, ``b`` larger by job index (so the
    policy's order between jobs' groups depends on which are in flight)."""
    a = [
        {"src": "h1", "dst": "h4", "size": 20000, "offset": 0.0},
        {"src": "h1", "dst": "h4", "size": 20000, "offset": 0.004},
    ]
    b = [
        {"src": "h2", "dst": "h4", "size": 50000 + 5000 * (k % 40), "offset": 0.0},
        {"src": "h3", "dst": "h4", "size": 50000, "offset": 0.001 * (k % 7)},
    ]
    return {
        "job": name,
        "echelonflows": [
            {"group": "a", "t_ref": 0.0, "flows": a},
            {"group": "b", "t_ref": 0.002 * (k % 5), "flows": b},
        ],
    }


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Reporter:
    """Sequence-numbered snapshots per (job, host), as the library sends them."""

    def __init__(self, bench: Bench) -> None:
        self.b = bench
        self.session = uuid.uuid4().hex[:8]
        self.seq = 0
        self.lock = threading.Lock()

    def body(self, job: str, host: str, it: int, rel: list[str], fin: list[str]) -> dict[str, Any]:
        with self.lock:
            self.seq += 1
            seq = self.seq
        return {
            "job": job,
            "host": host,
            "iteration": it,
            "session": self.session,
            "seq": seq,
            "released": rel,
            "finished": fin,
        }

    def send(self, body: dict[str, Any], wait: bool) -> dict[str, Any]:
        r = self.b.http.post("/progress", json=body, params={"wait": str(wait).lower()})
        if r.status_code != 200:
            raise SystemExit(f"error: POST /progress: {r.status_code} {r.text}")
        return dict(r.json())


def events(n_jobs: int, alive: int) -> list[tuple[str, str, int, list[str], list[str]]]:
    """Release job k's iteration (h1 sends ``a``, h2 ``b``) and finish, at h4, the job
    released ``alive`` steps earlier: ``alive`` jobs are in flight. 50 rounds of jobs."""
    out: list[tuple[str, str, int, list[str], list[str]]] = []
    for k in range(50 * n_jobs):
        j, it = k % n_jobs, k // n_jobs
        out.append((f"j{j}", "h1", it, ["a"], []))
        out.append((f"j{j}", "h2", it, ["b"], []))
        if k >= alive:
            o = k - alive
            out.append((f"j{o % n_jobs}", "h4", o // n_jobs, [], ["a", "b"]))
    return out


def run(kind: Literal["soft", "bmv2"], n_jobs: int, n_events: int, alive: int,
        interval_ms: float, burst_s: float, threads: int) -> None:  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="echelon-bench-online-") as d:
        b = Bench(Path(d), kind, "--replan", "online", "--replan-interval-ms", str(interval_ms))
        try:
            b.start_switch()
            b.start_daemon()
            for k in range(n_jobs):
                b.register(f"j{k}", job(f"j{k}", k))
            rep = Reporter(b)
            evs = events(n_jobs, alive)
            print(f"target {kind}, {n_jobs} jobs registered, {alive} in flight, "
                  f"interval {interval_ms} ms")  # fmt: skip
            # ---- isolated events
            react: list[float] = []
            rtt: list[float] = []
            replan: list[float] = []
            upd: list[int] = []
            plan: list[float] = []
            wake: list[float] = []
            write: list[float] = []
            floor: list[float] = []  # one-cell counter read: the machine's RPC round trip
            probe = SwitchConnection(f"127.0.0.1:{b.grpc}", election_id=(0, 0), p4info=b.p4info)
            probe.connect()
            c0, t0 = cpu_s(b.daemon.pid), time.monotonic()
            k = 0
            while len(react) < n_events:
                ev = evs[k % len(evs)]
                k += 1
                t = time.perf_counter()
                out = rep.send(rep.body(*ev), wait=True)
                dt = time.perf_counter() - t
                if not out.get("changed"):
                    continue
                if not out.get("covered") or out.get("error"):
                    raise SystemExit(f"error: re-plan failed: {out}")
                react.append(float(out["reaction_ms"]))
                replan.append(float(out["replan_ms"]))
                plan.append(float(out["plan_ms"]))
                wake.append(float(out["wake_ms"]))
                write.append(float(out["write_ms"]))
                upd.append(int(out["updates"]))
                rtt.append(dt * 1e3)
                t = time.perf_counter()
                probe.read_counter("echelon_pkts", 0)
                floor.append((time.perf_counter() - t) * 1e3)
                time.sleep(interval_ms / 1e3)  # pacing: the next report finds no re-plan due
            probe.close()
            wall = time.monotonic() - t0
            cpu = cpu_s(b.daemon.pid) - c0
            print(
                f"isolated: {len(react)} events; reaction p50 {pct(react, 0.5):.2f} ms, "
                f"p99 {pct(react, 0.99):.2f} ms, max {max(react):.2f} ms; "
                f"client round trip p50 {pct(rtt, 0.5):.2f} ms, p99 {pct(rtt, 0.99):.2f} ms; "
                f"re-plan p50 {pct(replan, 0.5):.2f} ms (policy + quantiser "
                f"{pct(plan, 0.5):.2f} ms); updates/re-plan mean "
                f"{statistics.mean(upd):.1f}; controller CPU {100 * cpu / wall:.0f} %"
            )
            parts = {"wake-up": wake, "policy + quantiser": plan, "diff + writes + acks": write}
            shown = [f"{k} {pct(v, 0.5):.2f} / {pct(v, 0.99):.2f}" for k, v in parts.items()]
            print("  parts, p50 / p99 ms: " + "; ".join(shown))
            print(f"  RPC floor (one-cell counter read from this process, between events): "
                  f"p50 {pct(floor, 0.5):.2f} ms, p99 {pct(floor, 0.99):.2f} ms")  # fmt: skip
            # ---- burst
            if burst_s > 0:
                before = b.http.get("/progress").json()["online"]
                stop = time.monotonic() + burst_s
                sent = [0] * threads
                pos = [k]

                def client(i: int) -> None:
                    import httpx

                    http = httpx.Client(base_url=b.api, timeout=60)
                    while time.monotonic() < stop:
                        with rep.lock:
                            ev = evs[pos[0] % len(evs)]
                            pos[0] += 1
                        body = rep.body(*ev)
                        r = http.post("/progress", json=body)
                        if r.status_code != 200:
                            raise SystemExit(f"error: POST /progress: {r.status_code}")
                        sent[i] += 1
                    http.close()

                c0, t0 = cpu_s(b.daemon.pid), time.monotonic()
                ts = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
                for th in ts:
                    th.start()
                for th in ts:
                    th.join()
                wall = time.monotonic() - t0
                cpu = cpu_s(b.daemon.pid) - c0
                after = b.http.get("/progress").json()["online"]
                n_rp = after["replans"] - before["replans"]
                n_up = after["updates"] - before["updates"]
                print(
                    f"burst: {sum(sent)} reports in {wall:.1f} s ({sum(sent) / wall:.0f}/s, "
                    f"{threads} clients); {n_rp / wall:.1f} re-plans/s, {n_up / wall:.0f} "
                    f"updates/s; controller CPU {100 * cpu / wall:.0f} %; reaction over the "
                    f"whole run p50 {after['reaction_ms']['p50']:.2f} ms, "
                    f"p99 {after['reaction_ms']['p99']:.2f} ms (without the interval wait "
                    f"p50 {after['reaction_active_ms']['p50']:.2f} ms, "
                    f"p99 {after['reaction_active_ms']['p99']:.2f} ms)"
                )
            # ---- counters: the cost of polling the switch instead
            addr = f"127.0.0.1:{b.grpc}"
            with SwitchConnection(addr, election_id=(0, 0), p4info=b.p4info) as sw:
                reads = []
                for _ in range(50):
                    t = time.perf_counter()
                    sw.read_counter("echelon_pkts")
                    reads.append((time.perf_counter() - t) * 1e3)
                # ---- check: what the API says is what the switch holds
                classify = {
                    (int(e.match_dict()["hdr.echelon.echelon_id"]), int(e.params_dict()["prio"]))  # type: ignore[arg-type]
                    for e in sw.read_table_entries("echelon_classify")
                }
            print(f"counter read (all echelon_pkts): p50 {pct(reads, 0.5):.2f} ms, "
                  f"p99 {pct(reads, 0.99):.2f} ms")  # fmt: skip
            bad = 0
            for j in range(n_jobs):
                for g in b.http.get(f"/jobs/j{j}").json()["groups"]:
                    if (g["echelon_id"], g["priority"]) not in classify:
                        bad += 1
            if bad:
                raise SystemExit(f"error: {bad} groups' levels differ between API and switch")
            print(f"check: all {2 * n_jobs} groups' levels on the switch match GET /jobs")
        finally:
            b.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.controller_online", description=__doc__)
    p.add_argument("--target", choices=("soft", "bmv2"), default="soft")
    p.add_argument("--jobs", type=int, default=100, help="registered jobs (2 groups each)")
    p.add_argument("--events", type=int, default=300, help="isolated events to time")
    p.add_argument("--alive", type=int, default=8, help="jobs in flight at once")
    p.add_argument("--interval-ms", type=float, default=10.0, help="daemon's re-plan interval")
    p.add_argument("--burst-s", type=float, default=5.0, help="burst phase length (0: skip)")
    p.add_argument("--threads", type=int, default=4, help="burst clients")
    a = p.parse_args(argv)
    if not 1 <= a.jobs <= 500 or a.events < 1 or not 0 <= a.alive < a.jobs or a.threads < 1:
        print("error: --jobs: 1..500, --events >= 1, 0 <= --alive < --jobs, --threads >= 1",
              file=sys.stderr)  # fmt: skip
        return 2
    return run_cli(
        lambda: run(a.target, a.jobs, a.events, a.alive, a.interval_ms, a.burst_s, a.threads),
        a.target,
    )


if __name__ == "__main__":
    sys.exit(main())

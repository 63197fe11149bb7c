"""``python -m bench.controller``: registration latency and write rate, end to end.

Starts a soft switch and the controller daemon (free ports, temporary registry),
then, with N = 1, 100 and 1,000 jobs already registered, times ``--probes``
registrations of one more job through the HTTP API (the API answers only after
every switch acknowledged the writes) and its removal. After each probe the
switch is read back to check the probe's entries really are installed (outside
the timed section). "fill updates/s" is the write rate while the background jobs
up to N were registered back to back (updates written / summed request time).
Finally the daemon is killed, the switch restarted empty and the daemon
restarted: the bulk write rate is the restarted agent's reconciliation (read
the empty switch back, diff against the desired set, write every entry) as the
daemon's /status reports it; the time including daemon start-up is printed too.
``--target bmv2`` drives simple_switch_grpc instead (needs p4src/build/echelon.json).

Every job is an explicit two-source EchelonFlow (1 ids + 2 classify + its ranges
entries). Numbers go to stdout; docs/controller.md records them with the command.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any, Literal

import httpx
import yaml

from bench.harness import pct, run_cli, timed
from controlplane.daemon import DEFAULT_P4INFO, DaemonProcess
from controlplane.registry import SYNC_MODES
from echelon.topology import one_switch
from p4client.p4info import P4Info
from p4client.p4rt import SwitchConnection
from targets.process import free_port
from targets.switch import Target, start_target


def job(name: str) -> dict[str, Any]:
    flows = [
        {"src": "h1", "dst": "h4", "size": 100000, "offset": 0.0},
        {"src": "h2", "dst": "h4", "size": 100000, "offset": 0.002},
    ]
    return {"job": name, "echelonflows": [{"group": "g", "flows": flows}]}


class Bench:
    """A switch and the daemon on a one-switch topology; ``daemon_args``: extra daemon
    options (``bench.controller_online``: ``--replan``)."""

    def __init__(self, tmp: Path, kind: Literal["soft", "bmv2"], *daemon_args: str) -> None:
        self.tmp = tmp
        self.kind = kind
        self.grpc = free_port()
        self.p4info = P4Info.load(DEFAULT_P4INFO)
        self.topo = tmp / "topo.yaml"
        topo = one_switch("bench", f"127.0.0.1:{self.grpc}", 9)  # nothing serves Thrift
        self.topo.write_text(yaml.safe_dump(topo))
        self.switch: Target | None = None
        self.daemon = DaemonProcess(
            self.topo, tmp / "reg.db", tmp / "daemon.log", "--log-level", "warning", *daemon_args
        )
        self.api = self.daemon.url
        self.http = httpx.Client(base_url=self.api, timeout=60)

    def start_switch(self) -> None:
        addr = f"127.0.0.1:{self.grpc}"
        log = self.tmp / "switch.log"
        self.switch = start_target(self.kind, {}, addr, free_port(), log_path=log)

    def start_daemon(self) -> float:
        """Start the daemon; the seconds until it had the switch in sync."""
        t0 = time.monotonic()
        self.daemon.start()
        # polling the API contends with the reconciliation being measured: 50 ms
        self.daemon.wait_in_sync(300, "s1", 0.05)
        return time.monotonic() - t0

    def status(self) -> dict[str, Any]:
        r = self.http.get("/status")
        r.raise_for_status()
        return dict(r.json())

    def register(self, name: str, body: dict[str, Any] | None = None) -> float:
        """Register ``body`` (default: :func:`job`) as ``name``: the request's wall time."""
        r, dt, _ = timed(partial(self.http.post, "/jobs", json=body or job(name)))
        if r.status_code != 201:
            raise SystemExit(f"error: registering {name}: {r.status_code} {r.text}")
        return dt

    def remove(self, name: str) -> float:
        r, dt, _ = timed(partial(self.http.delete, f"/jobs/{name}"))
        if r.status_code != 200:
            raise SystemExit(f"error: removing {name}: {r.status_code} {r.text}")
        return dt

    def installed_ids(self) -> set[int]:
        addr = f"127.0.0.1:{self.grpc}"
        with SwitchConnection(addr, election_id=(0, 0), p4info=self.p4info) as sw:
            return {
                int(e.match_dict()["hdr.echelon.echelon_id"])  # type: ignore[arg-type]
                for e in sw.read_table_entries("echelon_ids")
            }

    def close(self) -> None:
        self.daemon.close()
        if self.switch is not None:
            self.switch.stop()


def run(
    levels: list[int], probes: int, kind: Literal["soft", "bmv2"], sync: str = "normal"
) -> None:
    with tempfile.TemporaryDirectory(prefix="echelon-bench-") as d:
        b = Bench(Path(d), kind, "--registry-sync", sync)
        try:
            b.start_switch()
            b.start_daemon()
            registered = 0
            print(
                f"{'jobs':>6} {'reg p50 ms':>10} {'reg p99 ms':>10} {'rm p50 ms':>9} "
                f"{'rm p99 ms':>9} {'updates/s':>9} {'fill updates/s':>14}"
            )
            for n in levels:
                f0 = b.status()["switches"]["s1"]["updates_written"]
                fill_t = 0.0
                while registered < n:
                    fill_t += b.register(f"bg{registered}")
                    registered += 1
                fill_w = b.status()["switches"]["s1"]["updates_written"] - f0
                reg, rm = [], []
                w0 = b.status()["switches"]["s1"]["updates_written"]
                for k in range(probes):
                    reg.append(b.register(f"probe{k}"))
                    eid = next(
                        g["echelon_id"] for g in b.http.get(f"/jobs/probe{k}").json()["groups"]
                    )
                    if eid not in b.installed_ids():
                        raise SystemExit(f"error: probe{k} (echelon id {eid}) not on the switch")
                    rm.append(b.remove(f"probe{k}"))
                written = b.status()["switches"]["s1"]["updates_written"] - w0
                rate = written / (sum(reg) + sum(rm))
                print(
                    f"{n:>6} {1e3 * pct(reg, 0.5):>10.1f} {1e3 * pct(reg, 0.99):>10.1f} "
                    f"{1e3 * pct(rm, 0.5):>9.1f} {1e3 * pct(rm, 0.99):>9.1f} {rate:>9.0f} "
                    f"{fill_w / fill_t if fill_t else 0.0:>14.0f}",
                    flush=True,
                )
            entries = sum(b.status()["switches"]["s1"]["entries"].values())
            assert b.switch is not None
            b.daemon.kill()
            b.switch.stop()
            b.start_switch()
            dt = b.start_daemon()
            st = b.status()["switches"]["s1"]
            n, rs = st["last_reconcile_updates"], st["last_reconcile_s"]
            print(
                f"bulk re-install after switch restart ({kind}): {entries} entries, {n} updates "
                f"in {rs * 1e3:.0f} ms (read-back + diff + write) = {n / rs:.0f} updates/s; "
                f"{dt:.2f} s incl. daemon start-up; "
                f"median probe latency {statistics.median(reg) * 1e3:.1f} ms"
            )
        finally:
            b.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.controller", description=__doc__)
    p.add_argument("--levels", default="1,100,1000", help="registered-job counts to measure at")
    p.add_argument("--probes", type=int, default=50, help="timed registrations per level")
    p.add_argument("--target", choices=("soft", "bmv2"), default="soft", help="switch to drive")
    p.add_argument(
        "--registry-sync",
        choices=SYNC_MODES,
        default="normal",
        help="the daemon's --registry-sync (full: fsync per change)",
    )
    args = p.parse_args(argv)
    try:
        levels = sorted(int(x) for x in args.levels.split(","))
    except ValueError:
        print(
            f"error: --levels: not a comma-separated list of integers: {args.levels}",
            file=sys.stderr,
        )
        return 2
    if levels[-1] + 1 > 1024 or levels[0] < 0 or args.probes < 1:
        print(
            "error: --levels: 0..1023 jobs (1024 echelon_ids entries); --probes >= 1",
            file=sys.stderr,
        )
        return 2
    return run_cli(lambda: run(levels, args.probes, args.target, args.registry_sync), args.target)


if __name__ == "__main__":
    sys.exit(main())

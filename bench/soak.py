"""``python -m bench.soak``: registration churn across switch and daemon kills.

Starts a soft switch and the controller daemon (as ``bench.controller`` does),
then for ``--duration`` seconds ``--workers`` threads register and remove jobs
over HTTP without pause. Every ``--restart-every`` seconds, while the churn goes
on, one of: the switch is killed (SIGKILL), the daemon is killed, or both; the
churn continues for a moment against the damaged system, then pauses, the dead
processes are restarted, and once the daemon reports the switch in sync it is
checked:

* acknowledged vs present: every job whose registration was acknowledged (201)
  and not acknowledged as removed must be listed by ``GET /jobs`` (``lost`` counts
  those that are not); every listed job must have been acknowledged or have had
  a request in flight when the daemon died (``phantom`` counts the others);
* stray / missing: the switch's entries, read back over P4Runtime, against the
  entries an offline controller computes from the daemon's registry file.

The faults rotate through ``--faults`` (default all of them): ``switch``, ``daemon``,
``both`` (SIGKILL); ``slots`` (16 arbitrated idle streams with lower election IDs,
re-opened as they close, while the daemon is killed and restarted: it must get its
stream back); ``defaults`` (another role's primary changes two default entries:
counted as missing until repaired); ``registry``
(the registry file is moved away: every change must be refused with 503 until the
daemon restarts on the file put back). Throughout, a second client sends huge
Reads (1,000 wildcard counter entities, and the largest table wildcard the bound
allows); the soft switch's peak RSS is reported per round.

One table row per restart goes to stdout (markdown); docs/controller.md records it.
Requests whose answer was lost to a kill are "in doubt" and resolved from the
registry after the restart (either outcome is correct; they are counted).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import random
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import httpx
from finsy.proto import p4r, p4r_grpc

from bench.controller import Bench, job
from bench.harness import run_cli
from bench.read_bound import Reader, mem_mb
from controlplane.controller import Controller
from controlplane.daemon import DEFAULT_JSON
from controlplane.entries import T_CLASSIFY, T_LPM, default_entries
from controlplane.registry import Registry
from echelon.topology import load
from echelon.waiting import WaitTimeout, wait_until
from p4client.p4info import P4Info, TableEntry
from p4client.p4rt import SwitchConnection

#: Jobs one worker keeps registered at most (workers x this << 1024 echelon IDs).
PER_WORKER = 40
KINDS = ("switch", "daemon", "both", "slots", "defaults", "registry")
#: The daemon's election ID: the slot squatters use 1..16, below it.
ELECTION_ID = 100
#: Soft-switch peak RSS the soak accepts (MB).
RSS_BOUND_MB = 200.0


@dataclass
class Ledger:
    """What the clients were told: the ground truth the daemon must match."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: set[str] = field(default_factory=set)
    in_doubt: set[str] = field(default_factory=set)
    ok: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    failed: int = 0


class Churn:
    """Worker threads registering/removing jobs; :meth:`pause` waits until none is in flight."""

    def __init__(self, api: str, workers: int, ledger: Ledger, seed: int = 1) -> None:
        self.api = api
        self.seed = seed
        self.ledger = ledger
        self._go = threading.Event()
        self._go.set()
        self._stop = threading.Event()
        self._idle = threading.Semaphore(0)
        self._threads = [
            threading.Thread(target=self._work, args=(w,), daemon=True) for w in range(workers)
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def pause(self) -> None:
        self._go.clear()
        for _ in self._threads:
            self._idle.acquire()

    def resume(self) -> None:
        self._go.set()

    def stop(self) -> None:
        self._stop.set()
        self._go.set()
        for t in self._threads:
            t.join(timeout=30)

    def _work(self, w: int) -> None:
        rnd = random.Random(self.seed * 1000 + w)
        mine: list[str] = []
        n = 0
        http = httpx.Client(base_url=self.api, timeout=30)
        while not self._stop.is_set():
            if not self._go.is_set():
                self._idle.release()
                self._go.wait()
                with self.ledger.lock:  # the check resolved doubts: take ours from it
                    mine = sorted(j for j in self.ledger.acked if j.startswith(f"w{w}-"))
                continue
            if mine and (len(mine) >= PER_WORKER or rnd.random() < 0.4):
                name = mine.pop(rnd.randrange(len(mine)))
                self._op(http, "DELETE", name, mine)
            else:
                name = f"w{w}-{n}"
                n += 1
                self._op(http, "POST", name, mine)
        http.close()

    def _op(self, http: httpx.Client, method: str, name: str, mine: list[str]) -> None:
        led = self.ledger
        try:
            if method == "POST":
                r = http.post("/jobs", json=job(name))
                good = r.status_code == 201
            else:
                r = http.delete(f"/jobs/{name}")
                good = r.status_code == 200
        except httpx.ConnectError:  # never reached the daemon: certainly not applied
            with led.lock:
                led.failed += 1
                if method == "DELETE":
                    mine.append(name)
            time.sleep(0.05)  # do not spin while the daemon is down (not synchronisation)
            return
        except httpx.HTTPError:  # the daemon died with the request in flight
            with led.lock:
                led.failed += 1
                led.in_doubt.add(name)
                led.acked.discard(name)
            time.sleep(0.05)  # do not spin while the daemon is down (not synchronisation)
            return
        with led.lock:
            if good:
                led.ok += 1
                if method == "POST":
                    led.acked.add(name)
                    mine.append(name)
                else:
                    led.acked.discard(name)
            else:
                try:
                    detail = str(r.json().get("detail", ""))[:80]
                except ValueError:  # not JSON (a 500 would be a finding in itself)
                    detail = r.text[:80]
                what = f"{method} {r.status_code} {detail}"
                led.refused[what] = led.refused.get(what, 0) + 1
                if method == "DELETE" and r.status_code != 404:
                    mine.append(name)  # refused (e.g. 503): still registered


def desired_vs_switch(bench: Bench) -> tuple[int, int, int]:
    """(stray, missing, entries): the switch against an offline controller's desired
    set; a default entry that is not the program's counts as missing."""
    reg = Registry(bench.tmp / "reg.db")
    try:
        ctl = Controller(load(bench.topo), bench.p4info, reg)
        want = ctl.desired("s1")
    finally:
        reg.close()
    addr = f"127.0.0.1:{bench.grpc}"
    with SwitchConnection(addr, election_id=(0, 0), p4info=bench.p4info) as sw:
        got = set(sw.read_table_entries())
    bad_defaults = len(program_defaults(bench.p4info) - read_defaults(addr, bench.p4info))
    return len(got - want), len(want - got) + bad_defaults, len(got)


def program_defaults(info: P4Info) -> set[TableEntry]:
    cfg = DEFAULT_JSON.read_bytes()
    return {e for e in default_entries(info, cfg) if e.table in (T_CLASSIFY, T_LPM)}


def read_defaults(addr: str, info: P4Info) -> set[TableEntry]:
    with SwitchConnection(addr, election_id=(0, 0), p4info=info) as sw:
        return set(sw.read_default_entries(T_CLASSIFY, T_LPM))


def foreign_defaults(addr: str, info: P4Info) -> None:
    """Another controller, primary of another role, changes two default entries."""
    with SwitchConnection(addr, election_id=(0, 9), role="intruder", p4info=info) as sw:
        at_5_7 = {"class_id": 5, "prio": 7}
        to_port_3 = {"dstAddr": 1, "port": 3}
        sw.modify(
            [
                sw.table_entry(T_CLASSIFY, None, "set_echelon", at_5_7, default=True),
                sw.table_entry(T_LPM, None, "ipv4_forward", to_port_3, default=True),
            ]
        )


class Squatters:
    """Arbitrated idle streams with election IDs 1..16 (below the daemon's), each
    re-opened as soon as it is closed, until stopped."""

    def __init__(self, addr: str) -> None:
        self.addr = addr
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._hold, args=(i + 1,), daemon=True) for i in range(16)
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def _hold(self, eid: int) -> None:
        while not self._stop.is_set():
            # its own TCP connection (the switch bounds streams per connection)
            ch = grpc.insecure_channel(self.addr, options=[("grpc.use_local_subchannel_pool", 1)])
            feed: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
            req = p4r.StreamMessageRequest()
            req.arbitration.device_id = 0
            req.arbitration.election_id.low = eid
            feed.put(req)
            call = p4r_grpc.P4RuntimeStub(ch).StreamChannel(iter(feed.get, None))
            threading.Thread(target=self._cancel_on_stop, args=(call,), daemon=True).start()
            with contextlib.suppress(grpc.RpcError):
                for _ in call:  # held until the switch closes it or the soak stops
                    pass
            feed.put(None)
            ch.close()
            self._stop.wait(0.05)  # re-open at once, at a squatter's pace

    def _cancel_on_stop(self, call: grpc.Future) -> None:
        self._stop.wait()
        call.cancel()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(10)


def kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.kill(pid, signal.SIGKILL)


def run(duration: float, restart_every: float, workers: int, seed: int, faults: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="echelon-soak-") as d:
        bench = Bench(Path(d), "soft", "--election-id", str(ELECTION_ID))
        addr = f"127.0.0.1:{bench.grpc}"
        reg = bench.tmp / "reg.db"
        ledger = Ledger()
        churn = Churn(bench.api, workers, ledger, seed)
        reader: Reader | None = None
        bad = 0
        peak = 0.0
        try:
            bench.start_switch()
            bench.start_daemon()
            churn.start()
            # 40 table wildcards (refused once > 819 entries); election ID 50: not the
            # checks' 0, the squatters' 1..16 or the daemon's 100
            reader = Reader(addr, 40, 50)
            reader.start()
            t0 = time.monotonic()
            print(
                "| # | t (s) | fault | acknowledged | present | lost | phantom | in doubt "
                "| stray | missing | entries | in sync after (s) | switch peak RSS (MB) |"
            )
            print("| ---: " * 2 + "| --- " + "| ---: " * 10 + "|")
            k = 0
            while time.monotonic() - t0 < duration:
                time.sleep(restart_every)  # churn runs meanwhile (the soak's pacing)
                kind = faults[k % len(faults)]
                k += 1
                assert bench.switch is not None
                squat = Squatters(addr) if kind == "slots" else None
                if squat is not None:
                    squat.start()
                if kind == "defaults":
                    foreign_defaults(addr, bench.p4info)
                if kind == "registry":
                    reg.rename(reg.with_suffix(".moved"))
                if kind in ("switch", "both"):
                    kill(bench.switch.pid)
                if kind in ("daemon", "both", "slots"):
                    bench.daemon.kill()
                time.sleep(1.0)  # churn against the damaged system
                churn.pause()
                if kind == "registry":
                    bench.daemon.kill()
                    reg.with_suffix(".moved").rename(reg)
                t1 = time.monotonic()
                if kind in ("switch", "both"):
                    bench.switch.stop()
                    bench.start_switch()
                if kind in ("daemon", "both", "slots", "registry"):
                    bench.start_daemon()  # with squatters on every slot for "slots"
                else:
                    bench.daemon.wait_in_sync(120, "s1", 0.05)
                if kind == "defaults":
                    with contextlib.suppress(WaitTimeout):  # not repaired: counted below
                        wait_until(
                            lambda: (
                                program_defaults(bench.p4info) <= read_defaults(addr, bench.p4info)
                            ),
                            30,
                            "default entries repaired",
                            0.2,
                        )
                sync_s = time.monotonic() - t1
                if squat is not None:
                    squat.stop()
                present = {j["job"] for j in bench.http.get("/jobs").json()}
                with ledger.lock:
                    lost = ledger.acked - present
                    phantom = present - ledger.acked - ledger.in_doubt
                    doubt = len(ledger.in_doubt)
                    acked = len(ledger.acked)
                    ledger.acked |= ledger.in_doubt & present
                    ledger.in_doubt.clear()
                stray, missing, entries = desired_vs_switch(bench)
                bad += len(lost) + len(phantom) + stray + missing
                rss = mem_mb(bench.switch.pid)[1]
                peak = max(peak, rss)
                print(
                    f"| {k} | {time.monotonic() - t0:.0f} | {kind} | {acked} | {len(present)} "
                    f"| {len(lost)} | {len(phantom)} | {doubt} | {stray} | {missing} | {entries} "
                    f"| {sync_s:.1f} | {rss:.0f} |",
                    flush=True,
                )
                churn.resume()
            churn.stop()
            reader.stop()
            reads = {w: sorted({c for c, _, _ in got}) for w, got in reader.out.items()}
            print(
                f"\n{k} faults in {time.monotonic() - t0:.0f} s; requests: {ledger.ok} "
                f"acknowledged, {sum(ledger.refused.values())} refused {ledger.refused}, "
                f"{ledger.failed} lost to kills; huge Reads: "
                f"{ {w: len(g) for w, g in reader.out.items()} } outcomes {reads}; "
                f"lost + phantom + stray + missing = {bad}; switch peak RSS {peak:.0f} MB "
                f"(bound {RSS_BOUND_MB:.0f})"
            )
        finally:
            churn.stop()
            if reader is not None:
                reader.stop()
            bench.close()
    return 0 if bad == 0 and peak <= RSS_BOUND_MB else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    p.add_argument("--duration", type=float, default=600.0, help="seconds of churn (default 600)")
    p.add_argument("--restart-every", type=float, default=30.0, help="seconds between kills")
    p.add_argument("--workers", type=int, default=4, help="client threads")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--faults",
        default=",".join(KINDS),
        help=f"comma-separated, in turn (of {', '.join(KINDS)})",
    )
    args = p.parse_args(argv)
    faults = [f for f in args.faults.split(",") if f]
    if not faults or any(f not in KINDS for f in faults):
        print(f"error: --faults: each one of {', '.join(KINDS)}", file=sys.stderr)
        return 2
    if args.duration <= 0 or args.restart_every <= 0 or not 1 <= args.workers <= 16:
        print("error: --duration/--restart-every > 0, --workers 1..16", file=sys.stderr)
        return 2
    return run_cli(lambda: run(args.duration, args.restart_every, args.workers, args.seed, faults))


if __name__ == "__main__":
    sys.exit(main())

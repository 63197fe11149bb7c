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

One table row per restart goes to stdout (markdown); docs/controller.md records it.
Requests whose answer was lost to a kill are "in doubt" and resolved from the
registry after the restart (either outcome is correct; they are counted).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.controller import Bench, job
from controlplane.controller import Controller
from controlplane.registry import Registry
from echelon.errors import EchelonError
from echelon.topology import load
from p4client.p4rt import SwitchConnection
from targets.process import wait_until

#: Jobs one worker keeps registered at most (workers x this << 1024 echelon IDs).
PER_WORKER = 40
KINDS = ("switch", "daemon", "both")


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
    """(stray, missing, entries): the switch against an offline controller's desired set."""
    reg = Registry(bench.tmp / "reg.db")
    try:
        ctl = Controller(load(bench.topo), bench.p4info, reg)
        want = ctl.desired("s1")
    finally:
        reg.close()
    addr = f"127.0.0.1:{bench.grpc}"
    with SwitchConnection(addr, election_id=(0, 0), p4info=bench.p4info) as sw:
        got = set(sw.read_table_entries())
    return len(got - want), len(want - got), len(got)


def kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.kill(pid, signal.SIGKILL)


def run(duration: float, restart_every: float, workers: int, seed: int) -> int:
    with tempfile.TemporaryDirectory(prefix="echelon-soak-") as d:
        bench = Bench(Path(d), "soft")
        ledger = Ledger()
        churn = Churn(bench.api, workers, ledger, seed)
        bad = 0
        try:
            bench.start_switch()
            bench.start_daemon()
            churn.start()
            t0 = time.monotonic()
            print(
                "| # | t (s) | killed | acknowledged | present | lost | phantom | in doubt "
                "| stray | missing | entries | in sync after (s) |"
            )
            print("| ---: " * 2 + "| --- " + "| ---: " * 9 + "|")
            k = 0
            while time.monotonic() - t0 < duration:
                time.sleep(restart_every)  # churn runs meanwhile (the soak's pacing)
                kind = KINDS[k % len(KINDS)]
                k += 1
                assert bench.daemon is not None and bench.switch is not None
                if kind in ("switch", "both"):
                    kill(bench.switch.pid)
                if kind in ("daemon", "both"):
                    kill(bench.daemon.pid)
                time.sleep(1.0)  # churn against the damaged system
                churn.pause()
                t1 = time.monotonic()
                if kind in ("switch", "both"):
                    bench.switch.stop()
                    bench.start_switch()
                if kind in ("daemon", "both"):
                    bench.daemon.wait(10)
                    bench.start_daemon()
                else:
                    wait_until(
                        lambda: bench.status()["switches"]["s1"]["in_sync"],
                        120,
                        "in sync",
                        0.05,
                        (httpx.HTTPError, OSError),
                    )
                sync_s = time.monotonic() - t1
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
                print(
                    f"| {k} | {time.monotonic() - t0:.0f} | {kind} | {acked} | {len(present)} "
                    f"| {len(lost)} | {len(phantom)} | {doubt} | {stray} | {missing} | {entries} "
                    f"| {sync_s:.1f} |",
                    flush=True,
                )
                churn.resume()
            churn.stop()
            print(
                f"\n{k} restarts in {time.monotonic() - t0:.0f} s; requests: {ledger.ok} "
                f"acknowledged, {sum(ledger.refused.values())} refused {ledger.refused}, "
                f"{ledger.failed} lost to kills; "
                f"lost + phantom + stray + missing = {bad}"
            )
        finally:
            churn.stop()
            bench.close()
    return 0 if bad == 0 else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    p.add_argument("--duration", type=float, default=600.0, help="seconds of churn (default 600)")
    p.add_argument("--restart-every", type=float, default=30.0, help="seconds between kills")
    p.add_argument("--workers", type=int, default=4, help="client threads")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    if args.duration <= 0 or args.restart_every <= 0 or not 1 <= args.workers <= 16:
        print("error: --duration/--restart-every > 0, --workers 1..16", file=sys.stderr)
        return 2
    try:
        return run(args.duration, args.restart_every, args.workers, args.seed)
    except EchelonError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""``echelon-agent``: play one host's part of a scenario, or merge records into a report.

    echelon-agent play --scenario run/scenario.json --host h1 --out run/agents/h1.json [--go F]
    echelon-agent report --scenario run/scenario.json run/agents/*.json [--out report.json]

``play`` runs inside an emulated host (Mininet namespace): a receiver thread
bound to the echelon port records the flows addressed to this host while the
main thread sends this host's flows as they are released -- closed loop (the
scenario's default): by this host's compute tasks, which start when their input
flows have arrived (:mod:`hostagent.closedloop`); open loop: at fixed times. It
exits when it has run every task, sent everything and received every expected
flow, or at ``start_at + timeout``, and writes its record as JSON (``sent`` and
``received`` per flow instance, ``tasks`` with their start and end,
``iteration_starts``). SIGTERM ends it early and still writes what it has.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from echelon.errors import EchelonError
from echelon.progress import REPORT_PERIOD_S
from echelon.specs import read_file
from echelon.waiting import WaitTimeout, wait_until
from hostagent.closedloop import ClosedLoop, Releaser, releaser
from hostagent.progress import HostProgress
from hostagent.receiver import Receiver
from hostagent.report import formation_report
from hostagent.scenario import load
from hostagent.sender import Sender

#: How long a host waits for its "entering iteration 0" reports to leave before it
#: says ready anyway (reports are advice: a lost one only costs the head start).
PROGRESS_FLUSH_S = 2.0


class _Stop(Exception):
    pass


def wait_go(go: Path, timeout: float) -> float:
    """Wait for the driver's go file and return the start instant it holds.

    Why: agents in several namespaces need a second or two to start (Python,
    imports); rather than guessing a start instant far enough ahead, the driver
    waits for every ``.ready`` file and then publishes the instant.
    """

    def start_at() -> float | None:
        text = go.read_text().strip()  # FileNotFoundError: not written yet
        try:
            return float(text) if text else None
        except ValueError as exc:
            raise EchelonError(f"go: {go} does not hold a time: {exc}") from exc

    try:
        return wait_until(start_at, timeout, str(go), 0.005, (FileNotFoundError,))
    except WaitTimeout as exc:
        raise EchelonError(f"go: no start signal in {go} within {timeout:.0f}s") from exc


def play(
    scenario_path: str,
    host: str,
    out: str | None,
    bind_ip: str = "0.0.0.0",
    go: str | None = None,
    controller: str | None = None,
    entered: bool = True,
    progress_period: float = REPORT_PERIOD_S,
) -> dict[str, Any]:
    sc = load(scenario_path)
    if host not in sc.hosts:
        raise EchelonError(f"host: {host!r} is not in the scenario ({', '.join(sc.hosts)})")
    receiver = Receiver(sc, host, bind_ip)  # bind before anyone sends
    sender = Sender(sc, host)
    rel: Releaser = releaser(sc, host)
    loop = rel if isinstance(rel, ClosedLoop) else None
    progress = HostProgress(sc, host, controller, progress_period) if controller else None
    if loop is not None:  # first: it releases the next task
        receiver.on_complete.append(loop.arrive)
    if progress is not None:
        receiver.on_complete.append(progress.arrived)
        sender.on_release = progress.released
    if progress is not None and entered:
        # before "ready": the controller hears that iteration 0 is about to start while
        # the driver gathers the other hosts, and plans the opening groups in time
        progress.entered(0)
        progress.flush(PROGRESS_FLUSH_S)
    if out:  # tells the driver this host is ready (socket bound)
        Path(out).with_suffix(".ready").write_text(str(time.time()))
    start_at = wait_go(Path(go), sc.timeout_s) if go else sc.start_at
    receiver.start_at = sender.start_at = start_at
    if progress is not None:  # bytes sent: at each release and every progress_period
        progress.watch(sender, start_at)
    stop_at = start_at + sc.timeout_s
    thread = threading.Thread(target=receiver.run, args=(stop_at,), daemon=True)
    thread.start()
    idle = sc.idle_timeout_s

    def stalled() -> bool:
        """Nothing left or arrived on this host for ``idle`` seconds (lost packets)."""
        if idle is None:
            return False
        return time.time() - max(start_at, receiver.last_packet, sender.last_send) > idle

    sent: dict[str, Any] = {}
    try:
        sent = sender.run(stop_at, rel, stalled)
        while thread.is_alive() and time.time() < stop_at and not stalled():
            thread.join(0.2)
    except _Stop:  # SIGTERM: still write what was sent and received so far
        pass
    receiver.done.set()
    thread.join(1.0)
    record = {
        "host": host,
        "start_at": start_at,
        "sent": sent,
        "received": receiver.report(),
        "unknown_packets": receiver.unknown,
        "release": sc.release,
        "tasks": loop.records if loop is not None else {},
        "iteration_starts": loop.iteration_starts() if loop is not None else {},
        "complete": receiver.pending == 0
        and rel.finished()
        and len(sent) == len(sender.flows)
        and all(s["packets"] == s["expected"] for s in sent.values()),
    }
    # ended early because nothing moved on this host (idle_timeout_s), not done
    record["stalled"] = not record["complete"] and stalled()
    if progress is not None:
        progress.close()
        record["progress_reports"] = {
            j: {"sent": r.sent, "errors": r.errors} for j, r in progress.reporters.items()
        }
    if out:
        Path(out).write_text(json.dumps(record, indent=1))
    return record


def period(text: str) -> float:
    """``--progress-period``: seconds, finite and not negative (0: no sampling)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="echelon-agent", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("play", help="send and receive this host's flows")
    p.add_argument("--scenario", required=True)
    p.add_argument("--host", required=True)
    p.add_argument("--out", help="record file (JSON); stdout if absent")
    p.add_argument("--bind", default="0.0.0.0", help="receiver address (default all)")
    p.add_argument("--go", help="wait for this file; it holds the start instant (epoch s)")
    p.add_argument(
        "--controller",
        help="controller API (http://host:port): report group releases/finishes to it",
    )
    p.add_argument(
        "--no-entered",
        dest="entered",
        action="store_false",
        help="with --controller: do not report entering iteration 0 before the start",
    )
    p.add_argument(
        "--progress-period",
        type=period,
        default=REPORT_PERIOD_S,
        metavar="SECONDS",
        help="with --controller: report the bytes sent this often while sending "
        f"(default {REPORT_PERIOD_S}; 0: only at releases)",
    )
    r = sub.add_parser("report", help="formation report from agent records")
    r.add_argument("--scenario", required=True)
    r.add_argument("records", nargs="+")
    r.add_argument("--out")
    args = ap.parse_args(argv)

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise _Stop()

    signal.signal(signal.SIGTERM, on_term)
    try:
        if args.cmd == "play":
            rec = play(args.scenario, args.host, args.out, args.bind, args.go, args.controller,
                       args.entered, args.progress_period)  # fmt: skip
            if not args.out:
                print(json.dumps(rec, indent=1))
            return 0 if rec["complete"] else 1
        recs = [read_file(p) for p in args.records]
        report = formation_report(load(args.scenario), recs)
        text = json.dumps(report, indent=1)
        if args.out:
            Path(args.out).write_text(text)
        else:
            print(text)
        return 0
    except EchelonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc.filename or 'socket'}: {exc.strerror}", file=sys.stderr)
        return 2
    except (_Stop, KeyboardInterrupt):
        return 130


if __name__ == "__main__":
    sys.exit(main())

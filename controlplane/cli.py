"""``echelonctl``: the controller's command line, a thin client of the HTTP API.

Human-readable tables by default (numbers right-aligned, units in the headers),
``--json`` for scripts. Every failure (bad file, unreachable controller, a 4xx
from the API, a switch whose counters cannot be read) prints ``error: ...`` and
exits 2, never a traceback; a reader that leaves early (``| head``) is not an
error worth a traceback either. Talks to the API only through
:class:`controlplane.client.ApiClient`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import yaml

from controlplane.apimodels import JobSummary, JobView, PlanView, StatsView, StatusView
from controlplane.client import ApiClient, ControllerUnreachable, plain
from echelon.errors import EchelonError
from echelon.specs import read_file

DEFAULT_URL = "http://127.0.0.1:8080"

EPILOG = f"""environment:
  ECHELON_API        controller URL when --api is not given (default {DEFAULT_URL})
  ECHELON_API_TOKEN  bearer token when --token is not given
  ECHELON_API_CA     PEM CA of an https controller when --ca is not given

your own job against a running controller (see README "Your own job"):
  echelon show my-job.yaml --topo topo/star.yaml   # check it, see its levels alone
  echelonctl register --dry-run my-job.yaml        # its levels beside the jobs registered
  echelonctl register my-job.yaml                  # install its priorities
  echelonctl stats --job my-job --watch 1          # its live counters and queues (Ctrl-C stops)
  echelonctl stats --reset-max                     # maximum queue depths from now on
"""


class CliError(EchelonError):
    """Printed as ``error: <message>``; exit status 2."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    default_api = os.environ.get("ECHELON_API", DEFAULT_URL)
    p = argparse.ArgumentParser(
        prog="echelonctl",
        description="EchelonFlow controller client",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--api", default=default_api, help=f"controller URL (env ECHELON_API; now {default_api})"
    )
    p.add_argument(
        "--token",
        default=os.environ.get("ECHELON_API_TOKEN"),
        help="bearer token (env ECHELON_API_TOKEN)",
    )
    p.add_argument(
        "--ca",
        default=os.environ.get("ECHELON_API_CA"),
        help="PEM CA an https controller's certificate chains to (env ECHELON_API_CA)",
    )
    p.add_argument("--json", action="store_true", help="print the API's JSON")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("register", help="register a job (file or --paradigm)")
    r.add_argument("file", nargs="?", help="YAML/JSON job description or EchelonFlow spec")
    r.add_argument("--paradigm", help="build the description from flags instead of a file")
    r.add_argument("--job", help="job ID (with --paradigm)")
    r.add_argument("--hosts", help="comma-separated hosts (with --paradigm)")
    r.add_argument(
        "--param", action="append", default=[], metavar="K=V", help="paradigm field (YAML value)"
    )
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="register nothing: show the levels and ranges registration would install now, "
        "with the jobs already registered, and the registered groups it would change",
    )
    sub.add_parser("list", help="list registered jobs")
    s = sub.add_parser("show", help="show one job")
    s.add_argument("job")
    d = sub.add_parser("remove", help="remove a job")
    d.add_argument("job")
    st = sub.add_parser(
        "stats",
        help="per-echelon counters, unprioritized packets by reason, each priority queue's "
        "depth / max depth / last sojourn per switch port",
    )
    st.add_argument("--job", help="only this job's groups")
    st.add_argument(
        "--watch", type=float, metavar="SECONDS", help="repeat every SECONDS with rates (Ctrl-C)"
    )
    st.add_argument("--count", type=int, default=0, help="with --watch: stop after N samples")
    st.add_argument("--reset-max", action="store_true", help="zero the maximum queue depths first")
    sub.add_parser("status", help="switches, pipeline, entry counts")
    pol = sub.add_parser(
        "policy", help="show or set the policy (a name from the list, or package.module:Class)"
    )
    pol.add_argument("name", nargs="?")
    return p.parse_args(argv)


def description(args: argparse.Namespace) -> dict[str, Any]:
    """The JSON body of ``register``: a file's content, or built from flags."""
    if args.paradigm:
        if args.file:
            raise CliError("register: give a FILE or --paradigm, not both")
        desc: dict[str, Any] = {"paradigm": args.paradigm}
        if args.job:
            desc["job"] = args.job
        if args.hosts:
            desc["hosts"] = [h.strip() for h in args.hosts.split(",") if h.strip()]
        for item in args.param:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise CliError(f"--param: expected K=V, got {item!r}")
            try:
                desc[key] = yaml.safe_load(value)
            except yaml.YAMLError as exc:
                raise CliError(f"--param {key}: not a YAML value: {exc}") from None
        return desc
    if not args.file:
        raise CliError("register: a FILE or --paradigm is required")
    data = read_file(args.file)
    if not isinstance(data, dict):
        raise CliError(f"{args.file}: must hold a mapping")
    return data


# ---------------------------------------------------------------- rendering


def table(rows: Sequence[Sequence[Any]], head: Sequence[str]) -> str:
    """Columns padded to their widest cell; numeric columns right-aligned."""
    cells = [list(head)] + [[_cell(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    numeric = [
        bool(rows)
        and all(isinstance(r[i], int | float) and not isinstance(r[i], bool) for r in rows)
        for i in range(len(head))
    ]
    return "\n".join(
        "  ".join(
            c.rjust(w) if num else c.ljust(w) for c, w, num in zip(r, widths, numeric, strict=True)
        ).rstrip()
        for r in cells
    )


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "-" if value is None else str(value)


def switch_problem(error: str | None, grpc: str) -> str:
    """A switch's last error in words a user acts on (gRPC's are terse)."""
    if not error:
        return ""
    code = error.split(":", 1)[0].strip()
    if code == "UNAVAILABLE" or "connection refused" in error.lower():
        return f"switch not reachable at {grpc}: is it running? (make run starts one)"
    if code == "DEADLINE_EXCEEDED":
        return f"switch at {grpc} did not answer in time (overloaded or stopped?)"
    if code == "PERMISSION_DENIED":
        return "another controller is primary for this switch (higher election ID)"
    return error.splitlines()[0][:120]


def render_job(data: JobView) -> str:
    out = [f"job {data.job}  (policy {data.policy}, installed {data.installed})"]
    rows = []
    for g in data.groups:
        rng = " ".join(f"[{r.lo_us},{r.hi_us}]->{r.priority}" for r in g.ranges or [])
        srcs, switches = ",".join(g.sources or []), ",".join(g.switches or [])
        rows.append([g.group, g.echelon_id, g.class_id, g.priority, srcs, switches, rng or "-"])
    header = ["GROUP", "ID", "CLASS", "PRIO", "SOURCES", "SWITCHES", "DEADLINE RANGES (µs)"]
    out.append(table(rows, header))
    for ef in data.echelonflows:
        out.append(f"\n{ef.name}  t_ref {ef.t_ref * 1e3:.3f} ms, weight {ef.weight:g}")
        flows = [[f.index, f.src, f.dst, f.size, f.offset_us] for f in ef.flows]
        out.append(table(flows, ["FLOW", "SRC", "DST", "SIZE (B)", "OFFSET (µs)"]))
    return "\n".join(out)


def render_jobs(jobs: list[JobSummary]) -> str:
    rows = [[j.job, len(j.groups), ",".join(str(g.echelon_id) for g in j.groups)] for j in jobs]
    return table(rows, ["JOB", "GROUPS", "ECHELON IDS"])


def render_plan(data: PlanView) -> str:
    """``register --dry-run``: the job as registration would install it, and what it moves."""
    body = render_job(data).split("\n", 1)[1]  # not its "installed" line: nothing is
    head = f"job {data.job}  (policy {data.policy}; dry run: what registering it now installs)"
    out = [f"{head}\n{body}"]
    if data.moves:
        rows = [
            [m.job, m.group, f"{m.priority_before} -> {m.priority_after}",
             f"{m.ranges_before} -> {m.ranges_after}"]
            for m in data.moves
        ]  # fmt: skip
        moved = table(rows, ["REGISTERED JOB", "GROUP", "PRIO", "DEADLINE RANGES"])
        out.append(f"registered groups it would change:\n{moved}")
    out.append("nothing was registered (echelonctl register without --dry-run installs it)")
    return "\n\n".join(out)


def stats_errors(data: StatsView) -> list[str]:
    """One line per switch whose counters could not be read."""
    return [
        f"switch {name}: counters unavailable: {switch_problem(s.error, name) or s.error}"
        for name, s in data.switches.items()
        if s.error is not None
    ]


def queue_warnings(data: StatsView) -> list[str]:
    """One line per switch whose queue registers could not be read (its counters could:
    a warning, not an error; e.g. a switch without a Thrift runtime port)."""
    return [
        f"switch {name}: queue depths unavailable: {s.queues_error}"
        for name, s in data.switches.items()
        if s.queues_error is not None
    ]


def render_stats(
    data: StatsView,
    job: str | None = None,
    before: StatsView | None = None,
    interval_s: float = 0.0,
) -> str:
    """Counters per group (of ``job`` only if given); with ``before``, rates over
    ``interval_s``."""
    prev = {(g.job, g.group): g for g in before.groups} if before is not None else {}
    head = ["JOB", "GROUP", "ID", "CLASS", "PRIO", "PACKETS", "BYTES"]
    if before is not None:
        head += ["PKT/S", "MBIT/S"]
    rows: list[list[Any]] = []
    for g in data.groups:
        if job is not None and g.job != job:
            continue
        row: list[Any] = [g.job, g.group, g.echelon_id, g.class_id, g.priority, g.packets, g.bytes]
        if before is not None:
            p = prev.get((g.job, g.group))
            dp = g.packets - p.packets if p is not None else 0
            db = g.bytes - p.bytes if p is not None else 0
            row += [dp / interval_s if interval_s > 0 else 0.0,
                    db * 8 / 1e6 / interval_s if interval_s > 0 else 0.0]  # fmt: skip
        rows.append(row)
    out = [table(rows, head)]
    unprio = [[k, v.packets, v.bytes] for k, v in data.unprioritized.items()]
    out.append(table(unprio, ["UNPRIORITIZED (all switches)", "PACKETS", "BYTES"]))
    per = [
        [name, *(s.unprioritized[k].packets for k in data.unprioritized)]
        for name, s in data.switches.items()
        if s.unprioritized
    ]
    if len(per) > 1:
        out.append(table(per, ["SWITCH", *(f"{k} PKTS" for k in data.unprioritized)]))
    queues = render_queues(data)
    if queues:
        out.append(queues)
    return "\n\n".join(out)


def render_queues(data: StatsView) -> str:
    """Each switch's priority queues that held a packet: the depth the last departing
    packet left, the most held since the last reset, the last packet's wait."""
    rows = [
        [name, q.port, q.priority, q.depth, q.max_depth, q.sojourn_us]
        for name, s in data.switches.items()
        for q in s.queues or []
    ]
    if not rows:
        return ""
    head = ["QUEUES: SWITCH", "PORT", "PRIO", "DEPTH", "MAX DEPTH", "LAST SOJOURN µS"]
    return table(rows, head)


def render_status(data: StatusView) -> str:
    rows = []
    for n, s in data.switches.items():
        problem = switch_problem(s.last_error, s.grpc)
        if not s.connected and not problem:
            problem = f"not connected to {s.grpc}"
        entries = " ".join(f"{k.split('.')[-1]}={v}" for k, v in sorted(s.entries.items()))
        cookie = f"{s.pipeline_cookie:#x}" if s.pipeline_cookie is not None else "-"
        state = "ok" if s.in_sync and not problem else (problem or "syncing")
        rows.append([n, s.grpc, s.connected, s.primary, s.in_sync, cookie, entries or "-", state])
    head = f"policy {data.policy}, replan {data.replan}, {data.jobs} jobs\n"
    return head + table(
        rows, ["SWITCH", "GRPC", "CONNECTED", "PRIMARY", "IN SYNC", "COOKIE", "ENTRIES", "STATE"]
    )


# ---------------------------------------------------------------- commands


def run(args: argparse.Namespace, api: ApiClient) -> int:
    """One command; prints its answer. Returns the exit status."""
    if args.cmd == "stats":
        return stats(args, api)
    if args.cmd == "register":  # --dry-run: the same description, planned, not installed
        job = (api.plan if args.dry_run else api.register)(description(args))
        for w in job.warnings:
            print(f"warning: {w}", file=sys.stderr)
        emit(args, job, render_plan if args.dry_run else render_job)
    elif args.cmd == "list":
        emit(args, api.jobs(), render_jobs)
    elif args.cmd == "show":
        emit(args, api.show(args.job), render_job)
    elif args.cmd == "remove":
        emit(args, api.remove(args.job), lambda d: f"removed {d.removed}")
    elif args.cmd == "status":
        emit(args, api.status(), render_status)
    else:
        pol = api.set_policy(args.name) if args.name else api.policy()
        emit(args, pol, lambda d: f"{d.policy}  (available: {', '.join(d.available)})")
    return 0


def emit(args: argparse.Namespace, data: Any, human: Any) -> None:
    print(json.dumps(plain(data), indent=2) if args.json else human(data), flush=True)


#: ANSI: cursor home, clear the screen (``--watch`` on a terminal redraws in place).
CLEAR_SCREEN = "\x1b[H\x1b[2J"


def _is_terminal() -> bool:
    return sys.stdout.isatty()


def stats(args: argparse.Namespace, api: ApiClient) -> int:
    """``stats`` once, or every ``--watch`` seconds with per-group rates."""
    if args.watch is not None and not args.watch > 0:
        raise CliError(f"--watch: must be a positive number of seconds, got {args.watch}")
    if args.reset_max:
        reset = api.reset_queue_max()
        for name, why in reset.errors.items():
            print(f"error: switch {name}: maximum depths not reset: {why}", file=sys.stderr)
    before: StatsView | None = None
    t_before = 0.0
    samples = 0
    status = 0
    while True:
        t = time.monotonic()
        data = api.stats()
        if args.job is not None and not any(g.job == args.job for g in data.groups):
            names = sorted({g.job for g in data.groups})
            raise CliError(f"--job: {args.job!r} is not registered (registered: {names})")
        errors = stats_errors(data)
        answered = any(s.error is None for s in data.switches.values())
        if args.json:
            print(json.dumps(plain(data), indent=2), flush=True)
        elif answered:
            if args.watch is not None:
                stamp = time.strftime("%H:%M:%S")
                # a terminal: redraw in place (top-like); a pipe or file keeps every sample
                home = CLEAR_SCREEN if _is_terminal() else ""
                print(f"{home}-- {stamp}  every {args.watch:g} s  (Ctrl-C stops)", flush=True)
            shown = render_stats(data, args.job, before, t - t_before)
            print(shown + ("\n" if args.watch is not None else ""), flush=True)
        for e in errors:
            print(f"error: {e}", file=sys.stderr, flush=True)
        for w in queue_warnings(data) if samples == 0 else ():
            print(f"warning: {w}", file=sys.stderr, flush=True)
        status = 2 if errors else 0
        samples += 1
        if args.watch is None or (args.count and samples >= args.count):
            return status
        before, t_before = data, t
        # the period of a display, not synchronisation: nothing waits on it
        time.sleep(max(0.0, args.watch - (time.monotonic() - t)))


def make_client(args: argparse.Namespace) -> ApiClient:
    """The API client for ``args`` (tests replace this to call the app in process)."""
    return ApiClient(args.api, args.token, args.timeout, ca=args.ca)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        with make_client(args) as api:
            return run(args, api)
    except ControllerUnreachable as exc:
        print(f"error: {exc}", file=sys.stderr)
        print(
            "hint: is the controller running (README: Your own job)? "
            "--api or ECHELON_API give its URL",
            file=sys.stderr,
        )
        return 2
    except EchelonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C ends --watch: the normal way out
        return 0
    except BrokenPipeError:  # `echelonctl ... | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())

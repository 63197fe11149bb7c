"""``echelonctl``: the controller's command line, a thin client of the HTTP API.

Human-readable tables by default, ``--json`` for scripts. Every failure (bad
file, unreachable controller, a 4xx from the API) prints ``error: ...`` and
exits 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import yaml

DEFAULT_API = os.environ.get("ECHELON_API", "http://127.0.0.1:8080")


class CliError(Exception):
    """Printed as ``error: <message>``; exit status 2."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="echelonctl", description="EchelonFlow controller client")
    p.add_argument("--api", default=DEFAULT_API, help=f"controller URL (default {DEFAULT_API})")
    p.add_argument("--token", default=os.environ.get("ECHELON_API_TOKEN"), help="bearer token")
    p.add_argument("--json", action="store_true", help="print the API's JSON")
    p.add_argument("--timeout", type=float, default=30.0)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("register", help="register a job (file or --paradigm)")
    r.add_argument("file", nargs="?", help="YAML/JSON job description or EchelonFlow spec")
    r.add_argument("--paradigm", help="build the description from flags instead of a file")
    r.add_argument("--job", help="job ID (with --paradigm)")
    r.add_argument("--hosts", help="comma-separated hosts (with --paradigm)")
    r.add_argument(
        "--param", action="append", default=[], metavar="K=V", help="paradigm field (YAML value)"
    )
    sub.add_parser("list", help="list registered jobs")
    s = sub.add_parser("show", help="show one job")
    s.add_argument("job")
    d = sub.add_parser("remove", help="remove a job")
    d.add_argument("job")
    sub.add_parser("stats", help="per-echelon counters and unprioritized packets by reason")
    sub.add_parser("status", help="switches, pipeline, entry counts")
    pol = sub.add_parser("policy", help="show or set the policy (echelon, coflow, fifo)")
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
    try:
        text = Path(args.file).read_text()
    except OSError as exc:
        raise CliError(f"{args.file}: cannot read: {exc.strerror}") from None
    try:
        data = json.loads(text) if args.file.endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise CliError(f"{args.file}: not valid YAML/JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CliError(f"{args.file}: must hold a mapping")
    return data


def call(args: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    try:
        resp = httpx.request(
            method, args.api.rstrip("/") + path, json=body, headers=headers, timeout=args.timeout
        )
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach the controller at {args.api}: {exc}") from None
    try:
        data = resp.json()
    except ValueError:
        data = {"detail": resp.text}
    if resp.status_code >= 400:
        detail = data.get("detail") if isinstance(data, dict) else data
        if isinstance(detail, list):  # FastAPI request validation
            detail = "; ".join(
                f"{'.'.join(str(x) for x in d.get('loc', []))}: {d.get('msg')}" for d in detail
            )
        raise CliError(f"{detail} (HTTP {resp.status_code})")
    return data


def table(rows: list[list[Any]], head: list[str]) -> str:
    cells = [head] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def render(cmd: str, data: Any) -> str:
    if cmd == "list":
        rows = [
            [j["job"], len(j["groups"]), ",".join(str(g["echelon_id"]) for g in j["groups"])]
            for j in data
        ]
        return table(rows, ["JOB", "GROUPS", "ECHELON IDS"])
    if cmd in ("show", "register"):
        out = [f"job {data['job']}  (policy {data['policy']}, installed {data['installed']})"]
        rows = []
        for g in data["groups"]:
            rng = " ".join(f"[{r['lo_us']},{r['hi_us']}]->{r['priority']}" for r in g["ranges"])
            rows.append(
                [
                    g["group"],
                    g["echelon_id"],
                    g["class_id"],
                    g["priority"],
                    ",".join(g["sources"]),
                    rng or "-",
                ]
            )
        out.append(table(rows, ["GROUP", "ID", "CLASS", "PRIO", "SOURCES", "DEADLINE RANGES"]))
        for ef in data["echelonflows"]:
            out.append(f"\n{ef['name']}  t_ref={ef['t_ref']}")
            out.append(
                table(
                    [
                        [f["index"], f["src"], f["dst"], f["size"], f["offset_us"]]
                        for f in ef["flows"]
                    ],
                    ["FLOW", "SRC", "DST", "BYTES", "OFFSET_US"],
                )
            )
        return "\n".join(out)
    if cmd == "stats":
        rows = [
            [g["job"], g["group"], g["echelon_id"], g["class_id"], g["packets"], g["bytes"]]
            for g in data["groups"]
        ]
        sp = [[k, v["packets"], v["bytes"]] for k, v in data["unprioritized"].items()]
        return (
            table(rows, ["JOB", "GROUP", "ID", "CLASS", "PACKETS", "BYTES"])
            + "\n\n"
            + table(sp, ["UNPRIORITIZED", "PACKETS", "BYTES"])
        )
    if cmd == "status":
        rows = [
            [
                n,
                s["grpc"],
                s["connected"],
                s["primary"],
                s["in_sync"],
                f"{s['pipeline_cookie']:#x}" if s["pipeline_cookie"] is not None else "-",
                " ".join(f"{k.split('.')[-1]}={v}" for k, v in sorted(s["entries"].items())),
                s["last_error"] or "",
            ]
            for n, s in data["switches"].items()
        ]
        head = f"policy {data['policy']}, {data['jobs']} jobs\n"
        return head + table(
            rows, ["SWITCH", "GRPC", "CONN", "PRIMARY", "SYNC", "COOKIE", "ENTRIES", "ERROR"]
        )
    if cmd == "policy":
        return f"{data['policy']}  (available: {', '.join(data['available'])})"
    if cmd == "remove":
        return f"removed {data['removed']}"
    return json.dumps(data, indent=2)


def run(args: argparse.Namespace) -> Any:
    if args.cmd == "register":
        return call(args, "POST", "/jobs", description(args))
    if args.cmd == "list":
        return call(args, "GET", "/jobs")
    if args.cmd == "show":
        return call(args, "GET", f"/jobs/{args.job}")
    if args.cmd == "remove":
        return call(args, "DELETE", f"/jobs/{args.job}")
    if args.cmd == "stats":
        return call(args, "GET", "/stats")
    if args.cmd == "status":
        return call(args, "GET", "/status")
    if args.name:
        return call(args, "PUT", "/policy", {"name": args.name})
    return call(args, "GET", "/policy")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        data = run(args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(data, indent=2) if args.json else render(args.cmd, data))
    return 0


if __name__ == "__main__":
    sys.exit(main())

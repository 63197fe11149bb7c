"""``echelon-controller`` / ``python -m controlplane.daemon``: the controller process.

Reads the topology, connects to every switch in the background (primary with
the given election ID, pipeline pushed when missing, entries reconciled), and
serves the northbound API with uvicorn. Binding anywhere but loopback requires a
bearer token, because the API changes switch priorities for the whole network.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from controlplane.api import make_app
from controlplane.controller import Controller
from controlplane.p4info import P4Info
from controlplane.planning import POLICIES
from controlplane.registry import Registry
from echelon.errors import EchelonError
from topo.topology import load

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_P4INFO = ROOT / "p4src" / "build" / "echelon.p4info.txtpb"
DEFAULT_JSON = ROOT / "p4src" / "build" / "echelon.json"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="echelon-controller", description=__doc__.split("\n")[0])
    p.add_argument("--topo", required=True, help="topology file (topo/*.yaml)")
    p.add_argument("--p4info", default=str(DEFAULT_P4INFO), help="P4Info text file")
    p.add_argument(
        "--device-config",
        default=None,
        help="BMv2 JSON to push (default: p4src/build/echelon.json if it exists, else empty)",
    )
    p.add_argument("--db", default="echelon-controller.db", help="SQLite registry file")
    p.add_argument("--election-id", type=int, default=1, help="P4Runtime election ID (low)")
    p.add_argument("--role", default="", help="P4Runtime role name (default role if empty)")
    p.add_argument("--host", default="127.0.0.1", help="API bind address")
    p.add_argument("--port", type=int, default=8080, help="API port")
    p.add_argument(
        "--token",
        default=os.environ.get("ECHELON_API_TOKEN"),
        help="bearer token required by the API (env ECHELON_API_TOKEN); "
        "mandatory when --host is not loopback",
    )
    p.add_argument("--policy", choices=POLICIES, help="set the policy at start-up")
    p.add_argument("--log-level", default="info")
    return p.parse_args(argv)


def build(args: argparse.Namespace) -> Controller:
    topo = load(args.topo)
    p4info = P4Info.load(args.p4info)
    cfg_path = Path(args.device_config) if args.device_config else DEFAULT_JSON
    if args.device_config and not cfg_path.exists():
        raise EchelonError(f"device-config: {cfg_path} does not exist")
    device_config = cfg_path.read_bytes() if cfg_path.exists() else b""
    registry = Registry(args.db, class_slots=p4info.counter("echelon_pkts").size)
    return Controller(
        topo,
        p4info,
        registry,
        device_config,
        election_id=(0, args.election_id),
        role=args.role,
        policy=args.policy,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    if args.host not in LOOPBACK and not args.token:
        print(f"error: --token: required when binding to {args.host}", file=sys.stderr)
        return 2
    if not 0 < args.port < 65536:
        print(f"error: --port: not a TCP port: {args.port}", file=sys.stderr)
        return 2
    try:
        ctl = build(args)
    except EchelonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    import uvicorn

    ctl.start()
    try:
        app = make_app(ctl, args.token)
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level.lower())
    finally:
        ctl.stop()
        ctl.registry.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``echelon-controller`` / ``python -m controlplane.daemon``: the controller process.

Reads the topology, connects to every switch in the background (primary with
the given election ID, pipeline pushed when missing, entries reconciled), and
serves the northbound API with uvicorn. Binding anywhere but loopback requires a
bearer token, because the API changes switch priorities for the whole network.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import get_args

from controlplane.api import make_app
from controlplane.client import ApiClient
from controlplane.controller import Controller
from controlplane.inflight import DEFAULT_TIMEOUT_S
from controlplane.online import IDLE_MODES, MODES
from controlplane.planning import POLICIES
from controlplane.registry import CHECK_INTERVAL_S, SYNC_MODES, Registry
from controlplane.report_socket import ProgressSocket
from echelon.errors import EchelonError, SpecError
from echelon.specs import read_file
from echelon.topology import load, topology_warnings
from echelon.waiting import wait_until
from p4client.p4info import P4Info
from p4client.tls import TlsError, TlsFiles
from targets.process import SOURCE_TREE, free_port, pythonpath, stop_process
from targets.switch import Target, TargetKind, start_target

DEFAULT_P4INFO = SOURCE_TREE / "p4src" / "build" / "echelon.p4info.txtpb"
DEFAULT_JSON = SOURCE_TREE / "p4src" / "build" / "echelon.json"
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
    p.add_argument(
        "--registry-sync",
        choices=SYNC_MODES,
        default="normal",
        help="normal: a change survives kill -9 of the controller; full: also power loss "
        "(fsync per change: 1-5 ms more per registration on the development VM)",
    )
    p.add_argument("--election-id", type=int, default=1, help="P4Runtime election ID (low)")
    p.add_argument("--role", default="", help="P4Runtime role name (default role if empty)")
    p.add_argument(
        "--p4rt-ca",
        help="TLS to the switches: PEM CA that signed their certificates (without it, "
        "plaintext; BMv2: simple_switch_grpc --grpc-server-ssl ...)",
    )
    p.add_argument("--p4rt-cert", help="with --p4rt-ca: this controller's PEM certificate")
    p.add_argument("--p4rt-key", help="with --p4rt-cert: its PEM private key")
    p.add_argument("--host", default="127.0.0.1", help="API bind address")
    p.add_argument("--port", type=int, default=8080, help="API port")
    p.add_argument(
        "--token",
        default=os.environ.get("ECHELON_API_TOKEN"),
        help="bearer token required by the API (env ECHELON_API_TOKEN, or --token-file: "
        "a --token on the command line is visible to every local user in ps); "
        "mandatory when --host is not loopback",
    )
    p.add_argument(
        "--token-file", help="read the bearer token from this file (exactly one non-empty line)"
    )
    p.add_argument("--tls-cert", help="serve the API over https: PEM certificate (with --tls-key)")
    p.add_argument("--tls-key", help="its PEM private key")
    p.add_argument(
        "--policy",
        help=f"set the policy at start-up: one of {', '.join(POLICIES)} or package.module:Class",
    )
    p.add_argument(
        "--replan",
        choices=MODES,
        default="static",
        help="static: priorities from iteration 0 at registration; online: also re-plan "
        "the groups in flight on progress reports (POST /progress)",
    )
    p.add_argument(
        "--replan-interval-ms",
        type=float,
        default=10.0,
        help="online: minimum time between two re-plans (a burst of reports coalesces)",
    )
    p.add_argument(
        "--progress-timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help="online: seconds without a report after which a job has nothing in flight",
    )
    p.add_argument(
        "--idle-level",
        choices=IDLE_MODES,
        default="keep",
        help="online: a group not in flight keeps its last levels (keep) or drops to "
        "level 1 (lowest, as the simulator ranks a flow not yet re-planned)",
    )
    p.add_argument(
        "--progress-socket",
        help="online: also accept progress reports as datagrams on this AF_UNIX socket "
        "(for hosts in other network namespaces)",
    )
    p.add_argument("--log-level", default="info")
    p.add_argument(
        "--start-switches",
        choices=get_args(TargetKind),
        help="also start the topology's switches (no data ports) and stop them on exit: "
        "a controller to register jobs against, without the emulated network",
    )
    return p.parse_args(argv)


def build(args: argparse.Namespace) -> Controller:
    topo = load(args.topo)
    p4info = P4Info.load(args.p4info)
    cfg_path = Path(args.device_config) if args.device_config else DEFAULT_JSON
    try:
        device_config = cfg_path.read_bytes() if cfg_path.is_file() else b""
    except OSError as exc:
        raise EchelonError(f"--device-config: cannot read {cfg_path}: {exc.strerror}") from None
    registry = Registry(
        args.db, class_slots=p4info.counter("echelon_pkts").size, sync=args.registry_sync
    )
    registry.start_checks(CHECK_INTERVAL_S)
    return Controller(
        topo,
        p4info,
        registry,
        device_config,
        election_id=(0, args.election_id),
        role=args.role,
        policy=args.policy,
        replan=args.replan,
        replan_interval=args.replan_interval_ms / 1e3,
        progress_timeout=args.progress_timeout,
        idle_level=args.idle_level,
        tls=args.p4rt_tls,
    )


def api_tls(args: argparse.Namespace) -> TlsFiles | None:
    """The API's own certificate and key (``None``: plain http), both readable PEM."""
    if args.tls_cert is None and args.tls_key is None:
        return None
    cert = Path(args.tls_cert) if args.tls_cert else None
    key = Path(args.tls_key) if args.tls_key else None
    tls = TlsFiles(None, cert, key, option="--tls")
    tls.require_server()
    tls.check()
    return tls


def p4rt_tls(args: argparse.Namespace) -> TlsFiles | None:
    """The switch connections' TLS files (``None``: plaintext); every file readable PEM
    before anything starts, a missing one named by its option."""
    if args.p4rt_ca is None:
        if args.p4rt_cert or args.p4rt_key:
            raise TlsError("--p4rt-ca", "give the CA that verifies the switches with a certificate")
        return None
    cert = Path(args.p4rt_cert) if args.p4rt_cert else None
    key = Path(args.p4rt_key) if args.p4rt_key else None
    tls = TlsFiles(Path(args.p4rt_ca), cert, key, option="--p4rt")
    tls.check()
    return tls


LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
#: P4Runtime election IDs are 128-bit; this daemon takes the low 64 bits, never 0
#: (0 is "no election ID" to some switches)
MAX_ELECTION_ID = (1 << 64) - 1


def read_token_file(path: str) -> str:
    """The one token of a token file. A file with a blank first line used to start
    the daemon with no authentication at all: now anything but exactly one
    non-empty line (surrounding blank lines allowed) is an error."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise EchelonError(f"--token-file: cannot read {path}: {exc}") from None
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if len(lines) != 1:
        raise EchelonError(
            f"--token-file: {path} must hold exactly one non-empty token line, found {len(lines)}"
        )
    if any(c.isspace() for c in lines[0]):
        raise EchelonError(f"--token-file: {path}: the token must not contain spaces")
    return lines[0]


def check_args(args: argparse.Namespace, argv: list[str]) -> list[str]:
    """Refuse bad options before anything starts (``error: <option>: ...``, exit 2,
    never a traceback); returns warnings to print."""
    warnings = []
    if args.token_file:
        args.token = read_token_file(args.token_file)
    elif args.token is not None:
        if not args.token.strip():
            raise EchelonError("--token: empty (an empty token would accept a bare 'Bearer')")
        if any(a == "--token" or a.startswith("--token=") for a in argv):
            warnings.append(
                "--token on the command line is visible in ps; use ECHELON_API_TOKEN "
                "or --token-file"
            )
    if args.host not in LOOPBACK and not args.token:
        raise EchelonError(f"--token: required when binding to {args.host}")
    if args.log_level.lower() not in LOG_LEVELS:
        raise EchelonError(f"--log-level: {args.log_level!r} is not one of {list(LOG_LEVELS)}")
    if not 0 < args.election_id <= MAX_ELECTION_ID:
        raise EchelonError(f"--election-id: must be in 1..2**64-1, got {args.election_id}")
    # checked once, here, and kept: build() and serve() use these
    args.p4rt_tls, args.api_tls = p4rt_tls(args), api_tls(args)
    if not args.replan_interval_ms >= 0:
        raise EchelonError(f"--replan-interval-ms: must be >= 0, got {args.replan_interval_ms}")
    if not args.progress_timeout > 0:
        raise EchelonError(f"--progress-timeout: must be > 0, got {args.progress_timeout}")
    if not 0 < args.port < 65536:
        raise EchelonError(f"--port: not a TCP port: {args.port}")
    try:
        read_file(args.topo)  # readable, UTF-8, YAML/JSON: before anything starts
    except SpecError as exc:
        raise EchelonError(f"--topo: {exc}") from None
    if args.device_config and not Path(args.device_config).is_file():
        raise EchelonError(f"--device-config: {args.device_config} is not a file")
    if args.progress_socket:
        sock = Path(args.progress_socket)
        if not sock.parent.is_dir():
            raise EchelonError(f"--progress-socket: directory {sock.parent} does not exist")
        if sock.exists() and not sock.is_socket():
            raise EchelonError(
                f"--progress-socket: {sock} exists and is not a socket (refusing to replace it)"
            )
    return warnings


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        warnings = check_args(args, sys.argv[1:] if argv is None else argv)
    except EchelonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    for text in warnings:
        logging.getLogger(__name__).warning("%s", text)
    switches: list[Target] = []
    try:
        for w in topology_warnings(read_file(args.topo)):
            print(f"warning: {args.topo}: {w}", file=sys.stderr)
        if args.start_switches:
            # uvicorn re-raises the SIGTERM it caught once it has shut down; with the
            # default handler that would end the process before the switches are stopped
            signal.signal(signal.SIGTERM, _exit_on_sigterm)
            Path(args.db).parent.mkdir(parents=True, exist_ok=True)
            switches = start_switches(args.topo, args.start_switches, Path(args.db).parent)
        return serve(args, build(args))
    except EchelonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        for sw in switches:
            sw.stop()


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def start_switches(topo_path: str, kind: str, log_dir: Path) -> list[Target]:
    """One switch per switch of the topology, at its gRPC address and Thrift port."""
    out: list[Target] = []
    try:
        for sw in load(topo_path).switches.values():
            log = log_dir / f"switch-{sw.name}.log"
            print(f"starting {kind} switch {sw.name} at {sw.grpc} (log {log}); it has no data "
                  "ports, so no packet reaches it and echelonctl stats stays at 0: make run "
                  "plays traffic on the emulated network", file=sys.stderr)  # fmt: skip
            out.append(start_target(kind, {}, sw.grpc, sw.thrift_port, sw.device_id, log))  # type: ignore[arg-type]
    except BaseException:
        for t in out:
            t.stop()
        raise
    return out


def serve(args: argparse.Namespace, ctl: Controller) -> int:
    """Serve the API until interrupted (SIGINT/SIGTERM), then stop the controller."""
    import uvicorn

    sock = ProgressSocket(args.progress_socket, ctl.report) if args.progress_socket else None
    app = make_app(ctl, args.token)
    tls: TlsFiles | None = args.api_tls
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level.lower(),
        ssl_certfile=str(tls.cert) if tls else None,
        ssl_keyfile=str(tls.key) if tls else None,
    )
    server = uvicorn.Server(config)

    def start_agents() -> None:
        # Once the API listens: the server's start-up work (imports, event loop) then no
        # longer competes with the first reconciliation, and /status answers during it.
        wait_until(lambda: server.started or server.should_exit, math.inf, "the API to listen")
        if server.started:
            ctl.start()
            if sock is not None:
                sock.start()

    threading.Thread(target=start_agents, name="start-agents", daemon=True).start()
    try:
        server.run()
    finally:
        if sock is not None:
            sock.stop()
        ctl.stop()
        ctl.registry.close()
    return 0


class DaemonExited(EchelonError):
    """The daemon child process of a :class:`DaemonProcess` exited while awaited."""


class DaemonProcess:
    """This daemon as a child process: the one launcher the demo (``topo/``), the
    benchmarks, the PTF controller test and the integration tests share.

    The API listens on ``port`` (a free one if None) of 127.0.0.1; stdout and stderr go
    to ``log`` (appended); the child runs in its own session and is stopped by PID. Its
    ``PYTHONPATH`` starts with this source tree, so the child runs the same code as the
    parent even where the installed package points at another checkout.
    """

    def __init__(
        self,
        topo: str | Path,
        db: str | Path,
        log: Path,
        *extra: str,
        port: int | None = None,
        ca: str | Path | None = None,
    ) -> None:
        """``ca``: the API is https (``extra`` has ``--tls-cert/--tls-key``), its
        certificate signed by this PEM CA."""
        self.port = free_port() if port is None else port
        self.url = f"{'https' if ca else 'http'}://127.0.0.1:{self.port}"
        self.log = log
        self.argv = [sys.executable, "-m", "controlplane.daemon", "--topo", str(topo),
                     "--db", str(db), "--port", str(self.port), *extra]  # fmt: skip
        #: the API client callers drive the daemon with (one keep-alive connection)
        self.api = ApiClient(self.url, timeout=30, ca=ca)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the child (returns at once; :meth:`wait_in_sync` awaits it)."""
        env = {**os.environ, "PYTHONPATH": pythonpath()}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         env=env)  # fmt: skip

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise DaemonExited(f"controller not started (log {self.log})")
        return self.proc.pid

    def wait_in_sync(
        self, timeout: float = 30.0, switch: str | None = None, interval: float = 0.1
    ) -> None:
        """Wait until the API answers and ``switch`` (default: every switch) is in sync;
        :class:`DaemonExited` as soon as the child is gone (no use waiting for it)."""

        def in_sync() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise DaemonExited(f"controller exited with {self.proc.returncode}; see {self.log}")
            return self.api.in_sync(switch)

        what = f"controller in sync with {switch or 'every switch'}"
        wait_until(in_sync, timeout, what, interval)

    def kill(self) -> None:
        """SIGKILL, as a crash would end it (what a restart must recover from)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, SIGKILL after ``timeout`` (a stopped daemon may be started again)."""
        if self.proc is not None:
            stop_process(self.proc, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """The end: :meth:`stop`, then close :attr:`api`'s connection."""
        try:
            self.stop(timeout)
        finally:
            self.api.close()


if __name__ == "__main__":
    sys.exit(main())

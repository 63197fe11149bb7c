"""``python -m softswitch``: the switch process, started like simple_switch_grpc.

    python -m softswitch --device-id 0 -i 1@veth1 -i 2@veth2 --thrift-port 9090 \\
        [--log-console] [-L info] [--log-file F] [--pcap[=DIR]] \\
        [--p4info FILE] (--no-p4 | JSON) \\
        -- --grpc-server-addr 127.0.0.1:9559 --priority-queues 8 [--cpu-port N]

The program is p4c's BMv2 JSON, as for simple_switch_grpc: normally pushed with
SetForwardingPipelineConfig (P4Info + JSON); ``--p4info FILE JSON`` loads one at
start. Without ``--p4info`` the JSON argument (or ``--no-p4``) is accepted and
unused, since P4Runtime needs the P4Info to address the program.
Logging goes nowhere unless ``--log-console`` (stdout, like BMv2) or
``--log-file``; the default level is ``info`` (BMv2's is trace, which would
log every packet). When serving, the log gets ``ready grpc=... ports=...``.
``--pcap DIR`` (or ``--pcap=DIR``) captures every port's received and sent
frames in ``DIR/IFACE_in.pcap`` and ``DIR/IFACE_out.pcap`` (BMv2's names;
:mod:`echelon.pcap`), flushed after every batch of frames.
SIGTERM/SIGINT stop gRPC, the runtime port and the ports, then exit 0.
"""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from echelon.errors import EchelonError
from p4client.p4info import P4Info
from p4client.tls import TlsError, TlsFiles
from softswitch.bm.pipeline import Pipeline
from softswitch.dataplane import TRACE
from softswitch.errors import UsageError

LEVELS = {
    "trace": TRACE,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "off": logging.CRITICAL + 10,
}
log = logging.getLogger("softswitch")


@dataclass
class Options:
    ports: dict[int, str]
    device_id: int
    thrift_port: int
    log_console: bool
    log_level: str
    log_file: str | None
    p4info: str | None
    grpc_addr: str
    priority_queues: int
    cpu_port: int | None
    json: str | None = None
    pcap: str | None = None
    #: TLS of the P4Runtime server (``None``: plaintext), BMv2's ``--grpc-server-ssl ...``
    tls: TlsFiles | None = None
    client_auth: bool = False


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError("arguments", message)


def parse_args(argv: list[str]) -> Options:
    """Split at ``--`` like simple_switch_grpc: switch options, then target options."""
    if "--" in argv:
        cut = argv.index("--")
        main_argv, target_argv = argv[:cut], argv[cut + 1 :]
    else:
        main_argv, target_argv = argv, []
    ap = _Parser(prog="python -m softswitch", add_help=True)
    ap.add_argument("-i", "--interface", action="append", default=[], metavar="PORT@IFACE")
    ap.add_argument("--device-id", type=int, default=0)
    ap.add_argument("--thrift-port", type=int, default=9090)
    ap.add_argument("--log-console", action="store_true")
    ap.add_argument("-L", "--log-level", choices=sorted(LEVELS), default="info")
    ap.add_argument("--log-file")
    ap.add_argument("--no-p4", action="store_true")
    ap.add_argument(
        "--pcap",
        nargs="?",
        const=".",
        metavar="DIR",
        help="write IFACE_in.pcap and IFACE_out.pcap per interface in DIR (default .), as BMv2",
    )
    ap.add_argument("--p4info", help="P4Info (text) to load at start")
    ap.add_argument("json", nargs="?", help="BMv2 JSON (used with --p4info)")
    ns = ap.parse_args(main_argv)
    tp = _Parser(prog="python -m softswitch ... --", add_help=False)
    tp.add_argument("--grpc-server-addr", default="127.0.0.1:9559")
    tp.add_argument("--priority-queues", type=int, default=1)
    tp.add_argument("--cpu-port", type=int)
    tp.add_argument("--grpc-server-ssl", action="store_true")
    tp.add_argument("--grpc-server-cacert")
    tp.add_argument("--grpc-server-cert")
    tp.add_argument("--grpc-server-key")
    tp.add_argument("--grpc-server-with-client-auth", action="store_true")
    ts = tp.parse_args(target_argv)
    tls = None
    if ts.grpc_server_ssl:
        files = [ts.grpc_server_cacert, ts.grpc_server_cert, ts.grpc_server_key]
        ca, cert, key = (Path(f) if f else None for f in files)
        try:
            tls = TlsFiles(ca, cert, key, option="grpc-server")
            tls.require_server(ts.grpc_server_with_client_auth)
            tls.check()
        except TlsError as exc:  # named as simple_switch_grpc names its options
            field = exc.field.replace("grpc-server-ca", "grpc-server-cacert")
            raise UsageError(field, exc.message) from None
    elif ts.grpc_server_cert or ts.grpc_server_key or ts.grpc_server_with_client_auth:
        raise UsageError("grpc-server-ssl", "TLS options given without --grpc-server-ssl")
    ports: dict[int, str] = {}
    for spec in ns.interface:
        num, sep, iface = spec.partition("@")
        if not sep or not iface or not num.isdigit():
            raise UsageError("interface", f"{spec!r} is not PORT@IFACE")
        port = int(num)
        if not 0 <= port < 511 or port in ports:
            raise UsageError("interface", f"port {port} is out of range or given twice")
        ports[port] = iface
    if not 1 <= ts.priority_queues <= 32:
        raise UsageError("priority-queues", f"{ts.priority_queues} is not in 1..32")
    if not 0 <= ns.thrift_port < 65536:  # 0: any free port
        raise UsageError("thrift-port", f"{ns.thrift_port} is not a TCP port")
    if not 0 <= ns.device_id < 1 << 64:
        raise UsageError("device-id", f"{ns.device_id} is not a uint64")
    return Options(
        ports,
        ns.device_id,
        ns.thrift_port,
        ns.log_console,
        ns.log_level,
        ns.log_file,
        ns.p4info,
        ts.grpc_server_addr,
        ts.priority_queues,
        ts.cpu_port,
        ns.json,
        ns.pcap,
        tls,
        ts.grpc_server_with_client_auth,
    )


def setup_logging(opts: Options) -> None:
    logging.addLevelName(TRACE, "TRACE")
    root = logging.getLogger()
    root.setLevel(LEVELS[opts.log_level])
    fmt = logging.Formatter("%(asctime)s [softswitch] [%(levelname).1s] %(message)s")
    handlers: list[logging.Handler] = []
    if opts.log_console:
        handlers.append(logging.StreamHandler(sys.stdout))
    if opts.log_file:
        try:
            handlers.append(logging.FileHandler(opts.log_file))
        except OSError as exc:
            raise UsageError("log-file", str(exc)) from None
    for h in handlers:
        h.setFormatter(fmt)
        root.addHandler(h)
    # The ready line is written whatever the level, unless logging is off.
    ready = logging.getLogger("softswitch.ready")
    ready.setLevel(logging.INFO if opts.log_level != "off" else LEVELS["off"])


def run(opts: Options, stop: threading.Event) -> None:
    """Start everything, serve until ``stop`` is set, then shut down in reverse order."""
    from softswitch.dataplane import DataPlane, Queued
    from softswitch.p4rt_server import P4RuntimeService, make_server
    from softswitch.queueing import PriorityRateQueues
    from softswitch.runtime import RuntimeServer

    queues: PriorityRateQueues[Queued] = PriorityRateQueues(opts.priority_queues)
    dataplane = DataPlane(opts.ports, queues, opts.pcap)
    runtime: RuntimeServer | None = None
    server = None
    try:

        def set_pipeline(pl: Pipeline | None) -> None:
            dataplane.pipeline = pl

        service = P4RuntimeService(opts.device_id, set_pipeline)
        if opts.p4info:
            if not opts.json:
                raise UsageError("p4info", "--p4info needs the program's BMv2 JSON too")
            try:
                config = Path(opts.json).read_bytes()
            except OSError as exc:
                raise UsageError("json", f"{opts.json}: {exc.strerror}") from None
            service.commit(Pipeline(P4Info.load(opts.p4info).proto, config, 0))
        try:
            creds = opts.tls.server_credentials(opts.client_auth) if opts.tls else None
            server, grpc_port = make_server(service, opts.grpc_addr, creds)
        except RuntimeError as exc:
            raise UsageError(
                "grpc-server-addr", f"cannot listen on {opts.grpc_addr}: {exc}"
            ) from None
        runtime = RuntimeServer(
            opts.thrift_port,
            queues,
            dataplane.lock,
            service,
            ports=opts.ports,
            device_id=opts.device_id,
        )
        # get_time_elapsed_us and the timestamps packets carry count from the same start
        runtime.handler.started = dataplane.start_time
        # Startup objects (protos, grpc, modules) live forever: keep them out of the
        # collector's full passes, which otherwise stall the packet thread.
        gc.collect()
        gc.freeze()
        dataplane.start()
        runtime.start()
        server.start()
        host = opts.grpc_addr.rsplit(":", 1)[0]
        ports = ",".join(f"{n}@{i}" for n, i in sorted(opts.ports.items()))
        logging.getLogger("softswitch.ready").info(
            "ready grpc=%s:%d thrift=%d ports=%s device_id=%d priority_queues=%d",
            host,
            grpc_port,
            runtime.port,
            ports or "-",
            opts.device_id,
            opts.priority_queues,
        )
        # Wake up periodically: the kernel may deliver SIGTERM to a gRPC or packet
        # thread, and CPython runs the Python handler only when the *main* thread
        # executes bytecode, so an untimed wait here can sleep through SIGTERM.
        while not stop.wait(0.2):
            pass
        log.info("stopping: %r %r", dataplane.stats, queues.stats)
    finally:
        if server is not None:
            server.stop(grace=0.5).wait(2)
        if runtime is not None:
            runtime.stop()
        dataplane.stop()


def main(argv: list[str] | None = None) -> int:
    stop = threading.Event()
    try:
        opts = parse_args(sys.argv[1:] if argv is None else argv)
        setup_logging(opts)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda _s, _f: stop.set())
        run(opts, stop)
    except EchelonError as err:  # UsageError and anything a bad --p4info raises
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0

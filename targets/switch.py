"""Start, drive and stop a switch target: BMv2 ``simple_switch_grpc`` or the embedded soft switch.

Both take simple_switch_grpc's command line and serve BMv2's Thrift runtime API
on ``--thrift-port`` (:mod:`p4client.bmruntime`), so everything above this
module (PTF runner, Mininet launcher, integration tests) is written once. ``auto`` picks BMv2 when
``simple_switch_grpc`` is on PATH and the soft switch otherwise.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

from echelon.constants import NUM_PRIORITIES
from echelon.waiting import wait_until
from p4client.bmruntime import RuntimeClient
from p4client.tls import TlsFiles, server_flags
from targets.process import TargetError, freeze_process, port_open, stop_process

log = logging.getLogger(__name__)

TargetKind = Literal["soft", "bmv2", "auto"]
BMV2_BINARY = "simple_switch_grpc"
#: BMv2's packet-trace log rotates at this size, keeping this many files (its default,
#: 5 MB x 3, held only the last ~20,000 packets' steps of a run).
TRACE_FILE_BYTES = 512 * 2**20
TRACE_FILES = 4


def resolve_kind(kind: TargetKind) -> Literal["soft", "bmv2"]:
    """``auto`` -> ``bmv2`` if simple_switch_grpc is installed, else ``soft``."""
    if kind == "auto":
        return "bmv2" if shutil.which(BMV2_BINARY) else "soft"
    if kind == "bmv2" and not shutil.which(BMV2_BINARY):
        raise TargetError(f"target bmv2 requested but {BMV2_BINARY} is not on PATH")
    if kind not in ("soft", "bmv2"):
        raise TargetError(f"unknown target kind {kind!r} (soft, bmv2 or auto)")
    return kind


@dataclass
class Target:
    """A running switch process. Stop it with :meth:`stop`."""

    kind: Literal["soft", "bmv2"]
    proc: subprocess.Popen[bytes]
    grpc_addr: str
    thrift_port: int
    device_id: int
    ports: Mapping[int, str]
    log_path: Path | None
    pcap_dir: Path | None = None
    _log_file: IO[bytes] | None = field(default=None, repr=False)
    #: the per-packet trace log (``start_target(packet_trace=...)``), if any
    packet_trace: Path | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until the gRPC and runtime-CLI ports accept connections."""

        def ready() -> bool:
            if not self.alive():
                raise TargetError(
                    f"{self.kind} switch exited with {self.proc.returncode} during start-up"
                    + (f"; see {self.log_path}" if self.log_path else "")
                )
            return port_open(self.grpc_addr) and port_open(f"127.0.0.1:{self.thrift_port}")

        wait_until(ready, timeout, f"{self.kind} switch on {self.grpc_addr}")

    def runtime(self, timeout: float = 15.0) -> RuntimeClient:
        """A Thrift runtime client (BMv2's ``bm_runtime`` API) for this switch; close it."""
        return RuntimeClient(self.thrift_port, timeout=timeout).connect()

    def freeze(self, timeout: float = 5.0) -> None:
        """SIGSTOP the switch and wait until every thread of it has stopped: time passes
        for its queues, nothing is served. (kill() returns before a thread running on
        another core has taken the signal; a frame sent in that window would be served.)"""
        freeze_process(self.pid, timeout)

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def stop(self, timeout: float = 10.0) -> int:
        """SIGCONT + SIGTERM, then SIGKILL after ``timeout``; returns the exit status."""
        rc = stop_process(self.proc, timeout)
        if self._log_file:
            self._log_file.close()
            self._log_file = None
        return rc


def command_line(
    kind: Literal["soft", "bmv2"],
    ports: Mapping[int, str],
    grpc_addr: str,
    thrift_port: int,
    device_id: int = 0,
    pcap_dir: str | Path | None = None,
    packet_trace: str | Path | None = None,
    tls: TlsFiles | None = None,
    client_auth: bool = False,
) -> list[str]:
    """simple_switch_grpc's argv; the soft switch takes the same after ``-m softswitch``.
    One priority queue per echelon level (:data:`~echelon.constants.NUM_PRIORITIES`).

    ``pcap_dir``: ``--pcap=DIR``, one ``IFACE_in.pcap``/``IFACE_out.pcap`` pair per
    port. With ``=``: BMv2's option has an optional value (boost's implicit value),
    which it takes only in that form.

    ``packet_trace``: the switch's log at level ``trace`` goes to that file (a name
    ending in ``.txt``, which BMv2 adds itself) instead of the console (``--log-file``:
    BMv2 refuses it together with ``--log-console``).
    BMv2 then logs every packet's parser states, tables, actions and deparser, flushed
    after each line (``--log-flush``: a run stopped by a signal keeps its last packets)
    and rotated at :data:`TRACE_FILE_BYTES` into at most :data:`TRACE_FILES` files; the
    soft switch logs every packet's bytes on input and its forwarding decision
    (egress port, queue, drops), not BMv2's per-table steps.
    """
    head = [BMV2_BINARY] if kind == "bmv2" else [sys.executable, "-m", "softswitch"]
    argv = [*head, "--device-id", str(device_id), "--thrift-port", str(thrift_port)]
    for port, iface in sorted(ports.items()):
        argv += ["-i", f"{port}@{iface}"]
    if pcap_dir is not None:
        argv.append(f"--pcap={pcap_dir}")
    if packet_trace is None:
        argv += ["--log-console", "-L", "info"]
    elif not str(packet_trace).endswith(".txt"):
        raise TargetError(f"packet_trace: must end in .txt (BMv2 adds it), got {packet_trace}")
    elif kind == "bmv2":
        # BMv2 writes the file it is given with ".txt" added (rotated: NAME.1.txt, ...)
        argv += ["--log-file", str(packet_trace).removesuffix(".txt"), "-L", "trace"]
        argv += ["--log-flush", "--log-file-max-size", str(TRACE_FILE_BYTES)]
        argv += ["--log-file-max-files", str(TRACE_FILES)]
    else:
        argv += ["--log-file", str(packet_trace), "-L", "trace"]
    argv += ["--no-p4", "--"]
    argv += ["--grpc-server-addr", grpc_addr, "--priority-queues", str(NUM_PRIORITIES)]
    if tls is not None:
        argv += server_flags(tls, client_auth)
    return argv


def start_target(
    kind: TargetKind,
    ports: Mapping[int, str],
    grpc_addr: str,
    thrift_port: int,
    device_id: int = 0,
    log_path: str | Path | None = None,
    cpus: str | None = None,
    pcap_dir: str | Path | None = None,
    nice: int | None = None,
    packet_trace: str | Path | None = None,
    tls: TlsFiles | None = None,
    client_auth: bool = False,
) -> Target:
    """Start a switch on ``ports`` ({port number: interface}) and wait until it serves.

    The process's console log goes to ``log_path`` (or is discarded). ``cpus`` (a
    ``taskset`` list such as ``"1"``) pins it, as the benchmarks do. With
    ``pcap_dir`` the switch captures every port into that directory (created
    here; ``IFACE_in.pcap``/``IFACE_out.pcap``, BMv2's names, on both targets).
    ``nice`` runs it at that ``nice`` increment (the emulation: negative, so the
    switch is not starved by the emulated hosts it forwards for). ``packet_trace``:
    the switch's per-packet trace log into that file (:func:`command_line`); its
    console log then holds only what it prints itself. ``tls``: its P4Runtime server
    speaks TLS with these files (``client_auth``: and requires client certificates),
    BMv2's ``--grpc-server-ssl`` options, which the soft switch takes too.
    """
    real = resolve_kind(kind)
    if pcap_dir is not None:
        pcap_dir = Path(pcap_dir).resolve()  # the switch may run in another cwd/netns
        pcap_dir.mkdir(parents=True, exist_ok=True)
    if packet_trace is not None:
        packet_trace = Path(packet_trace).resolve()
        packet_trace.parent.mkdir(parents=True, exist_ok=True)
    argv = command_line(real, ports, grpc_addr, thrift_port, device_id, pcap_dir, packet_trace,
                        tls, client_auth)  # fmt: skip
    if cpus:
        argv = ["taskset", "-c", cpus, *argv]
    if nice is not None:
        argv = ["nice", "-n", str(nice), *argv]
    path = Path(log_path) if log_path else None
    sink: IO[bytes] | None = None
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        sink = path.open("ab")
    log.info("starting %s switch: %s", real, " ".join(argv))
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=sink or subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # Ctrl-C in the terminal reaches us, not the switch
    )
    pcap = Path(pcap_dir) if pcap_dir is not None else None
    target = Target(real, proc, grpc_addr, thrift_port, device_id, dict(ports), path, pcap, sink)
    target.packet_trace = packet_trace
    try:
        target.wait_ready()
    except BaseException:
        target.stop()
        raise
    return target

"""A switch target on its own veth pairs, programmed with one program, driven frame by frame.

:meth:`Rig.run` sends one frame into a port and returns everything that came
out of every port because of it, in order. To know when a frame is *done*
(it may be dropped, and BMv2 says nothing about drops) the rig follows it,
on the same ingress port, with one *sentinel* frame per egress port: a frame
the program is known to forward to that port at priority 0. A port's queues
are strict-priority and FIFO within a level, so once each port has delivered
its sentinel, whatever the test frame produced has been delivered before it.
Sentinels carry a per-rig nonce in their payload and are filtered out.

Both targets get exactly the same frames (test frames and sentinels) in the
same order, so stateful programs (registers, meters, digest filters) stay in
step. Digest lists the switch sends on the P4Runtime stream are collected
(never acknowledged: each distinct sample is sent once) in :attr:`Rig.digests`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from finsy.proto import p4r as p4runtime_pb2

from p4client.p4info import TableEntry
from p4client.p4rt import SwitchConnection
from softswitch.dataplane import ANC_SIZE, PACKET_AUXDATA, SOL_PACKET, frame_with_vlan
from targets.process import free_port
from targets.switch import Target, start_target

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
MTU = 9500
#: Egress frames of one test frame: (port, bytes) in arrival order per port.
Outputs = list[tuple[int, bytes]]


class RigError(Exception):
    """The rig could not be set up or a frame did not complete."""


@dataclass(frozen=True)
class Program:
    """What the rig needs of a P4 program: its build outputs, entries and sentinels."""

    name: str
    p4info: Path
    json: Path
    ports: tuple[int, ...]
    entries: Callable[[SwitchConnection], list[TableEntry]]
    #: (egress port, nonce) -> a frame the program forwards to that port at priority 0.
    sentinel: Callable[[int, bytes], bytes]
    #: other writes after the entries (clone sessions, meter configs), the same on both
    setup: Callable[[SwitchConnection], None] | None = None
    #: 2 for programs whose frames make E2E clones or recirculate: BMv2 queues those
    #: only once the original reaches egress, possibly behind the first sentinels; a
    #: second round, sent when the first has arrived, is behind them
    sentinel_rounds: int = 1


def _ip(*args: str) -> None:
    res = subprocess.run(["ip", *args], capture_output=True, text=True)
    if res.returncode != 0:
        raise RigError(f"ip {' '.join(args)}: {res.stderr.strip()}")


class Rig:
    """One running target (``soft`` or ``bmv2``) with ``program`` installed."""

    def __init__(self, kind: str, prefix: str, program: Program, log_dir: Path) -> None:
        self.kind = kind
        self.program = program
        self.prefix = prefix
        self.nonce = b"SENTINEL" + os.urandom(8)
        self.pairs = {p: (f"{prefix}s{p}", f"{prefix}h{p}") for p in program.ports}
        self.socks: dict[int, socket.socket] = {}
        self.target: Target | None = None
        self.sw: SwitchConnection | None = None
        self.frames = 0
        try:
            self._veths()
            for port, (_sw, host) in self.pairs.items():
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                s.bind((host, 0))
                s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)  # see frame_with_vlan
                s.setblocking(False)
                self.socks[port] = s
            grpc_addr = f"127.0.0.1:{free_port()}"
            self.target = start_target(
                kind,  # type: ignore[arg-type]
                {p: sw for p, (sw, _h) in self.pairs.items()},
                grpc_addr,
                free_port(),
                log_path=log_dir / f"{prefix}-{kind}.log",
            )
            self.sw = SwitchConnection(grpc_addr, 0)
            #: every digest sample the switch sent: (digest name, member values), in order
            self.digests: list[tuple[str, tuple[int, ...]]] = []
            self.sw.on_message(self._on_message)
            deadline = time.monotonic() + 10
            while not self.sw.connect():
                if time.monotonic() > deadline:
                    raise RigError(f"{kind}: no primary P4Runtime session")
            self.sw.set_pipeline(program.p4info, program.json.read_bytes())
            self.sw.insert(program.entries(self.sw))
            if program.setup is not None:
                program.setup(self.sw)
            self._drain()
        except BaseException:
            self.close()
            raise

    def _veths(self) -> None:
        self._delete_veths()
        for sw, host in self.pairs.values():
            _ip("link", "add", sw, "type", "veth", "peer", "name", host)
            for dev in (sw, host):
                Path(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6").write_text("1\n")
                _ip("link", "set", "dev", dev, "mtu", str(MTU), "up")
                if shutil.which("ethtool"):
                    for feature in ("rx", "tx", "sg", "tso", "gso", "gro"):
                        subprocess.run(["ethtool", "-K", dev, feature, "off"], capture_output=True)

    def _delete_veths(self) -> None:
        for sw, _host in self.pairs.values():
            if Path("/sys/class/net", sw).exists():
                subprocess.run(["ip", "link", "del", sw], capture_output=True)

    def close(self) -> None:
        if self.sw is not None:
            self.sw.close()
            self.sw = None
        if self.target is not None:
            self.target.stop()
            self.target = None
        for s in self.socks.values():
            s.close()
        self.socks = {}
        self._delete_veths()

    # ------------------------------------------------------------------ frames
    def _recv(self, port: int) -> Iterator[bytes]:
        sock = self.socks[port]
        while True:
            try:
                data, anc, _flags, addr = sock.recvmsg(65536, ANC_SIZE)
            except BlockingIOError:
                return
            if addr[2] != PACKET_OUTGOING:
                yield frame_with_vlan(data, anc)

    def _drain(self) -> None:
        for port in self.socks:
            for _ in self._recv(port):
                pass

    def run(self, in_port: int, frame: bytes, timeout: float = 5.0) -> Outputs:
        """Send ``frame`` into ``in_port``; every frame it caused, per port in order."""
        self.frames += 1
        send = self.socks[in_port].send
        send(frame)
        out: Outputs = []
        for rnd in range(self.program.sentinel_rounds):
            tag = self.nonce + self.frames.to_bytes(4, "big") + bytes([rnd])
            for port in self.program.ports:
                send(self.program.sentinel(port, tag))
            self._await(tag, out, time.monotonic() + timeout)
        return out

    def _await(self, tag: bytes, out: Outputs, deadline: float) -> None:
        """Collect outputs into ``out`` until every port has delivered its ``tag`` sentinel."""
        pending = set(self.program.ports)
        by_fd = {s.fileno(): p for p, s in self.socks.items()}
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RigError(f"{self.kind}: sentinels of frame {self.frames} missing {pending}")
            ready, _w, _x = select.select(list(by_fd), [], [], left)
            for fd in ready:
                port = by_fd[fd]
                for data in self._recv(port):
                    if tag in data:
                        pending.discard(port)
                    elif self.nonce in data:
                        raise RigError(f"{self.kind}: a stale sentinel on port {port}")
                    else:
                        out.append((port, data))

    def _on_message(self, msg: p4runtime_pb2.StreamMessageResponse) -> None:
        if msg.WhichOneof("update") != "digest" or self.sw is None or self.sw.p4info is None:
            return
        names = {d.preamble.id: d.preamble.name for d in self.sw.p4info.proto.digests}
        for data in msg.digest.data:
            values = tuple(int.from_bytes(m.bitstring, "big") for m in data.struct.members)
            self.digests.append((names.get(msg.digest.digest_id, "?"), values))

    def counters(self) -> dict[str, dict[int, tuple[int, int]]]:
        """Every cell of every counter in the P4Info."""
        assert self.sw is not None and self.sw.p4info is not None
        return {c.name: self.sw.read_counter(c.name) for c in self.sw.p4info.counters()}


LOCK_PATH = Path("/run/lock/echelon-differential.lock")


@contextlib.contextmanager
def rigs(program: Program, log_dir: Path) -> Iterator[tuple[Rig, Rig]]:
    """BMv2 and the soft switch, both running ``program``; stopped and cleaned up after.

    Holds a machine-wide lock: the veth names are fixed, so runs take turns."""
    log_dir.mkdir(parents=True, exist_ok=True)
    LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
    with LOCK_PATH.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield from _rigs(program, log_dir)


def _rigs(program: Program, log_dir: Path) -> Iterator[tuple[Rig, Rig]]:
    bmv2 = Rig("bmv2", "dfb", program, log_dir)
    try:
        soft = Rig("soft", "dfs", program, log_dir)
        try:
            yield bmv2, soft
        finally:
            soft.close()
    finally:
        bmv2.close()

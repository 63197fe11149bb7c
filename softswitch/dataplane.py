"""The packet thread: AF_PACKET ports, pipeline, priority queues, transmit.

One thread owns the hot path. It waits in ``epoll`` on the port sockets (and a
wake-up pipe), with a timeout set to the next queued departure. On a wake-up it
drains up to ``BATCH`` frames per readable port through the ingress pipeline
into the queues, then runs every due packet, highest priority first, through
the egress pipeline (with the queueing metadata of the queue it waited in, as
simple_switch's egress thread) and transmits it. A queued packet keeps the
pipeline that ran its ingress, so a new config never sees an old state vector. Reading a
batch before serving means a burst that queued up in the kernel (e.g. while the
switch was SIGSTOPped) is ordered by priority, like simple_switch, whose ingress
and egress run in separate threads.

The pipeline reference is swapped by the P4Runtime server on a new config; the
thread reads it once per frame. Queue settings are changed by the runtime CLI
under ``lock``, which the thread holds for each batch.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from echelon.pcap import PcapWriter, pcap_names
from softswitch.bm.packet import Ingressed, PacketState
from softswitch.bm.pipeline import Pipeline
from softswitch.errors import UsageError
from softswitch.queueing import PriorityRateQueues

log = logging.getLogger("softswitch.dataplane")

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_IGNORE_OUTGOING = 23
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
_AUXDATA = struct.Struct("IIIHHHH")
ANC_SIZE = socket.CMSG_SPACE(_AUXDATA.size)
PACKET_OUTGOING = 4
SO_RCVBUFFORCE = 33
BATCH = 64
RCVBUF = 4 << 20
#: Log level below DEBUG for packet dumps (``-L trace``).
TRACE = 5


#: A queued packet: the pipeline that ran its ingress and its state.
Queued = tuple[Pipeline, PacketState]


@dataclass
class DataPlaneStats:
    """Counts of what happened to frames, beside the program's own counters (the queues
    count their own drops: :class:`softswitch.queueing.QueueStats`)."""

    rx: int = 0
    tx: int = 0
    no_pipeline: int = 0
    pipeline_drop: int = 0
    no_such_port: int = 0
    errors: int = 0


def frame_with_vlan(data: bytes, ancdata: list[tuple[int, int, bytes]]) -> bytes:
    """The frame as it was on the wire: Linux strips an 802.1Q/802.1ad tag before
    AF_PACKET sees it and reports it in PACKET_AUXDATA; put it back (as libpcap,
    and so BMv2, does)."""
    for level, kind, aux in ancdata:
        if level == SOL_PACKET and kind == PACKET_AUXDATA and len(aux) >= _AUXDATA.size:
            status, _len, _snap, _mac, _net, tci, tpid = _AUXDATA.unpack_from(aux)
            if status & TP_STATUS_VLAN_VALID:
                if not status & TP_STATUS_VLAN_TPID_VALID:
                    tpid = 0x8100
                return data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
    return data


def open_port(ifname: str) -> socket.socket:
    """A non-blocking promiscuous raw socket bound to ``ifname``."""
    try:
        ifindex = socket.if_nametoindex(ifname)
    except OSError:
        raise UsageError("interface", f"{ifname} does not exist") from None
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        sock.bind((ifname, 0))
        mreq = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
        sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
        sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)  # VLAN tags: see frame_with_vlan
        # Linux >= 4.20: the kernel does not loop our own transmissions back.
        with contextlib.suppress(OSError):
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise UsageError("interface", f"{ifname}: {exc.strerror or exc}") from None
    return sock


class DataPlane:
    """Ports, queues and the thread that moves frames between them."""

    def __init__(
        self,
        ports: dict[int, str],
        queues: PriorityRateQueues[Queued],
        pcap_dir: str | None = None,
    ) -> None:
        self.queues = queues
        self.pipeline: Pipeline | None = None
        self.stats = DataPlaneStats()
        self.lock = threading.Lock()
        self.start_time = time.monotonic()
        self.socks: dict[int, socket.socket] = {}
        #: ``--pcap DIR``: per port the writers of ``IFACE_in.pcap`` and ``IFACE_out.pcap``.
        self.pcap_in: dict[int, PcapWriter] = {}
        self.pcap_out: dict[int, PcapWriter] = {}
        try:
            for number, ifname in ports.items():
                self.socks[number] = open_port(ifname)
            if pcap_dir is not None:
                self._open_pcaps(ports, Path(pcap_dir))
        except BaseException:
            self.close()
            raise
        for number in ports:
            queues.add_port(number)
        self._by_fd = {s.fileno(): (n, s) for n, s in self.socks.items()}
        self._wake_r, self._wake_w = os.pipe()
        self._running = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._running = True
        self._thread = threading.Thread(target=self._run, name="dataplane", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._running = False
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            self._thread.join(timeout=5)
            self._thread = None
        self.close()

    def _open_pcaps(self, ports: dict[int, str], where: Path) -> None:
        """BMv2's ``--pcap DIR`` files, so a capture of either target reads the same."""
        try:
            where.mkdir(parents=True, exist_ok=True)
            for number, ifname in ports.items():
                name_in, name_out = pcap_names(ifname)
                self.pcap_in[number] = PcapWriter(where / name_in)
                self.pcap_out[number] = PcapWriter(where / name_out)
        except OSError as exc:
            raise UsageError("pcap", f"{where}: {exc.strerror or exc}") from None

    def close(self) -> None:
        for w in [*self.pcap_in.values(), *self.pcap_out.values()]:
            w.close()
        for s in self.socks.values():
            s.close()
        self.socks = {}
        for fd in (getattr(self, "_wake_r", -1), getattr(self, "_wake_w", -1)):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1

    # ---------------------------------------------------------------- the thread
    def _run(self) -> None:
        ep = select.epoll()
        try:
            ep.register(self._wake_r, select.EPOLLIN)
            for fd in self._by_fd:
                ep.register(fd, select.EPOLLIN)
            while self._running:
                nxt = self.queues.next_departure()
                timeout = -1.0 if nxt is None else max(0.0, nxt - time.monotonic())
                events = ep.poll(timeout)
                with self.lock:
                    for fd, _ev in events:
                        if fd == self._wake_r:
                            os.read(self._wake_r, 64)
                            continue
                        port, sock = self._by_fd[fd]
                        if not self._drain(port, sock):
                            # The interface went away (e.g. Mininet tore it down first):
                            # stop polling it rather than spin on its error.
                            ep.unregister(fd)
                            log.error("port %d: receive failed, port disabled", port)
                    self._transmit(time.monotonic())
                    if self.pcap_in:  # what this batch captured is readable now
                        for w in (*self.pcap_in.values(), *self.pcap_out.values()):
                            w.flush()
        except Exception:  # the thread must never die silently
            log.exception("data plane thread failed")
            raise
        finally:
            ep.close()

    def _drain(self, port: int, sock: socket.socket) -> bool:
        """Run up to BATCH waiting frames of a port through the pipeline; False if it failed."""
        stats = self.stats
        trace = log.isEnabledFor(logging.DEBUG)
        dump = log.isEnabledFor(TRACE)
        capture = self.pcap_in.get(port)
        for _ in range(BATCH):
            try:
                data, anc, _flags, addr = sock.recvmsg(65536, ANC_SIZE)
            except (BlockingIOError, InterruptedError):
                return True
            except OSError as exc:
                stats.errors += 1
                log.error("port %d: receive failed: %s", port, exc)
                return False
            if addr[2] == PACKET_OUTGOING:
                continue
            if anc and anc[0][2][0] & TP_STATUS_VLAN_VALID:  # status, little-endian
                data = frame_with_vlan(data, anc)
            stats.rx += 1
            if capture is not None:
                capture.write(data)
            if dump:
                log.log(TRACE, "port %d in: %s", port, data.hex())
            pipeline = self.pipeline
            if pipeline is None:
                stats.no_pipeline += 1
                continue
            now = time.monotonic()
            try:
                result = pipeline.ingress(data, port, int((now - self.start_time) * 1e6))
                if pipeline.spawned:  # ingress clones, queued before their original
                    for item in pipeline.take_spawned():
                        self._enqueue(port, pipeline, item, now, trace)
            except Exception:
                stats.errors += 1
                log.exception("port %d: pipeline failed on a %d-byte frame", port, len(data))
                continue
            if result is None:
                stats.pipeline_drop += 1
                if trace:
                    log.debug("port %d: %d bytes dropped by the pipeline", port, len(data))
                continue
            self._enqueue(port, pipeline, result, now, trace)
        return True

    def _enqueue(
        self, port: int, pipeline: Pipeline, item: Ingressed, now: float, trace: bool
    ) -> None:
        """Queue a packet the pipeline sent from ``port`` (or count its drop)."""
        stats, queues = self.stats, self.queues
        egress, prio, state = item
        if egress not in self.socks:
            stats.no_such_port += 1
            if trace:
                log.debug("port %d: egress port %d does not exist, dropped", port, egress)
            return
        if not queues.push(egress, prio, (pipeline, state), now):
            if prio >= queues.nb_queues:
                n = queues.stats.dropped_priority
                if n & (n - 1) == 0:  # 1, 2, 4, 8, ...: counted without flooding the log
                    log.warning(
                        "priority %d not supported with %d queues: dropped (%d so far)",
                        prio,
                        queues.nb_queues,
                        n,
                    )
            elif trace:
                log.debug("queue %d/%d full, dropped", egress, prio)
        elif trace:
            log.debug("port %d -> %d prio %d", port, egress, prio)

    def _transmit(self, now: float) -> None:
        """Egress and send every due packet; times in µs since the switch started."""
        start = self.start_time
        now_us = int((now - start) * 1e6)
        for port, _prio, (pipeline, state), enq, enq_depth, deq_depth in self.queues.pop_due(now):
            try:
                frame = pipeline.egress(
                    state, port, int((enq - start) * 1e6), enq_depth, now_us, deq_depth
                )
            except Exception:
                self.stats.errors += 1
                log.exception("port %d: egress pipeline failed", port)
                continue
            if pipeline.spawned:  # egress clones (and a recirculated packet's ingress clones)
                for item in pipeline.take_spawned():
                    self._enqueue(port, pipeline, item, now, False)
            if frame is None:
                self.stats.pipeline_drop += 1
                continue
            if isinstance(frame, tuple):  # recirculated: queued again after its new ingress
                self._enqueue(port, pipeline, frame, now, False)
                continue
            try:
                self.socks[port].send(frame)
                self.stats.tx += 1
                if self.pcap_out:
                    self.pcap_out[port].write(frame)
            except OSError as exc:
                self.stats.errors += 1
                log.debug("port %d: send failed: %s", port, exc)

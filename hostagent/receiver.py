"""Record when each flow instance a host receives is complete (its last byte arrived).

Arrival times come from the kernel (``SO_TIMESTAMPNS``, the wall clock every
namespace shares) so a busy Python process does not add its own delay to the
measurement. A flow instance is identified by ``(source address, source port)``
and its packets by the echelon header's ``seq``; duplicates are ignored. Its
finish time is the arrival of the packet that completes it.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from echelon.constants import ECHELON_UDP_PORT, LINK_MTU
from echelon.wire import unpack_header
from hostagent.scenario import Scenario

_TIMESPEC = struct.Struct("@ll")
RCVBUF_BYTES = 32 * 1024 * 1024
# Linux values; the socket module has them on Linux but typeshed does not declare them.
SO_RCVBUFFORCE: int = getattr(socket, "SO_RCVBUFFORCE", 33)
SO_TIMESTAMPNS: int = getattr(socket, "SO_TIMESTAMPNS", 35)


@dataclass
class _Expect:
    uid: str
    echelon_id: int
    index: int
    total: int
    seen: bytearray
    count: int = 0
    first: float | None = None
    finish: float | None = None
    last: float | None = None
    mismatched: int = 0


class Receiver:
    """Bind the echelon port on ``host`` and count arrivals of the flows sent to it."""

    def __init__(self, scenario: Scenario, host: str, bind_ip: str = "0.0.0.0") -> None:
        self.sc = scenario
        #: The shared start instant; ``echelon-agent --go`` may move it after set-up.
        self.start_at = scenario.start_at
        self.expect: dict[tuple[str, int], _Expect] = {}
        for e, f in scenario.flows_to(host):
            n = scenario.packets(f)
            key = (scenario.hosts[f.src], f.sport)
            self.expect[key] = _Expect(e.uid(f), e.echelon_id, f.index, n, bytearray(n))
        self.unknown = 0
        #: Called in turn (in the receiver's thread) with ``(flow uid, finish)`` as each flow
        #: completes: the closed loop's input arrivals, the progress reports.
        self.on_complete: list[Callable[[str, float], None]] = []
        self.pending = len(self.expect)
        #: wall-clock time of the last datagram received (0: none yet)
        self.last_packet = 0.0
        self.done = threading.Event()
        if not self.expect:
            self.done.set()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:  # root may exceed rmem_max; anyone else gets what rmem_max allows
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF_BYTES)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.bind((bind_ip, ECHELON_UDP_PORT))
        self.sock.settimeout(0.1)

    def run(self, stop_at: float) -> None:
        """Receive until every expected flow completed or wall-clock ``stop_at``."""
        t0 = self.start_at
        anc = socket.CMSG_SPACE(_TIMESPEC.size)
        try:
            while not self.done.is_set() and time.time() < stop_at:
                try:
                    # a UDP payload is smaller than the links' MTU: one buffer holds any
                    data, cmsgs, _, addr = self.sock.recvmsg(LINK_MTU, anc)
                except TimeoutError:
                    continue
                self.last_packet = time.time()
                stamp = None
                for level, kind, blob in cmsgs:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                        sec, nsec = _TIMESPEC.unpack(blob[: _TIMESPEC.size])
                        stamp = sec + nsec * 1e-9
                self._record(addr, data, (stamp or time.time()) - t0)
        finally:
            self.sock.close()

    def _record(self, addr: tuple[str, int], data: bytes, t: float) -> None:
        x = self.expect.get(addr)
        if x is None:
            self.unknown += 1
            return
        try:
            _, eid, _, index, seq = unpack_header(data)
        except ValueError:
            x.mismatched += 1
            return
        if eid != x.echelon_id or index != x.index or seq >= x.total:
            x.mismatched += 1
            return
        x.last = t
        if x.first is None:
            x.first = t
        if x.seen[seq]:
            return
        x.seen[seq] = 1
        x.count += 1
        if x.count == x.total:
            x.finish = t
            for listener in self.on_complete:
                listener(x.uid, t)
            self.pending -= 1
            if self.pending == 0:
                self.done.set()

    def report(self) -> dict[str, dict[str, float | int | None]]:
        return {
            x.uid: {"packets": x.count, "expected": x.total, "first": x.first,
                    "finish": x.finish, "last": x.last, "mismatched": x.mismatched}
            for x in self.expect.values()
        }  # fmt: skip

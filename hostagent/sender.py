"""Play the flows a host sends: echelon-tagged UDP, paced, released as a
:class:`hostagent.closedloop.Releaser` says (closed loop: when the producer task ends).

Pacing models the host's NIC: the host sends at ``rate_mbit`` in total (wire
bytes: payload + IPv4/UDP + Ethernet), its released flows sharing it round-robin
packet by packet, as parallel transfers from one host would. Without pacing the
Python senders would outrun the soft switch and packets would be lost at its
input instead of queueing at the emulated bottleneck, which is what we study.

A flow released while others are sending joins the *back* of the round (each flow
already in it sends once more first), as in the packet model (:mod:`sim.packet`); a
sender that slotted it in at its current position would start it up to a round early,
and on a host link shared by several flows that moves every later finish (measured:
docs/measurements/demo.md).

Why round-robin matters: flows a host releases together -- a parameter
server's per-layer pulls -- leave interleaved, one packet each in turn, with no
regard to their priority (the host knows none; only the switch classifies).
So under one priority level (a Coflow) they reach the switch's FIFO queue
interleaved and all finish near the group's end, while per-flow levels
(EchelonFlow) let the switch pull the earliest-needed one ahead. A sender that
sent them one after another in layer order would hand a Coflow the echelon's
order for free.

Each flow instance has its own socket bound to ``(host ip, sport)``: the source
address is what the switch classifies on, the source port tells instances of
the same flow in different iterations apart at the receiver.
"""

from __future__ import annotations

import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from echelon.constants import (
    ECHELON_UDP_PORT,
    ETHERNET_HEADER_LEN,
    IPV4_HEADER_LEN,
    UDP_HEADER_LEN,
)
from echelon.model import offset_us
from echelon.wire import pack_header
from hostagent.closedloop import Releaser
from hostagent.closedloop import releaser as make_releaser
from hostagent.scenario import EchelonSpec, FlowSpec, Scenario

#: Most packets sent back-to-back before re-reading the clock (bounds bursts at ~1 ms).
MAX_BURST = 8


@dataclass
class _Active:
    uid: str
    sock: socket.socket
    dst: tuple[str, int]
    echelon_id: int
    deadline_us: int
    index: int
    total: int
    release: float
    #: the last packet's payload: what is left of the flow after ``total - 1`` full ones
    last_pad: bytes = b""
    #: the flow's payload bytes (``FlowSpec.size``)
    size: int = 0
    sent: int = 0
    released: float | None = None
    start: float | None = None
    end: float | None = None


class Sender:
    def __init__(self, scenario: Scenario, host: str) -> None:
        self.sc = scenario
        #: The shared start instant; ``echelon-agent --go`` may move it after set-up.
        self.start_at = scenario.start_at
        self.host = host
        self.ip = scenario.hosts[host]
        self.pad = bytes(scenario.chunk)
        #: Wire bytes around a packet's UDP payload (the echelon header is in the payload).
        self.overhead = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN
        #: Pacing rate in wire bytes per second: a flow's short last packet takes its own
        #: length of the host's time, as on the wire and in the packet model.
        self.bytes_per_s = scenario.rate_of(host) * 1e6 / 8
        self.flows = [self._open(e, f) for e, f in scenario.flows_from(host)]
        #: wall-clock time of the last packet sent (0: none yet)
        self.last_send = 0.0
        #: Called with each flow's uid as it is released (the progress reports).
        self.on_release: Callable[[str], None] | None = None
        #: Released flows not fully sent yet, by uid: written by :meth:`run` only (at a
        #: release and at a flow's last packet), read by :meth:`payload_sent`.
        self._inflight: dict[str, _Active] = {}

    def _open(self, e: EchelonSpec, f: FlowSpec) -> _Active:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((self.ip, f.sport))
        dst = (self.sc.hosts[f.dst], ECHELON_UDP_PORT)
        total = self.sc.packets(f)
        last = bytes(f.size - (total - 1) * self.sc.chunk)
        return _Active(e.uid(f), s, dst, e.echelon_id, offset_us(f.offset), f.index,
                       total, f.release, last, f.size)  # fmt: skip

    def payload_sent(self) -> dict[str, int]:
        """Payload bytes sent so far of each flow released and not fully sent, by uid.

        For the progress reports (:class:`hostagent.progress.HostProgress`), from
        another thread: it reads the packet counts :meth:`run` keeps anyway (no work per
        packet). A flow is listed from before its ``on_release`` call until its last
        packet has left, so a released flow missing here was fully sent."""
        chunk = self.sc.chunk
        return {uid: min(a.size, a.sent * chunk) for uid, a in self._inflight.copy().items()}

    def packet(self, a: _Active) -> bytes:
        pad = a.last_pad if a.sent == a.total - 1 else self.pad
        return pack_header(a.echelon_id, a.deadline_us, a.index, a.sent) + pad

    def run(
        self,
        stop_at: float,
        releaser: Releaser | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> dict[str, dict[str, float | int | None]]:
        """Send every flow as ``releaser`` releases it (default: the scenario's mode),
        until it has nothing more to release and all is sent, wall-clock ``stop_at``, or
        ``should_stop()`` (asked between bursts and while waiting for a release). Returns
        per flow instance the packets sent and the span (relative to ``start_at``), the
        record's ``sent`` (as :meth:`hostagent.receiver.Receiver.report` is its
        ``received``)."""
        t0 = self.start_at
        rel = releaser if releaser is not None else make_releaser(self.sc, self.host)
        by_uid = {a.uid: a for a in self.flows}
        # the round: the next flow to send is at the left, a flow that sent goes to the
        # right, and so does a newly released one
        active: deque[_Active] = deque()
        credit_t = max(time.time(), t0)
        sent_bytes = 0  # wire bytes sent since credit_t
        try:
            while (active or not rel.finished()) and time.time() < stop_at:
                if should_stop is not None and should_stop():
                    break
                now = time.time()
                for uid in rel.due(now - t0):
                    a = by_uid[uid]
                    self._inflight[uid] = a  # before on_release: see payload_sent
                    if self.on_release is not None:
                        self.on_release(uid)
                    a.released = now - t0
                    active.append(a)
                if not active:
                    # Idle link: pacing credit restarts at the next release.
                    rel.wait(now - t0, stop_at - t0)
                    credit_t, sent_bytes = time.time(), 0
                    continue
                # a packet may leave once the ones before it have had their wire time
                ahead = sent_bytes / self.bytes_per_s - (now - credit_t)
                if ahead > 0:
                    time.sleep(min(0.001, ahead))
                    continue
                for _ in range(MAX_BURST):
                    if not active or sent_bytes / self.bytes_per_s > now - credit_t:
                        break
                    a = active.popleft()
                    if a.start is None:
                        a.start = time.time() - t0
                    packet = self.packet(a)
                    a.sock.sendto(packet, a.dst)
                    self.last_send = time.time()
                    a.sent += 1
                    sent_bytes += len(packet) + self.overhead
                    if a.sent >= a.total:
                        a.end = time.time() - t0
                        self._inflight.pop(a.uid, None)
                    else:
                        active.append(a)
        finally:
            for a in self.flows:
                a.sock.close()
        return {
            a.uid: {"packets": a.sent, "expected": a.total, "released": a.released,
                    "start": a.start, "end": a.end}
            for a in self.flows
        }  # fmt: skip

"""Bounds on what P4Runtime clients may hold in the soft switch's gRPC server.

Why: a StreamChannel occupies one gRPC worker thread for its whole life, so 32
idle streams used to take every worker of the pool and freeze every other RPC.
Streams are therefore counted (in total and per client connection)
and refused with RESOURCE_EXHAUSTED beyond the bound, a stream that does not
arbitrate in time is closed, and concurrent unary requests per client are
bounded, so the pool (sized in :func:`softswitch.p4rt_server.make_server` above
these bounds) always keeps threads for other clients.

Slots must not lock the primary out: a client holding every slot with idle
streams (never arbitrated, or arbitrated as backups and re-opened as they close)
kept a restarted controller off the switch. So when the switch is full, a new
stream first takes the slot of the oldest stream that has not arbitrated for
``evict_grace_s``; otherwise it is admitted provisionally (up to
``max_provisional`` beyond the limit) and, when it arbitrates, it stays only if it
becomes its role's primary, taking the slot of the oldest backup (or of a stream
that never arbitrated); any other arbitration beyond the limit is refused with
RESOURCE_EXHAUSTED. A primary-elect controller therefore always gets in.

A "client" is the gRPC peer string (``ipv4:127.0.0.1:54321``): one channel's TCP
connection. Counting by address would lump every local client together.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from finsy.proto import p4r

from softswitch.arbitration import Arbiter, Stream, election_of
from softswitch.errors import ResourceExhausted

#: Bytes of entities one ReadResponse carries (the answer streams in such chunks,
#: so a Read's memory is bounded by a few chunks, whatever its total).
READ_CHUNK_BYTES = 1 << 20


@dataclass
class Limits:
    """The bounds one server applies; the defaults are the switch's (tests shrink them)."""

    #: StreamChannels open at once, over all clients.
    max_streams: int = 16
    #: StreamChannels open at once on one client connection.
    max_streams_per_client: int = 8
    #: Streams admitted beyond ``max_streams``, each until it arbitrates (as a primary,
    #: or it is refused).
    max_provisional: int = 4
    #: Seconds a stream may stay without arbitration before a new stream may take its slot.
    evict_grace_s: float = 1.0
    #: Unary RPCs (Write, Read, pipeline, Capabilities) running at once for one client.
    max_requests_per_client: int = 8
    #: Seconds a StreamChannel may stay open without a MasterArbitrationUpdate.
    arbitration_timeout_s: float = 10.0
    #: Updates one WriteRequest may carry (the project's client sends <= 2048).
    max_write_updates: int = 10_000
    #: Entities one ReadRequest may name (a client reads with a handful of wildcards).
    max_read_request_entities: int = 10_000
    #: Entities one Read may answer, summed over the request's entities: every table
    #: entry and counter cell of the project's program (15,376) twice over. A tiny
    #: request of 1,000 wildcard ``counter_entry`` used to answer 1.04 M entities
    #: (1.17 GB, 3.5 s under the service lock); past this bound it is
    #: RESOURCE_EXHAUSTED at once.
    max_read_entities: int = 32_768

    @property
    def workers(self) -> int:
        """gRPC worker threads: every stream and every client's requests fit with room
        to spare."""
        return self.max_streams + self.max_provisional + 4 * self.max_requests_per_client


class ClientBounds:
    """Counts streams and in-flight requests per client; refuses beyond the limits."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._open: dict[Stream, str] = {}  # stream -> peer
        self._requests: dict[str, int] = {}

    @property
    def open_streams(self) -> int:
        with self._lock:
            return len(self._open)

    @contextmanager
    def stream(self, peer: str, stream: Stream) -> Iterator[None]:
        """Hold one stream slot of ``peer`` for the ``with`` block (see the module
        docstring for what happens when the switch is full)."""
        lim = self.limits
        with self._lock:
            mine = sum(1 for p in self._open.values() if p == peer)
            if mine >= lim.max_streams_per_client:
                raise ResourceExhausted(
                    "StreamChannel",
                    f"this client already has {mine} streams "
                    f"(limit {lim.max_streams_per_client} per client)",
                )
            regular = [s for s in self._open if not s.provisional]
            if len(regular) >= lim.max_streams:
                now = time.monotonic()
                silent = [
                    s for s in regular if s.role is None and now - s.opened >= lim.evict_grace_s
                ]
                if silent:
                    self._evict(min(silent, key=lambda s: s.opened), "never arbitrated")
                elif len(self._open) - len(regular) < lim.max_provisional:
                    stream.provisional = True
                else:
                    raise ResourceExhausted(
                        "StreamChannel",
                        f"the switch already serves {len(regular)} streams (limit "
                        f"{lim.max_streams}) and {lim.max_provisional} waiting to arbitrate",
                    )
            self._open[stream] = peer
        try:
            yield
        finally:
            with self._lock:
                self._open.pop(stream, None)

    def admit(self, stream: Stream, arbiter: Arbiter, msg: p4r.MasterArbitrationUpdate) -> None:
        """A provisional ``stream`` arbitrates: keep it if it becomes its role's primary,
        in the slot of the oldest stream that never arbitrated or is a backup; else
        raise RESOURCE_EXHAUSTED."""
        lim = self.limits
        eid = election_of(msg)
        with self._lock:
            regular = [s for s in self._open if not s.provisional]
            if len(regular) < lim.max_streams:
                stream.provisional = False
                return
            victims = sorted((s for s in regular if s.role is None), key=lambda s: s.opened)
            if arbiter.primary_elect(msg.role.name, eid):
                victims += [s for s in arbiter.backups() if s in self._open and not s.provisional]
                if victims:
                    self._evict(victims[0], "a primary needs the slot")
                    stream.provisional = False
                    return
            raise ResourceExhausted(
                "StreamChannel",
                f"the switch already serves {len(regular)} streams (limit {lim.max_streams}); "
                "beyond it only a client that becomes primary is kept",
            )

    def _evict(self, victim: Stream, why: str) -> None:
        """End ``victim``'s stream (its serve loop aborts with the error) and free its
        slot now (caller holds the lock)."""
        self._open.pop(victim, None)
        victim.out.put(ResourceExhausted("StreamChannel", f"stream closed to make room ({why})"))

    @contextmanager
    def request(self, peer: str, what: str) -> Iterator[None]:
        """Hold one request slot of ``peer`` for the ``with`` block."""
        lim = self.limits
        with self._lock:
            mine = self._requests.get(peer, 0)
            if mine >= lim.max_requests_per_client:
                raise ResourceExhausted(
                    what,
                    f"this client already has {mine} requests in flight "
                    f"(limit {lim.max_requests_per_client} per client)",
                )
            self._requests[peer] = mine + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._requests.get(peer, 1) - 1
                if left > 0:
                    self._requests[peer] = left
                else:
                    self._requests.pop(peer, None)

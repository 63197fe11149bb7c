"""Client arbitration (P4Runtime spec section 5): who may write.

Per role, every open StreamChannel that sent a MasterArbitrationUpdate has an
election ID (or none). The primary is the stream with the highest election ID;
the others are backups. Whenever the primary of a role changes (a stream
arrives, changes its ID or goes away) every stream of that role is told:
status OK for the primary, ALREADY_EXISTS for a backup, NOT_FOUND when the
role has no primary; ``election_id`` carries the primary's ID. A Write or
SetForwardingPipelineConfig is allowed only with the primary's election ID.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field

from finsy.proto import p4r
from finsy.proto import rpc_code as code_pb2

from softswitch.errors import InvalidArgument, PermissionDenied, SwitchError


@dataclass(eq=False)
class Stream:
    """One StreamChannel: what it announced and where its outgoing messages go."""

    out: queue.Queue[p4r.StreamMessageResponse | SwitchError | None] = field(
        default_factory=queue.Queue
    )
    role: str | None = None
    election_id: int | None = None
    opened: float = field(default_factory=time.monotonic)
    #: admitted beyond the stream limit: kept only if it arbitrates as a primary
    #: (:meth:`softswitch.grpc_limits.ClientBounds.admit`)
    provisional: bool = False


def election_of(
    msg: p4r.MasterArbitrationUpdate | p4r.WriteRequest | p4r.SetForwardingPipelineConfigRequest,
) -> int | None:
    """The election ID a message carries, as an int; None when it has none."""
    if not msg.HasField("election_id"):
        return None
    return int((msg.election_id.high << 64) | msg.election_id.low)


class Arbiter:
    """Election state of one device."""

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self._lock = threading.Lock()
        self._streams: dict[str, list[Stream]] = {}

    def send_primary(self, msg: p4r.StreamMessageResponse, role: str = "") -> None:
        """Queue ``msg`` (a digest list) on the primary stream of ``role``, if any."""
        with self._lock:
            primary = self._primary(role)
        if primary is not None:
            primary.out.put(msg)

    def _primary(self, role: str) -> Stream | None:
        best: Stream | None = None
        for s in self._streams.get(role, []):
            if s.election_id is not None and (best is None or s.election_id > best.election_id):  # type: ignore[operator]
                best = s
        return best

    def update(self, stream: Stream, msg: p4r.MasterArbitrationUpdate) -> None:
        """Apply a stream's arbitration message; raises InvalidArgument for a clash."""
        role = msg.role.name
        eid = election_of(msg)
        with self._lock:
            if stream.role is not None and stream.role != role:
                raise InvalidArgument("role", "a stream cannot change its role")
            others = [s for s in self._streams.get(role, []) if s is not stream]
            if eid is not None and any(s.election_id == eid for s in others):
                raise InvalidArgument("election_id", f"{eid} is already used by another client")
            before = self._primary(role)
            stream.role = role
            stream.election_id = eid
            if stream not in self._streams.setdefault(role, []):
                self._streams[role].append(stream)
            after = self._primary(role)
            targets = self._streams[role] if after is not before else [stream]
            for s in targets:
                s.out.put(self._message(role, s, after))

    def primary_elect(self, role: str, eid: int | None) -> bool:
        """Whether a stream arbitrating ``eid`` for ``role`` would become its primary."""
        if eid is None:
            return False
        with self._lock:
            primary = self._primary(role)
            return primary is None or primary.election_id is None or eid > primary.election_id

    def backups(self) -> list[Stream]:
        """Arbitrated streams that are not their role's primary, oldest first."""
        with self._lock:
            out = [
                s for role, ss in self._streams.items() for s in ss if s is not self._primary(role)
            ]
        return sorted(out, key=lambda s: s.opened)

    def remove(self, stream: Stream) -> None:
        """Forget a closed stream; tell the others if it was their primary."""
        with self._lock:
            role = stream.role
            if role is None or stream not in self._streams.get(role, []):
                return
            before = self._primary(role)
            self._streams[role].remove(stream)
            after = self._primary(role)
            if after is not before:
                for s in self._streams[role]:
                    s.out.put(self._message(role, s, after))

    def _message(self, role: str, s: Stream, primary: Stream | None) -> p4r.StreamMessageResponse:
        resp = p4r.StreamMessageResponse()
        arb = resp.arbitration
        arb.device_id = self.device_id
        if role:
            arb.role.name = role
        if primary is not None and primary.election_id is not None:
            arb.election_id.high = primary.election_id >> 64
            arb.election_id.low = primary.election_id & ((1 << 64) - 1)
        if primary is None:
            arb.status.code = code_pb2.NOT_FOUND
            arb.status.message = "no primary client for this role"
        elif primary is s:
            arb.status.code = code_pb2.OK
            arb.status.message = "is primary"
        else:
            arb.status.code = code_pb2.ALREADY_EXISTS
            arb.status.message = "is backup: a client with a higher election id is primary"
        return resp

    def check_primary(self, role: str, eid: int | None) -> None:
        """Raise PermissionDenied unless election ID ``eid`` is the role's primary's."""
        with self._lock:
            primary = self._primary(role)
            if primary is None:
                raise PermissionDenied("election_id", f"role {role!r} has no primary client")
            if eid != primary.election_id:
                raise PermissionDenied(
                    "election_id", f"{eid} is not the primary's election id for role {role!r}"
                )

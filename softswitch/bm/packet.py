"""The packet path: every packet of every program, in simple_switch's order.

simple_switch's order for one packet is split where its queues are:
:meth:`PacketPath.ingress` (parser, verify checksums, ingress, the instance
rules below, drop check ``egress_spec == 511``, priority taken for the queue)
runs on arrival; :meth:`PacketPath.egress` (queueing metadata, egress, the
instance rules, drop check, update checksums, deparser) when the packet leaves
its priority queue. There is one path: a program without the primitives below
leaves their request slots at 0 and pays only for reading them.

v1model's ``clone``/``clone_preserving_field_list``, ``resubmit_preserving_field_list``
and ``recirculate_preserving_field_list`` compile to the primitives
``clone_ingress_pkt_to_egress`` / ``clone_egress_pkt_to_egress`` (session, field list),
``resubmit`` and ``recirculate`` (field list). Like simple_switch's, the primitives
only record a request in per-packet registers (here: slots of the state
vector); what happens to the packet
is decided after ingress and after egress (``simple_switch.cpp``'s
``ingress_thread``/``egress_thread``):

* **after ingress**: an I2E clone request whose mirroring session exists makes a
  copy of the frame *as it came in*, parsed again, with all metadata reset but the
  field list's fields, ``instance_type`` 1, sent to egress on the session's port;
  then a digest request is learned (:mod:`softswitch.bm.digests`); then a resubmit
  request sends the frame as it came in back to the parser with metadata reset but
  the field list (``instance_type`` 6) and nothing else of this pass leaves; then
  ``egress_spec == 511`` drops it; otherwise it goes to egress (``instance_type`` 0).
  Ingress clones are queued before their original.
* **after egress**: an E2E clone request whose session exists copies the headers
  as egress left them, metadata reset but the field list (``instance_type`` 2),
  through egress again on the session's port; then ``egress_spec == 511`` drops the
  packet; a recirculate request sends the deparsed frame back to the parser
  (metadata reset but the field list, ``instance_type`` 4, ``packet_length`` the
  new length) instead of out.

A reset leaves ``ingress_port`` 0 too, as in simple_switch. ``packet_length`` is
the ingress length for I2E clones and resubmits, and the packet length register
(the ingress length plus/minus the headers made valid/invalid) for E2E clones.
Sessions are one egress port each (:attr:`PacketPath.sessions`, written by
P4Runtime ``CloneSessionEntry`` and Thrift ``mirroring_add``); a request for a
session nobody configured does nothing. One frame may make at most
:data:`MAX_PASSES` resubmissions and recirculations (simple_switch has no bound:
a program that always resubmits spins forever there); beyond it they are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from softswitch.bm.digests import Digests
from softswitch.bm.expr import PrimitiveFn, compile_expr
from softswitch.bm.layout import Layout
from softswitch.errors import InvalidArgument

#: A packet between ingress and egress: state vector, frame, parser end offset.
PacketState = tuple[list[int], bytes, int]
#: What ingress hands the queues for a packet it did not drop: (egress port, priority, state).
Ingressed = tuple[int, int, PacketState]
#: v1model's 48-bit global timestamps.
TS_MASK = (1 << 48) - 1

OPS = frozenset(
    {"clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress", "resubmit", "recirculate"}
)
NORMAL, INGRESS_CLONE, EGRESS_CLONE, RECIRC, RESUBMIT = 0, 1, 2, 4, 6
DROP_PORT = 511
#: A clone request keeps this bit set, so that session 0 is a request too (as in BMv2).
_VALID = 1 << 15
#: Resubmissions + recirculations of one frame before it is dropped.
MAX_PASSES = 32


@dataclass(frozen=True)
class Registers:
    """The per-packet request slots: clone (session | valid bit), its field list, resubmit
    and recirculate field lists, digest learn list (0 = no request); and the frame's
    resubmissions + recirculations so far (``passes``, after the reset range: an
    instance keeps it)."""

    clone: int
    clone_list: int
    resubmit: int
    recirculate: int
    learn: int
    passes: int

    @classmethod
    def allocate(cls, lay: Layout) -> Registers:
        return cls(*(lay.new_slot() for _ in range(6)))


def primitive(lay: Layout, regs: Registers, op: str, params: list[Any], where: str) -> PrimitiveFn:
    """The request primitive ``op``: record session and field list like simple_switch."""
    args = tuple(compile_expr(lay, p, where) for p in params)
    if op.startswith("clone_"):
        if len(args) != 2:
            raise InvalidArgument(where, "expected (session, field list)")
        session, flist = args
        c, cl = regs.clone, regs.clone_list

        def clone(v: list[int], a: Sequence[int]) -> None:
            v[c] = (session(v, a) & 0x7FFF) | _VALID
            v[cl] = flist(v, a) & 0xFFFF

        return clone
    if len(args) != 1:
        raise InvalidArgument(where, "expected (field list)")
    (flist,) = args
    slot = regs.resubmit if op == "resubmit" else regs.recirculate

    def request(v: list[int], a: Sequence[int]) -> None:
        v[slot] = flist(v, a) & 0xFFFF

    return request


class PacketPath:
    """simple_switch's order for every packet of every program, split where its queues are.

    :meth:`ingress` runs on arrival, :meth:`egress` when the packet leaves its
    priority queue (so the egress control sees the queue it waited in, as on
    BMv2). A program without clone/resubmit/recirculate/digest primitives runs
    the same code: its request slots stay 0, which costs a few slot reads per
    packet. Instances a packet makes besides itself (clones) are left in
    :attr:`spawned`, in the order simple_switch queues them."""

    def __init__(
        self,
        lay: Layout,
        j: dict[str, Any],
        regs: Registers,
        lengths: tuple[int, int],
        sessions: dict[int, int],
        digests: Digests,
        parser: Any,
        checksums: Any,
        controls: Any,
        deparser: Any,
    ) -> None:
        self.regs = regs
        self._lreg, self._ilen = lengths  # the length register, the ingress length
        #: mirroring session id -> egress port (the pipeline's, shared)
        self.sessions = sessions
        #: clones made by the last ingress/egress (and a recirculated packet's new ingress)
        self.spawned: list[Ingressed] = []
        self._digests = digests
        self._parser, self._checksums = parser, checksums
        self._controls, self._deparser = controls, deparser
        self._initial = lay.initial
        self._lists: dict[int, tuple[int, ...]] = {}
        for fl in j.get("field_lists", []):
            slots = []
            for e in fl.get("elements", []):
                if e.get("type") != "field":
                    raise InvalidArgument(f"field list {fl.get('name')!r}", f"a {e.get('type')!r}")
                slots.append(lay.field(e["value"])[0])
            self._lists[int(fl["id"])] = tuple(slots)
        # Metadata is reset to its initial values for a new instance: these slot ranges.
        ranges = []
        for h in lay.headers.values():
            if h.metadata:
                ranges.append((h.valid, h.valid + 1 + len(h.fields)))
        ranges.append((regs.clone, regs.learn + 1))
        self._meta = tuple(ranges)
        std = lay.std
        self._port, self._len, self._spec = (
            std("ingress_port"),
            std("packet_length"),
            std("egress_spec"),
        )
        self._eport, self._prio, self._type = (
            std("egress_port"),
            std("priority"),
            std("instance_type"),
        )
        self._igts, self._egts = std("ingress_global_timestamp"), std("egress_global_timestamp")
        self._enq_ts, self._enq_depth = std("enq_timestamp"), std("enq_qdepth")
        self._deq_delta, self._deq_depth = std("deq_timedelta"), std("deq_qdepth")

    def _kept(self, v: list[int], flist: int) -> tuple[tuple[int, int], ...]:
        return tuple((s, v[s]) for s in self._lists.get(flist, ()))

    def _reset(
        self, v: list[int], kept: tuple[tuple[int, int], ...], kind: int, length: int
    ) -> None:
        init = self._initial
        for start, end in self._meta:
            v[start:end] = init[start:end]
        for s, value in kept:
            v[s] = value
        v[self._type] = kind
        v[self._len] = v[self._lreg] = length

    def ingress(
        self,
        frame: bytes,
        in_port: int,
        now_us: int = 0,
        kind: int = NORMAL,
        kept: tuple[tuple[int, int], ...] = (),
        passes: int = 0,
    ) -> Ingressed | None:
        """Parser, verify checksums, ingress, drop check ``egress_spec == 511``, priority
        taken for the queue: (egress port, priority, state), None if dropped.

        ``now_us`` (µs since the switch started) is ``ingress_global_timestamp``. Ingress
        clones go to :attr:`spawned`, to be queued before the returned original. A
        recirculated frame comes back here as ``kind`` RECIRC with the fields it keeps
        and its passes so far."""
        length = len(frame)
        regs = self.regs
        while True:
            v = self._initial.copy()
            v[self._port], v[self._len], v[self._lreg] = in_port, length, length
            v[self._ilen] = length
            if kind != NORMAL:
                self._reset(v, kept, kind, length)
            v[self._igts] = now_us & TS_MASK
            v[regs.passes] = passes
            pos = self._parser.parse(v, frame)
            self._checksums.run_verify(v, frame)
            self._controls.ingress(v)
            v[0] = 0
            if v[regs.clone]:
                dst = self.sessions.get(v[regs.clone] & 0x7FFF)
                if dst is not None:
                    c = self._initial.copy()
                    c[self._port] = in_port  # the parser may branch on it
                    c[self._ilen] = length
                    cpos = self._parser.parse(c, frame)
                    self._checksums.run_verify(c, frame)
                    self._reset(c, self._kept(v, v[regs.clone_list]), INGRESS_CLONE, length)
                    self.spawned.append((dst, c[self._prio], (c, frame, cpos)))
                v[regs.clone] = v[regs.clone_list] = 0
            if v[regs.learn]:
                self._digests.learn(v[regs.learn], v)
                v[regs.learn] = 0
            if not v[regs.resubmit]:
                break
            # the frame goes back to the parser instead of on
            passes += 1
            if passes > MAX_PASSES:
                return None
            kept, kind, in_port = self._kept(v, v[regs.resubmit]), RESUBMIT, 0
        if v[self._spec] == DROP_PORT:
            return None
        v[self._type] = NORMAL  # what goes on is the normal instance in egress, as in BMv2
        return v[self._spec], v[self._prio], (v, frame, pos)

    def egress(
        self,
        state: PacketState,
        port: int,
        enq_us: int = 0,
        enq_depth: int = 0,
        deq_us: int = 0,
        deq_depth: int = 0,
    ) -> bytearray | Ingressed | None:
        """Egress of a dequeued packet, update checksums, deparse: the frame to send; or,
        if egress recirculated it, the packet after its new ingress, to be queued again;
        None if dropped (by egress, or by the recirculated packet's ingress).

        Sets what simple_switch's ``enqueue``/``egress_thread`` set: the queueing
        metadata (``enq_timestamp``, ``enq_qdepth``, ``deq_timedelta``,
        ``deq_qdepth``; µs and packets of the packet's own priority queue),
        ``egress_global_timestamp``, ``egress_port``, and ``egress_spec`` reset to
        ``drop_port + 1`` (0 in 9 bits) so only an egress ``mark_to_drop`` drops.
        An egress clone goes to :attr:`spawned`."""
        regs = self.regs
        v, data, pos = state
        v[self._enq_ts] = enq_us & 0xFFFFFFFF
        v[self._enq_depth] = enq_depth & 0x7FFFF
        v[self._deq_delta] = (deq_us - enq_us) & 0xFFFFFFFF
        v[self._deq_depth] = deq_depth & 0x7FFFF
        v[self._egts] = deq_us & TS_MASK
        v[self._eport] = port
        v[self._spec] = (DROP_PORT + 1) & 0x1FF
        v[self._len] = v[self._lreg]
        v[0] = 0
        self._controls.egress(v)
        if v[regs.clone]:
            dst = self.sessions.get(v[regs.clone] & 0x7FFF)
            if dst is not None:
                c = v.copy()
                c[0] = 0
                self._reset(c, self._kept(v, v[regs.clone_list]), EGRESS_CLONE, v[self._lreg])
                self.spawned.append((dst, c[self._prio], (c, data, pos)))
            v[regs.clone] = v[regs.clone_list] = 0
        if v[self._spec] == DROP_PORT:
            return None
        self._checksums.run_update(v, data)
        frame: bytearray = self._deparser.deparse(v, data, pos)
        if v[regs.recirculate]:
            passes = v[regs.passes] + 1
            if passes > MAX_PASSES:
                return None
            kept = self._kept(v, v[regs.recirculate])
            return self.ingress(bytes(frame), 0, deq_us, RECIRC, kept, passes)
        return frame

    def take_spawned(self) -> list[Ingressed]:
        """The clones the last ingress/egress made, in order; the list is emptied."""
        out = self.spawned.copy()
        self.spawned.clear()
        return out

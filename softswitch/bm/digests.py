"""Digests (v1model ``digest<T>(receiver, data)``), learned and sent as simple_switch_grpc does.

p4c compiles ``digest`` to the primitive ``generate_digest(receiver, learn list id)``
and a ``learn_lists`` entry naming the fields; like BMv2, the primitive only records
the list id in a per-packet register (one: a second ``digest`` in the same pass
replaces the first), and after ingress -- before the resubmit and drop checks, so a
dropped packet still sends its digest -- the sample (the fields' values) is learned.

Delivery follows BMv2's learning engine under PI: nothing is sent for a digest
without a P4Runtime ``DigestEntry``; a sample already sent and not yet acknowledged
(``DigestListAck``) or timed out (``ack_timeout_ns``) is not sent again; samples
are buffered and sent as one ``DigestList`` when ``max_list_size`` are waiting or
``max_timeout_ns`` after the first (0: at once), to the primary controller's stream.
Members are canonical byte strings.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from finsy.proto import p4r

from p4client.p4info import encode
from softswitch.bm.expr import PrimitiveFn, compile_expr
from softswitch.bm.layout import Layout
from softswitch.errors import AlreadyExists, InvalidArgument, NotFound

Sample = tuple[int, ...]


@dataclass
class _List:
    """One learn list: its fields, its P4Runtime config and its delivery state."""

    name: str
    slots: tuple[int, ...]
    widths: tuple[int, ...]
    digest_id: int = 0
    config: p4r.DigestEntry.Config | None = None
    buffer: list[Sample] = field(default_factory=list)
    #: samples sent, by DigestList id, not yet acknowledged
    pending: dict[int, list[Sample]] = field(default_factory=dict)
    filtered: set[Sample] = field(default_factory=set)
    timer: threading.Timer | None = None


class Digests:
    """The program's learn lists and what has been sent of them."""

    def __init__(self, lay: Layout, j: dict[str, Any]) -> None:
        self.lists: dict[int, _List] = {}
        for ll in j.get("learn_lists", []):
            fields = []
            for e in ll.get("elements", []):
                if e.get("type") != "field":
                    raise InvalidArgument(f"learn list {ll.get('name')!r}", f"a {e.get('type')!r}")
                fields.append(lay.field(e["value"]))
            slots, widths = zip(*fields, strict=True) if fields else ((), ())
            self.lists[int(ll["id"])] = _List(str(ll["name"]), tuple(slots), tuple(widths))
        self.by_digest: dict[int, _List] = {}
        #: where DigestList messages go (the P4Runtime service sets it on commit)
        self.sink: Callable[[p4r.StreamMessageResponse], None] | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def bind(self, digest_id: int, name: str) -> None:
        """P4Info digest ``digest_id`` is the learn list called ``name``."""
        ll = next((x for x in self.lists.values() if x.name == name), None)
        if ll is None:
            raise InvalidArgument(name, "P4Info digest is not a learn list of the BMv2 JSON")
        ll.digest_id = digest_id
        self.by_digest[digest_id] = ll

    def learn(self, list_id: int, v: list[int]) -> None:
        """After ingress: the sample of learn list ``list_id`` from packet state ``v``."""
        ll = self.lists.get(list_id)
        if ll is None or ll.config is None:
            return
        sample = tuple(v[s] for s in ll.slots)
        with self._lock:
            if sample in ll.filtered:
                return
            ll.filtered.add(sample)
            ll.buffer.append(sample)
            cfg = ll.config
            if len(ll.buffer) >= max(cfg.max_list_size, 1) or cfg.max_timeout_ns <= 0:
                self._send(ll)
            elif ll.timer is None:
                ll.timer = threading.Timer(cfg.max_timeout_ns / 1e9, self._flush, (ll,))
                ll.timer.daemon = True
                ll.timer.start()

    def _flush(self, ll: _List) -> None:
        with self._lock:
            ll.timer = None
            if ll.buffer:
                self._send(ll)

    def _send(self, ll: _List) -> None:
        """Send the buffer as one DigestList (lock held)."""
        list_id = next(self._ids)
        msg = p4r.StreamMessageResponse()
        dl = msg.digest
        dl.digest_id, dl.list_id, dl.timestamp = ll.digest_id, list_id, time.time_ns()
        for sample in ll.buffer:
            members = dl.data.add().struct.members
            for value, width in zip(sample, ll.widths, strict=True):
                members.add().bitstring = encode(value, width, ll.name)
        ll.pending[list_id] = ll.buffer
        ll.buffer = []
        assert ll.config is not None
        if ll.config.ack_timeout_ns > 0:
            t = threading.Timer(ll.config.ack_timeout_ns / 1e9, self.ack, (ll.digest_id, list_id))
            t.daemon = True
            t.start()
        if self.sink is not None:
            self.sink(msg)

    def ack(self, digest_id: int, list_id: int) -> None:
        """A DigestListAck (or its timeout): those samples may be sent again."""
        ll = self.by_digest.get(digest_id)
        if ll is None:
            return
        with self._lock:
            for sample in ll.pending.pop(list_id, []):
                ll.filtered.discard(sample)

    def configure(self, kind: int, de: p4r.DigestEntry) -> None:
        """A P4Runtime DigestEntry write."""
        ll = self.by_digest.get(de.digest_id)
        if ll is None:
            raise InvalidArgument("digest_entry.digest_id", f"unknown digest id {de.digest_id}")
        with self._lock:
            if kind == p4r.Update.INSERT and ll.config is not None:
                raise AlreadyExists(ll.name, "digest entry exists")
            if kind in (p4r.Update.MODIFY, p4r.Update.DELETE) and ll.config is None:
                raise NotFound(ll.name, "no digest entry")
            if kind == p4r.Update.DELETE:
                ll.config = None
                ll.buffer, ll.pending, ll.filtered = [], {}, set()
                return
            ll.config = p4r.DigestEntry.Config()
            ll.config.CopyFrom(de.config)


def generate_digest(lay: Layout, slot: int, params: list[Any], where: str) -> PrimitiveFn:
    """``generate_digest(receiver, list id)``: record the list id (the receiver is unused,
    as in BMv2)."""
    if len(params) != 2:
        raise InvalidArgument(where, "expected (receiver, learn list id)")
    list_id = compile_expr(lay, params[1], where)

    def digest(v: list[int], a: Sequence[int]) -> None:
        v[slot] = list_id(v, a)

    return digest

"""Conversion between :class:`~p4client.p4info.TableEntry` and P4Runtime protobufs.

Kept apart from the connection code so the pure parts (entry diffing, tests) can
check the exact bytes a write would carry without a switch.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

from finsy.proto import p4r as p4runtime_pb2

from p4client.p4info import MatchValue, P4Info, P4InfoError, TableEntry, decode, encode


def entry_to_proto(p4info: P4Info, entry: TableEntry) -> p4runtime_pb2.TableEntry:
    """Encode an entry with canonical bytes; the entry was validated when built."""
    ti = p4info.table(entry.table)
    msg = p4runtime_pb2.TableEntry(table_id=ti.id, priority=entry.priority)
    msg.is_default_action = entry.is_default
    # fields and parameters in id order: the canonical form a switch reads back (and
    # the soft switch's fast write path stores a request in that form without a copy)
    for fname, value in sorted(entry.match, key=lambda m: ti.fields[m[0]].id):
        f = ti.fields[fname]
        fm = msg.match.add(field_id=f.id)
        where = f"match.{fname}"
        if f.kind == "EXACT":
            assert isinstance(value, int)
            fm.exact.value = encode(value, f.bitwidth, where)
        elif f.kind == "OPTIONAL":
            assert isinstance(value, int)
            fm.optional.value = encode(value, f.bitwidth, where)
        elif f.kind == "LPM":
            assert isinstance(value, tuple)
            fm.lpm.value = encode(value[0], f.bitwidth, where)
            fm.lpm.prefix_len = value[1]
        elif f.kind == "RANGE":
            assert isinstance(value, tuple)
            fm.range.low = encode(value[0], f.bitwidth, where)
            fm.range.high = encode(value[1], f.bitwidth, where)
        elif f.kind == "TERNARY":
            assert isinstance(value, tuple)
            fm.ternary.value = encode(value[0], f.bitwidth, where)
            fm.ternary.mask = encode(value[1], f.bitwidth, where)
    if entry.action is not None:
        ai = p4info.action(entry.action)
        msg.action.action.action_id = ai.id
        for pname, pval in sorted(entry.params, key=lambda p: ai.params[p[0]].id):
            p = ai.params[pname]
            msg.action.action.params.add(param_id=p.id, value=encode(pval, p.bitwidth, pname))
    return msg


#: Encoded entries per P4Info, shared and read-only (callers ``CopyFrom`` them): the
#: controller writes the same entries again and again (reconciliation after a switch
#: restart, undo, re-plans), and encoding one costs ~7 µs of Python.
_ENCODED: weakref.WeakKeyDictionary[P4Info, dict[TableEntry, p4runtime_pb2.TableEntry]]
_ENCODED = weakref.WeakKeyDictionary()
#: Entries kept per P4Info before the cache starts over (bounds memory).
ENCODED_MAX = 1 << 17


def encoded(p4info: P4Info, entry: TableEntry) -> p4runtime_pb2.TableEntry:
    """:func:`entry_to_proto`, remembered: the returned message must not be modified."""
    cache = _ENCODED.get(p4info)
    if cache is None:
        cache = _ENCODED.setdefault(p4info, {})
    msg = cache.get(entry)
    if msg is None:
        msg = entry_to_proto(p4info, entry)
        if len(cache) >= ENCODED_MAX:
            cache.clear()
        cache[entry] = msg
    return msg


def default_entry_reads(p4info: P4Info, tables: Iterable[str]) -> list[p4runtime_pb2.Entity]:
    """The Read entities for the default entry of each of ``tables`` (a wildcard Read
    of table entries does not return default entries)."""
    reads = []
    for t in tables:
        ent = p4runtime_pb2.Entity()
        ent.table_entry.table_id = p4info.table(t).id
        ent.table_entry.is_default_action = True
        reads.append(ent)
    return reads


def entry_from_proto(p4info: P4Info, msg: p4runtime_pb2.TableEntry) -> TableEntry:
    """Decode an entry read back from a switch into the same normalised form."""
    tname = p4info.name_of(msg.table_id)
    ti = p4info.table(tname)
    by_id = {f.id: f for f in ti.fields.values()}
    match: list[tuple[str, MatchValue]] = []
    for fm in msg.match:
        f = by_id.get(fm.field_id)
        if f is None:
            raise P4InfoError("match", f"{tname} has no match field id {fm.field_id}")
        kind = fm.WhichOneof("field_match_type")
        if kind == "exact":
            match.append((f.name, decode(fm.exact.value)))
        elif kind == "optional":
            match.append((f.name, decode(fm.optional.value)))
        elif kind == "lpm":
            match.append((f.name, (decode(fm.lpm.value), fm.lpm.prefix_len)))
        elif kind == "range":
            match.append((f.name, (decode(fm.range.low), decode(fm.range.high))))
        elif kind == "ternary":
            match.append((f.name, (decode(fm.ternary.value), decode(fm.ternary.mask))))
        else:
            raise P4InfoError("match", f"unsupported match kind {kind} in {tname}")
    action: str | None = None
    params: list[tuple[str, int]] = []
    if msg.HasField("action") and msg.action.HasField("action"):
        ai = p4info.action(p4info.name_of(msg.action.action.action_id))
        action = ai.name
        pby_id = {p.id: p for p in ai.params.values()}
        for prm in msg.action.action.params:
            p = pby_id.get(prm.param_id)
            if p is None:
                raise P4InfoError("params", f"{ai.name} has no parameter id {prm.param_id}")
            params.append((p.name, decode(prm.value)))
    return TableEntry(
        tname,
        tuple(sorted(match)),
        action,
        tuple(sorted(params)),
        msg.priority,
        msg.is_default_action,
    )

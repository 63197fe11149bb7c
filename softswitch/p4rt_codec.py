"""Translate P4Runtime table, counter and register entities to pipeline terms, validating them.

Every check the P4Runtime spec puts on a write lives here, each raising a
:class:`~softswitch.errors.SwitchError` whose gRPC code is the one the spec
names and whose message names the offending field. A byte string may be
canonical (no leading zero bytes) or padded with leading zeros up to
``ceil(bitwidth / 8)`` bytes; both mean the same value. Empty strings, longer
ones and values that do not fit the bit width are INVALID_ARGUMENT
(:func:`decode_bytes`). Reads return canonical byte strings.

This is the switch's only Write decoder, so it is written for speed: a
:class:`Decoder` is built once per pipeline and holds, per table, each match
field's position, kind, width and error name and, per action, its compiled
function and parameter positions, so decoding an entry is a walk over the
request with dict lookups and no per-entry P4Info work. The entry a read
returns is canonical: match fields and parameters in id order, canonical byte
strings. When the request's entry already is that (what every P4Runtime client
of the project sends, and what reads return), it is stored as it came; only
otherwise is a canonical copy built.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from finsy.proto import p4i as p4info_pb2
from finsy.proto import p4r

from p4client.p4info import encode
from softswitch.bm.pipeline import ActionInfo, CounterInfo, Pipeline, RegisterInfo, TableInfo
from softswitch.errors import InvalidArgument
from softswitch.tables import (
    EXACT,
    RANGE,
    ActionCall,
    ActionFn,
    FieldMatch,
    MatchKey,
)

T = TypeVar("T")

_MAX_PRIORITY = (1 << 31) - 1


@dataclass(slots=True)
class DecodedEntry:
    """A table entry in pipeline terms; ``call`` is None for DELETE or a default reset.
    ``proto`` is the canonical entry a read returns (the request's own when canonical)."""

    info: TableInfo
    key: MatchKey
    priority: int
    call: ActionCall | None
    proto: p4r.TableEntry


#: A match field: (position in the key, P4Runtime oneof name, width, bytes at most,
#: error name). Tuples, not objects: unpacking one is the cheapest read per field.
_Field = tuple[int, str, int, int, str]
#: An action parameter: (its bit among the action's, position in the call, width,
#: bytes at most, error name).
_Param = tuple[int, int, int, int, str]


@dataclass(frozen=True)
class _Action:
    info: ActionInfo
    fn: ActionFn
    scope: int
    params: dict[int, _Param]
    all_bits: int


@dataclass(frozen=True)
class _Table:
    """What decoding an entry of one table needs, precomputed per pipeline."""

    info: TableInfo
    fields: dict[int, _Field]
    template: tuple[FieldMatch | None, ...]  # per position: the wildcard, None if exact
    required: tuple[_Field, ...]  # exact fields in position order
    required_bits: int
    actions: dict[int, _Action]


def decode_bytes(field: str, data: bytes, bitwidth: int) -> int:
    """The integer a P4Runtime byte string encodes, checked against ``bitwidth``.

    The codec inlines this test on its hot path (``0 < len(data) <= ceil(bitwidth / 8)``
    and no bit above ``bitwidth``) and calls :func:`bytes_error` when it fails."""
    value = int.from_bytes(data, "big")
    if not 0 < len(data) <= (bitwidth + 7) // 8 or value >> bitwidth:
        raise bytes_error(field, data, bitwidth)
    return value


def bytes_error(field: str, data: bytes, bitwidth: int) -> InvalidArgument:
    """Why ``data`` is not a valid byte string for ``bitwidth`` (it must not be one)."""
    if not data:
        return InvalidArgument(field, "empty byte string")
    if len(data) > (bitwidth + 7) // 8:
        return InvalidArgument(field, f"{len(data)} bytes is too long for bitwidth {bitwidth}")
    value = int.from_bytes(data, "big")
    return InvalidArgument(field, f"value {value} does not fit in {bitwidth} bits")


def _table(pl: Pipeline, info: TableInfo) -> _Table:
    fields: dict[int, _Field] = {}
    template: list[FieldMatch | None] = []
    for pos, (fid, kf) in enumerate(zip(info.field_ids, info.table.fields, strict=True)):
        w = kf.bitwidth
        fields[fid] = (pos, kf.kind, w, (w + 7) // 8, f"{info.name}.{kf.name}")
        if kf.kind == EXACT:
            template.append(None)
        elif kf.kind == RANGE:
            template.append((0, (1 << w) - 1))
        else:
            template.append((0, 0))
    required = tuple(sorted(f for f in fields.values() if f[1] == "exact"))
    actions: dict[int, _Action] = {}
    for aid, scope in info.actions.items():
        ainfo = pl.actions.get(aid)
        if ainfo is None:
            continue
        params = {
            pid: (1 << i, pos, w, (w + 7) // 8, f"{ainfo.name}.{ainfo.param_names[pid]}")
            for i, (pid, (pos, w)) in enumerate(sorted(ainfo.params.items()))
        }
        fn = info.runtime.action_fn(ainfo.name)
        actions[aid] = _Action(ainfo, fn, scope, params, (1 << len(params)) - 1)
    return _Table(
        info,
        fields,
        tuple(template),
        required,
        sum(1 << f[0] for f in required),
        actions,
    )


class Decoder:
    """Table entries of one pipeline, decoded and validated (see the module's docstring)."""

    def __init__(self, pl: Pipeline) -> None:
        self.pipeline = pl
        self.tables = {tid: _table(pl, info) for tid, info in pl.tables.items()}

    def table_entry(self, te: p4r.TableEntry, needs_action: bool) -> DecodedEntry:
        """Validate a written table entry (``needs_action`` for INSERT/MODIFY)."""
        spec = self.tables.get(te.table_id)
        if spec is None:
            raise InvalidArgument("table_id", f"unknown table id {te.table_id}")
        info = spec.info
        default = te.is_default_action
        if info.is_const and not default and needs_action:
            raise InvalidArgument(info.name, "table has const entries: it cannot be written")
        for unsupported in ("counter_data", "meter_config", "time_since_last_hit"):
            if te.HasField(unsupported):
                raise InvalidArgument(f"{info.name}.{unsupported}", "table has no direct resource")
        if te.idle_timeout_ns:
            raise InvalidArgument(f"{info.name}.idle_timeout_ns", "table has no idle timeout")
        # fields a read does not return: the stored entry must be a copy without them
        canonical = not te.is_const and not te.HasField("meter_counter_data")
        seen = 0
        if default:
            if len(te.match) or te.priority:
                raise InvalidArgument(info.name, "default entry must have no match and no priority")
            key: MatchKey = ()
            priority = 0
        else:
            key, seen, ordered = _match(spec, te.match)
            canonical = canonical and ordered
            priority = te.priority
            if info.table.needs_priority:
                if not 0 < priority <= _MAX_PRIORITY:
                    raise InvalidArgument(
                        f"{info.name}.priority", "range/ternary tables need a priority in 1..2^31-1"
                    )
            elif priority:
                raise InvalidArgument(f"{info.name}.priority", "must be 0 for exact/lpm tables")
        call: ActionCall | None = None
        action = te.action  # an unset sub-message reads as empty: no oneof set
        which = action.WhichOneof("type")
        if which == "action":
            call, ordered = _action(spec, action.action, default)
            canonical = canonical and ordered
        elif which is not None:
            raise InvalidArgument(f"{info.name}.action", f"{which} needs an action profile")
        elif needs_action and not default:
            raise InvalidArgument(f"{info.name}.action", "INSERT/MODIFY needs an action")
        elif te.HasField("action"):
            canonical = False  # an empty TableAction, which a read does not return
        proto = te if canonical else _canonical(self.pipeline, info, te, key, seen, priority, call)
        return DecodedEntry(info, key, priority, call, proto)


def _match(spec: _Table, match: Iterable[p4r.FieldMatch]) -> tuple[MatchKey, int, bool]:
    """(key, bits of the positions given, canonical) of an entry's match fields.

    Each byte string is checked inline as :func:`decode_bytes` does (non-empty, at
    most ``maxlen`` bytes, no bit above the width); :func:`bytes_error` says why
    one fails. The field's oneof is read only when a check fails (:func:`_kind`):
    a field of another kind reads as empty (no bytes, prefix length 0), so its
    first check always fails, and the kind is reported before any value error.
    Canonical: fields in id order, no byte string with a leading zero byte."""
    key = list(spec.template)
    fields = spec.fields
    seen = 0
    last = 0
    canonical = True
    for fm in match:
        fid = fm.field_id
        f = fields.get(fid)
        if f is None:
            raise InvalidArgument(f"{spec.info.name}.match", f"unknown field id {fid}")
        pos, kind, bw, maxlen, name = f
        if seen >> pos & 1:
            raise InvalidArgument(name, "field given twice")
        seen |= 1 << pos
        if fid < last:
            canonical = False
        last = fid
        if kind == "exact":
            data = fm.exact.value
            value = int.from_bytes(data, "big")
            if not 0 < len(data) <= maxlen or value >> bw:
                raise _kind(fm, kind, name) or bytes_error(name, data, bw)
            key[pos] = value
            if not data[0] and len(data) > 1:
                canonical = False
        elif kind == "lpm":
            lpm = fm.lpm
            plen = lpm.prefix_len
            if not 0 < plen <= bw:
                raise _kind(fm, kind, name) or InvalidArgument(
                    name, f"prefix_len {plen} not in 1..{bw} (omit the field for a wildcard)"
                )
            data = lpm.value
            value = decode_bytes(name, data, bw)
            if value & ((1 << (bw - plen)) - 1):
                raise InvalidArgument(name, f"value has bits set beyond prefix_len {plen}")
            key[pos] = (value, plen)
            if not data[0] and len(data) > 1:
                canonical = False
        elif kind == "range":
            r = fm.range
            lo, hi, plain = _two(fm, kind, name, ("low", "high"), r.low, r.high, bw, maxlen)
            if lo > hi:
                raise InvalidArgument(name, f"low {lo} > high {hi}")
            if lo == 0 and hi == (1 << bw) - 1:
                raise InvalidArgument(name, "full range is a wildcard: omit the field")
            key[pos] = (lo, hi)
            canonical = canonical and plain
        elif kind == "optional":
            # BMv2 matches optional as ternary with an all-ones mask.
            data = fm.optional.value
            if not data:
                raise _kind(fm, kind, name) or bytes_error(name, data, bw)
            key[pos] = (decode_bytes(name, data, bw), (1 << bw) - 1)
            if not data[0] and len(data) > 1:
                canonical = False
        else:
            t = fm.ternary
            value, mask, plain = _two(
                fm, kind, name, ("value", "mask"), t.value, t.mask, bw, maxlen
            )
            if not mask:
                raise InvalidArgument(name, "zero mask is a wildcard: omit the field")
            if value & ~mask:
                raise InvalidArgument(name, "value has bits set outside the mask")
            key[pos] = (value, mask)
            canonical = canonical and plain
    if seen & spec.required_bits != spec.required_bits:
        missing = next(f for f in spec.required if not seen >> f[0] & 1)
        raise InvalidArgument(missing[4], "exact field missing")
    return tuple(key), seen, canonical  # type: ignore[arg-type]


def _two(
    fm: p4r.FieldMatch,
    kind: str,
    name: str,
    labels: tuple[str, str],
    a: bytes,
    b: bytes,
    bw: int,
    maxlen: int,
) -> tuple[int, int, bool]:
    """The two byte strings of a range (low, high) or ternary (value, mask) field:
    their values, checked as :func:`decode_bytes` does, and whether both are canonical."""
    x, y = int.from_bytes(a, "big"), int.from_bytes(b, "big")
    if not 0 < len(a) <= maxlen or x >> bw:
        raise _kind(fm, kind, name) or bytes_error(f"{name}.{labels[0]}", a, bw)
    if not 0 < len(b) <= maxlen or y >> bw:
        raise bytes_error(f"{name}.{labels[1]}", b, bw)
    return x, y, bool((a[0] or len(a) == 1) and (b[0] or len(b) == 1))


def _kind(fm: p4r.FieldMatch, kind: str, name: str) -> InvalidArgument | None:
    """The error for a match field of another kind than the table's, if it is one."""
    which = fm.WhichOneof("field_match_type")
    return (
        None if which == kind else InvalidArgument(name, f"is a {kind} field, request has {which}")
    )


def _action(spec: _Table, action: p4r.Action, default: bool) -> tuple[ActionCall, bool]:
    """(the pipeline's call, canonical) of an action, checked against the table's refs."""
    a = spec.actions.get(action.action_id)
    if a is None:
        raise InvalidArgument(
            f"{spec.info.name}.action",
            f"action id {action.action_id} is not an action of this table",
        )
    if default and a.scope == p4info_pb2.ActionRef.TABLE_ONLY:
        raise InvalidArgument(f"{spec.info.name}.action", f"{a.info.name} is @tableonly")
    if not default and a.scope == p4info_pb2.ActionRef.DEFAULT_ONLY:
        raise InvalidArgument(f"{spec.info.name}.action", f"{a.info.name} is @defaultonly")
    params = a.params
    args = [0] * len(params)
    seen = 0
    last = 0
    canonical = True
    for p in action.params:
        pid = p.param_id
        q = params.get(pid)
        if q is None:
            raise InvalidArgument(f"{a.info.name}.params", f"unknown param id {pid}")
        bit, pos, width, maxlen, name = q
        if seen & bit:
            raise InvalidArgument(name, "given twice")
        seen |= bit
        if pid < last:
            canonical = False
        last = pid
        data = p.value
        value = int.from_bytes(data, "big")
        if not 0 < len(data) <= maxlen or value >> width:
            raise bytes_error(name, data, width)
        args[pos] = value
        if not data[0] and len(data) > 1:
            canonical = False
    if seen != a.all_bits:
        names = a.info.param_names
        missing = sorted(names[pid] for pid, q in params.items() if not seen & q[0])
        raise InvalidArgument(f"{a.info.name}.params", f"missing {', '.join(missing)}")
    return (a.fn, tuple(args)), canonical


def _canonical(
    pl: Pipeline,
    info: TableInfo,
    te: p4r.TableEntry,
    key: MatchKey,
    seen: int,
    priority: int,
    call: ActionCall | None,
) -> p4r.TableEntry:
    """The entry a read returns for a valid but not canonical ``te``."""
    aid, args = (None, ()) if call is None else (te.action.action.action_id, call[1])
    out = pl.entry_message(info, key, priority, aid, args, seen)
    out.metadata, out.controller_metadata = te.metadata, te.controller_metadata
    out.is_default_action = te.is_default_action
    return out


_decoders: weakref.WeakKeyDictionary[Pipeline, Decoder] = weakref.WeakKeyDictionary()


def decoder(pl: Pipeline) -> Decoder:
    """The pipeline's :class:`Decoder`, built on first use."""
    dec = _decoders.get(pl)
    if dec is None:
        dec = _decoders[pl] = Decoder(pl)
    return dec


def by_id(infos: Mapping[int, T], field: str, object_id: int) -> T:
    """The object P4Info id ``object_id`` names, or INVALID_ARGUMENT naming ``field``."""
    info = infos.get(object_id)
    if info is None:
        raise InvalidArgument(field, f"unknown {field.removesuffix('_id')} id {object_id}")
    return info


#: A counter or register: what :func:`entry_cells` walks.
C = TypeVar("C", CounterInfo, RegisterInfo)


def entry_cells(
    infos: Mapping[int, C], field: str, entry: p4r.CounterEntry | p4r.RegisterEntry
) -> list[tuple[C, range]]:
    """The cells a counter or register entry names (``field``: its id field), as an
    index range per object: id 0 is every object, an unset index every cell (a
    wildcard builds nothing); a set index is checked against each object's size."""
    object_id = getattr(entry, field)
    chosen = list(infos.values()) if object_id == 0 else [by_id(infos, field, object_id)]
    index = entry.index.index if entry.HasField("index") else None
    cells: list[tuple[C, range]] = []
    for info in chosen:
        n = info.size
        if index is None:
            cells.append((info, range(n)))
        elif 0 <= index < n:
            cells.append((info, range(index, index + 1)))
        else:
            raise InvalidArgument(f"{info.name}.index", f"{index} not in 0..{n - 1}")
    return cells


def default_entry(pl: Pipeline, info: TableInfo) -> p4r.TableEntry:
    """The table's current default entry as P4Runtime reads it."""
    payload = info.table.default_payload
    if isinstance(payload, p4r.TableEntry):
        return payload
    args = info.runtime.default_args
    te = pl.entry_message(info, (), 0, info.default_action_id, args, present=0)
    te.is_default_action = True
    return te


def counter_entry(ci: CounterInfo, index: int) -> p4r.CounterEntry:
    ce = p4r.CounterEntry(counter_id=ci.id)
    ce.index.index = index
    ce.data.packet_count = ci.counter.packets[index]
    ce.data.byte_count = ci.counter.bytes[index]
    return ce


def register_entry(info: RegisterInfo, index: int) -> p4r.RegisterEntry:
    re = p4r.RegisterEntry(register_id=info.id)
    re.index.index = index
    re.data.bitstring = encode(info.register.cells[index], info.bitwidth, info.name)
    return re

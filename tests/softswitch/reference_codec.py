"""The soft switch's first P4Runtime table-entry decoder, kept as a slow reference.

:mod:`softswitch.p4rt_codec` is the switch's one decoder, written for speed
(precomputed per-table specs, inline byte checks, the request's entry stored
when it is canonical). This is the plain version it replaced, unchanged: it
walks the P4Info maps for every entry, checks each field in the order the
errors are reported and always builds the canonical copy a read returns.
``test_ssw_codec`` checks that both give the same error (code and message) or
the same key, priority, action call and read entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from finsy.proto import p4i as p4info_pb2
from finsy.proto import p4r

from softswitch.bm.pipeline import ActionInfo, Pipeline, TableInfo
from softswitch.errors import InvalidArgument
from softswitch.tables import (
    EXACT,
    LPM,
    OPTIONAL,
    RANGE,
    TERNARY,
    ActionCall,
    FieldMatch,
    MatchKey,
)

_ONEOF = {EXACT: "exact", LPM: "lpm", RANGE: "range", TERNARY: "ternary", OPTIONAL: "optional"}
_MAX_PRIORITY = (1 << 31) - 1


def encode_bytes(value: int) -> bytes:
    """Canonical byte string: no leading zero bytes, at least one byte."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode_bytes(field: str, data: bytes, bitwidth: int) -> int:
    """The integer a P4Runtime byte string encodes, checked against ``bitwidth``."""
    if not data:
        raise InvalidArgument(field, "empty byte string")
    if len(data) > (bitwidth + 7) // 8:
        raise InvalidArgument(field, f"{len(data)} bytes is too long for bitwidth {bitwidth}")
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        raise InvalidArgument(field, f"value {value} does not fit in {bitwidth} bits")
    return value


@dataclass
class DecodedEntry:
    """A table entry in pipeline terms; ``call`` is None for DELETE or a default reset."""

    info: TableInfo
    key: MatchKey
    priority: int
    call: ActionCall | None
    proto: p4r.TableEntry


def table_info(pl: Pipeline, table_id: int) -> TableInfo:
    info = pl.tables.get(table_id)
    if info is None:
        raise InvalidArgument("table_id", f"unknown table id {table_id}")
    return info


def _decode_match(info: TableInfo, te: p4r.TableEntry, out: p4r.TableEntry) -> MatchKey:
    values: dict[int, FieldMatch] = {}
    fields = dict(zip(info.field_ids, enumerate(info.table.fields), strict=True))
    for fm in te.match:
        located = fields.get(fm.field_id)
        if located is None:
            raise InvalidArgument(f"{info.name}.match", f"unknown field id {fm.field_id}")
        pos, kf = located
        name = f"{info.name}.{kf.name}"
        if pos in values:
            raise InvalidArgument(name, "field given twice")
        which = fm.WhichOneof("field_match_type")
        if which != _ONEOF[kf.kind]:
            raise InvalidArgument(name, f"is a {kf.kind} field, request has {which}")
        bw = kf.bitwidth
        o = out.match.add(field_id=fm.field_id)
        if kf.kind == EXACT:
            exact = decode_bytes(name, fm.exact.value, bw)
            values[pos] = exact
            o.exact.value = encode_bytes(exact)
        elif kf.kind == LPM:
            plen = fm.lpm.prefix_len
            if not 0 < plen <= bw:
                raise InvalidArgument(
                    name, f"prefix_len {plen} not in 1..{bw} (omit the field for a wildcard)"
                )
            value = decode_bytes(name, fm.lpm.value, bw)
            if value & ((1 << (bw - plen)) - 1):
                raise InvalidArgument(name, f"value has bits set beyond prefix_len {plen}")
            values[pos] = (value, plen)
            o.lpm.value, o.lpm.prefix_len = encode_bytes(value), plen
        elif kf.kind == RANGE:
            lo = decode_bytes(f"{name}.low", fm.range.low, bw)
            hi = decode_bytes(f"{name}.high", fm.range.high, bw)
            if lo > hi:
                raise InvalidArgument(name, f"low {lo} > high {hi}")
            if lo == 0 and hi == (1 << bw) - 1:
                raise InvalidArgument(name, "full range is a wildcard: omit the field")
            values[pos] = (lo, hi)
            o.range.low, o.range.high = encode_bytes(lo), encode_bytes(hi)
        elif kf.kind == OPTIONAL:
            # BMv2 matches optional as ternary with an all-ones mask.
            opt = decode_bytes(name, fm.optional.value, bw)
            values[pos] = (opt, (1 << bw) - 1)
            o.optional.value = encode_bytes(opt)
        else:
            value = decode_bytes(f"{name}.value", fm.ternary.value, bw)
            mask = decode_bytes(f"{name}.mask", fm.ternary.mask, bw)
            if not mask:
                raise InvalidArgument(name, "zero mask is a wildcard: omit the field")
            if value & ~mask:
                raise InvalidArgument(name, "value has bits set outside the mask")
            values[pos] = (value, mask)
            o.ternary.value, o.ternary.mask = encode_bytes(value), encode_bytes(mask)
    key: list[FieldMatch] = []
    for pos, kf in enumerate(info.table.fields):
        if pos in values:
            key.append(values[pos])
        elif kf.kind == EXACT:
            raise InvalidArgument(f"{info.name}.{kf.name}", "exact field missing")
        elif kf.kind == RANGE:
            key.append((0, (1 << kf.bitwidth) - 1))
        else:
            key.append((0, 0))
    out.match.sort(key=lambda m: m.field_id)
    return tuple(key)


def decode_action(
    pl: Pipeline, info: TableInfo, action: p4r.Action, default: bool, out: p4r.Action
) -> ActionCall:
    """Check an action against the table's refs and widths; the pipeline's call for it."""
    ainfo: ActionInfo | None = pl.actions.get(action.action_id)
    scope = info.actions.get(action.action_id)
    if ainfo is None or scope is None:
        raise InvalidArgument(
            f"{info.name}.action", f"action id {action.action_id} is not an action of this table"
        )
    if default and scope == p4info_pb2.ActionRef.TABLE_ONLY:
        raise InvalidArgument(f"{info.name}.action", f"{ainfo.name} is @tableonly")
    if not default and scope == p4info_pb2.ActionRef.DEFAULT_ONLY:
        raise InvalidArgument(f"{info.name}.action", f"{ainfo.name} is @defaultonly")
    args = [0] * len(ainfo.params)
    seen: set[int] = set()
    out.action_id = action.action_id
    for p in action.params:
        located = ainfo.params.get(p.param_id)
        if located is None:
            raise InvalidArgument(f"{ainfo.name}.params", f"unknown param id {p.param_id}")
        if p.param_id in seen:
            raise InvalidArgument(f"{ainfo.name}.{ainfo.param_names[p.param_id]}", "given twice")
        seen.add(p.param_id)
        pos, width = located
        args[pos] = decode_bytes(f"{ainfo.name}.{ainfo.param_names[p.param_id]}", p.value, width)
        out.params.add(param_id=p.param_id, value=encode_bytes(args[pos]))
    missing = sorted(ainfo.param_names[i] for i in set(ainfo.params) - seen)
    if missing:
        raise InvalidArgument(f"{ainfo.name}.params", f"missing {', '.join(missing)}")
    out.params.sort(key=lambda p: p.param_id)
    return info.runtime.action_fn(ainfo.name), tuple(args)


def decode_table_entry(pl: Pipeline, te: p4r.TableEntry, needs_action: bool) -> DecodedEntry:
    """Validate a written table entry (``needs_action`` for INSERT/MODIFY)."""
    info = table_info(pl, te.table_id)
    if info.is_const and not te.is_default_action and needs_action:
        raise InvalidArgument(info.name, "table has const entries: it cannot be written")
    for unsupported in ("counter_data", "meter_config", "time_since_last_hit"):
        if te.HasField(unsupported):
            raise InvalidArgument(f"{info.name}.{unsupported}", "table has no direct resource")
    if te.idle_timeout_ns:
        raise InvalidArgument(f"{info.name}.idle_timeout_ns", "table has no idle timeout")
    out = p4r.TableEntry(table_id=te.table_id, metadata=te.metadata)
    out.controller_metadata = te.controller_metadata
    if te.is_default_action:
        if len(te.match) or te.priority:
            raise InvalidArgument(info.name, "default entry must have no match and no priority")
        out.is_default_action = True
        key: MatchKey = ()
        priority = 0
    else:
        key = _decode_match(info, te, out)
        priority = te.priority
        if info.table.needs_priority:
            if not 0 < priority <= _MAX_PRIORITY:
                raise InvalidArgument(
                    f"{info.name}.priority", "range/ternary tables need a priority in 1..2^31-1"
                )
        elif priority:
            raise InvalidArgument(f"{info.name}.priority", "must be 0 for exact/lpm tables")
        out.priority = priority
    call: ActionCall | None = None
    which = te.action.WhichOneof("type") if te.HasField("action") else None
    if which is not None and which != "action":
        raise InvalidArgument(f"{info.name}.action", f"{which} needs an action profile")
    if which == "action":
        call = decode_action(pl, info, te.action.action, te.is_default_action, out.action.action)
    elif needs_action and not te.is_default_action:
        raise InvalidArgument(f"{info.name}.action", "INSERT/MODIFY needs an action")
    return DecodedEntry(info, key, priority, call, out)

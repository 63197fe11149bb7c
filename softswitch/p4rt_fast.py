"""The fast path for table writes: per-table decoders that accept only the plain case.

Measured before (``python -m softswitch.bench --inserts-only``): the soft switch
accepted a third of BMv2's insert rate. Per update, :mod:`softswitch.p4rt_codec`
walked the P4Info maps, dispatched on ``WhichOneof``, built a canonical copy of
the entry for reads (a second protobuf message with every field re-encoded) and
sorted its repeated fields; the table then rebuilt a range/ternary group per
insert.

:class:`FastWriter` is built once per committed pipeline. For each table it
precomputes field id -> (position, kind, width) and action id -> (compiled
action, parameter ids in order, widths). An update is handled here only when it
is the plain, canonical case: known ids, match fields and parameters in
increasing id order, every byte string canonical (what P4Runtime reads return
and what every client of the project sends), no default entry, no direct
resources. The entry a read returns is then the request's own ``TableEntry``
(byte for byte what the codec would have built), so nothing is copied.
Anything else returns ``None`` and goes through :func:`p4rt_codec.decode_table_entry`,
the one place that says *why* an update is wrong: the fast path never refuses.
A property test (``tests/softswitch/test_ssw_fast.py``) checks that whenever the
fast path accepts, it yields exactly what the codec yields.
"""

from __future__ import annotations

from dataclasses import dataclass

from finsy.proto import p4i as p4info_pb2
from finsy.proto import p4r

from softswitch.bm.pipeline import Pipeline, TableInfo
from softswitch.errors import SwitchError
from softswitch.tables import (
    EXACT,
    LPM,
    OPTIONAL,
    RANGE,
    TERNARY,
    ActionCall,
    ActionFn,
    FieldMatch,
    MatchKey,
    Table,
)

_MAX_PRIORITY = (1 << 31) - 1
_INSERT, _MODIFY, _DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE
#: kinds as small ints (compared in the per-field loop)
_K = {EXACT: 0, LPM: 1, RANGE: 2, TERNARY: 3, OPTIONAL: 4}


@dataclass(frozen=True)
class _Action:
    fn: ActionFn
    param_ids: tuple[int, ...]  # increasing
    positions: tuple[int, ...]
    widths: tuple[int, ...]
    maxlens: tuple[int, ...]


@dataclass(frozen=True)
class _TableSpec:
    table: Table
    fields: dict[int, tuple[int, int, int, int]]  # field id -> (pos, kind, width, max bytes)
    template: tuple[FieldMatch | None, ...]  # per position: the wildcard, None if required
    needs_priority: bool
    actions: dict[int, _Action]  # actions an entry may use (not @defaultonly)


def _spec(pl: Pipeline, info: TableInfo) -> _TableSpec | None:
    if info.is_const:
        return None
    fields: dict[int, tuple[int, int, int, int]] = {}
    template: list[FieldMatch | None] = []
    for pos, fid in enumerate(info.field_ids):
        _pos, kf = info.fields[fid]
        assert _pos == pos
        fields[fid] = (pos, _K[kf.kind], kf.bitwidth, (kf.bitwidth + 7) // 8)
        if kf.kind == EXACT:
            template.append(None)
        elif kf.kind == RANGE:
            template.append((0, (1 << kf.bitwidth) - 1))
        else:
            template.append((0, 0))
    actions: dict[int, _Action] = {}
    for aid, scope in info.actions.items():
        ainfo = pl.actions.get(aid)
        if ainfo is None or scope == p4info_pb2.ActionRef.DEFAULT_ONLY:
            continue
        pids = tuple(sorted(ainfo.params))
        actions[aid] = _Action(
            pl.action_fn(info, ainfo.name),
            pids,
            tuple(ainfo.params[p][0] for p in pids),
            tuple(ainfo.params[p][1] for p in pids),
            tuple((ainfo.params[p][1] + 7) // 8 for p in pids),
        )
    return _TableSpec(info.table, fields, tuple(template), info.table.needs_priority, actions)


def _field_id(fm: p4r.FieldMatch) -> int:
    return int(fm.field_id)


def _canonical(v: bytes, maxlen: int) -> bool:
    """Non-empty, not too long, no leading zero byte (except the value 0 itself)."""
    return 0 < len(v) <= maxlen and (v[0] != 0 or len(v) == 1)


class FastWriter:
    """Table writes of one pipeline without the codec, for the plain case."""

    def __init__(self, pl: Pipeline) -> None:
        self.specs: dict[int, _TableSpec] = {}
        for tid, info in pl.tables.items():
            spec = _spec(pl, info)
            if spec is not None:
                self.specs[tid] = spec

    def decode(
        self, te: p4r.TableEntry, needs_action: bool
    ) -> tuple[_TableSpec, MatchKey, int, ActionCall | None] | None:
        """(table, key, priority, call) for a plain entry; ``None``: use the codec."""
        spec = self.specs.get(te.table_id)
        if spec is None or te.is_default_action or te.idle_timeout_ns or te.is_const:
            return None
        if (
            te.HasField("counter_data")
            or te.HasField("meter_config")
            or te.HasField("time_since_last_hit")
            or te.HasField("meter_counter_data")
        ):
            return None
        key: list[FieldMatch | None] = list(spec.template)
        fields = spec.fields
        last = 0
        seen = 0
        ordered = True
        match = te.match
        for fm in match:
            fid = fm.field_id
            f = fields.get(fid)
            if f is None:
                return None
            pos, kind, bw, maxlen = f
            if seen >> pos & 1:
                return None
            seen |= 1 << pos
            if fid < last:
                ordered = False
            last = fid
            if kind == 0:  # exact
                v = fm.exact.value
                if not v or len(v) > maxlen or (v[0] == 0 and len(v) > 1):
                    return None
                x = int.from_bytes(v, "big")
                if x >> bw:
                    return None
                key[pos] = x
            elif kind == 1:  # lpm
                v, plen = fm.lpm.value, fm.lpm.prefix_len
                if not _canonical(v, maxlen) or not 0 < plen <= bw:
                    return None
                x = int.from_bytes(v, "big")
                if x >> bw or x & ((1 << (bw - plen)) - 1):
                    return None
                key[pos] = (x, plen)
            elif kind == 2:  # range
                r = fm.range
                lo_b, hi_b = r.low, r.high
                if not (_canonical(lo_b, maxlen) and _canonical(hi_b, maxlen)):
                    return None
                lo, hi = int.from_bytes(lo_b, "big"), int.from_bytes(hi_b, "big")
                if hi >> bw or lo > hi or (lo == 0 and hi == (1 << bw) - 1):
                    return None
                key[pos] = (lo, hi)
            elif kind == 3:  # ternary
                t = fm.ternary
                vb, mb = t.value, t.mask
                if not (_canonical(vb, maxlen) and _canonical(mb, maxlen)):
                    return None
                x, m = int.from_bytes(vb, "big"), int.from_bytes(mb, "big")
                if m >> bw or not m or x & ~m:
                    return None
                key[pos] = (x, m)
            else:  # optional: BMv2 matches it as ternary with an all-ones mask
                v = fm.optional.value
                if not _canonical(v, maxlen):
                    return None
                x = int.from_bytes(v, "big")
                if x >> bw:
                    return None
                key[pos] = (x, (1 << bw) - 1)
        if None in key:  # a required exact field is missing
            return None
        priority = te.priority
        if spec.needs_priority:
            if not 0 < priority <= _MAX_PRIORITY:
                return None
        elif priority:
            return None
        if not ordered:  # the stored entry is what a read returns: fields in id order
            match.sort(key=_field_id)
        if not needs_action:
            return None if te.HasField("action") else (spec, tuple(key), priority, None)  # type: ignore[arg-type]
        action = te.action.action  # id 0 (absent, or a profile member) is no action below
        a = spec.actions.get(action.action_id)
        if a is None:
            return None
        params = action.params
        pids, widths, maxlens, positions = a.param_ids, a.widths, a.maxlens, a.positions
        if len(params) != len(pids):
            return None
        args = [0] * len(pids)
        for i, p in enumerate(params):
            if p.param_id != pids[i]:
                return None
            v = p.value
            width = widths[i]
            if not v or len(v) > maxlens[i] or (v[0] == 0 and len(v) > 1):
                return None
            x = int.from_bytes(v, "big")
            if x >> width:
                return None
            args[positions[i]] = x
        return spec, tuple(key), priority, (a.fn, tuple(args))  # type: ignore[arg-type]

    def apply(self, update: p4r.Update, touched: set[Table]) -> SwitchError | bool | None:
        """Apply a plain table update: ``None`` (done), a :class:`SwitchError` (the
        table refused it: duplicate, missing, full), or ``False`` (not plain: use the
        codec). Tables whose lookup view was deferred are added to ``touched``."""
        kind = update.type
        te = update.entity.table_entry  # another entity reads as an empty entry: table 0
        d = self.decode(te, kind != _DELETE)
        if d is None:
            return False
        spec, key, priority, call = d
        table = spec.table
        try:
            if kind == _INSERT:
                assert call is not None
                table.insert(key, priority, call, te, defer=True)
            elif kind == _MODIFY:
                assert call is not None
                table.modify(key, priority, call, te, defer=True)
            elif kind == _DELETE:
                table.delete(key, priority, defer=True)
            else:
                return False
        except SwitchError as err:
            return err
        touched.add(table)
        return None

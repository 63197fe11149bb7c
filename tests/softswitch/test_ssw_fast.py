"""The fast write path accepts only what the codec accepts, and yields exactly its result.

For random table entries of both programs (echelon: exact/lpm/range tables;
l3acl: ternary, range, optional, a const table), mostly well-formed and often
perturbed (padded or empty byte strings, fields out of order or twice, other
match kinds, unknown ids, bad priorities, missing or extra parameters, direct
resources, default entries), whenever :class:`FastWriter` decodes an entry the
codec decodes it without error to the same key, priority and action call, and
the request's entry (which the fast path stores for reads) equals the codec's
canonical copy.
"""

from __future__ import annotations

from pathlib import Path

from finsy.proto import p4i as p4info_pb2
from finsy.proto import p4r
from google.protobuf import text_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from softswitch import p4rt_codec as codec
from softswitch.bm.pipeline import Pipeline
from softswitch.errors import SwitchError
from softswitch.p4rt_fast import FastWriter

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = {
    "echelon": (
        ROOT / "p4src" / "build" / "echelon.p4info.txtpb",
        ROOT / "p4src" / "build" / "echelon.json",
    ),
    "l3acl": (
        ROOT / "tests" / "p4" / "programs" / "build" / "l3acl.p4info.txtpb",
        ROOT / "tests" / "p4" / "programs" / "build" / "l3acl.json",
    ),
}


def _load(name: str) -> tuple[p4info_pb2.P4Info, Pipeline, FastWriter]:
    info_path, json_path = PROGRAMS[name]
    info = text_format.Parse(info_path.read_text(), p4info_pb2.P4Info())
    pl = Pipeline(info, json_path.read_bytes(), 0)
    return info, pl, FastWriter(pl)


LOADED = {name: _load(name) for name in PROGRAMS}
SETTINGS = settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))


def _canon(value: int) -> bytes:
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


@st.composite
def entries(draw: st.DrawFn, program: str) -> p4r.TableEntry:
    """A mostly valid entry of a random table of ``program``, maybe perturbed."""
    info, _pl, _w = LOADED[program]
    table = draw(st.sampled_from(list(info.tables)))
    actions = {a.preamble.id: a for a in info.actions}
    bad = draw(st.integers(0, 3)) == 0  # one in four gets a perturbation

    def blob(width: int) -> bytes:
        value = draw(st.integers(0, (1 << width) - 1))
        data = _canon(value)
        if bad and draw(st.integers(0, 5)) == 0:
            data = draw(st.sampled_from([b"\x00" + data, b"", data + b"\x01", b"\xff" * 9]))
        return data

    te = p4r.TableEntry(table_id=table.preamble.id)
    fields = list(table.match_fields)
    if draw(st.booleans()):
        fields = draw(st.permutations(fields))
    for f in fields:
        mt = f.match_type
        if mt != p4info_pb2.MatchField.EXACT and draw(st.booleans()):
            continue  # a wildcard
        kind = {
            p4info_pb2.MatchField.EXACT: "exact",
            p4info_pb2.MatchField.LPM: "lpm",
            p4info_pb2.MatchField.RANGE: "range",
            p4info_pb2.MatchField.TERNARY: "ternary",
            p4info_pb2.MatchField.OPTIONAL: "optional",
        }[mt]
        if bad and draw(st.integers(0, 6)) == 0:
            kind = draw(st.sampled_from(["exact", "lpm", "range", "ternary", "optional"]))
        fid = f.id if not (bad and draw(st.integers(0, 8)) == 0) else draw(st.integers(0, 9))
        for _ in range(2 if bad and draw(st.integers(0, 8)) == 0 else 1):
            fm = te.match.add(field_id=fid)
            w = f.bitwidth
            if kind == "exact":
                fm.exact.value = blob(w)
            elif kind == "optional":
                fm.optional.value = blob(w)
            elif kind == "lpm":
                plen = draw(st.integers(0 if bad else 1, w + (1 if bad else 0)))
                value = draw(st.integers(0, (1 << w) - 1))
                if not bad or draw(st.booleans()):
                    value &= ((1 << plen) - 1) << (w - plen) if plen <= w else 0
                fm.lpm.value, fm.lpm.prefix_len = _canon(value), plen
            elif kind == "range":
                lo, hi = sorted(draw(st.integers(0, (1 << w) - 1)) for _ in range(2))
                if bad and draw(st.booleans()):
                    lo, hi = hi, lo
                if bad and draw(st.integers(0, 3)) == 0:  # the full range: a wildcard
                    lo, hi = 0, (1 << w) - 1
                fm.range.low, fm.range.high = _canon(lo), _canon(hi)
            else:
                mask = draw(st.integers(0 if bad else 1, (1 << w) - 1))
                value = draw(st.integers(0, (1 << w) - 1))
                if not bad or draw(st.booleans()):
                    value &= mask
                fm.ternary.value, fm.ternary.mask = _canon(value), _canon(mask)
    needs_priority = any(
        f.match_type
        in (
            p4info_pb2.MatchField.RANGE,
            p4info_pb2.MatchField.TERNARY,
            p4info_pb2.MatchField.OPTIONAL,
        )
        for f in table.match_fields
    )
    te.priority = draw(st.integers(1, 100)) if needs_priority else 0
    if bad and draw(st.integers(0, 4)) == 0:
        te.priority = draw(st.sampled_from([0, -1, 2**31 - 1, 5]))
    refs = [r for r in table.action_refs]
    if refs and not (bad and draw(st.integers(0, 6)) == 0):
        ref = draw(st.sampled_from(refs))
        a = actions[ref.id]
        te.action.action.action_id = a.preamble.id
        params = list(a.params)
        if draw(st.booleans()):
            params = draw(st.permutations(params))
        if bad and params and draw(st.integers(0, 4)) == 0:
            params = params[1:] if draw(st.booleans()) else [*params, params[0]]
        for p in params:
            te.action.action.params.add(param_id=p.id, value=blob(p.bitwidth))
    if bad and draw(st.integers(0, 5)) == 0:
        which = draw(st.sampled_from(["default", "counter", "idle", "const", "meta"]))
        if which == "default":
            te.is_default_action = True
        elif which == "counter":
            te.counter_data.packet_count = 1
        elif which == "idle":
            te.idle_timeout_ns = 5
        elif which == "const":
            te.is_const = True
        else:
            te.metadata = b"m"
            te.controller_metadata = 7
    return te


def _check(program: str, te: p4r.TableEntry, needs_action: bool) -> bool:
    _info, pl, writer = LOADED[program]
    request = p4r.TableEntry()
    request.CopyFrom(te)
    fast = writer.decode(request, needs_action)
    try:
        slow = codec.decode_table_entry(pl, te, needs_action)
    except SwitchError as err:
        assert fast is None, f"fast path accepted what the codec refuses: {err}"
        return False
    if fast is None:
        return False
    spec, key, priority, call = fast
    assert spec.table is slow.info.table
    assert key == slow.key and priority == slow.priority
    if needs_action:
        assert call == slow.call
        assert request == slow.proto  # what a read returns
    else:
        assert call is None
    return True


@SETTINGS
@given(st.data())
def test_fast_path_agrees_with_the_codec(data: st.DataObject) -> None:
    program = data.draw(st.sampled_from(list(PROGRAMS)))
    te = data.draw(entries(program))
    _check(program, te, needs_action=data.draw(st.booleans()))


def plain_entries() -> list[tuple[str, p4r.TableEntry]]:
    """A canonical entry with an action for every writable table of both programs."""
    out = []
    for program in PROGRAMS:
        info, pl, _w = LOADED[program]
        for table in info.tables:
            if pl.tables[table.preamble.id].is_const or not table.action_refs:
                continue
            te = p4r.TableEntry(table_id=table.preamble.id)
            for f in table.match_fields:
                fm = te.match.add(field_id=f.id)
                mt = f.match_type
                if mt == p4info_pb2.MatchField.EXACT:
                    fm.exact.value = b"\x01"
                elif mt == p4info_pb2.MatchField.LPM:
                    fm.lpm.value, fm.lpm.prefix_len = _canon(1 << (f.bitwidth - 1)), 1
                elif mt == p4info_pb2.MatchField.RANGE:
                    fm.range.low, fm.range.high = b"\x01", b"\x02"
                elif mt == p4info_pb2.MatchField.TERNARY:
                    fm.ternary.value, fm.ternary.mask = b"\x01", b"\x01"
                else:
                    fm.optional.value = b"\x01"
            if pl.tables[table.preamble.id].table.needs_priority:
                te.priority = 3
            ref = next(
                (r for r in table.action_refs if r.scope != p4info_pb2.ActionRef.DEFAULT_ONLY),
                None,
            )
            if ref is None:
                continue
            a = next(x for x in info.actions if x.preamble.id == ref.id)
            te.action.action.action_id = a.preamble.id
            for p in a.params:
                te.action.action.params.add(param_id=p.id, value=b"\x01")
            out.append((program, te))
    return out


def test_fast_path_takes_the_plain_entries() -> None:
    """Not vacuous: canonical entries of every writable table take the fast path."""
    taken = 0
    for program, te in plain_entries():
        assert _check(program, te, True), te.table_id
        assert _check(program, te, False) is False  # a DELETE with an action: codec
        te.ClearField("action")
        assert _check(program, te, False), te.table_id
        taken += 1
    assert taken >= 5

"""The codec, the switch's one Write decoder, against the reference decoder it replaced.

:mod:`tests.softswitch.reference_codec` is the plain decoder the soft switch had
before the codec was made fast. For random table entries of both programs
(echelon: exact/lpm/range tables; l3acl: ternary, range, optional, a const
table), mostly well-formed and often perturbed (padded or empty byte strings,
fields out of order or twice, other match kinds, unknown ids, bad priorities,
missing or extra parameters, direct resources, default entries), and for each
kind of irregular entry one at a time, both refuse with the same error (code
and message) or both accept with the same key, priority, action call and read
entry. Whole services, one on each decoder, given the same random WriteRequests
(INSERT/MODIFY/DELETE, counter and UNSPECIFIED updates, damaged bytes) end the
same way and hold the same entries. A canonical entry is stored as it came
(no copy): the not-vacuous check that the fast case is taken.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import grpc
import pytest
from finsy.proto import p4i as p4info_pb2
from finsy.proto import p4r
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from p4client.p4info import P4Info
from softswitch import p4rt_codec as codec
from softswitch.arbitration import Stream
from softswitch.bm.pipeline import Pipeline
from softswitch.errors import SwitchError
from softswitch.p4rt_server import P4RuntimeService, _parse_write
from tests.softswitch import reference_codec as reference
from tests.softswitch.helpers import trailer_errors
from tests.softswitch.reference_codec import encode_bytes

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


def _load(name: str) -> tuple[p4info_pb2.P4Info, Pipeline]:
    info_path, json_path = PROGRAMS[name]
    info = P4Info.load(info_path).proto
    pl = Pipeline(info, json_path.read_bytes(), 0)
    return info, pl


LOADED = {name: _load(name) for name in PROGRAMS}
SETTINGS = settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))


@st.composite
def entries(draw: st.DrawFn, program: str) -> p4r.TableEntry:
    """A mostly valid entry of a random table of ``program``, maybe perturbed."""
    info, _pl = LOADED[program]
    table = draw(st.sampled_from(list(info.tables)))
    actions = {a.preamble.id: a for a in info.actions}
    bad = draw(st.integers(0, 3)) == 0  # one in four gets a perturbation

    def blob(width: int) -> bytes:
        value = draw(st.integers(0, (1 << width) - 1))
        data = encode_bytes(value)
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
                fm.lpm.value, fm.lpm.prefix_len = encode_bytes(value), plen
            elif kind == "range":
                lo, hi = sorted(draw(st.integers(0, (1 << w) - 1)) for _ in range(2))
                if bad and draw(st.booleans()):
                    lo, hi = hi, lo
                if bad and draw(st.integers(0, 3)) == 0:  # the full range: a wildcard
                    lo, hi = 0, (1 << w) - 1
                fm.range.low, fm.range.high = encode_bytes(lo), encode_bytes(hi)
            else:
                mask = draw(st.integers(0 if bad else 1, (1 << w) - 1))
                value = draw(st.integers(0, (1 << w) - 1))
                if not bad or draw(st.booleans()):
                    value &= mask
                fm.ternary.value, fm.ternary.mask = encode_bytes(value), encode_bytes(mask)
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


ELECTION = p4r.Uint128(high=0, low=7)


def _outcome(decode: Any, pl: Pipeline, te: p4r.TableEntry, needs_action: bool) -> Any:
    """(error type, message) or (table, key, priority, call, read entry)."""
    try:
        d = decode(pl, te, needs_action)
    except SwitchError as err:
        return type(err), str(err)
    return d.info.name, d.key, d.priority, d.call, d.proto


def _check(program: str, te: p4r.TableEntry, needs_action: bool) -> bool:
    """Both decoders agree on ``te``; whether it was accepted."""
    pl = LOADED[program][1]
    request = p4r.TableEntry()
    request.CopyFrom(te)
    got = _outcome(lambda p, e, n: codec.decoder(p).table_entry(e, n), pl, request, needs_action)
    assert got == _outcome(reference.decode_table_entry, pl, te, needs_action)
    assert request == te  # the request is never changed
    return len(got) == 5


@pytest.mark.slow
@SETTINGS
@given(st.data())
def test_codec_agrees_with_the_reference(data: st.DataObject) -> None:
    program = data.draw(st.sampled_from(list(PROGRAMS)))
    te = data.draw(entries(program))
    _check(program, te, needs_action=data.draw(st.booleans()))


def plain_entries() -> list[tuple[str, p4r.TableEntry]]:
    """A canonical entry with an action for every writable table of both programs."""
    out = []
    for program in PROGRAMS:
        info, pl = LOADED[program]
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
                    fm.lpm.value, fm.lpm.prefix_len = encode_bytes(1 << (f.bitwidth - 1)), 1
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


def test_canonical_entries_are_stored_as_sent() -> None:
    """Not vacuous: a canonical entry of every writable table is accepted as
    INSERT/MODIFY with its action and as DELETE without, and stored as it came."""
    taken = 0
    for program, te in plain_entries():
        pl = LOADED[program][1]
        assert _check(program, te, True), te.table_id
        assert codec.decoder(pl).table_entry(te, True).proto is te
        te.ClearField("action")
        assert _check(program, te, False), te.table_id
        assert codec.decoder(pl).table_entry(te, False).proto is te
        taken += 1
    assert taken >= 5


def test_each_kind_of_irregular_entry_agrees_with_the_reference() -> None:
    """Every refusal rule and every non-canonical layout, one at a time, on a plain
    entry of each writable table: the same outcome as the reference; an accepted
    non-canonical entry is stored as its canonical copy, never as sent."""
    seen = set()
    copied = set()
    for program, te in plain_entries():
        info, pl = LOADED[program]
        table = next(t for t in info.tables if t.preamble.id == te.table_id)
        widths = {f.id: f.bitwidth for f in table.match_fields}
        for name, changed in _perturbations(te, widths).items():
            for needs_action in (True, False):
                if _check(program, changed, needs_action):
                    d = codec.decoder(pl).table_entry(changed, needs_action)
                    if d.proto is not changed:
                        copied.add(name)
                        assert d.proto != changed
            seen.add(name)
    assert {
        "full range",
        "zero mask",
        "bits past the prefix",
        "parameters out of order",
        "fields out of order",
        "exact field missing",
    } <= seen
    assert {
        "padded",
        "padded high",
        "padded mask",
        "fields out of order",
        "padded parameter",
        "parameters out of order",
        "const",
    } <= copied


def _first_bytes(fm: p4r.FieldMatch) -> tuple[Any, str]:
    """The sub-message and attribute of a match field's first byte string."""
    which = fm.WhichOneof("field_match_type")
    sub = getattr(fm, which)
    return sub, "low" if which == "range" else "value"


def _perturbations(te: p4r.TableEntry, widths: dict[int, int]) -> dict[str, p4r.TableEntry]:
    """One named change per entry copy; each makes the entry not plain for the kernel.
    ``widths``: field id -> bit width."""
    out: dict[str, p4r.TableEntry] = {}
    width = widths[te.match[0].field_id]

    def change(name: str) -> p4r.TableEntry:
        copy = p4r.TableEntry()
        copy.CopyFrom(te)
        out[name] = copy
        return copy

    sub, attr = _first_bytes(change("padded").match[0])
    setattr(sub, attr, b"\x00" + getattr(sub, attr))
    sub, attr = _first_bytes(change("empty").match[0])
    setattr(sub, attr, b"")
    sub, attr = _first_bytes(change("too wide").match[0])
    setattr(sub, attr, (1 << width).to_bytes((width + 8) // 8, "big"))
    change("unknown field").match[0].field_id = 99
    if te.match[0].WhichOneof("field_match_type") == "exact":
        del change("exact field missing").match[0]
    c = change("field twice")
    c.match.add().CopyFrom(c.match[0])
    if len(te.match) > 1:
        c = change("fields out of order")
        first = p4r.FieldMatch()
        first.CopyFrom(c.match[0])
        del c.match[0]
        c.match.add().CopyFrom(first)
    which = te.match[0].WhichOneof("field_match_type")
    c = change("another kind")
    if which == "exact":
        c.match[0].lpm.value, c.match[0].lpm.prefix_len = b"\x01", 1
    else:
        c.match[0].exact.value = b"\x01"
    if which == "lpm":
        change("prefix 0").match[0].lpm.prefix_len = 0
        change("prefix too long").match[0].lpm.prefix_len = width + 1
        change("bits past the prefix").match[0].lpm.value = b"\x01"
    for fm_index, fm in enumerate(te.match):
        kind = fm.WhichOneof("field_match_type")
        width = widths[fm.field_id]
        if kind == "range":
            r = change("full range").match[fm_index].range
            r.low, r.high = b"\x00", ((1 << width) - 1).to_bytes((width + 7) // 8, "big")
            r = change("empty range").match[fm_index].range
            r.low, r.high = b"\x05", b"\x04"
            if width > 8:
                r = change("padded high").match[fm_index].range
                r.high = b"\x00" + r.high
        if kind == "ternary":
            change("zero mask").match[fm_index].ternary.mask = b"\x00"
            if width > 8:  # room for a leading zero byte
                t = change("padded mask").match[fm_index].ternary
                t.mask = b"\x00" + t.mask
            t = change("value outside the mask").match[fm_index].ternary
            t.value, t.mask = b"\x03", b"\x01"
    change("priority").priority = 0 if te.priority else 5
    change("negative priority").priority = -1
    change("no action").ClearField("action")
    change("unknown action").action.action.action_id = 12345
    change("action profile").action.action_profile_member_id = 1
    params = te.action.action.params
    if params:
        del change("missing parameter").action.action.params[-1]
        c = change("parameter twice")
        c.action.action.params.add().CopyFrom(params[0])
        change("unknown parameter").action.action.params[0].param_id = 99
        change("padded parameter").action.action.params[0].value = b"\x00\x01"
        change("empty parameter").action.action.params[0].value = b""
        change("parameter too wide").action.action.params[0].value = b"\xff" * 9
    if len(params) > 1:
        c = change("parameters out of order")
        first_param = p4r.Action.Param()
        first_param.CopyFrom(c.action.action.params[0])
        del c.action.action.params[0]
        c.action.action.params.add().CopyFrom(first_param)
    change("metadata").metadata = b"m"
    change("controller metadata").controller_metadata = 1
    change("default entry").is_default_action = True
    change("counter data").counter_data.packet_count = 1
    change("idle timeout").idle_timeout_ns = 5
    change("const").is_const = True
    change("no table").table_id = 0
    change("unknown table").table_id = 77
    return out


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str, trailers: Any) -> None:
        super().__init__(code, details)
        self.outcome = (code, details, trailer_errors(trailers))


@dataclass
class Context:
    """What the Write handler uses of a ``grpc.ServicerContext``."""

    trailers: Any = field(default=())

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    def set_trailing_metadata(self, md: Any) -> None:
        self.trailers = md

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details, self.trailers)


def _service(program: str) -> P4RuntimeService:
    info, _pl = LOADED[program]
    svc = P4RuntimeService(0, lambda pl: None)
    svc.pipeline = Pipeline(info, PROGRAMS[program][1].read_bytes(), 0)
    svc.arbiter.update(Stream(), p4r.MasterArbitrationUpdate(device_id=0, election_id=ELECTION))
    return svc


def _write(svc: P4RuntimeService, data: bytes) -> Any:
    try:
        svc.Write(_parse_write(data), Context())  # type: ignore[arg-type]
    except Aborted as a:
        return a.outcome
    return "OK"


def _contents(svc: P4RuntimeService) -> dict[str, Any]:
    """Every table's entries in read order: key, priority, action name, args, read entry."""
    pl = svc.pipeline
    assert pl is not None
    names = {}
    for info in pl.tables.values():
        for aid in info.actions:
            names[id(info.runtime.action_fn(pl.actions[aid].name))] = pl.actions[aid].name
    out: dict[str, Any] = {}
    for info in pl.tables.values():
        rows = []  # in read order
        for e in info.table:
            fn, args = e.call
            rows.append((e.key, e.priority, names.get(id(fn), "?"), args, e.payload))
        out[info.name] = rows
    return out


@st.composite
def requests(draw: st.DrawFn, program: str) -> list[bytes]:
    """1-3 serialized WriteRequests over a small pool of entries."""
    pool = draw(st.lists(entries(program), min_size=1, max_size=5))
    out = []
    for _ in range(draw(st.integers(1, 3))):
        req = p4r.WriteRequest(device_id=0, election_id=ELECTION)
        for _ in range(draw(st.integers(1, 8))):
            u = req.updates.add()
            u.type = draw(
                st.sampled_from([p4r.Update.INSERT] * 4 + [p4r.Update.MODIFY, p4r.Update.DELETE])
            )
            what = draw(st.integers(0, 19))
            if what == 0:
                u.entity.counter_entry.counter_id = 1
            elif what == 1:
                u.type = p4r.Update.UNSPECIFIED
                u.entity.table_entry.CopyFrom(draw(st.sampled_from(pool)))
            else:
                te = draw(st.sampled_from(pool))
                u.entity.table_entry.CopyFrom(te)
                if u.type == p4r.Update.DELETE and draw(st.booleans()):
                    u.entity.table_entry.ClearField("action")
        data = req.SerializeToString()
        if draw(st.integers(0, 9)) == 0 and data:  # damage the bytes
            at = draw(st.integers(0, len(data) - 1))
            if draw(st.booleans()):
                data = data[:at]
            else:
                data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
        out.append(data)
    return out


@contextmanager
def _reference_decoder() -> Iterator[None]:
    """Services write through the reference decoder meanwhile."""

    class Reference(codec.Decoder):
        def table_entry(self, te: p4r.TableEntry, needs_action: bool) -> Any:
            return reference.decode_table_entry(self.pipeline, te, needs_action)

    with mock.patch.object(codec, "decoder", Reference):
        yield


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_services_end_like_the_reference(data: st.DataObject) -> None:
    program = data.draw(st.sampled_from(list(PROGRAMS)))
    ours, ref = _service(program), _service(program)
    for req in data.draw(requests(program)):
        with _reference_decoder():
            expected = _write(ref, req)
        assert _write(ours, req) == expected
    assert _contents(ours) == _contents(ref)

"""The compiled write path (numba kernel + columnar apply) against the upb path.

Two services of the same program, one with the compiled decoder and one without
(``compiled=False``: every request parsed with upb, then ``FastWriter`` and the
codec), get the same random WriteRequests: a few random entries of both programs
(valid, or perturbed as in test_ssw_fast: padded/empty byte strings, fields out of
order or twice, wrong kinds, unknown ids, bad priorities and parameters, direct
resources, default entries), written in random order as INSERT/MODIFY/DELETE,
so that duplicates, missing entries and refusals of every kind occur; some updates
are counter entries or UNSPECIFIED, some requests have their bytes cut or
flipped. Each request must end the same way on both (OK, or the same gRPC code,
message and per-update ``p4.v1.Error`` list), and afterwards both must hold the
same entries (key, priority, action, arguments, and the entry a read returns).
Kernel-level tests check that plain entries are taken and what the kernel takes
agrees with ``FastWriter.decode``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from finsy.proto import p4r
from finsy.proto import rpc_status as status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from softswitch import p4rt_batch
from softswitch import p4rt_layout as k
from softswitch.arbitration import Stream
from softswitch.bm.pipeline import Pipeline
from softswitch.p4rt_fast import FastWriter
from softswitch.p4rt_server import P4RuntimeService
from tests.softswitch.test_ssw_fast import LOADED, PROGRAMS, entries, plain_entries

DECODE = p4rt_batch.load_kernel()
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
ELECTION = p4r.Uint128(high=0, low=7)


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str, trailers: Any) -> None:
        super().__init__(code, details)
        self.outcome = (code, details, _errors(trailers))


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


def _errors(trailers: Any) -> list[tuple[int, str]]:
    for key, value in trailers:
        if key == "grpc-status-details-bin":
            out = []
            for d in status_pb2.Status.FromString(value).details:
                e = p4r.Error()
                d.Unpack(e)
                out.append((e.canonical_code, e.message))
            return out
    return []


def _service(program: str, compiled: bool) -> P4RuntimeService:
    info, _pl, _w = LOADED[program]
    svc = P4RuntimeService(0, lambda pl: None, compiled=compiled)
    svc.pipeline = Pipeline(info, PROGRAMS[program][1].read_bytes(), 0)
    svc.arbiter.update(Stream(), p4r.MasterArbitrationUpdate(device_id=0, election_id=ELECTION))
    return svc


def _write(svc: P4RuntimeService, data: bytes) -> Any:
    try:
        assert svc.write_raw(data, Context()) == b""  # type: ignore[arg-type]
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
            names[id(pl.action_fn(info, pl.actions[aid].name))] = pl.actions[aid].name
    out: dict[str, Any] = {}
    for info in pl.tables.values():
        rows = []  # in read order
        for e in info.table:
            fn, args = e.call
            stored = e.payload
            if not isinstance(stored, p4r.TableEntry):
                stored = p4r.TableEntry.FromString(stored)
            rows.append((e.key, e.priority, names.get(id(fn), "?"), args, stored))
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


@pytest.mark.skipif(DECODE is None, reason="numba kernel unavailable")
@SETTINGS
@given(st.data())
def test_compiled_path_ends_like_the_upb_path(data: st.DataObject) -> None:
    program = data.draw(st.sampled_from(list(PROGRAMS)))
    fast, slow = _service(program, True), _service(program, False)
    for req in data.draw(requests(program)):
        assert _write(fast, req) == _write(slow, req)
    assert fast._kernel is not None  # the compiled path was taken
    assert _contents(fast) == _contents(slow)


def _rows(program: str, te: p4r.TableEntry, kind: int) -> tuple[Any, Any, bytes]:
    _info, _pl, writer = LOADED[program]
    kt = p4rt_batch.KernelTables(writer)
    req = p4r.WriteRequest(device_id=0)
    req.updates.add(type=kind).entity.table_entry.CopyFrom(te)  # type: ignore[arg-type]
    data = req.SerializeToString()
    assert DECODE is not None
    decoded = kt.decode(DECODE, data)
    assert decoded is not None
    return kt, decoded[1], data


@pytest.mark.skipif(DECODE is None, reason="numba kernel unavailable")
@SETTINGS
@given(st.data())
def test_kernel_takes_only_what_the_fast_decoder_takes(data: st.DataObject) -> None:
    """A plain row carries FastWriter.decode's key, priority and call, and the entry."""
    program = data.draw(st.sampled_from(list(PROGRAMS)))
    te = data.draw(entries(program))
    kind = data.draw(st.sampled_from([p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE]))
    kt, rows, raw = _rows(program, te, kind)
    if rows[0, k.STATUS] != k.PLAIN:
        return
    writer: FastWriter = LOADED[program][2]
    request = p4r.TableEntry()
    request.CopyFrom(te)
    fast = writer.decode(request, kind != p4r.Update.DELETE)
    assert fast is not None, "the kernel took an entry the fast decoder refuses"
    (run,) = kt.runs(rows)
    keys, prios, calls, payloads = kt.columns(raw, rows, run)
    spec, key, priority, call = fast
    assert kt.recipes[run.table].spec is spec
    assert (keys[0], prios[0]) == (key, priority)
    assert (calls[0] if calls else None) == call
    assert p4r.TableEntry.FromString(payloads[0]) == te


@pytest.mark.skipif(DECODE is None, reason="numba kernel unavailable")
def test_kernel_takes_the_plain_entries() -> None:
    """Not vacuous: canonical entries of every writable table are plain for the kernel,
    as INSERT/MODIFY with their action and as DELETE without."""
    taken = 0
    for program, te in plain_entries():
        for kind in (p4r.Update.INSERT, p4r.Update.MODIFY):
            assert _rows(program, te, kind)[1][0, k.STATUS] == k.PLAIN, te
        assert _rows(program, te, p4r.Update.DELETE)[1][0, k.STATUS] == k.OTHER
        te.ClearField("action")
        assert _rows(program, te, p4r.Update.DELETE)[1][0, k.STATUS] == k.PLAIN, te
        taken += 1
    assert taken >= 5


@pytest.mark.skipif(DECODE is None, reason="numba kernel unavailable")
def test_request_header_and_fallbacks() -> None:
    """Header fields as upb reads them; a role name or unknown field: the upb path."""
    _info, _pl, writer = LOADED["echelon"]
    kt = p4rt_batch.KernelTables(writer)
    assert DECODE is not None
    req = p4r.WriteRequest(device_id=2**64 - 1, atomicity=p4r.WriteRequest.ROLLBACK_ON_ERROR)
    req.election_id.high, req.election_id.low = 2**64 - 2, 3
    decoded = kt.decode(DECODE, req.SerializeToString())
    assert decoded is not None
    hdr, rows = decoded
    assert rows.shape[0] == 0
    mask = 2**64 - 1
    assert int(hdr[k.H_DEVICE]) & mask == 2**64 - 1
    assert (int(hdr[k.H_ELECTION_HIGH]) & mask, int(hdr[k.H_ELECTION_LOW])) == (2**64 - 2, 3)
    assert hdr[k.H_ATOMICITY] == p4r.WriteRequest.ROLLBACK_ON_ERROR
    for other in (
        p4r.WriteRequest(role="r1").SerializeToString(),
        b"\x08\x00" + b"\x38\x01",  # field 7: unknown
        b"\x22\x05\x08\x01",  # an update longer than the request
        b"\x28" + b"\x80" * 4 + b"\x10",  # atomicity 2^32: upb truncates an int32
    ):
        assert kt.decode(DECODE, other) is None, other


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
        if kind == "ternary":
            change("zero mask").match[fm_index].ternary.mask = b"\x00"
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


@pytest.mark.skipif(DECODE is None, reason="numba kernel unavailable")
def test_kernel_leaves_each_kind_of_irregular_entry_to_the_upb_path() -> None:
    """Every refusal rule and every non-canonical layout, one at a time, on a plain
    entry of each writable table: the kernel marks the update OTHER."""
    seen = set()
    for program, te in plain_entries():
        info = LOADED[program][0]
        table = next(t for t in info.tables if t.preamble.id == te.table_id)
        widths = {f.id: f.bitwidth for f in table.match_fields}
        for name, changed in _perturbations(te, widths).items():
            rows = _rows(program, changed, p4r.Update.INSERT)[1]
            assert rows[0, k.STATUS] == k.OTHER, (table.preamble.name, name)
            seen.add(name)
    assert {
        "full range",
        "zero mask",
        "bits past the prefix",
        "parameters out of order",
        "fields out of order",
        "exact field missing",
    } <= seen

"""P4Runtime Write conformance: status codes per update, batches, defaults, counters."""

from __future__ import annotations

import grpc
import pytest
from finsy.proto import p4r
from finsy.proto import rpc_code as code_pb2

from echelon import constants as C
from tests.softswitch.conftest import ServerHandle
from tests.softswitch.helpers import DELETE, INSERT, MODIFY, Client, Names, write_errors

LPM = "EchelonIngress.ipv4_lpm"
FWD = "EchelonIngress.ipv4_forward"
DP = "EchelonIngress.deadline_prio"
CLS = "EchelonIngress.echelon_classify"


def route(names: Names, last: int, port: int = 1, plen: int = 32) -> p4r.TableEntry:
    return names.entry(
        LPM, {"hdr.ipv4.dstAddr": ((10 << 24) | last, plen)}, FWD, {"dstAddr": 0xAB, "port": port}
    )


def single_error(c: Client, kind: int, entity: object) -> tuple[int, str]:
    with pytest.raises(grpc.RpcError) as exc:
        c.send_write((kind, entity))
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    errors = write_errors(exc.value)
    assert len(errors) == 1
    return errors[0]


def test_no_pipeline_is_failed_precondition(client: Client, names: Names) -> None:
    with pytest.raises(grpc.RpcError) as exc:
        client.send_write((INSERT, route(names, 1)))
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_insert_modify_delete_and_their_errors(primed: Client, names: Names) -> None:
    c = primed
    c.send_write((INSERT, route(names, 1)))
    code, msg = single_error(c, INSERT, route(names, 1))
    assert code == code_pb2.ALREADY_EXISTS and LPM in msg
    c.send_write((MODIFY, route(names, 1, port=3)))
    (got,) = c.read(names.entry(LPM, {"hdr.ipv4.dstAddr": ((10 << 24) | 1, 32)}))
    assert got.table_entry.action.action.params[1].value == b"\x03"
    assert single_error(c, MODIFY, route(names, 2))[0] == code_pb2.NOT_FOUND
    c.send_write((DELETE, names.entry(LPM, {"hdr.ipv4.dstAddr": ((10 << 24) | 1, 32)})))
    assert single_error(c, DELETE, route(names, 1))[0] == code_pb2.NOT_FOUND


def test_continue_on_error_reports_every_update(primed: Client, names: Names) -> None:
    bad = route(names, 5)
    bad.table_id = 12345
    with pytest.raises(grpc.RpcError) as exc:
        primed.send_write((INSERT, route(names, 4)), (INSERT, bad), (INSERT, route(names, 6)))
    codes = [code for code, _ in write_errors(exc.value)]
    assert codes == [code_pb2.OK, code_pb2.INVALID_ARGUMENT, code_pb2.OK]
    assert len(primed.read(p4r.TableEntry(table_id=names.table_id(LPM)))) == 2


def _mutations(names: Names) -> list[tuple[str, p4r.TableEntry, str]]:
    cases: list[tuple[str, p4r.TableEntry, str]] = []
    te = route(names, 1)
    te.match[0].field_id = 9
    cases.append(("unknown field", te, "field id 9"))
    te = route(names, 1)
    te.action.action.action_id = names.action_id("EchelonIngress.set_deadline_prio")
    cases.append(("action not in table", te, "not an action of this table"))
    te = route(names, 1)
    te.action.action.params[1].value = b"\x02\x00"  # 512 > 9 bits
    cases.append(("param exceeds width", te, "port"))
    te = route(names, 1)
    te.action.action.params[0].value = b"\x00" * 7  # 7 bytes for 48 bits
    cases.append(("param too long", te, "too long"))
    te = route(names, 1)
    te.action.action.params[0].value = b""
    cases.append(("empty bytes", te, "empty"))
    te = route(names, 1)
    del te.action.action.params[1]
    cases.append(("missing param", te, "missing port"))
    cases.append(("lpm host bits", route(names, 1, plen=24), "beyond prefix_len"))
    te = route(names, 0)
    te.match[0].lpm.prefix_len = 0
    cases.append(("lpm zero prefix", te, "prefix_len 0"))
    te = route(names, 1)
    te.priority = 5
    cases.append(("priority on lpm table", te, "priority"))
    te = names.entry(
        DP,
        {"meta.class_id": 1, "hdr.echelon.deadline_us": (0, 9)},
        "EchelonIngress.set_deadline_prio",
        {"prio": 1},
    )
    cases.append(("range without priority", te, "priority"))
    te = names.entry(
        DP,
        {"meta.class_id": 1, "hdr.echelon.deadline_us": (9, 3)},
        "EchelonIngress.set_deadline_prio",
        {"prio": 1},
        priority=1,
    )
    cases.append(("range low > high", te, "low 9 > high 3"))
    te = names.entry(
        CLS, {"hdr.ipv4.srcAddr": 1}, "EchelonIngress.set_echelon", {"class_id": 1, "prio": 1}
    )
    cases.append(("exact field missing", te, "exact field missing"))
    te = route(names, 1)
    te.match[0].ClearField("lpm")
    te.match[0].exact.value = b"\x01"
    cases.append(("wrong match kind", te, "lpm field"))
    te = route(names, 1)
    te.ClearField("action")
    cases.append(("no action", te, "needs an action"))
    te = route(names, 1)
    te.action.action_profile_member_id = 3
    cases.append(("profile member", te, "action profile"))
    te = route(names, 1)
    te.table_id = 99
    cases.append(("unknown table", te, "unknown table id 99"))
    return cases


def test_invalid_arguments_named(primed: Client, names: Names) -> None:
    for label, te, needle in _mutations(names):
        code, msg = single_error(primed, INSERT, te)
        assert code == code_pb2.INVALID_ARGUMENT, label
        assert needle in msg, (label, msg)
    assert primed.read(p4r.TableEntry()) == []


def test_non_canonical_bytes_accepted_and_read_canonical(primed: Client, names: Names) -> None:
    te = route(names, 7)  # helper pads every value to full byte width
    assert te.action.action.params[0].value == b"\x00\x00\x00\x00\x00\xab"
    primed.send_write((INSERT, te))
    canon = names.entry(LPM, {})
    fm = canon.match.add(field_id=1)
    fm.lpm.value, fm.lpm.prefix_len = bytes([10, 0, 0, 7]), 32
    (got,) = primed.read(canon)
    assert got.table_entry.action.action.params[0].value == b"\xab"
    assert got.table_entry.action.action.params[1].value == b"\x01"


def test_table_full_is_resource_exhausted(client: Client, names: Names) -> None:
    info = names.p4info
    small = type(info)()
    small.CopyFrom(info)
    next(t for t in small.tables if t.preamble.name == LPM).size = 2
    client.push_pipeline(small)
    client.send_write((INSERT, route(names, 1)), (INSERT, route(names, 2)))
    code, msg = single_error(client, INSERT, route(names, 3))
    assert code == code_pb2.RESOURCE_EXHAUSTED and "2 entries" in msg


def test_wrong_device_is_not_found(primed: Client, names: Names) -> None:
    with pytest.raises(grpc.RpcError) as exc:
        primed.send_write((INSERT, route(names, 1)), device_id=3)
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND


def test_rollback_atomicity_unimplemented(primed: Client, names: Names) -> None:
    req = p4r.WriteRequest(device_id=0, atomicity=p4r.WriteRequest.ROLLBACK_ON_ERROR)
    req.election_id.low = 10
    req.updates.add(type=INSERT).entity.table_entry.CopyFrom(route(names, 1))
    with pytest.raises(grpc.RpcError) as exc:
        primed.stub.Write(req)
    assert exc.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_default_action_modify_read_reset(primed: Client, names: Names) -> None:
    tid = names.table_id(LPM)
    (initial,) = primed.read(p4r.TableEntry(table_id=tid, is_default_action=True))
    assert initial.table_entry.action.action.action_id == names.action_id("EchelonIngress.drop")
    d = names.entry(LPM, {}, FWD, {"dstAddr": 1, "port": 2})
    d.is_default_action = True
    primed.send_write((MODIFY, d))
    (now,) = primed.read(p4r.TableEntry(table_id=tid, is_default_action=True))
    assert now.table_entry.action.action.action_id == names.action_id(FWD)
    assert single_error(primed, INSERT, d)[0] == code_pb2.INVALID_ARGUMENT
    reset = p4r.TableEntry(table_id=tid, is_default_action=True)
    primed.send_write((MODIFY, reset))
    (back,) = primed.read(p4r.TableEntry(table_id=tid, is_default_action=True))
    assert back.table_entry.action.action.action_id == names.action_id("EchelonIngress.drop")


def test_counter_modify_sets_and_resets(primed: Client, names: Names, server: ServerHandle) -> None:
    cid = names.counter_id("EchelonIngress.unprioritized_pkts")
    ce = p4r.CounterEntry(counter_id=cid)
    ce.index.index = 3
    ce.data.packet_count, ce.data.byte_count = 7, 700
    primed.send_write((MODIFY, ce))
    (got,) = primed.read(ce)
    assert (got.counter_entry.data.packet_count, got.counter_entry.data.byte_count) == (7, 700)
    primed.send_write((MODIFY, p4r.CounterEntry(counter_id=cid)))  # no index, no data: reset all
    assert all(
        e.counter_entry.data.packet_count == 0
        for e in primed.read(p4r.CounterEntry(counter_id=cid))
    )
    assert single_error(primed, INSERT, ce)[0] == code_pb2.INVALID_ARGUMENT
    ce.index.index = C.UNPRIO_COUNT  # one past the last slot
    assert single_error(primed, MODIFY, ce)[0] == code_pb2.INVALID_ARGUMENT

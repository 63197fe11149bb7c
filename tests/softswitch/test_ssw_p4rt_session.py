"""P4Runtime conformance: pipeline config actions, reads with wildcards, arbitration."""

from __future__ import annotations

import json

import grpc
import pytest
from finsy.proto import p4r
from finsy.proto import rpc_code as code_pb2

from echelon import constants as C
from tests.softswitch.conftest import ServerHandle
from tests.softswitch.helpers import INSERT, Client, Names, load_config

CFG = p4r.SetForwardingPipelineConfigRequest
GET = p4r.GetForwardingPipelineConfigRequest
LPM = "EchelonIngress.ipv4_lpm"


def route(names: Names, last: int) -> p4r.TableEntry:
    return names.entry(
        LPM,
        {"hdr.ipv4.dstAddr": ((10 << 24) | last, 32)},
        "EchelonIngress.ipv4_forward",
        {"dstAddr": 1, "port": 1},
    )


def get(c: Client, rt: int) -> p4r.ForwardingPipelineConfig:
    return c.stub.GetForwardingPipelineConfig(GET(device_id=0, response_type=rt)).config


def test_capabilities(client: Client) -> None:
    assert client.stub.Capabilities(p4r.CapabilitiesRequest()).p4runtime_api_version == "1.4.1"


def test_undecodable_write_is_invalid_argument_over_grpc(server: ServerHandle) -> None:
    """Write's own request deserializer is the one the server registers: bytes that are
    not a WriteRequest answer INVALID_ARGUMENT naming them (gRPC's would be INTERNAL),
    and every other RPC is still served."""
    with grpc.insecure_channel(server.addr) as ch:
        write = ch.unary_unary("/p4.v1.P4Runtime/Write")
        with pytest.raises(grpc.RpcError) as exc:
            write(b"\xff\xff\xff", timeout=10)
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "request: not a p4.v1.WriteRequest" in str(exc.value.details())
        caps = ch.unary_unary(
            "/p4.v1.P4Runtime/Capabilities",
            request_serializer=p4r.CapabilitiesRequest.SerializeToString,
            response_deserializer=p4r.CapabilitiesResponse.FromString,
        )
        assert caps(p4r.CapabilitiesRequest(), timeout=10).p4runtime_api_version == "1.4.1"


def test_config_actions(client: Client, names: Names, server: ServerHandle) -> None:
    with pytest.raises(grpc.RpcError) as exc:
        get(client, GET.ALL)
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    client.push_pipeline(names.p4info, CFG.VERIFY)
    assert server.committed == []
    with pytest.raises(grpc.RpcError) as exc:
        client.push_pipeline(names.p4info, CFG.COMMIT)
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    client.push_pipeline(names.p4info, CFG.VERIFY_AND_SAVE, cookie=42)
    assert server.committed == []
    client.push_pipeline(names.p4info, CFG.COMMIT)
    assert len(server.committed) == 1
    full = get(client, GET.ALL)
    assert full.p4info == names.p4info and full.p4_device_config == load_config()
    assert full.cookie.cookie == 42
    only = get(client, GET.COOKIE_ONLY)
    assert only.cookie.cookie == 42 and not only.HasField("p4info") and not only.p4_device_config
    p4i = get(client, GET.P4INFO_AND_COOKIE)
    assert p4i.HasField("p4info") and not p4i.p4_device_config
    dev = get(client, GET.DEVICE_CONFIG_AND_COOKIE)
    assert dev.p4_device_config == load_config() and not dev.HasField("p4info")


def test_reconcile_keeps_state_commit_resets(client: Client, names: Names) -> None:
    client.push_pipeline(names.p4info)
    client.send_write((INSERT, route(names, 1)))
    client.push_pipeline(names.p4info, CFG.RECONCILE_AND_COMMIT, cookie=5)
    assert len(client.read(p4r.TableEntry())) == 1
    assert get(client, GET.COOKIE_ONLY).cookie.cookie == 5
    client.push_pipeline(names.p4info, CFG.VERIFY_AND_COMMIT)
    assert client.read(p4r.TableEntry()) == []


def test_reconcile_with_another_json_starts_fresh(client: Client, names: Names) -> None:
    client.push_pipeline(names.p4info)
    client.send_write((INSERT, route(names, 1)))
    other = json.dumps(json.loads(load_config()), indent=1).encode()  # same program, new bytes
    client.push_pipeline(names.p4info, CFG.RECONCILE_AND_COMMIT, device_config=other)
    assert client.read(p4r.TableEntry()) == []
    assert get(client, GET.DEVICE_CONFIG_AND_COOKIE).p4_device_config == other


def test_unsupported_json_refused_over_grpc_naming_it(client: Client, names: Names) -> None:
    program = json.loads(load_config())
    program["calculations"][0]["algo"] = "crc32"
    with pytest.raises(grpc.RpcError) as exc:
        client.push_pipeline(names.p4info, device_config=json.dumps(program).encode())
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "crc32" in (exc.value.details() or "")


def test_bad_p4info_invalid_argument_named(client: Client, names: Names) -> None:
    info = type(names.p4info)()
    info.CopyFrom(names.p4info)
    info.tables[0].preamble.name = "EchelonIngress.nonesuch"
    with pytest.raises(grpc.RpcError) as exc:
        client.push_pipeline(info)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "EchelonIngress.ipv4_lpm" in (exc.value.details() or "")  # now missing


def test_read_wildcards(primed: Client, names: Names) -> None:
    for i in range(1, 4):
        primed.send_write((INSERT, route(names, i)))
    primed.send_write(
        (
            INSERT,
            names.entry("EchelonIngress.echelon_ids", {"hdr.echelon.echelon_id": 9}, "NoAction"),
        )
    )
    assert len(primed.read(p4r.TableEntry())) == 4  # table_id 0: every table
    assert len(primed.read(p4r.TableEntry(table_id=names.table_id(LPM)))) == 3
    one = primed.read(names.entry(LPM, {"hdr.ipv4.dstAddr": ((10 << 24) | 2, 32)}))
    assert len(one) == 1 and one[0].table_entry.match[0].lpm.value == bytes([10, 0, 0, 2])
    assert primed.read(names.entry(LPM, {"hdr.ipv4.dstAddr": ((10 << 24) | 9, 32)})) == []
    defaults = primed.read(p4r.TableEntry(is_default_action=True))
    assert len(defaults) == 4 and all(e.table_entry.is_default_action for e in defaults)
    counters = primed.read(p4r.CounterEntry())
    assert len(counters) == C.ECHELON_CLASSES + C.UNPRIO_COUNT
    cid = names.counter_id("EchelonIngress.echelon_pkts")
    assert len(primed.read(p4r.CounterEntry(counter_id=cid))) == 1024
    ce = p4r.CounterEntry(counter_id=cid)
    ce.index.index = 1023
    (cell,) = primed.read(ce)
    assert cell.counter_entry.index.index == 1023
    with pytest.raises(grpc.RpcError) as exc:
        primed.read(p4r.TableEntry(table_id=77))
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as exc:
        primed.read(p4r.Entity(register_entry=p4r.RegisterEntry(register_id=77)))
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_arbitration_primary_backup_and_failover(server: ServerHandle, names: Names) -> None:
    a = Client(server.addr, election=5)
    b = Client(server.addr, election=9)
    try:
        assert a.arbitrate().arbitration.status.code == code_pb2.OK
        mb = b.arbitrate()
        assert mb.arbitration.status.code == code_pb2.OK
        assert mb.arbitration.election_id.low == 9
        ma = a.next_message()  # a is told it lost
        assert ma.arbitration.status.code == code_pb2.ALREADY_EXISTS
        assert ma.arbitration.election_id.low == 9
        with pytest.raises(grpc.RpcError) as exc:
            a.push_pipeline(names.p4info)
        assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
        b.push_pipeline(names.p4info)
        with pytest.raises(grpc.RpcError) as exc:
            a.send_write((INSERT, route(names, 1)))
        assert exc.value.code() == grpc.StatusCode.PERMISSION_DENIED
        b.send_write((INSERT, route(names, 1)))
        b.close()
        back = a.next_message()  # b left: a is primary again
        assert back.arbitration.status.code == code_pb2.OK
        a.send_write((INSERT, route(names, 2)))
    finally:
        a.close()
        b.close()


def test_arbitration_errors(server: ServerHandle) -> None:
    a = Client(server.addr, election=5)
    dup = Client(server.addr, election=5)
    wrong = Client(server.addr, election=6)
    try:
        assert a.arbitrate().arbitration.status.code == code_pb2.OK
        err = dup.arbitrate()
        assert isinstance(err, grpc.RpcError)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        err = wrong.arbitrate(device_id=4)
        assert isinstance(err, grpc.RpcError) and err.code() == grpc.StatusCode.NOT_FOUND
    finally:
        for c in (a, dup, wrong):
            c.close()


def test_roles_are_independent(server: ServerHandle) -> None:
    a = Client(server.addr, election=5, role="")
    r = Client(server.addr, election=1, role="other")
    try:
        assert a.arbitrate().arbitration.status.code == code_pb2.OK
        msg = r.arbitrate()
        assert msg.arbitration.status.code == code_pb2.OK
        assert msg.arbitration.role.name == "other"
    finally:
        a.close()
        r.close()


def test_packet_out_unimplemented(primed: Client) -> None:
    req = p4r.StreamMessageRequest()
    req.packet.payload = b"\x00" * 20
    primed.send_stream(req)
    msg = primed.next_message()
    assert msg.error.canonical_code == code_pb2.UNIMPLEMENTED
    assert msg.error.packet_out.packet_out.payload == req.packet.payload

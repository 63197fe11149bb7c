"""Robustness: random and malformed frames and P4Runtime requests, for a bounded time."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from finsy.proto import p4r
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from echelon.wire import Echelon
from softswitch.bm.pipeline import Pipeline
from softswitch.p4rt_server import P4RuntimeService, make_server
from tests.softswitch.conftest import ServerHandle
from tests.softswitch.helpers import Client, Names, load_config, load_p4info

PIPELINE = Pipeline(load_p4info(), load_config(), 0)
NAMES = Names(load_p4info())
#: Bytes the program may change: MACs, DSCP/ECN byte, TTL, IPv4 checksum.
MUTABLE = set(range(12)) | {15, 22, 24, 25}
VALID = bytes(
    Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(dport=0xEC00) / Echelon(echelon_id=1)
)
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
FEW = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def _route_all() -> None:
    # Route everything (0.0.0.0/1 and 128.0.0.0/1) so most frames reach egress.
    from softswitch import p4rt_codec as codec

    for first in (0, 128):
        te = NAMES.entry(
            "EchelonIngress.ipv4_lpm",
            {"hdr.ipv4.dstAddr": (first << 24, 1)},
            "EchelonIngress.ipv4_forward",
            {"dstAddr": 5, "port": 2},
        )
        d = codec.decoder(PIPELINE).table_entry(te, needs_action=True)
        assert d.call is not None
        d.info.table.insert(d.key, d.priority, d.call, d.proto)


_route_all()

frames = st.one_of(
    st.binary(max_size=120),
    st.tuples(
        st.integers(0, len(VALID)),
        st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), max_size=6),
    ).map(lambda t: _mutate(t[0], t[1])),
)


def _mutate(cut: int, flips: list[tuple[int, int]]) -> bytes:
    data = bytearray(VALID)
    for pos, val in flips:
        data[pos] = val
    return bytes(data[:cut])


@FUZZ
@given(frames)
def test_pipeline_never_crashes_and_only_touches_mutable_bytes(frame: bytes) -> None:
    out = PIPELINE.process(frame, 1)
    if out is None:
        return
    port, prio, data = out
    assert port == 2 and 0 <= prio <= 7
    assert len(data) == len(frame)
    changed = {i for i, (a, b) in enumerate(zip(frame, data, strict=True)) if a != b}
    assert changed <= MUTABLE


def _table_entries() -> st.SearchStrategy[p4r.TableEntry]:
    ids = [NAMES.table_id(n) for n in NAMES.tables] + [0, 1, 2**32 - 1]
    aids = [NAMES.action_id(n) for n in NAMES.actions] + [0, 7]
    blobs = st.binary(max_size=9)

    @st.composite
    def build(draw: st.DrawFn) -> p4r.TableEntry:
        te = p4r.TableEntry(
            table_id=draw(st.sampled_from(ids)),
            priority=draw(st.integers(-(2**31), 2**31 - 1)),
            is_default_action=draw(st.booleans()),
        )
        for _ in range(draw(st.integers(0, 3))):
            fm = te.match.add(field_id=draw(st.integers(0, 4)))
            kind = draw(st.sampled_from(["exact", "lpm", "range", "ternary", "optional", None]))
            if kind == "exact":
                fm.exact.value = draw(blobs)
            elif kind == "lpm":
                fm.lpm.value, fm.lpm.prefix_len = draw(blobs), draw(st.integers(-1, 40))
            elif kind == "range":
                fm.range.low, fm.range.high = draw(blobs), draw(blobs)
            elif kind == "ternary":
                fm.ternary.value, fm.ternary.mask = draw(blobs), draw(blobs)
            elif kind == "optional":
                fm.optional.value = draw(blobs)
        if draw(st.booleans()):
            a = te.action.action
            a.action_id = draw(st.sampled_from(aids))
            for _ in range(draw(st.integers(0, 3))):
                a.params.add(param_id=draw(st.integers(0, 3)), value=draw(blobs))
        return te

    return build()


ALLOWED = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INVALID_ARGUMENT}


@pytest.fixture(scope="module")
def server_and_client() -> Iterator[tuple[ServerHandle, Client]]:
    """One server and primary client for all examples (hypothesis reuses them)."""
    service = P4RuntimeService(0, lambda _pl: None)
    srv, port = make_server(service, "127.0.0.1:0")
    srv.start()
    c = Client(f"127.0.0.1:{port}", election=10)
    try:
        assert c.arbitrate().arbitration.status.code == 0
        c.push_pipeline(NAMES.p4info)
        yield ServerHandle(service, f"127.0.0.1:{port}"), c
    finally:
        c.close()
        srv.stop(grace=0).wait(5)


@pytest.mark.slow
@FUZZ
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2, 3]), _table_entries()), min_size=1, max_size=4))
def test_server_answers_every_random_write(
    server_and_client: tuple[ServerHandle, Client], updates: list[tuple[int, p4r.TableEntry]]
) -> None:
    _server, c = server_and_client
    try:
        c.send_write(*updates)
    except grpc.RpcError as err:
        assert err.code() in ALLOWED, err
    # and it still answers reads consistently
    assert all(e.HasField("table_entry") for e in c.read(p4r.TableEntry()))


@FEW
@given(_table_entries(), st.integers(0, 2**32 - 1), st.booleans())
def test_server_answers_every_random_read(
    server_and_client: tuple[ServerHandle, Client], te: p4r.TableEntry, cid: int, with_index: bool
) -> None:
    _server, c = server_and_client
    ce = p4r.CounterEntry(counter_id=cid)
    if with_index:
        ce.index.index = cid % 2000 - 10
    for ent in (te, ce):
        try:
            c.read(ent)
        except grpc.RpcError as err:
            assert err.code() in {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND}


@FUZZ
@given(st.binary(max_size=200))
def test_garbage_bytes_get_an_error_status(
    server_and_client: tuple[ServerHandle, Client], blob: bytes
) -> None:
    _server, c = server_and_client
    raw = c.channel.unary_unary(
        "/p4.v1.P4Runtime/Write", request_serializer=lambda b: b, response_deserializer=lambda b: b
    )
    try:
        raw(blob, timeout=10)
    except grpc.RpcError as err:
        assert err.code() != grpc.StatusCode.DEADLINE_EXCEEDED
    assert c.stub.Capabilities(p4r.CapabilitiesRequest(), timeout=10).p4runtime_api_version


@st.composite
def _stream_messages(draw: st.DrawFn) -> p4r.StreamMessageRequest:
    req = p4r.StreamMessageRequest()
    kind = draw(st.sampled_from(["arbitration", "packet"]))
    if kind == "arbitration":
        arb = req.arbitration
        arb.device_id = draw(st.sampled_from([0, 0, 1, 2**64 - 1]))
        if draw(st.booleans()):
            arb.election_id.high = draw(st.integers(0, 2**64 - 1))
            arb.election_id.low = draw(st.integers(0, 2**64 - 1))
        arb.role.name = draw(st.sampled_from(["", "", "r1", "\x00weird"]))
    else:
        req.packet.payload = draw(st.binary(max_size=64))
    return req


@pytest.mark.slow
@FEW
@given(st.lists(_stream_messages(), min_size=1, max_size=3))
def test_random_stream_messages_are_answered(
    server_and_client: tuple[ServerHandle, Client], msgs: list[p4r.StreamMessageRequest]
) -> None:
    server, primary = server_and_client
    c = Client(server.addr, election=None)
    try:
        for m in msgs:
            c.send_stream(m)
            reply = c.next_message(timeout=10)  # an answer or the stream's error, never silence
            if isinstance(reply, grpc.RpcError):
                assert reply.code() in {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND}
                break
            assert reply.HasField("arbitration") or reply.HasField("error")
    finally:
        c.close()
    # The fixture's primary keeps its role whatever the fuzzed streams claimed, unless one
    # of them won with a higher election id; either way the server still answers.
    assert primary.stub.Capabilities(p4r.CapabilitiesRequest(), timeout=10).p4runtime_api_version

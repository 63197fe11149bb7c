"""SwitchConnection against an in-process fake P4Runtime server (real gRPC, no switch)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from controlplane.p4rt import (
    P4RuntimeConnectionError,
    P4RuntimeWriteError,
    SwitchConnection,
)
from tests.controlplane.fake_switch import FakeServer

P4INFO = Path(__file__).resolve().parents[2] / "p4src" / "build" / "echelon.p4info.txtpb"


@pytest.fixture
def server() -> Iterator[FakeServer]:
    srv = FakeServer()
    try:
        yield srv
    finally:
        srv.stop()


def _route(sw: SwitchConnection, i: int) -> object:
    return sw.table_entry(
        "ipv4_lpm",
        {"hdr.ipv4.dstAddr": (f"10.1.{i // 250}.{i % 250}", 32)},
        "ipv4_forward",
        {"dstAddr": i, "port": 1 + i % 8},
    )


def test_arbitration_pipeline_write_read(server: FakeServer) -> None:
    with SwitchConnection(server.addr, election_id=(0, 5)) as sw:
        assert sw.is_primary and sw.is_alive
        assert sw.get_pipeline_p4info() is None
        cookie = sw.set_pipeline(P4INFO)
        assert sw.get_pipeline_cookie() == cookie
        got = sw.get_pipeline_p4info()
        assert got is not None and got.table("ipv4_lpm").size == 1024
        entries = [_route(sw, i) for i in range(5)]
        sw.insert(entries)  # type: ignore[arg-type]
        assert set(sw.read_table_entries("ipv4_lpm")) == set(entries)
        assert sw.read_table_entries("echelon_ids") == []
        sw.delete(entries[:2])  # type: ignore[arg-type]
        assert set(sw.read_table_entries()) == set(entries[2:])


def test_lower_election_id_is_not_primary(server: FakeServer) -> None:
    with SwitchConnection(server.addr, election_id=(0, 9)) as a:
        assert a.is_primary
        with SwitchConnection(server.addr, election_id=(0, 2)) as b:
            assert not b.is_primary


def test_write_errors_are_per_update(server: FakeServer) -> None:
    with SwitchConnection(server.addr) as sw:
        sw.set_pipeline(P4INFO)
        e0, e1, e2 = (_route(sw, i) for i in range(3))
        sw.insert([e0])  # type: ignore[list-item]
        with pytest.raises(P4RuntimeWriteError) as ei:
            sw.insert([e1, e0, e2])  # type: ignore[list-item]
        err = ei.value
        assert [s.code for s in err.statuses] == ["OK", "ALREADY_EXISTS", "OK"]
        assert err.succeeded_indices == [0, 2]
        assert not err.resource_exhausted


def test_chunked_write_reports_applied_prefix(server: FakeServer) -> None:
    with SwitchConnection(server.addr) as sw:
        sw.set_pipeline(P4INFO)
        entries = [_route(sw, i) for i in range(1030)]  # ipv4_lpm holds 1024
        with pytest.raises(P4RuntimeWriteError) as ei:
            sw.write(sw.updates("INSERT", entries), chunk=100)  # type: ignore[arg-type]
        assert ei.value.resource_exhausted
        assert ei.value.applied == 1000
        assert len(ei.value.succeeded_indices) == 1024
        assert server.switch.writes == 11


def test_counters_read_and_reset(server: FakeServer) -> None:
    with SwitchConnection(server.addr) as sw:
        sw.set_pipeline(P4INFO)
        cid = sw.p4info.counter("echelon_pkts").id  # type: ignore[union-attr]
        server.switch.counters[cid][3] = (10, 1500)
        assert sw.read_counter("echelon_pkts", 3) == {3: (10, 1500)}
        assert len(sw.read_counter("echelon_pkts")) == 1024
        sw.reset_counter("echelon_pkts")
        assert sw.read_counter("echelon_pkts", 3) == {3: (0, 0)}


def test_connect_timeout_and_stream_break(server: FakeServer) -> None:
    with pytest.raises(P4RuntimeConnectionError):
        SwitchConnection("127.0.0.1:1").connect(timeout=0.3)
    sw = SwitchConnection(server.addr)
    broke: list[SwitchConnection] = []
    sw.on_stream_break(broke.append)
    sw.connect()
    try:
        server.stop()
        assert sw.wait_broken(5.0)
        assert not sw.is_alive
        assert broke == [sw]
    finally:
        sw.close()

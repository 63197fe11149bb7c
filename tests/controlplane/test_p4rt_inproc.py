"""SwitchConnection against the soft switch's P4Runtime service in-process (real gRPC)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from finsy.proto import p4r

from p4client.p4rt import (
    P4RuntimeConnectionError,
    P4RuntimeWriteError,
    SwitchConnection,
)
from tests.controlplane.helpers import DEVICE_CONFIG
from tests.controlplane.inproc import InProcessSwitch

P4INFO = Path(__file__).resolve().parents[2] / "p4src" / "build" / "echelon.p4info.txtpb"


@pytest.fixture
def server() -> Iterator[InProcessSwitch]:
    srv = InProcessSwitch()
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


def test_arbitration_pipeline_write_read(server: InProcessSwitch) -> None:
    with SwitchConnection(server.addr, election_id=(0, 5)) as sw:
        assert sw.is_primary and sw.is_alive
        assert sw.get_pipeline_p4info() is None
        cookie = sw.set_pipeline(P4INFO, DEVICE_CONFIG)
        assert sw.get_pipeline_cookie() == cookie
        got = sw.get_pipeline_p4info()
        assert got is not None and got.table("ipv4_lpm").size == 1024
        entries = [_route(sw, i) for i in range(5)]
        sw.insert(entries)  # type: ignore[arg-type]
        assert set(sw.read_table_entries("ipv4_lpm")) == set(entries)
        assert sw.read_table_entries("echelon_ids") == []
        sw.delete(entries[:2])  # type: ignore[arg-type]
        assert set(sw.read_table_entries()) == set(entries[2:])


def test_lower_election_id_is_not_primary(server: InProcessSwitch) -> None:
    with SwitchConnection(server.addr, election_id=(0, 9)) as a:
        assert a.is_primary
        with SwitchConnection(server.addr, election_id=(0, 2)) as b:
            assert not b.is_primary


def test_write_errors_are_per_update(server: InProcessSwitch) -> None:
    with SwitchConnection(server.addr) as sw:
        sw.set_pipeline(P4INFO, DEVICE_CONFIG)
        e0, e1, e2 = (_route(sw, i) for i in range(3))
        sw.insert([e0])  # type: ignore[list-item]
        with pytest.raises(P4RuntimeWriteError) as ei:
            sw.insert([e1, e0, e2])  # type: ignore[list-item]
        err = ei.value
        assert [s.code for s in err.statuses] == ["OK", "ALREADY_EXISTS", "OK"]
        assert err.succeeded_indices == [0, 2]
        assert not err.resource_exhausted


def test_chunked_write_reports_applied_prefix(server: InProcessSwitch) -> None:
    with SwitchConnection(server.addr) as sw:
        sw.set_pipeline(P4INFO, DEVICE_CONFIG)
        entries = [_route(sw, i) for i in range(1030)]  # ipv4_lpm holds 1024
        with pytest.raises(P4RuntimeWriteError) as ei:
            sw.write(sw.updates("INSERT", entries), chunk=100)  # type: ignore[arg-type]
        assert ei.value.resource_exhausted
        assert ei.value.applied == 1000
        assert len(ei.value.succeeded_indices) == 1024
        assert server.writes == 11


def test_counters_read_and_reset(server: InProcessSwitch) -> None:
    with SwitchConnection(server.addr) as sw:
        sw.set_pipeline(P4INFO, DEVICE_CONFIG)
        cid = sw.p4info.counter("echelon_pkts").id  # type: ignore[union-attr]
        cell = p4r.CounterEntry(counter_id=cid, index=p4r.Index(index=3))
        cell.data.packet_count, cell.data.byte_count = 10, 1500
        server.service.write_counter(cell)  # what packets would have counted
        assert sw.read_counter("echelon_pkts", 3) == {3: (10, 1500)}
        assert len(sw.read_counter("echelon_pkts")) == 1024
        sw.reset_counter("echelon_pkts")
        assert sw.read_counter("echelon_pkts", 3) == {3: (0, 0)}


def test_connect_timeout_and_stream_break(server: InProcessSwitch) -> None:
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


def test_pipelined_write_keeps_order_and_stops_at_the_failing_chunk(
    server: InProcessSwitch,
) -> None:
    with SwitchConnection(server.addr) as sw:
        sw.set_pipeline(P4INFO, DEVICE_CONFIG)
        entries = [_route(sw, i) for i in range(1030)]  # ipv4_lpm holds 1024
        sw.write_entries([("INSERT", e) for e in entries[:300]], chunk=100)  # type: ignore[misc]
        assert server.writes == 3
        # a DELETE then re-INSERT of the same entries only works if chunks apply in order
        pairs = [("DELETE", e) for e in entries[:300]] + [("INSERT", e) for e in entries[:300]]
        sw.write_entries(pairs, chunk=100)  # type: ignore[arg-type]
        assert set(sw.read_table_entries("ipv4_lpm")) == set(entries[:300])
        with pytest.raises(P4RuntimeWriteError) as ei:
            # 730 inserts in 10 chunks of 73 (room for 724), then a DELETE in an 11th chunk
            rest = [("INSERT", e) for e in entries[300:]] + [("DELETE", entries[0])]
            sw.write_entries(rest, chunk=73)  # type: ignore[arg-type]
        assert ei.value.resource_exhausted
        assert ei.value.applied == 9 * 73  # the chunks before the failing one
        assert len(ei.value.succeeded_indices) == 724
        assert server.writes == 3 + 6 + 10  # nothing sent after the failing chunk
        assert entries[0] in sw.read_table_entries("ipv4_lpm")  # the DELETE never went out

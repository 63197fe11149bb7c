"""Fault injection: the soft switch's gRPC server under idle, greedy and oversized
clients (stream and request bounds, the Write update bound).

Before: 32 StreamChannels that never arbitrate took all 32 worker threads and every
other RPC hit DEADLINE_EXCEEDED.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc

from echelon.waiting import wait_until
from p4client.p4info import P4Info
from p4client.p4rt import P4RuntimeConnectionError, SwitchConnection
from softswitch.grpc_limits import Limits
from softswitch.p4rt_read import READ_CHUNK
from softswitch.p4rt_server import P4RuntimeService, make_server
from tests.controlplane.helpers import DEVICE_CONFIG, P4INFO

#: The switch's own bounds (the tests below change only the timeouts they name).
DEFAULT = Limits()


class Served:
    def __init__(self, limits: Limits) -> None:
        self.service = P4RuntimeService(0, lambda _pl: None, limits)
        self.server, port = make_server(self.service, "127.0.0.1:0")
        self.server.start()
        self.addr = f"127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.stop(grace=0).wait(5)


@pytest.fixture
def served() -> Iterator[Served]:
    s = Served(Limits(arbitration_timeout_s=30.0, max_write_updates=600))
    try:
        yield s
    finally:
        s.stop()


class IdleClient:
    """A client on its own connection (own gRPC peer) that opens a StreamChannel and
    never arbitrates."""

    def __init__(self, addr: str) -> None:
        self.channel = grpc.insecure_channel(addr, options=[("grpc.use_local_subchannel_pool", 1)])
        self.feed: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self.call = p4r_grpc.P4RuntimeStub(self.channel).StreamChannel(iter(self.feed.get, None))

    def close(self) -> None:
        self.feed.put(None)
        self.call.cancel()
        self.channel.close()


def test_idle_streams_do_not_freeze_the_switch() -> None:
    served = Served(Limits(arbitration_timeout_s=30.0, evict_grace_s=600.0))
    idle = [IdleClient(served.addr) for _ in range(40)]
    info = P4Info.load(P4INFO)
    try:
        # the first max_streams are held, max_provisional wait to arbitrate, the rest
        # are refused at once
        wait_until(
            lambda: (
                sum(c.call.done() for c in idle)
                == 40 - DEFAULT.max_streams - DEFAULT.max_provisional
            ),
            30.0,
            "excess streams refused",
        )
        refused = [c.call for c in idle if c.call.done()]
        assert {c.code() for c in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        assert f"limit {DEFAULT.max_streams}" in refused[0].details()
        # unary RPCs still work (a 5 s deadline, not the 10 s default)
        probe = p4r_grpc.P4RuntimeStub(idle[0].channel)
        probe.Capabilities(p4r.CapabilitiesRequest(), timeout=5.0)
        with pytest.raises(grpc.RpcError) as ei:
            probe.GetForwardingPipelineConfig(
                p4r.GetForwardingPipelineConfigRequest(device_id=0), timeout=5.0
            )
        assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # no pipeline yet
        # a client that wants to arbitrate now is refused clearly, not hung
        with pytest.raises(P4RuntimeConnectionError) as ce:
            SwitchConnection(served.addr).connect(10.0)
        assert "RESOURCE_EXHAUSTED" in str(ce.value)
    finally:
        for c in idle:
            c.close()
    # once the idle clients go, a controller gets in
    wait_until(lambda: served.service.bounds.open_streams == 0, 15.0, "streams released")
    with SwitchConnection(served.addr) as sw:
        assert sw.is_primary
        sw.set_pipeline(info, DEVICE_CONFIG)
    served.stop()


def test_never_arbitrated_streams_give_way() -> None:
    """Idle streams that never arbitrated lose their slot to a new stream."""
    served = Served(Limits(arbitration_timeout_s=30.0, evict_grace_s=0.0))
    idle = [IdleClient(served.addr) for _ in range(DEFAULT.max_streams)]
    try:
        wait_until(lambda: served.service.bounds.open_streams == DEFAULT.max_streams, 15.0, "held")
        with SwitchConnection(served.addr, election_id=(0, 1)) as sw:
            assert sw.is_primary
        wait_until(lambda: any(c.call.done() for c in idle), 15.0, "an idle stream evicted")
        gone = [c.call for c in idle if c.call.done()]
        assert gone and gone[0].code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "never arbitrated" in str(gone[0].details())
    finally:
        for c in idle:
            c.close()
        served.stop()


def arbitrate(client: IdleClient, election: int) -> None:
    """Send one arbitration and read the answers in the background (a call's final
    status is seen only once the messages before it are read)."""
    req = p4r.StreamMessageRequest()
    req.arbitration.device_id = 0
    req.arbitration.election_id.low = election
    client.feed.put(req)

    def drain() -> None:
        with contextlib.suppress(grpc.RpcError):
            for _ in client.call:
                pass

    threading.Thread(target=drain, daemon=True).start()


def test_primary_elect_gets_in_past_arbitrated_idle_streams() -> None:
    """Before: 16 arbitrated idle streams (re-opened as they closed) kept a restarted
    controller out for as long as they stayed: RESOURCE_EXHAUSTED, nothing installed."""
    served = Served(Limits(arbitration_timeout_s=30.0, evict_grace_s=600.0))
    hostile = [IdleClient(served.addr) for _ in range(DEFAULT.max_streams)]
    try:
        for i, c in enumerate(hostile):
            arbitrate(c, i + 1)  # ids 1..16: the one with 16 is primary
        wait_until(
            lambda: len(served.service.arbiter.backups()) == DEFAULT.max_streams - 1,
            15.0,
            "arbitrated",
        )
        with SwitchConnection(served.addr, election_id=(0, 100)) as sw:
            assert sw.is_primary  # took the oldest backup's slot
            sw.set_pipeline(P4Info.load(P4INFO), DEVICE_CONFIG)
            wait_until(lambda: any(c.call.done() for c in hostile), 15.0, "a backup evicted")
            evicted = [c.call for c in hostile if c.call.done()]
            assert len(evicted) == 1 and "a primary needs the slot" in str(evicted[0].details())
            # a newcomer that would only be a backup is refused beyond the limit
            late = IdleClient(served.addr)
            arbitrate(late, 50)
            wait_until(late.call.done, 15.0, "backup beyond the limit refused")
            assert late.call.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "only a client that becomes primary" in str(late.call.details())
            late.close()
            assert sw.is_primary and sw.is_alive
    finally:
        for c in hostile:
            c.close()
        served.stop()


@pytest.mark.slow
def test_stream_without_arbitration_times_out() -> None:
    s = Served(Limits(arbitration_timeout_s=0.5))
    try:
        idle = SwitchConnection(s.addr)
        idle.open(5.0)  # a stream, no arbitration
        assert idle.wait_broken(10.0)
        assert "DEADLINE_EXCEEDED" in (idle.stream_error or "")
        assert "MasterArbitrationUpdate" in (idle.stream_error or "")
        with SwitchConnection(s.addr) as sw:  # an arbitrated stream stays open past it
            assert not sw.wait_broken(1.0)
            assert sw.is_alive
    finally:
        s.stop()


def test_streams_per_client_bounded(served: Served) -> None:
    """One connection cannot open more than its share of streams."""
    with SwitchConnection(served.addr) as sw:  # holds one stream
        feeds: list[queue.Queue[p4r.StreamMessageRequest | None]] = []
        calls = []
        for _ in range(10):  # same channel, so the same peer
            q: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
            feeds.append(q)
            calls.append(sw.stub.StreamChannel(iter(q.get, None)))
        try:
            wait_until(lambda: sum(c.done() for c in calls) >= 3, 15.0, "refusals")
            done = [c for c in calls if c.done()]
            assert len(done) == 3  # 8 per client: the controller's stream + 7 of these
            assert {c.code() for c in done} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
            assert "per client" in done[0].details()
            assert sw.is_alive
        finally:
            for q in feeds:
                q.put(None)
            for c in calls:
                c.cancel()


def test_write_update_limit_named(served: Served) -> None:
    """A WriteRequest above the update limit is refused before anything applies."""
    info = P4Info.load(P4INFO)
    with SwitchConnection(served.addr) as sw:
        sw.set_pipeline(info, DEVICE_CONFIG)
        entries = [
            info.table_entry("echelon_ids", {"hdr.echelon.echelon_id": i}, "NoAction")
            for i in range(1, 602)
        ]
        with pytest.raises(grpc.RpcError) as ei:
            sw.stub.Write(sw.write_request(sw.updates("INSERT", entries)), timeout=10.0)
        assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "601 updates exceed the limit of 600" in str(ei.value.details())
        assert sw.read_table_entries("echelon_ids") == []
        sw.insert(entries)  # the client's own chunks stay under the limit
        assert len(sw.read_table_entries("echelon_ids")) == 601


def _read(sw: SwitchConnection, *entities: p4r.Entity) -> list[p4r.ReadResponse]:
    req = p4r.ReadRequest(device_id=0, entities=list(entities))
    return list(sw.stub.Read(req, timeout=20.0))


def test_huge_read_is_refused_at_once(served: Served) -> None:
    """Before: 1,000 empty ``counter_entry`` (4 KB) answered 1.04 M entities, built
    under the service lock (1.17 GB, registrations stalled 3.5 s)."""
    info = P4Info.load(P4INFO)
    with SwitchConnection(served.addr) as sw:
        sw.set_pipeline(info, DEVICE_CONFIG)
        wild = p4r.Entity(counter_entry=p4r.CounterEntry())
        t0 = time.perf_counter()
        with pytest.raises(grpc.RpcError) as ei:
            _read(sw, *[wild] * 1000)
        assert time.perf_counter() - t0 < 2.0
        assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert f"over the limit of {DEFAULT.max_read_entities}" in str(ei.value.details())
        with pytest.raises(grpc.RpcError) as ei:
            _read(sw, *[p4r.Entity(table_entry=p4r.TableEntry())] * 10_001)
        assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "10001 entities exceed" in str(ei.value.details())
        # one wildcard of every counter cell is still answered, in bounded chunks
        answers = _read(sw, wild)
        cells = sum(c.size for c in info.counters())
        assert sum(len(a.entities) for a in answers) == cells
        assert all(len(a.entities) <= READ_CHUNK for a in answers) and len(answers) >= 2


def test_read_bound_counts_table_entries() -> None:
    s = Served(Limits(max_read_entities=100))
    info = P4Info.load(P4INFO)
    try:
        with SwitchConnection(s.addr) as sw:
            sw.set_pipeline(info, DEVICE_CONFIG)
            sw.insert(
                [
                    info.table_entry("echelon_ids", {"hdr.echelon.echelon_id": i}, "NoAction")
                    for i in range(1, 61)
                ]
            )
            wild = p4r.Entity(table_entry=p4r.TableEntry())
            assert sum(len(a.entities) for a in _read(sw, wild)) == 60
            with pytest.raises(grpc.RpcError) as ei:
                _read(sw, wild, wild)  # 120 > 100
            assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "120 entities" in str(ei.value.details())
    finally:
        s.stop()

"""Clone sessions over P4Runtime, and the bound on resubmit/recirculate loops.

What clones, resubmits and recirculations do to packets is checked against BMv2
by the differential test (tests/p4/programs/clone.p4); these are the soft
switch's own rules around them.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import pytest
from finsy.proto import p4r

from p4client.p4info import P4Info
from softswitch import p4rt_codec as codec
from softswitch.bm.packet import MAX_PASSES
from softswitch.bm.pipeline import Pipeline
from softswitch.dataplane import DataPlane, Queued
from softswitch.errors import AlreadyExists, InvalidArgument, NotFound, Unimplemented
from softswitch.p4rt_entities import write_pre
from softswitch.queueing import PriorityRateQueues
from tests.softswitch.helpers import Names

BUILD = Path(__file__).resolve().parents[1] / "p4" / "programs" / "build"


def _pipeline() -> Pipeline:
    info = P4Info.load(BUILD / "clone.p4info.txtpb").proto
    return Pipeline(info, (BUILD / "clone.json").read_bytes(), 1)


def _session(sid: int, *ports: int, truncate: int = 0) -> p4r.PacketReplicationEngineEntry:
    pre = p4r.PacketReplicationEngineEntry()
    cs = pre.clone_session_entry
    cs.session_id, cs.packet_length_bytes = sid, truncate
    for port in ports:
        cs.replicas.add(egress_port=port, instance=1)
    return pre


def test_clone_sessions_inserted_modified_deleted_with_p4runtime_errors() -> None:
    pl = _pipeline()
    write_pre(pl, p4r.Update.INSERT, _session(5, 2))
    assert pl.mirroring == {5: 2}
    with pytest.raises(AlreadyExists):
        write_pre(pl, p4r.Update.INSERT, _session(5, 3))
    write_pre(pl, p4r.Update.MODIFY, _session(5, 3))
    assert pl.mirroring == {5: 3}
    with pytest.raises(NotFound):
        write_pre(pl, p4r.Update.MODIFY, _session(6, 3))
    write_pre(pl, p4r.Update.DELETE, _session(5))
    with pytest.raises(NotFound):
        write_pre(pl, p4r.Update.DELETE, _session(5))
    assert pl.mirroring == {}


@pytest.mark.parametrize(
    ("pre", "error", "named"),
    [
        (_session(5, 2, 3), Unimplemented, "replicas"),
        (_session(5, 2, truncate=64), Unimplemented, "packet_length_bytes"),
        (_session(1 << 15, 2), InvalidArgument, "session_id"),
        (_session(5, 511), InvalidArgument, "egress_port"),
    ],
)
def test_clone_sessions_the_switch_cannot_serve_are_refused_by_name(
    pre: p4r.PacketReplicationEngineEntry, error: type[Exception], named: str
) -> None:
    with pytest.raises(error, match=named):
        write_pre(_pipeline(), p4r.Update.INSERT, pre)


def test_multicast_group_entries_are_unimplemented() -> None:
    pre = p4r.PacketReplicationEngineEntry()
    pre.multicast_group_entry.multicast_group_id = 1
    with pytest.raises(Unimplemented, match="multicast_group_entry"):
        write_pre(_pipeline(), p4r.Update.INSERT, pre)


def _frame(op: int) -> bytes:
    ip = bytes.fromhex("4500001c0000000040110000") + bytes([10, 0, 9, 9, 10, 0, 1, 9])
    return bytes.fromhex("0200000000010000000000000800") + ip + struct.pack("!BB", op, 7)


def test_a_frame_that_resubmits_forever_stops_after_max_passes() -> None:
    pl = _pipeline()
    inst = pl.packets
    calls = 0
    ingress = inst._controls.ingress

    def resubmitting(v: list[int]) -> None:  # as if every pass asked to be resubmitted
        nonlocal calls
        calls += 1
        ingress(v)
        v[inst.regs.resubmit] = 2

    inst._controls.ingress = resubmitting
    assert pl.ingress(_frame(0), 1) is None  # dropped after MAX_PASSES resubmissions
    assert not pl.spawned
    assert calls == MAX_PASSES + 1


def test_a_recirculated_frame_is_queued_again_and_sent_not_counted_as_a_drop() -> None:
    pl = _pipeline()
    names = Names(pl.p4info)
    te = names.entry("Ing.routes", {"hdr.ipv4.dst": (0x0A000109, 32)}, "Ing.route", {"port": 2})
    d = codec.Decoder(pl).table_entry(te, needs_action=True)
    assert d.call is not None
    d.info.table.insert(d.key, d.priority, d.call, d.proto)
    inst = pl.packets
    egress = inst._controls.egress

    def recirculating_once(v: list[int]) -> None:
        # clone.p4's op 4 asks again on every pass (egress sees instance_type 0 as on
        # BMv2, which would loop): only the first pass's request is kept here
        egress(v)
        if v[inst.regs.passes]:
            v[inst.regs.recirculate] = 0

    inst._controls.egress = recirculating_once
    queues: PriorityRateQueues[Queued] = PriorityRateQueues()
    dp = DataPlane({}, queues)  # no interfaces: port 2 is one end of a socket pair
    wire, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        dp.socks[2] = wire
        queues.add_port(2)
        dp.pipeline = pl
        first = pl.ingress(_frame(4), 1)  # op 4: egress recirculates it
        assert first is not None
        dp._enqueue(1, pl, first, 0.0, False)
        dp._transmit(0.0)  # egress recirculates: back into the queue, nothing sent
        assert (dp.stats.tx, dp.stats.pipeline_drop) == (0, 0)
        assert queues.next_departure() is not None  # the recirculated instance waits
        dp._transmit(1.0)
        assert (dp.stats.tx, dp.stats.pipeline_drop) == (1, 0)
        sent = far.recv(2048)
        assert sent[12:14] == b"\x88\xb6"  # what op 4's egress writes before recirculating
    finally:
        dp.close()
        wire.close()
        far.close()

"""Registers and queueing metadata in the soft switch, in process.

The echelon program's egress records per (egress port, priority) the queue
depth, the maximum depth and the last sojourn in three registers (p4src/
include/ingress.p4). Here: the egress pipeline fed the queueing metadata a
dequeue gives writes exactly those cells; P4Runtime Read/Write of
RegisterEntry follows the spec's rules (BMv2's P4Runtime server refuses both,
UNIMPLEMENTED; the Thrift calls are in test_ssw_runtime.py).
"""

from __future__ import annotations

import grpc
import pytest
from finsy.proto import p4r

from echelon.constants import NUM_PRIORITIES
from softswitch.bm.pipeline import Pipeline
from softswitch.errors import InvalidArgument
from tests.softswitch.helpers import MODIFY, Client, Names, load_config
from tests.softswitch.test_ssw_pipeline import echelon_pkt, pl  # noqa: F401 (fixture)

DEPTH, MAX, SOJOURN = (
    "EchelonEgress.queue_depth",
    "EchelonEgress.queue_depth_max",
    "EchelonEgress.queue_sojourn_us",
)
CELLS = 64 * NUM_PRIORITIES


def cells(p: Pipeline, name: str) -> list[int]:
    return next(i.register for i in p.register_infos.values() if i.name == name).cells


def test_egress_records_the_queue_it_left(pl: Pipeline) -> None:  # noqa: F811
    """A packet of priority 6 leaving port 2's queue: cell 2 * 8 + 6 gets the depth it
    left behind, the most the queue held just before one of its departures (deq_qdepth
    + 1, whatever the queue held at enqueue), and its sojourn; no other cell moves."""
    got = pl.ingress(bytes(echelon_pkt(deadline=500)), 1, now_us=1_000)
    assert got is not None
    port, prio, state = got
    assert (port, prio) == (2, 6)
    assert pl.egress(state, port, 1_000, 3, 1_250, 1) is not None
    cell = port * NUM_PRIORITIES + prio
    assert (cells(pl, DEPTH)[cell], cells(pl, MAX)[cell], cells(pl, SOJOURN)[cell]) == (1, 2, 250)
    # the first of a burst: found the queue empty, left 5 behind: the queue held 6
    first = pl.ingress(bytes(echelon_pkt(deadline=500)), 1)
    assert first is not None
    assert pl.egress(first[2], port, 1_300, 0, 1_400, 5) is not None
    assert (cells(pl, DEPTH)[cell], cells(pl, MAX)[cell], cells(pl, SOJOURN)[cell]) == (5, 6, 100)
    for name in (DEPTH, MAX, SOJOURN):
        assert sum(cells(pl, name)) == cells(pl, name)[cell]
    # the queue drained: depth 0, the maximum stays, the sojourn is the last packet's
    again = pl.ingress(bytes(echelon_pkt(deadline=500)), 1)
    assert again is not None
    assert pl.egress(again[2], port, 2_000, 0, 2_010, 0) is not None
    assert (cells(pl, DEPTH)[cell], cells(pl, MAX)[cell], cells(pl, SOJOURN)[cell]) == (0, 6, 10)


def test_idle_queue_metadata_without_a_data_plane(pl: Pipeline) -> None:  # noqa: F811
    """``process`` (ingress then egress at once) is a packet through an empty queue."""
    assert pl.process(bytes(echelon_pkt(deadline=1500)), 1) is not None
    cell = 2 * NUM_PRIORITIES + 5
    assert (cells(pl, DEPTH)[cell], cells(pl, MAX)[cell], cells(pl, SOJOURN)[cell]) == (0, 1, 0)


def _entry(
    names: Names, name: str, index: int | None = None, data: bytes | None = None
) -> p4r.Entity:
    rid = next(r.preamble.id for r in names.p4info.registers if r.preamble.name == name)
    re = p4r.RegisterEntry(register_id=rid)
    if index is not None:
        re.index.index = index
    if data is not None:
        re.data.bitstring = data
    return p4r.Entity(register_entry=re)


def test_p4runtime_register_read_and_write(primed: Client, names: Names) -> None:
    every = primed.read(p4r.Entity(register_entry=p4r.RegisterEntry()))
    assert len(every) == 3 * CELLS
    assert {e.register_entry.data.bitstring for e in every} == {b"\x00"}  # canonical zero
    assert len(primed.read(_entry(names, MAX))) == CELLS
    primed.send_write((MODIFY, _entry(names, MAX, 17, b"\x00\x01\x02")))  # padded accepted
    (one,) = primed.read(_entry(names, MAX, 17))
    assert (one.register_entry.index.index, one.register_entry.data.bitstring) == (17, b"\x01\x02")
    primed.send_write((MODIFY, _entry(names, MAX, None, b"\x07")))  # no index: every cell
    assert {e.register_entry.data.bitstring for e in primed.read(_entry(names, MAX))} == {b"\x07"}
    primed.send_write((MODIFY, _entry(names, MAX)))  # no data: reset
    assert {e.register_entry.data.bitstring for e in primed.read(_entry(names, MAX))} == {b"\x00"}


@pytest.mark.parametrize(
    ("kind", "index", "data", "named"),
    [
        (p4r.Update.INSERT, 1, b"\x01", "only support MODIFY"),
        (p4r.Update.DELETE, 1, b"\x01", "only support MODIFY"),
        (MODIFY, CELLS, b"\x01", "index"),
        (MODIFY, 1, b"\x01\x00\x00\x00\x00", "too long"),
        (MODIFY, 1, b"", "empty"),
    ],
)
def test_p4runtime_register_write_refusals(
    primed: Client, names: Names, kind: int, index: int, data: bytes, named: str
) -> None:
    with pytest.raises(grpc.RpcError) as exc:
        primed.send_write((kind, _entry(names, DEPTH, index, data)))
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    assert named in str(exc.value.trailing_metadata())


def test_p4runtime_register_read_refusals(primed: Client, names: Names) -> None:
    for bad in (
        p4r.Entity(register_entry=p4r.RegisterEntry(register_id=77)),
        _entry(names, DEPTH, CELLS),
    ):
        with pytest.raises(grpc.RpcError) as exc:
            primed.read(bad)
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_register_shape_must_match_the_p4info(names: Names) -> None:
    info = names.p4info.__deepcopy__()
    info.registers[0].size = 3
    with pytest.raises(InvalidArgument, match=r"queue_depth\.size"):
        Pipeline(info, load_config(), 0)

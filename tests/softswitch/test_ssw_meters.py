"""Meters: BMv2's trTCM arithmetic, and their P4Runtime configuration.

The colors on real packets are compared with BMv2's by the differential test
(tests/p4/programs/meters.p4); these pin the arithmetic down with a fake clock.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from finsy.proto import p4r

from p4client.p4info import P4Info
from softswitch import p4rt_codec as codec
from softswitch.bm.meters import GREEN, RED, YELLOW, MeterArray
from softswitch.bm.pipeline import Pipeline
from softswitch.errors import InvalidArgument, NotFound
from softswitch.p4rt_entities import write_meter

BUILD = Path(__file__).resolve().parents[1] / "p4" / "programs" / "build"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _meter(unit: str = "packets", clock: Clock | None = None) -> MeterArray:
    clock = clock or Clock()
    return MeterArray("m", 2, unit, clock(), clock)


def test_an_unconfigured_cell_is_always_green() -> None:
    m = _meter()
    assert [m.execute(0, 64) for _ in range(100)] == [GREEN] * 100


def test_rate_zero_colors_follow_the_bursts_peak_first() -> None:
    m = _meter()
    m.set_rates(0, [(0.0, 2), (0.0, 4)])  # committed burst 2, peak burst 4
    assert [m.execute(0, 64) for _ in range(6)] == [GREEN, GREEN, YELLOW, YELLOW, RED, RED]
    assert m.execute(1, 64) == GREEN  # the other cell is not configured


def test_bytes_meters_count_the_frame_length() -> None:
    m = _meter("bytes")
    m.set_rates(0, [(0.0, 100), (0.0, 150)])
    assert [m.execute(0, 60) for _ in range(3)] == [GREEN, YELLOW, RED]


def test_buckets_refill_by_whole_tokens_from_one_time_origin() -> None:
    clock = Clock()
    m = _meter(clock=clock)
    m.set_rates(0, [(0.001, 1), (0.002, 2)])  # 1000 and 2000 packets/s
    assert [m.execute(0, 1) for _ in range(3)] == [GREEN, YELLOW, RED]
    clock.now += 0.0005  # 500 µs: one peak token, no committed token yet
    assert [m.execute(0, 1) for _ in range(2)] == [YELLOW, RED]
    clock.now += 0.0005  # 1000 µs in all: a committed token and a peak token
    assert m.execute(0, 1) == GREEN


def test_committed_rate_above_peak_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="peak"):
        _meter().set_rates(0, [(0.5, 1), (0.1, 1)])


def _pipeline() -> Pipeline:
    info = P4Info.load(BUILD / "meters.p4info.txtpb").proto
    return Pipeline(info, (BUILD / "meters.json").read_bytes(), 1)


def _write(pl: Pipeline, kind: int, me: p4r.MeterEntry) -> None:
    write_meter(codec.Decoder(pl), kind, p4r.Entity(meter_entry=me))


def _entry(pl: Pipeline, index: int | None, cir: int = 0, pir: int = 0) -> p4r.MeterEntry:
    me = p4r.MeterEntry(meter_id=next(iter(pl.meters)))
    if index is not None:
        me.index.index = index
    me.config.cir, me.config.cburst, me.config.pir, me.config.pburst = cir, 3, pir, 5
    return me


def test_p4runtime_meter_entries_configure_one_cell_or_all() -> None:
    pl = _pipeline()
    array = pl.meters[next(iter(pl.meters))]
    _write(pl, p4r.Update.MODIFY, _entry(pl, 2, cir=1_000_000, pir=2_000_000))
    assert array.rates(2) == [(1.0, 3), (2.0, 5)] and array.rates(1) is None
    _write(pl, p4r.Update.MODIFY, _entry(pl, None))
    assert all(array.rates(i) == [(0.0, 3), (0.0, 5)] for i in range(array.size))
    reset = p4r.MeterEntry(meter_id=next(iter(pl.meters)))
    _write(pl, p4r.Update.MODIFY, reset)
    assert array.rates(0) is None


@pytest.mark.parametrize(
    ("kind", "index", "named"),
    [(p4r.Update.INSERT, 0, "MODIFY"), (p4r.Update.MODIFY, 8, "out of range")],
)
def test_p4runtime_meter_entries_refused_naming_the_problem(
    kind: int, index: int, named: str
) -> None:
    pl = _pipeline()
    with pytest.raises(InvalidArgument, match=named):
        _write(pl, kind, _entry(pl, index))


def test_unknown_meter_id_refused() -> None:
    with pytest.raises(InvalidArgument, match="meter_id"):
        _write(_pipeline(), p4r.Update.MODIFY, p4r.MeterEntry(meter_id=7))


def test_direct_meter_cells_follow_the_tables_entries() -> None:
    pl = _pipeline()
    dec = codec.Decoder(pl)
    (dm,) = pl.direct_meters.values()
    table = next(ti for ti in pl.tables.values() if ti.name == "Ing.sources")
    police = next(a for a in pl.actions.values() if a.name == "Ing.police")
    te = p4r.TableEntry(table_id=table.id)
    te.match.add(field_id=table.field_ids[0]).exact.value = bytes([10, 0, 1, 5])
    dme = p4r.DirectMeterEntry(table_entry=te)
    dme.config.cburst, dme.config.pburst = 1, 2
    with pytest.raises(NotFound):  # no such entry yet
        write_meter(dec, p4r.Update.MODIFY, p4r.Entity(direct_meter_entry=dme))
    te.action.action.action_id = police.id
    d = dec.table_entry(te, needs_action=True)
    assert d.call is not None
    table.table.insert(d.key, d.priority, d.call, d.proto)
    cell = dm.index[(d.key, d.priority)]
    assert dm.array.rates(cell) is None  # a new entry's meter: unconfigured
    write_meter(dec, p4r.Update.MODIFY, p4r.Entity(direct_meter_entry=dme))
    assert dm.array.rates(cell) == [(0.0, 1), (0.0, 2)]
    table.table.delete(d.key, d.priority)
    assert (d.key, d.priority) not in dm.index

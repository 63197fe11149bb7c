"""BMv2 and the soft switch, same burst into a rate-limited port (see
tests/p4/differential/queueing.py for how the arrival pattern is made the same):
queue depths per priority, register values (data plane, Thrift, P4Runtime) equal;
sojourn times and timestamps within the stated tolerances.
Skips, saying why, without root, BMv2 or p4c."""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from finsy.proto import p4r

from p4client.bmruntime import RuntimeClient
from tests.p4.differential import queueing as q
from tests.p4.differential.rig import Rig, rigs

pytestmark = [pytest.mark.root, pytest.mark.slow]
#: interleaved priorities: 5 probes at 3, 3 at 1 and 1 at 6, each its own queue.
PATTERN = [3, 1, 3, 1, 3, 6, 1, 3, 3]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Rig, Rig]]:
    if os.geteuid() != 0:
        pytest.skip("needs root (veth interfaces, raw sockets)")
    for tool in ("simple_switch_grpc", "p4c-bm2-ss"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed: no reference to compare with")
    where: Path = tmp_path_factory.mktemp("qmeta")
    with rigs(q.compile_program(where / "build"), where / "logs") as pair:
        yield pair


def _cells(rig: Rig) -> list[int]:
    assert rig.target is not None
    with RuntimeClient(rig.target.thrift_port) as rt:
        return rt.read_register_all(q.REGISTER)


@pytest.mark.timeout(120)
def test_queue_depths_and_sojourn_agree(both: tuple[Rig, Rig]) -> None:
    bmv2, soft = both
    want, got = q.run_burst(bmv2, PATTERN), q.run_burst(soft, PATTERN)
    assert q.timing_problems("bmv2", want) == []
    assert q.timing_problems("soft", got) == []
    expected = q.expected_depths(PATTERN)
    w, g = q.by_priority(want), q.by_priority(got)
    assert {p: [(r.enq_qdepth, r.deq_qdepth) for r in rs] for p, rs in w.items()} == expected
    assert {p: [(r.enq_qdepth, r.deq_qdepth) for r in rs] for p, rs in g.items()} == expected
    for prio in expected:
        assert [r.seq for r in w[prio]] == [r.seq for r in g[prio]]  # FIFO in each queue
        # the register count each probe read: the pacer was 0, then 1, 2, ...
        assert [r.seen for r in w[prio]] == [r.seen for r in g[prio]]
        for a, b in zip(w[prio], g[prio], strict=True):
            assert abs(a.deq_timedelta - b.deq_timedelta) <= q.SOJOURN_TOLERANCE_US, (a, b)
        # each later probe of a queue waited one more departure slot (100 ms) than the one before
        slots = [r.deq_timedelta for r in g[prio]]
        assert all(b - a > 50_000 for a, b in itertools.pairwise(slots)), slots
    assert _cells(bmv2) == _cells(soft)


@pytest.mark.timeout(60)
def test_registers_agree_over_thrift_and_p4runtime(both: tuple[Rig, Rig]) -> None:
    """register_write/read/reset on both; the soft switch's P4Runtime Read gives the cells
    BMv2's Thrift gives (BMv2's P4Runtime server refuses register Reads: UNIMPLEMENTED)."""
    bmv2, soft = both
    for rig in both:
        assert rig.target is not None
        with RuntimeClient(rig.target.thrift_port) as rt:
            rt.write_register(q.REGISTER, 5, 1000)
            rt.write_register(q.REGISTER, 4, (1 << 40) + 7)  # truncated to 32 bits
    want, got = q.run_burst(bmv2, [5, 5], 2000), q.run_burst(soft, [5, 5], 2000)
    # the pacer read 1000, the burst 1001 and 1002
    assert [r.seen for r in want.records] == [r.seen for r in got.records] == [1001, 1002]
    cells = _cells(bmv2)
    assert cells == _cells(soft) and cells[4] == 7 and cells[5] == 1003
    assert soft.sw is not None and soft.sw.p4info is not None
    rid = next(r.preamble.id for r in soft.sw.p4info.proto.registers)
    ent = p4r.Entity(register_entry=p4r.RegisterEntry(register_id=rid))
    read = {
        e.register_entry.index.index: int.from_bytes(e.register_entry.data.bitstring, "big")
        for e in soft.sw.read_entities(ent)
    }
    assert [read[i] for i in range(len(cells))] == cells
    for rig in both:
        assert rig.target is not None
        with RuntimeClient(rig.target.thrift_port) as rt:
            rt.reset_register(q.REGISTER)
    assert _cells(bmv2) == _cells(soft) == [0] * len(cells)

"""Fault injection: large batches that partly fail.

Each test provokes a write whose outcome the client could get wrong and checks that
the per-update statuses come back (and the controller reconciles instead of guessing).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from finsy.proto import p4r

from controlplane.controller import Controller
from controlplane.entries import T_IDS
from controlplane.registry import Registry
from echelon.topology import load
from p4client.codec import entry_to_proto
from p4client.p4info import P4Info, TableEntry
from p4client.p4rt import P4RuntimeWriteError, SwitchConnection
from tests.controlplane.helpers import DEVICE_CONFIG, P4INFO, spec, write_topo
from tests.controlplane.inproc import InProcessSwitch
from tests.controlplane.test_controller_inproc import read_back

# Fault injection against in-process switches and a whole controller: not a unit test
# (make test-fast leaves it out; make test runs it).
pytestmark = pytest.mark.slow


def ids_entry(info: P4Info, echelon_id: int) -> TableEntry:
    return info.table_entry(T_IDS, {"hdr.echelon.echelon_id": echelon_id}, "NoAction")


@pytest.fixture
def switch() -> Iterator[InProcessSwitch]:
    s = InProcessSwitch()
    try:
        yield s
    finally:
        s.stop()


@pytest.mark.parametrize("pipelined", [False, True])
def test_partly_failed_large_batch_reports_every_update(
    switch: InProcessSwitch, pipelined: bool
) -> None:
    """600 inserts, one of which exists: 599 applied, and the client says exactly that."""
    info = P4Info.load(P4INFO)
    with SwitchConnection(switch.addr) as sw:
        sw.set_pipeline(info, DEVICE_CONFIG)
        sw.insert([ids_entry(info, 300)])
        entries = [ids_entry(info, i) for i in range(1, 601)]
        with pytest.raises(P4RuntimeWriteError) as ei:
            if pipelined:
                sw.write_entries([("INSERT", e) for e in entries], chunk=600)
            else:
                sw.write(sw.updates("INSERT", entries), chunk=600)
        err = ei.value
        assert err.outcome_known
        assert [(s.index, s.code) for s in err.failed] == [(299, "ALREADY_EXISTS")]
        assert len(err.succeeded_indices) == 599
        assert len(sw.read_table_entries(T_IDS)) == 600


def test_default_chunks_fit_error_details(switch: InProcessSwitch) -> None:
    """With the default chunk sizes every update's status comes back even when each
    carries a long error message."""
    info = P4Info.load(P4INFO)
    with SwitchConnection(switch.addr) as sw:
        sw.set_pipeline(info, DEVICE_CONFIG)
        entries = [ids_entry(info, i) for i in range(1, 1001)]
        sw.insert(entries)
        with pytest.raises(P4RuntimeWriteError) as ei:
            sw.insert(entries)  # every one ALREADY_EXISTS, each with a message
        assert ei.value.outcome_known
        assert len(ei.value.failed) >= 1
        assert {s.code for s in ei.value.failed} == {"ALREADY_EXISTS"}


@pytest.fixture
def ctl_one(tmp_path: Path, switch: InProcessSwitch) -> Iterator[Controller]:
    topo = load(write_topo(tmp_path / "t.yaml", [switch.addr]))
    ctl = Controller(topo, P4Info.load(P4INFO), Registry(tmp_path / "r.db"), DEVICE_CONFIG)
    ctl.start()
    try:
        assert ctl.wait_in_sync(10.0)
        yield ctl
    finally:
        ctl.stop()


def test_foreign_entry_and_large_registration(ctl_one: Controller, switch: InProcessSwitch) -> None:
    """End to end: one foreign echelon_ids entry + a 150-group registration.
    Before: 507 "table full" at 1/1024, 600 strays, status in_sync. Now: the controller
    reads the switch back, reconciles, and the registration goes through."""
    info = ctl_one.p4info
    svc = switch.service  # the foreign write bypasses arbitration, as a buggy peer would
    assert svc.pipeline is not None
    foreign = p4r.Update(type=p4r.Update.INSERT)
    foreign.entity.table_entry.CopyFrom(entry_to_proto(info, ids_entry(info, 77)))
    assert svc._apply_all(svc.pipeline, [foreign]) == [None]
    view = ctl_one.register(spec("big", groups=150, sources=("h1", "h2")))
    assert len(view["groups"]) == 150
    assert read_back(switch) == ctl_one.desired("s1")
    st = ctl_one.status()["switches"]["s1"]
    assert st["in_sync"] and st["drift_repairs"] >= 1

"""Fault injection: default entries are under drift repair, on both targets.

Before: ``MODIFY is_default_action`` written with the controller's own election ID
(``echelon_classify`` -> ``set_echelon(5, 7)``, ``ipv4_lpm`` -> ``ipv4_forward(port
3)``) stayed after any number of verifications (drift 0) and a daemon restart:
unknown-ID packets left at the attacker's priority and unroutable ones leaked out
of port 3. A repair made when the controller got primary back was not counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc

from controlplane.controller import Controller
from controlplane.entries import T_CLASSIFY, T_LPM, default_entries
from controlplane.registry import Registry
from echelon.topology import load
from echelon.waiting import wait_until
from p4client.codec import entry_to_proto
from p4client.p4info import P4Info, TableEntry
from p4client.p4rt import SwitchConnection
from targets.process import free_port
from targets.switch import Target, start_target
from tests.controlplane.helpers import DEVICE_CONFIG, P4INFO, spec, write_topo
from tests.targets.test_targets_runtime import KINDS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture(params=KINDS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Target, str]]:
    addr = f"127.0.0.1:{free_port()}"
    t = start_target(request.param, {}, addr, free_port(), log_path=tmp_path / "sw.log")
    try:
        yield t, addr
    finally:
        t.stop()


def controller(tmp_path: Path, addr: str) -> Controller:
    topo = load(write_topo(tmp_path / "t.yaml", [addr]))
    ctl = Controller(topo, P4Info.load(P4INFO), Registry(tmp_path / "r.db"), DEVICE_CONFIG)
    ctl.start()
    assert ctl.wait_in_sync(30.0)
    return ctl


def hostile_defaults(addr: str, info: P4Info) -> None:
    """The issue's writes: a bare Write (no stream) with the controller's election ID."""
    bad = [
        info.table_entry(T_CLASSIFY, None, "set_echelon", {"class_id": 5, "prio": 7}, default=True),
        info.table_entry(T_LPM, None, "ipv4_forward", {"dstAddr": 1, "port": 3}, default=True),
    ]
    req = p4r.WriteRequest(device_id=0)
    req.election_id.low = 1
    for e in bad:
        u = req.updates.add()
        u.type = p4r.Update.MODIFY
        u.entity.table_entry.CopyFrom(entry_to_proto(info, e))
    with grpc.insecure_channel(addr) as ch:
        p4r_grpc.P4RuntimeStub(ch).Write(req, timeout=10.0)


def defaults_on(addr: str, info: P4Info) -> set[TableEntry]:
    with SwitchConnection(addr, election_id=(0, 0), p4info=info) as sw:
        return set(sw.read_default_entries(T_CLASSIFY, T_LPM))


def program_defaults(info: P4Info) -> set[TableEntry]:
    return {e for e in default_entries(info, DEVICE_CONFIG) if e.table in (T_CLASSIFY, T_LPM)}


def test_default_entry_drift_is_repaired_and_counted(
    target: tuple[Target, str], tmp_path: Path
) -> None:
    _, addr = target
    info = P4Info.load(P4INFO)
    want = program_defaults(info)
    assert {e.action for e in want} == {"EchelonIngress.drop", "NoAction"}
    ctl = controller(tmp_path, addr)
    try:
        ctl.register(spec("j1"))
        assert defaults_on(addr, info) == want
        hostile_defaults(addr, info)
        assert defaults_on(addr, info) != want
        agent = ctl.agents["s1"]
        agent.request_verify()
        wait_until(lambda: agent.status.drift_repairs >= 1, 20.0, "default entries repaired")
        assert defaults_on(addr, info) == want
        st = ctl.status()["switches"]["s1"]
        assert st["drift_detected"] >= 1 and "2 changed" in st["last_drift"]
    finally:
        ctl.stop()


def test_default_entry_drift_is_repaired_at_start_and_counted(
    target: tuple[Target, str], tmp_path: Path
) -> None:
    _, addr = target
    info = P4Info.load(P4INFO)
    first = controller(tmp_path, addr)
    first.register(spec("j1"))
    first.stop()
    first.registry.close()
    with SwitchConnection(addr, election_id=(0, 1)):  # while no controller runs
        hostile_defaults(addr, info)
    ctl = controller(tmp_path, addr)
    try:
        assert defaults_on(addr, info) == program_defaults(info)
        st = ctl.status()["switches"]["s1"]
        assert st["drift_detected"] == 1 and "reconcile on (re)connect" in st["last_drift"]
        assert "2 changed" in st["last_drift"]
    finally:
        ctl.stop()

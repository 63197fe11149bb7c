"""Fault injection: a 201 means installed on every switch.

Before: an agent thread that died (``--election-id -5`` raised ValueError in it) left
``/status`` at ``connected: false`` with an empty ``last_error`` and every registration
answered 201 with nothing installed; a registry file deleted under the daemon still
took registrations (``integrity_ok: true``) and a restart found none of them.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from controlplane.api import make_app
from controlplane.controller import Controller
from controlplane.registry import Registry, RegistryError, RegistryUnavailableError
from echelon.topology import load
from echelon.waiting import wait_until
from p4client.p4info import P4Info
from tests.controlplane.helpers import DEVICE_CONFIG, P4INFO, spec, write_topo
from tests.controlplane.inproc import InProcessSwitch, running_controller

# Fault injection against in-process switches and a whole controller: not a unit test
# (make test-fast leaves it out; make test runs it).
pytestmark = pytest.mark.slow


@pytest.fixture
def switch() -> Iterator[InProcessSwitch]:
    srv = InProcessSwitch()
    yield srv
    srv.stop()


def controller(tmp_path: Path, srv: InProcessSwitch, **kw: object) -> Controller:
    topo = load(write_topo(tmp_path / "t.yaml", [srv.addr]))
    reg = Registry(tmp_path / "r.db")
    return Controller(topo, P4Info.load(P4INFO), reg, DEVICE_CONFIG, **kw)  # type: ignore[arg-type]


def test_failed_agent_is_restarted_shown_and_refuses(
    tmp_path: Path, switch: InProcessSwitch
) -> None:
    ctl = controller(tmp_path, switch, election_id=(0, -5))  # ValueError inside the agent
    ctl.start()
    try:
        agent = ctl.agents["s1"]
        wait_until(lambda: agent.status.agent_failures >= 2, 10.0, "agent failed twice")
        client = TestClient(make_app(ctl))
        r = client.post("/jobs", json=spec("j1"))
        assert r.status_code == 503, r.text
        assert r.json()["field"] == "switches.s1" and "agent failed" in r.json()["message"]
        st = client.get("/status").json()["switches"]["s1"]
        assert st["agent_alive"] and "ValueError" in st["last_error"]
        assert st["unavailable"] and st["agent_failures"] >= 2
        assert ctl.jobs() == [] and switch.writes == 0
    finally:
        ctl.stop()


def test_agent_not_running_refuses(tmp_path: Path, switch: InProcessSwitch) -> None:
    ctl = controller(tmp_path, switch)  # never started
    with pytest.raises(Exception, match="agent thread not running") as ei:
        ctl.register(spec("j1"))
    assert getattr(ei.value, "code", "") == "UNAVAILABLE"
    assert ctl.jobs() == []


def test_switch_down_refuses_then_accepts(tmp_path: Path) -> None:
    srv = InProcessSwitch()
    ctl = controller(tmp_path, srv)
    ctl.start()
    try:
        assert ctl.wait_in_sync(10.0)
        srv.stop()
        wait_until(lambda: ctl.agents["s1"].unavailable(), 10.0, "switch seen down")
        r = TestClient(make_app(ctl)).post("/jobs", json=spec("j1"))
        assert r.status_code == 503 and r.json()["field"] == "switches.s1", r.text
        assert ctl.jobs() == []
    finally:
        ctl.stop()


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_registry_file_deleted_or_replaced(tmp_path: Path, how: str) -> None:
    with running_controller(tmp_path) as ctl:
        ctl.register(spec("before"))
        path = Path(ctl.registry.path)
        path.unlink()
        if how == "replaced":
            Registry(path).close()  # a fresh, valid, empty registry at the same path
        r = TestClient(make_app(ctl)).post("/jobs", json=spec("after"))
        assert r.status_code == 503, r.text
        assert r.json()["field"] == "registry" and how[:4] in r.json()["message"]
        reg = ctl.status()["registry"]
        assert reg["integrity_ok"] is False and reg["integrity_error"]
        assert ctl.registry.check_integrity() is False
        assert TestClient(make_app(ctl)).get("/jobs").status_code in (200, 503)


def test_registry_replaced_between_begin_and_commit(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "r.db")
    reg.begin()
    reg.add_job("j", {"job": "j"}, ["g"])
    os.rename(tmp_path / "r.db", tmp_path / "moved.db")
    with pytest.raises(RegistryUnavailableError, match="disappeared"):
        reg.commit()
    reg.close()


def test_foreign_sqlite_file_is_left_alone(tmp_path: Path) -> None:
    """Before: ``--db`` naming another program's database added the registry's tables."""
    other = tmp_path / "app.db"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE customers (id INTEGER)")
    db.commit()
    db.close()
    with pytest.raises(RegistryError, match="other tables: customers"):
        Registry(other)
    db = sqlite3.connect(other)
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    db.close()
    assert names == {"customers"}

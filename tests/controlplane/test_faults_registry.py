"""Fault injection: start-up and storage.

Before: a truncated, corrupt or wrong-schema registry or an unopenable path gave a
traceback and exit 1; damage while running went unnoticed; a topology that lost a
host used by a job made the daemon refuse to start; a locked DB or a full disk gave 500.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from controlplane import daemon
from controlplane.api import make_app
from controlplane.controller import Controller
from controlplane.registry import Registry, RegistryError
from echelon.topology import load
from p4client.p4info import P4Info
from tests.controlplane.helpers import DEVICE_CONFIG, P4INFO, spec, write_topo
from tests.controlplane.inproc import InProcessSwitch

# Fault injection against in-process switches and a whole controller: not a unit test
# (make test-fast leaves it out; make test runs it).
pytestmark = pytest.mark.slow


def filled_db(path: Path, jobs: int = 30) -> Path:
    reg = Registry(path)
    for i in range(jobs):
        reg.begin()
        reg.add_job(f"j{i}", {"job": f"j{i}", "pad": "x" * 2000}, ["g0", "g1"])
        reg.commit()
    reg._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    reg.close()
    return path


def corrupt(path: Path) -> None:
    """Overwrite pages after the first (the schema survives, the b-trees do not)."""
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    for off in range(page, len(data), 97):
        data[off] = 0xA5
    path.write_bytes(bytes(data))


def bad_registries(tmp: Path) -> dict[str, Path]:
    out = {}
    out["directory"] = tmp / "adir"
    out["directory"].mkdir()
    out["missing-parent"] = tmp / "no" / "such" / "r.db"
    garbage = tmp / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    out["garbage"] = garbage
    trunc = filled_db(tmp / "trunc.db")
    trunc.write_bytes(trunc.read_bytes()[: 4096 + 100])
    out["truncated"] = trunc
    bad = filled_db(tmp / "corrupt.db")
    corrupt(bad)
    out["corrupt"] = bad
    other = tmp / "other.db"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE jobs (name TEXT, body BLOB)")
    db.commit()
    db.close()
    out["wrong-schema"] = other
    return out


@pytest.mark.parametrize(
    "kind", ["directory", "missing-parent", "garbage", "truncated", "corrupt", "wrong-schema"]
)
def test_bad_registry_exits_2_with_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    db = bad_registries(tmp_path)[kind]
    topo = write_topo(tmp_path / "t.yaml", ["127.0.0.1:1"])
    rc = daemon.main(["--topo", str(topo), "--db", str(db), "--port", "1"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("error: registry: "), err[:300]
    assert "Traceback" not in err


def test_damage_while_running_is_noticed_and_changes_refused(tmp_path: Path) -> None:
    path = filled_db(tmp_path / "r.db")
    reg = Registry(path)
    assert reg.check_integrity() and reg.integrity_error is None
    corrupt(path)
    assert not reg.check_integrity()
    assert reg.integrity_error
    with pytest.raises(RegistryError) as ei:
        reg.begin()
    assert ei.value.field == "registry" and "integrity" in ei.value.message
    reg.close()


@pytest.mark.slow
def test_locked_registry_is_503_not_500(tmp_path: Path) -> None:
    srv = InProcessSwitch()
    topo = load(write_topo(tmp_path / "t.yaml", [srv.addr]))
    ctl = Controller(topo, P4Info.load(P4INFO), Registry(tmp_path / "r.db"), DEVICE_CONFIG)
    ctl.start()
    other = sqlite3.connect(tmp_path / "r.db", isolation_level=None)
    try:
        assert ctl.wait_in_sync(10.0)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        r = TestClient(make_app(ctl)).post("/jobs", json=spec("a"))
        assert r.status_code == 503
        assert r.json()["field"] == "registry"
        other.execute("ROLLBACK")
        assert TestClient(make_app(ctl)).post("/jobs", json=spec("a")).status_code == 201
    finally:
        other.close()
        ctl.stop()
        srv.stop()


@pytest.mark.slow
def test_full_disk_mid_registration_is_503_and_leaves_nothing(tmp_path: Path) -> None:
    """A write that fails inside the transaction (SQLite's "database or disk is full",
    which also rolls the transaction back itself) is a 503 naming the registry, not a
    500: neither the write's error nor the ROLLBACK's that follows may escape."""
    srv = InProcessSwitch()
    topo = load(write_topo(tmp_path / "t.yaml", [srv.addr]))
    reg = Registry(tmp_path / "r.db")
    ctl = Controller(topo, P4Info.load(P4INFO), reg, DEVICE_CONFIG)
    ctl.start()
    try:
        assert ctl.wait_in_sync(10.0)
        api = TestClient(make_app(ctl))
        assert api.post("/jobs", json=spec("a")).status_code == 201
        pages = reg._db.execute("PRAGMA page_count").fetchone()[0]
        reg._db.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full now
        big = spec("b", groups=60)  # needs pages the file cannot grow by
        r = api.post("/jobs", json=big)
        assert r.status_code == 503, r.text
        assert r.json()["field"] == "registry"
        assert [j["job"] for j in api.get("/jobs").json()] == ["a"]
        reg._db.execute("PRAGMA max_page_count = 1073741823")  # space again
        assert api.post("/jobs", json=big).status_code == 201
        assert api.delete("/jobs/a").status_code == 200
    finally:
        ctl.stop()
        srv.stop()


@pytest.fixture
def two_topos(tmp_path: Path) -> Iterator[tuple[InProcessSwitch, Path, Path]]:
    srv = InProcessSwitch()
    full = write_topo(tmp_path / "full.yaml", [srv.addr])
    data = yaml.safe_load(full.read_text())
    del data["hosts"]["h5"]
    data["links"] = [ln for ln in data["links"] if "h5" not in (ln["a"], ln["b"])]
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump(data))
    try:
        yield srv, full, small
    finally:
        srv.stop()


def test_job_whose_host_left_is_kept_flagged_and_removable(
    tmp_path: Path, two_topos: tuple[InProcessSwitch, Path, Path]
) -> None:
    _srv, full, small = two_topos
    info = P4Info.load(P4INFO)
    ctl = Controller(load(full), info, Registry(tmp_path / "r.db"), DEVICE_CONFIG)
    ctl.start()
    assert ctl.wait_in_sync(10.0)
    ctl.register(spec("keep"))
    ctl.register(spec("gone", sources=("h5", "h1")))
    ctl.stop()
    ctl.registry.close()

    ctl = Controller(load(small), info, Registry(tmp_path / "r.db"), DEVICE_CONFIG)  # used to raise
    ctl.start()
    try:
        assert ctl.wait_in_sync(10.0)
        client = TestClient(make_app(ctl))
        jobs = {j["job"]: j for j in client.get("/jobs").json()}
        assert "orphaned" not in jobs["keep"]
        assert "h5" in jobs["gone"]["orphaned"]
        shown = client.get("/jobs/gone").json()
        assert shown["installed"] == {"s1": False} and "h5" in shown["orphaned"]
        assert "gone" in client.get("/status").json()["orphaned_jobs"]
        assert client.delete("/jobs/gone").status_code == 200
        assert [j["job"] for j in client.get("/jobs").json()] == ["keep"]
        assert client.get("/status").json()["orphaned_jobs"] == {}
    finally:
        ctl.stop()

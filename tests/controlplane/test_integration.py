"""End to end: the real soft switch process(es), the real controller daemon, real gRPC.

Every check reads the entries back from the switch with an independent P4Runtime
client (a backup-priority session, election ID 0), never trusting the controller.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from google.protobuf import text_format

from controlplane.entries import T_CLASSIFY, T_DEADLINE, T_IDS, T_LPM
from echelon.waiting import wait_until
from p4client.p4info import P4Info, TableEntry
from p4client.p4rt import SwitchConnection
from targets.switch import Target
from tests.controlplane.helpers import P4INFO, spec, write_topo
from tests.controlplane.procs import RETRY, Daemon, free_port, start_softswitch

# Every test starts switch and controller processes: seconds each, so not in test-fast.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@dataclass
class Env:
    tmp: Path
    ports: list[int]
    switches: list[Target] = field(default_factory=list)
    daemons: list[Daemon] = field(default_factory=list)

    @property
    def topo(self) -> Path:
        return self.tmp / "topo.yaml"

    def daemon(self, *extra: str) -> Daemon:
        d = Daemon(self.topo, self.tmp / "reg.db", self.tmp / f"ctl{len(self.daemons)}.log", *extra)
        self.daemons.append(d)
        d.wait_ready()
        return d

    def restart_switch(self, i: int) -> None:
        self.switches[i].stop()
        self.start_switch(i)

    def start_switch(self, i: int) -> None:
        self.switches[i] = start_softswitch(self.ports[i], self.tmp / f"ss{i}-b.log")

    def read(self, i: int = 0) -> set[TableEntry]:
        info = P4Info.load(P4INFO)
        with SwitchConnection(f"127.0.0.1:{self.ports[i]}", election_id=(0, 0), p4info=info) as sw:
            return set(sw.read_table_entries())


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield from _env(tmp_path, 1)


@pytest.fixture
def env2(tmp_path: Path) -> Iterator[Env]:
    yield from _env(tmp_path, 2)


def _env(tmp_path: Path, n: int) -> Iterator[Env]:
    e = Env(tmp_path, [free_port() for _ in range(n)])
    write_topo(e.topo, [f"127.0.0.1:{p}" for p in e.ports])
    try:
        for i, p in enumerate(e.ports):
            e.switches.append(start_softswitch(p, tmp_path / f"ss{i}.log"))
        yield e
    finally:
        for d in e.daemons:
            d.stop()
        for s in e.switches:
            s.stop()


def tables(entries: set[TableEntry]) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in entries:
        out[x.table] = out.get(x.table, 0) + 1
    return out


def test_register_then_remove(env2: Env) -> None:
    d = env2.daemon()
    for i in range(2):
        assert tables(env2.read(i)) == {T_LPM: 5}
    r = d.request("POST", "/jobs", spec("j1", groups=2, dst="h5"))  # crosses s1 and s2
    assert r.status_code == 201, r.text
    view = r.json()
    eids = sorted(g["echelon_id"] for g in view["groups"])
    for i in range(2):
        got = env2.read(i)
        counts = tables(got)
        assert counts[T_IDS] == 2 and counts[T_CLASSIFY] == 4
        ids = sorted(x.match_dict()["hdr.echelon.echelon_id"] for x in got if x.table == T_IDS)
        assert ids == eids
        for g in view["groups"]:
            cls = [
                x
                for x in got
                if x.table == T_CLASSIFY
                and x.match_dict()["hdr.echelon.echelon_id"] == g["echelon_id"]
            ]
            assert {x.params_dict()["prio"] for x in cls} == {g["priority"]}
            assert {x.params_dict()["class_id"] for x in cls} == {g["class_id"]}
            rng = sorted(
                x.match_dict()["hdr.echelon.deadline_us"]
                for x in got
                if x.table == T_DEADLINE and x.match_dict()["meta.class_id"] == g["class_id"]
            )
            assert rng == sorted((r["lo_us"], r["hi_us"]) for r in g["ranges"])
    assert d.request("DELETE", "/jobs/j1").status_code == 200
    for i in range(2):
        assert tables(env2.read(i)) == {T_LPM: 5}
    assert d.request("DELETE", "/jobs/j1").status_code == 404


def test_controller_kill9_restart_keeps_everything(env: Env) -> None:
    d = env.daemon()
    for k in range(3):
        assert d.request("POST", "/jobs", spec(f"j{k}")).status_code == 201
    before = env.read()
    jobs = d.get("/jobs")
    d.kill()  # right after the API answered: nothing may be lost
    d2 = env.daemon()
    assert d2.get("/jobs") == jobs
    assert env.read() == before
    st = d2.get("/status")["switches"]["s1"]
    assert st["pipeline_pushes"] == 0  # same cookie: the restart did not wipe the switch


def test_switch_restart_restores_entries(env: Env) -> None:
    d = env.daemon()
    assert d.request("POST", "/jobs", spec("j1", groups=2)).status_code == 201
    before = env.read()
    env.restart_switch(0)
    wait_until(
        lambda: env.read() == before,
        30,
        "entries re-installed on the restarted switch",
        0.05,
        RETRY,
    )
    st = d.wait_ready()["switches"]["s1"]
    assert st["pipeline_pushes"] == 2 and st["reconciles"] >= 2
    # and the controller keeps working on the new session
    assert d.request("POST", "/jobs", spec("j2")).status_code == 201
    assert tables(env.read())[T_IDS] == 3


def test_registration_while_switch_down_is_refused_naming_it(env2: Env) -> None:
    """A job whose packets cross a switch that is down is refused (503 naming it), not
    acknowledged without being installed; a job that never crosses it is installed."""
    d = env2.daemon()
    env2.switches[1].stop()
    wait_until(
        lambda: not d.get("/status")["switches"]["s2"]["connected"], 20, "s2 seen down", 0.05, RETRY
    )
    r = d.request("POST", "/jobs", spec("j1", dst="h5"))
    assert r.status_code == 503, r.text
    assert r.json()["field"] == "switches.s2" and "not connected" in r.json()["message"]
    assert d.get("/status")["switches"]["s2"]["unavailable"]
    assert tables(env2.read(0)).get(T_IDS, 0) == 0  # s1 undone: nothing half-applied
    assert d.get("/jobs") == []
    # h1, h2 -> h4 stays on s1: s2 being down does not concern it
    assert d.request("POST", "/jobs", spec("local")).status_code == 201
    assert tables(env2.read(0))[T_IDS] == 1
    env2.start_switch(1)
    d.wait_ready()
    assert d.request("POST", "/jobs", spec("j1", dst="h5")).status_code == 201
    assert tables(env2.read(0))[T_IDS] == 2 and tables(env2.read(1))[T_IDS] == 1


def test_startup_reconcile_removes_strays_and_fixes_changed(env: Env) -> None:
    d = env.daemon()
    assert d.request("POST", "/jobs", spec("j1")).status_code == 201
    want = env.read()
    d.stop()
    info = P4Info.load(P4INFO)
    with SwitchConnection(f"127.0.0.1:{env.ports[0]}", election_id=(0, 50), p4info=info) as sw:
        stray = sw.table_entry(T_IDS, {"hdr.echelon.echelon_id": 999}, "NoAction")
        changed = next(x for x in want if x.table == T_CLASSIFY)
        wrong = sw.table_entry(
            T_CLASSIFY, changed.match_dict(), changed.action, {**changed.params_dict(), "prio": 0}
        )
        missing = next(x for x in want if x.table == T_LPM)
        sw.insert([stray])
        sw.modify([wrong])
        sw.delete([missing])
    assert env.read() != want
    env.daemon()
    assert env.read() == want


def test_concurrent_registrations_are_consistent(env: Env) -> None:
    d = env.daemon()
    codes: list[int] = []
    lock = threading.Lock()

    def worker(w: int) -> None:
        for k in range(4):
            r = d.request("POST", "/jobs", spec(f"w{w}-{k}", groups=1 + k % 2))
            with lock:
                codes.append(r.status_code)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert codes == [201] * 24
    jobs = d.get("/jobs")
    eids = [g["echelon_id"] for j in jobs for g in j["groups"]]
    cids = [g["class_id"] for j in jobs for g in j["groups"]]
    assert len(eids) == 36 and len(set(eids)) == 36 and len(set(cids)) == 36
    got = env.read()
    assert sorted(
        x.match_dict()["hdr.echelon.echelon_id"] for x in got if x.table == T_IDS
    ) == sorted(eids)
    assert tables(got)[T_CLASSIFY] == 72


def test_bad_input_is_4xx_naming_the_field_and_changes_nothing(env: Env) -> None:
    d = env.daemon()
    assert d.request("POST", "/jobs", spec("ok")).status_code == 201
    before = env.read()
    bad_size = spec("b1")
    bad_size["echelonflows"][0]["flows"][0]["size"] = "lots"
    cases = [
        (spec("ok"), 409, "job"),
        (spec("b2", sources=("h1", "nohost")), 422, "g0.flows[1].src"),
        (bad_size, 400, "echelonflows[0].flows[0].size"),
        ({"job": "b3", "echelonflows": []}, 400, "echelonflows"),
        ({"job": "b4", "paradigm": "nope", "hosts": ["h1"]}, 400, "paradigm"),
        ({"job": "b5", "paradigm": "gpipe", "hosts": ["h1", "h77"]}, 422, "hosts[1]"),
    ]
    for body, code, fld in cases:
        r = d.request("POST", "/jobs", body)
        assert r.status_code == code, (body, r.text)
        assert r.json()["field"] == fld, r.text
        assert r.json()["detail"].startswith(fld)
    r = d.request("POST", "/jobs", [1, 2])
    assert r.status_code == 422
    assert env.read() == before
    assert [j["job"] for j in d.get("/jobs")] == ["ok"]


def test_table_full_is_explicit_and_nothing_applied(env: Env) -> None:
    proto = P4Info.load(P4INFO).proto
    next(t for t in proto.tables if t.preamble.name == T_IDS).size = 3
    small = env.tmp / "small.p4info.txtpb"
    small.write_text(text_format.MessageToString(proto))
    assert P4Info.load(small).table(T_IDS).size == 3
    d = env.daemon("--p4info", str(small))
    assert d.request("POST", "/jobs", spec("a", groups=2)).status_code == 201
    before = env.read()
    r = d.request("POST", "/jobs", spec("b", groups=2))
    assert r.status_code == 507, r.text
    assert r.json()["field"] == T_IDS and "table full" in r.json()["detail"]
    assert env.read() == before
    assert d.request("POST", "/jobs", spec("c", groups=1)).status_code == 201
    assert tables(env.read())[T_IDS] == 3


def test_preempted_by_higher_election_id_then_recovers(env: Env) -> None:
    d = env.daemon()
    info = P4Info.load(P4INFO)
    with SwitchConnection(f"127.0.0.1:{env.ports[0]}", election_id=(0, 100), p4info=info) as other:
        assert other.is_primary
        wait_until(
            lambda: not d.get("/status")["switches"]["s1"]["primary"],
            10,
            "backup seen",
            0.05,
            RETRY,
        )
        r = d.request("POST", "/jobs", spec("j1"))  # a backup refuses changes
        assert r.status_code == 503 and "not primary" in r.json()["detail"]
        assert T_IDS not in tables(env.read())
        other.insert([other.table_entry(T_IDS, {"hdr.echelon.echelon_id": 77}, "NoAction")])
    # the other controller left: this one is primary again and reconciles, counting the
    # other's change as drift (before: repaired, but neither counted nor logged)
    st = d.wait_ready()["switches"]["s1"]
    assert st["drift_detected"] >= 1 and "1 stray" in st["last_drift"]
    assert d.request("POST", "/jobs", spec("j1")).status_code == 201
    got = env.read()
    ids = [x.match_dict()["hdr.echelon.echelon_id"] for x in got if x.table == T_IDS]
    assert ids == [d.get("/jobs/j1")["groups"][0]["echelon_id"]]

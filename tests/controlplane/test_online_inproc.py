"""Online re-planning against the soft switch's P4Runtime service in-process.

The real core policy runs (``echelon``): the order between two jobs' groups must
follow what is in flight, and what the switch holds must always equal what the
controller says it wants. Also: a burst coalesces into one re-plan per interval,
static mode never re-plans, and the HTTP endpoint validates reports.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from controlplane.api import make_app
from controlplane.controller import Controller
from controlplane.entries import T_CLASSIFY
from controlplane.registry import Registry
from controlplane.report_socket import ProgressSocket
from echelon.topology import load
from echelon.waiting import wait_until
from hostagent.progress import ProgressReporter
from p4client.p4info import P4Info, TableEntry
from p4client.p4rt import SwitchConnection
from tests.controlplane.helpers import DEVICE_CONFIG, P4INFO, write_topo
from tests.controlplane.inproc import InProcessSwitch


def job(name: str, size: int, src: str) -> dict[str, Any]:
    return {
        "job": name,
        "echelonflows": [
            {"group": "g", "flows": [{"src": src, "dst": "h4", "size": size, "offset": 0.0}]}
        ],
    }


def make(
    tmp_path: Path, replan: str, interval: float, idle: str = "keep"
) -> tuple[Controller, InProcessSwitch]:
    server = InProcessSwitch()
    topo = load(write_topo(tmp_path / "t.yaml", [server.addr]))
    ctl = Controller(
        topo,
        P4Info.load(P4INFO),
        Registry(tmp_path / "r.db"),
        DEVICE_CONFIG,
        replan=replan,
        replan_interval=interval,
        idle_level=idle,
    )
    ctl.start()
    assert ctl.wait_in_sync(20.0)
    # big: 10 MB from h1; small: 10 kB from h2 -- SEBF puts small first when both fly
    ctl.register(job("big", 10_000_000, "h1"))
    ctl.register(job("small", 10_000, "h2"))
    return ctl, server


@pytest.fixture
def online(tmp_path: Path) -> Iterator[tuple[Controller, InProcessSwitch]]:
    ctl, server = make(tmp_path, "online", 0.0)
    try:
        yield ctl, server
    finally:
        ctl.stop()
        server.stop()


class Hosts:
    """Snapshots with increasing sequence numbers, one session."""

    def __init__(self, ctl: Controller) -> None:
        self.ctl = ctl
        self.seq = 0

    def report(self, job: str, host: str, it: int, rel: list[str], fin: list[str],
               wait: bool = True) -> dict[str, Any]:  # fmt: skip
        self.seq += 1
        body = {"job": job, "host": host, "iteration": it, "session": "t", "seq": self.seq,
                "released": rel, "finished": fin}  # fmt: skip
        return self.ctl.report(body, wait=wait, timeout=30.0)


def levels(server: InProcessSwitch) -> dict[int, int]:
    """Echelon ID -> classify level, read back from the switch."""
    with SwitchConnection(server.addr, election_id=(0, 0), p4info=P4Info.load(P4INFO)) as sw:
        entries: list[TableEntry] = sw.read_table_entries(T_CLASSIFY)
    return {
        int(e.match_dict()["hdr.echelon.echelon_id"]): int(e.params_dict()["prio"])  # type: ignore[arg-type]
        for e in entries
    }


def eid(ctl: Controller, job_id: str) -> int:
    return int(ctl.show(job_id)["groups"][0]["echelon_id"])


def read_all(server: InProcessSwitch) -> set[TableEntry]:
    with SwitchConnection(server.addr, election_id=(0, 0), p4info=P4Info.load(P4INFO)) as sw:
        return set(sw.read_table_entries())


@pytest.mark.slow
def test_order_follows_what_is_in_flight(online: tuple[Controller, InProcessSwitch]) -> None:
    ctl, server = online
    hosts = Hosts(ctl)
    big, small = eid(ctl, "big"), eid(ctl, "small")
    static = levels(server)
    assert static[small] > static[big], "static plan (iteration 0): small first"
    out = hosts.report("big", "h1", 0, ["g"], [])  # big alone in flight: top level
    assert out["changed"] and out["covered"] and out["error"] is None
    alone = levels(server)
    assert alone[big] == 7 > static[big], "big moved up; small (not in flight) kept its entries"
    assert alone[small] == static[small]
    hosts.report("small", "h2", 0, ["g"], [])  # small joins: it goes first again
    both = levels(server)
    assert both[small] == 7 and both[small] > both[big]
    hosts.report("small", "h4", 0, [], ["g"])  # small done: big alone again, on top
    after = levels(server)
    assert after[big] == 7
    assert read_all(server) == ctl.desired("s1")
    view = ctl.progress_view()
    assert view["jobs"]["big"]["groups"]["g"]["alive"] is True
    assert view["jobs"]["small"]["groups"]["g"]["alive"] is False
    assert view["online"]["replans"] >= 3
    assert view["online"]["reaction_ms"]["n"] >= 3


def test_replans_ask_one_policy_object(
    online: tuple[Controller, InProcessSwitch], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A policy may remember between re-plans (echelon.schedule.Policy), as the
    simulator's one policy object per run does: the planner must not build a fresh
    policy for every re-plan."""
    import controlplane.online as online_mod
    from echelon.policies import get_policy

    made: list[object] = []
    asked: list[object] = []

    def counting(name: str) -> Any:
        policy = get_policy(name)
        schedule = policy.schedule

        def spy(*args: Any, **kwargs: Any) -> Any:
            asked.append(policy)
            return schedule(*args, **kwargs)

        policy.schedule = spy  # type: ignore[method-assign]
        made.append(policy)
        return policy

    monkeypatch.setattr(online_mod, "get_policy", counting)
    ctl, _ = online
    hosts = Hosts(ctl)
    hosts.report("big", "h1", 0, ["g"], [])
    hosts.report("small", "h2", 0, ["g"], [])
    hosts.report("small", "h4", 0, [], ["g"])
    assert ctl.progress_view()["online"]["replans"] >= 3
    assert len(made) == 1 and len(asked) >= 3 and set(map(id, asked)) == {id(made[0])}


def test_duplicate_report_does_not_replan(online: tuple[Controller, InProcessSwitch]) -> None:
    ctl, _ = online
    hosts = Hosts(ctl)
    hosts.report("big", "h1", 0, ["g"], [])
    n = ctl.progress_view()["online"]["replans"]
    hosts.seq -= 1  # the same snapshot again (a retransmission)
    assert hosts.report("big", "h1", 0, ["g"], [])["changed"] is False
    assert ctl.progress_view()["online"]["replans"] == n
    assert ctl.progress_view()["ignored"] == 1


def test_burst_coalesces_into_one_replan_per_interval(tmp_path: Path) -> None:
    ctl, server = make(tmp_path, "online", 0.5)
    try:
        hosts = Hosts(ctl)
        first = hosts.report("big", "h1", 0, ["g"], [])
        assert first["covered"]
        n0 = ctl.progress_view()["online"]["replans"]
        t0 = time.monotonic()
        for it in range(1, 6):  # five changes well inside one interval
            hosts.report("small", "h2", it, ["g"], [], wait=False)
        last = hosts.report("big", "h4", 0, [], ["g"])
        assert last["covered"]
        assert time.monotonic() - t0 < 10.0
        assert ctl.progress_view()["online"]["replans"] - n0 == 1, "one coalesced re-plan"
        assert read_all(server) == ctl.desired("s1")
    finally:
        ctl.stop()
        server.stop()


def test_static_mode_never_replans(tmp_path: Path) -> None:
    ctl, server = make(tmp_path, "static", 0.0)
    try:
        before = levels(server)
        out = Hosts(ctl).report("big", "h1", 0, ["g"], [])
        assert out == {"changed": True, "replan": "static"}
        assert levels(server) == before
        assert "online" not in ctl.progress_view()
        assert ctl.progress_view()["jobs"]["big"]["groups"]["g"]["alive"] is True
    finally:
        ctl.stop()
        server.stop()


def test_removal_and_policy_switch_drop_online_plans(
    online: tuple[Controller, InProcessSwitch],
) -> None:
    ctl, server = online
    Hosts(ctl).report("big", "h1", 0, ["g"], [])
    assert ("big", "g") in ctl.overlay
    ctl.set_policy("fifo")
    assert ctl.overlay == {} or all(p.priority == 0 for p in ctl.overlay.values())
    ctl.remove("big")
    assert all(k[0] != "big" for k in ctl.overlay)
    assert read_all(server) == ctl.desired("s1")


def test_progress_endpoint(online: tuple[Controller, InProcessSwitch]) -> None:
    ctl, _ = online
    client = TestClient(make_app(ctl))
    body = {"job": "big", "host": "h1", "iteration": 0, "session": "x", "seq": 1,
            "released": ["g"], "finished": []}  # fmt: skip
    r = client.post("/progress", json=body, params={"wait": "true"})
    assert r.status_code == 200, r.text
    assert r.json()["covered"] is True
    bad = [
        ({**body, "job": "nope"}, 404, "job"),
        ({**body, "host": "h99"}, 422, "host"),
        ({**body, "released": ["zz"]}, 400, "released"),
        ({**body, "seq": -1}, 400, "seq"),
    ]
    for b, code, field in bad:
        r = client.post("/progress", json=b)
        assert r.status_code == code, r.text
        assert r.json()["field"] == field
    view = client.get("/progress").json()
    assert view["replan"] == "online"
    assert view["online"]["replans"] >= 1


@pytest.mark.slow
def test_progress_socket_datagrams_from_the_library(
    online: tuple[Controller, InProcessSwitch], tmp_path: Path
) -> None:
    """``unix:PATH``: the library's datagrams reach the controller; garbage is counted."""
    ctl, server = online
    sock = ProgressSocket(tmp_path / "p.sock", ctl.report)
    sock.start()
    try:
        assert (tmp_path / "p.sock").stat().st_mode & 0o077 == 0, "only the owner may report"
        rep = ProgressReporter(f"unix:{tmp_path / 'p.sock'}", job="big", host="h1")
        rep.released(0, "g")
        rep.close()
        assert rep.sent == 1
        wait_until(lambda: ctl.progress.reports >= 1, 20.0, "the datagram to be ingested")
        wait_until(lambda: levels(server)[eid(ctl, "big")] == 7, 20.0, "big on top")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(b"not json", str(tmp_path / "p.sock"))
            s.sendto(b'{"job": "nope", "host": "h1", "iteration": 0, "seq": 1}',
                     str(tmp_path / "p.sock"))  # fmt: skip
        wait_until(lambda: sock.rejected == 2, 20.0, "both bad datagrams to be rejected")
    finally:
        sock.stop()
    assert not (tmp_path / "p.sock").exists()


def test_idle_lowest_drops_groups_not_in_flight_to_level_1(tmp_path: Path) -> None:
    ctl, server = make(tmp_path, "online", 0.0, idle="lowest")
    try:
        hosts = Hosts(ctl)
        hosts.report("big", "h1", 0, ["g"], [])
        got = levels(server)
        assert got[eid(ctl, "big")] == 7 and got[eid(ctl, "small")] == 1
        hosts.report("big", "h4", 0, [], ["g"])  # big done: nothing in flight
        assert set(levels(server).values()) == {1}
        assert read_all(server) == ctl.desired("s1")
    finally:
        ctl.stop()
        server.stop()

"""Controller logic against the soft switch's P4Runtime service in-process (real gRPC, fast).

The real soft switch process is exercised in test_integration.py; in-process, a
test can give one switch a smaller table than the P4Info the controller holds (a
pipeline with the controller's cookie), to provoke a switch-side RESOURCE_EXHAUSTED. Scheduling is
replaced by a deterministic stand-in so these tests do not depend on the core's
policy details, only on the controller's contract with them.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from finsy.proto import p4i, p4r

from controlplane.controller import Controller
from controlplane.entries import T_CLASSIFY, T_DEADLINE, T_IDS, T_LPM, TableFullError
from controlplane.registry import DuplicateJobError
from echelon.errors import SpecError, UnknownHostError
from p4client.p4info import P4Info, TableEntry
from p4client.p4rt import SwitchConnection
from softswitch.bm.pipeline import Pipeline
from tests.controlplane.helpers import P4INFO, spec
from tests.controlplane.inproc import InProcessSwitch, controller_and_switches
from tests.controlplane.oracle import desired_entries, plan_groups


@pytest.fixture
def env(
    tmp_path: Path,
) -> Iterator[tuple[Controller, list[InProcessSwitch]]]:
    with controller_and_switches(tmp_path, 2) as pair:
        yield pair


def shrink_table(server: InProcessSwitch, info: P4Info, table: str, size: int) -> None:
    """Make ``table`` on ``server`` hold only ``size`` entries, keeping every installed
    entry and the pipeline cookie (so the controller sees "its" program)."""
    svc = server.service
    assert svc.pipeline is not None
    with SwitchConnection(server.addr, election_id=(0, 0), p4info=info) as sw:
        entries = sw.read_entities(p4r.Entity(table_entry=p4r.TableEntry()))
    small = p4i.P4Info()
    small.CopyFrom(info.proto)
    next(t for t in small.tables if t.preamble.name == table).size = size
    svc.commit(Pipeline(small, svc.pipeline.device_config, svc.pipeline.cookie))
    for ent in entries:
        update = p4r.Update(type=p4r.Update.INSERT, entity=ent)
        assert svc._apply_all(svc.pipeline, [update]) == [None]


def read_back(server: InProcessSwitch) -> set[TableEntry]:
    with SwitchConnection(server.addr, election_id=(0, 0), p4info=P4Info.load(P4INFO)) as sw:
        return set(sw.read_table_entries())


def by_table(entries: set[TableEntry], table: str) -> list[TableEntry]:
    return sorted(e for e in entries if e.table == table)


@pytest.mark.slow
def test_startup_installs_routes_and_register_remove(
    env: tuple[Controller, list[InProcessSwitch]],
) -> None:
    ctl, servers = env
    for s in servers:
        assert len(by_table(read_back(s), T_LPM)) == 5
    view = ctl.register(spec("j1", groups=2, dst="h5"))  # its packets cross s1 and s2
    assert [g["echelon_id"] for g in view["groups"]] == [1, 2]
    assert view["groups"][0]["ranges"][0]["lo_us"] == 0
    assert [g["switches"] for g in view["groups"]] == [["s1", "s2"]] * 2
    for name, s in zip(("s1", "s2"), servers, strict=True):
        got = read_back(s)
        assert len(by_table(got, T_IDS)) == 2
        assert len(by_table(got, T_CLASSIFY)) == 4
        assert len(by_table(got, T_DEADLINE)) == 4
        assert got == ctl.desired(name)
    ctl.remove("j1")
    for s in servers:
        assert {e.table for e in read_back(s)} == {"EchelonIngress.ipv4_lpm"}


def test_second_job_modifies_in_place(env: tuple[Controller, list[InProcessSwitch]]) -> None:
    ctl, servers = env
    ctl.register(spec("a"))
    before = servers[0].writes
    ctl.register(spec("b"))
    got = read_back(servers[0])
    prios = sorted(e.params_dict()["prio"] for e in by_table(got, T_CLASSIFY))
    # a keeps the top band, b gets one band below it (which one depends on how many
    # levels the policy's ranks give a's flows: a's two flows are 7 and 6 when a is
    # served whole first, docs/model.md §5.1)
    assert prios[2:] == [7, 7] and prios[0] == prios[1] < 7
    assert servers[0].writes - before == 1  # one insert/modify phase, no delete


def test_rejections_leave_nothing(env: tuple[Controller, list[InProcessSwitch]]) -> None:
    ctl, servers = env
    ctl.register(spec("a"))
    snapshot = [read_back(s) for s in servers]
    with pytest.raises(DuplicateJobError):
        ctl.register(spec("a"))
    with pytest.raises(UnknownHostError) as ei:
        ctl.register(spec("b", sources=("h1", "h9")))
    assert ei.value.field == "g0.flows[1].src"
    bad = spec("c")
    bad["echelonflows"][0]["flows"][1]["size"] = -5
    with pytest.raises(SpecError) as ei2:
        ctl.register(bad)
    assert ei2.value.field == "echelonflows[0].flows[1].size"
    assert [read_back(s) for s in servers] == snapshot
    assert [j["job"] for j in ctl.jobs()] == ["a"]


def test_switch_table_full_rolls_back_every_switch(
    env: tuple[Controller, list[InProcessSwitch]],
) -> None:
    ctl, servers = env
    ctl.register(spec("a", dst="h5"))
    snapshot = [read_back(s) for s in servers]
    shrink_table(servers[1], ctl.p4info, T_CLASSIFY, 3)  # s2 has 2 classify entries, room for 1
    with pytest.raises(TableFullError) as ei:
        ctl.register(spec("b", dst="h5"))
    assert ei.value.table == T_CLASSIFY
    assert [read_back(s) for s in servers] == snapshot
    assert [j["job"] for j in ctl.jobs()] == ["a"]
    assert ctl.wait_in_sync(1.0)


def test_p4info_size_checked_before_writing(env: tuple[Controller, list[InProcessSwitch]]) -> None:
    ctl, servers = env
    ctl.register(spec("a", groups=600, sources=("h1",)))  # one job is at most 1024 groups
    writes = servers[0].writes
    with pytest.raises(Exception) as ei:
        ctl.register(spec("big", groups=500, sources=("h1",)))
    assert getattr(ei.value, "field", "") in ("class_id", T_IDS)
    assert servers[0].writes == writes
    assert [j["job"] for j in ctl.jobs()] == ["a"]


def test_policy_switch(env: tuple[Controller, list[InProcessSwitch]]) -> None:
    ctl, servers = env
    ctl.register(spec("a"))
    ctl.set_policy("fifo")
    got = read_back(servers[0])
    assert by_table(got, T_DEADLINE) == []
    assert {e.params_dict()["prio"] for e in by_table(got, T_CLASSIFY)} == {0}
    ctl.set_policy("coflow")
    got = read_back(servers[0])
    assert by_table(got, T_DEADLINE) == []
    assert {e.params_dict()["prio"] for e in by_table(got, T_CLASSIFY)} == {7}
    with pytest.raises(SpecError):
        ctl.set_policy("nope")
    assert ctl.policy == "coflow"


@pytest.mark.slow
def test_incremental_changes_leave_what_a_full_replan_wants(
    env: tuple[Controller, list[InProcessSwitch]],
) -> None:
    """Random registrations, removals and policy switches, each written as a delta:
    every switch then holds exactly the entries of a from-scratch plan of the jobs."""
    ctl, servers = env
    rng = random.Random(3)
    alive: list[str] = []
    for step in range(40):
        if alive and rng.random() < 0.35:
            ctl.remove(alive.pop(rng.randrange(len(alive))))
        elif step % 13 == 12:
            ctl.set_policy(rng.choice(["echelon", "coflow", "fifo"]))
        else:
            name = f"j{step}"
            sources = tuple(rng.sample(["h1", "h2", "h3", "h5"], rng.randint(1, 3)))
            # h5 is on s2: some groups cross both switches, some only one of them
            dst = "h5" if "h5" not in sources and rng.random() < 0.5 else "h4"
            ctl.register(spec(name, groups=rng.randint(1, 3), sources=sources, dst=dst))
            alive.append(name)
        if step % 5 == 4:
            plans = plan_groups(ctl.policy, ctl.registered(), ctl.network)
            for name, s in zip(("s1", "s2"), servers, strict=True):
                want = desired_entries(ctl.p4info, ctl.topo, name, plans)
                assert read_back(s) == want, f"step {step}, switch {name}"

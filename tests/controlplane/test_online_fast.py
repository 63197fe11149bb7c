"""The reaction-time fixes of online re-planning, each shown to hold.

* A re-plan plans its writes from the changed groups' entries alone (the delta),
  and they are exactly the steps the full diff of every installed entry gives;
  when the installed set is not the one the delta was built on, the full diff runs.
* The periodic verification reads the switch without the controller lock; a read
  that overlapped a write is retried, so it never reports drift that was only a
  write in progress.
* Online, long-lived state is frozen out of the cyclic collector's scans.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from controlplane import entries, switchsync
from controlplane import online as online_mod
from controlplane.controller import Controller
from controlplane.entries import Step, count_by_table, plan_updates
from echelon.waiting import wait_until
from p4client.p4info import TableEntry
from tests.controlplane.inproc import InProcessSwitch
from tests.controlplane.test_online_inproc import Hosts, make, read_all


@pytest.fixture
def online(tmp_path: Path) -> Iterator[tuple[Controller, InProcessSwitch]]:
    ctl, server = make(tmp_path, "online", 0.0)
    ctl.agents["s1"].verify_interval = 3600.0  # the tests verify themselves
    try:
        yield ctl, server
    finally:
        ctl.stop()
        server.stop()
        gc.unfreeze()


def _steps(steps: list[Step]) -> set[tuple[str, TableEntry, TableEntry | None]]:
    return {(s.kind, s.entry, s.old) for s in steps}


def test_delta_steps_equal_the_full_diff(
    online: tuple[Controller, InProcessSwitch], monkeypatch: pytest.MonkeyPatch
) -> None:
    ctl, server = online
    agent = ctl.agents["s1"]
    seen: list[tuple[list[Step], list[Step]]] = []
    real = entries.plan_delta

    def spy(
        before: set[TableEntry],
        gone: set[TableEntry],
        new: set[TableEntry],
        counts: Mapping[str, int],
        sizes: Mapping[str, int] | None = None,
    ) -> list[Step]:
        assert dict(counts) == count_by_table(before)  # the controller's, of the same set
        got = real(before, gone, new, counts, sizes)
        seen.append((got, plan_updates(before, (before - gone) | new, agent._sizes())))
        return got

    monkeypatch.setattr(switchsync, "plan_delta", spy)
    hosts = Hosts(ctl)
    for it in range(3):
        hosts.report("big", "h1", it, ["g"], [])
        hosts.report("small", "h2", it, ["g"], [])
        hosts.report("small", "h4", it, [], ["g"])
        hosts.report("big", "h4", it, [], ["g"])
    assert len(seen) >= 3, "re-plans did not use the delta"
    for delta, full in seen:
        assert delta and _steps(delta) == _steps(full)
        assert all(s.kind == "MODIFY" for s in delta), "fine ranges: a re-plan only modifies"
    assert read_all(server) == ctl.desired("s1")


def test_delta_on_an_equal_installed_set(online: tuple[Controller, InProcessSwitch]) -> None:
    """Installed set equal to, but not the object the controller built the delta on:
    the delta still takes the switch exactly to the desired set."""
    ctl, server = online
    agent = ctl.agents["s1"]
    with ctl.lock:
        agent.installed = set(agent.installed)  # equal, but another object
    out = Hosts(ctl).report("big", "h1", 0, ["g"], [])
    assert out["covered"] and out["error"] is None and out["updates"] > 0
    assert agent.installed == ctl.desired("s1")
    assert read_all(server) == ctl.desired("s1")


def test_verify_read_overlapping_a_write_is_read_again(
    online: tuple[Controller, InProcessSwitch],
) -> None:
    ctl, server = online
    agent = ctl.agents["s1"]
    conn = agent.conn
    assert conn is not None
    hosts = Hosts(ctl)
    real_read = conn.read_entities
    calls: list[int] = []

    def read_then_replan(*entities: Any) -> Any:
        raw = real_read(*entities)
        calls.append(len(raw))
        if len(calls) == 1:  # the lock-free read: a re-plan lands after it, from another thread
            out: list[dict[str, Any]] = []
            t = threading.Thread(target=lambda: out.append(hosts.report("big", "h1", 0, ["g"], [])))
            t.start()
            t.join(30.0)
            assert out and out[0]["covered"] and out[0]["updates"] > 0
        return raw

    conn.read_entities = read_then_replan  # type: ignore[method-assign]
    before = agent.status.drift_detected
    # the lock-free read overlapped a write: not taken for drift, retried later
    assert agent.verify("test") is False
    assert len(calls) == 1 and agent.status.verify_rereads == 1
    # the retry reads again, nothing overlaps it, and the switch matches
    assert agent.verify("test") is False
    assert len(calls) == 2 and agent.status.verify_rereads == 1
    assert agent.status.drift_detected == before, "a write in progress was taken for drift"
    assert read_all(server) == ctl.desired("s1")


def test_online_state_is_frozen_out_of_the_collector(
    online: tuple[Controller, InProcessSwitch], monkeypatch: pytest.MonkeyPatch
) -> None:
    ctl, _ = online
    assert gc.get_freeze_count() > 0, "registrations did not freeze the heap"
    monkeypatch.setattr(online_mod, "FREEZE_EVERY_S", 0.0)
    assert ctl.online is not None
    before = ctl.online.freezes
    Hosts(ctl).report("big", "h1", 0, ["g"], [])
    planner = ctl.online
    wait_until(lambda: planner.stats()["heap_freezes"] > before, 10.0, "a freeze after the re-plan")

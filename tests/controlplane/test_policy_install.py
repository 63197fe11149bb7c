"""Every policy the evaluation compares is installable on the switch or refused with a
reason, and a policy from outside the project installs through ``echelonctl policy``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from controlplane.planning import POLICIES as INSTALLABLE
from controlplane.planning import Planner, check_policy
from controlplane.registry import GroupIds
from echelon.errors import SpecError
from echelon.jobs import load_description
from echelon.policies import POLICIES as EVALUATED
from echelon.topology import TopologyNetwork, load
from tests.controlplane.helpers import spec, write_topo
from tests.controlplane.procs import Daemon, free_port, start_softswitch
from tests.policy_plugin import REFERENCE, install_outside

# Fault injection against in-process switches and a whole controller: not a unit test
# (make test-fast leaves it out; make test runs it).
pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent


def _staggered(job: str, groups: int) -> dict[str, object]:
    """Groups of different sizes and staggered flows, so policies disagree."""
    desc = spec(job, groups, ("h1", "h2", "h3"))
    for g, ef in enumerate(desc["echelonflows"]):  # type: ignore[attr-defined]
        for k, f in enumerate(ef["flows"]):
            f["size"] = 1000 * (g + 1) * (k + 1)
    return desc


@pytest.mark.parametrize("policy", EVALUATED)
def test_every_evaluated_policy_installs_or_is_refused(tmp_path: Path, policy: str) -> None:
    topo = load(write_topo(tmp_path / "t.yaml", ["127.0.0.1:1"]))
    if policy == "fair":
        with pytest.raises(SpecError, match="cannot be installed on the switch: per-flow"):
            check_policy(policy)
        return
    assert policy in INSTALLABLE
    planner = Planner(policy, TopologyNetwork(topo))
    job = load_description(_staggered("j", 3), topo.hosts)
    planner.add(job, [GroupIds(g, i + 1, i + 1) for i, g in enumerate(job.groups)])
    plans = planner.plans()
    levels = {p.priority for p in plans} | {r.priority for p in plans for r in p.ranges}
    if policy == "fifo":  # FIFO is the switch without priorities: one queue, arrival order
        assert levels == {0}
    else:  # the policy's order reaches the switch as distinct levels
        assert len(levels - {0}) >= 2, plans


@pytest.fixture
def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Daemon]:
    env = install_outside(tmp_path / "outside")
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])  # the daemon inherits it
    port = free_port()
    topo = write_topo(tmp_path / "t.yaml", [f"127.0.0.1:{port}"])
    switch = start_softswitch(port, tmp_path / "ss.log")
    d = Daemon(topo, tmp_path / "r.db", tmp_path / "ctl.log")
    try:
        d.wait_ready()
        yield d
    finally:
        d.stop()
        switch.stop()


def _ctl(d: Daemon, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "echelonctl"), "--api", d.url, *argv],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_plugin_installs_through_echelonctl(daemon: Daemon, tmp_path: Path) -> None:
    import yaml

    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump(_staggered("j", 3)))
    assert _ctl(daemon, "register", str(f)).returncode == 0
    r = _ctl(daemon, "policy", REFERENCE)
    assert r.returncode == 0, r.stdout + r.stderr
    assert REFERENCE in r.stdout
    shown = daemon.get("/jobs/j")
    assert shown["policy"] == REFERENCE
    assert all(shown["installed"].values())
    prios = {g["priority"] for g in shown["groups"]}
    assert len(prios - {0}) >= 2, shown["groups"]  # its order, as levels on the switch
    refused = _ctl(daemon, "policy", "fair")
    assert refused.returncode != 0
    assert "cannot be installed" in refused.stdout + refused.stderr
    assert daemon.get("/jobs/j")["policy"] == REFERENCE  # a refusal changes nothing


def test_start_switches_says_the_switch_has_no_ports(tmp_path: Path) -> None:
    """``echelon-controller --start-switches soft``: a switch with no data ports counts
    nothing, which a user watching ``echelonctl stats`` must be told up front."""
    port = free_port()
    topo = write_topo(tmp_path / "t.yaml", [f"127.0.0.1:{port}"])
    d = Daemon(topo, tmp_path / "r.db", tmp_path / "ctl.log", "--start-switches", "soft")
    try:
        d.wait_ready()
    finally:
        d.stop()
    log = d.log.read_text()
    assert "it has no data ports" in log and "echelonctl stats stays at 0" in log

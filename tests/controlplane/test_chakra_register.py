"""End to end: a Chakra trace -> `echelon job --chakra` job file -> registered with the
controller -> table entries installed on (in-process) soft switches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from controlplane.controller import Controller
from controlplane.entries import T_CLASSIFY, T_DEADLINE, T_IDS, T_LPM
from echelon.cli import main
from tests.controlplane.inproc import InProcessSwitch, controller_and_switches
from tests.controlplane.test_controller_inproc import by_table, read_back
from tests.core.test_chakra_convert import _ddp_like
from tests.core.test_chakra_trace import DDP

HOSTS = "h1,h2,h3,h4"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[Controller, list[InProcessSwitch]]]:
    with controller_and_switches(tmp_path, 2) as pair:
        yield pair


def _job_file(trace: Path, out: Path) -> dict[str, object]:
    assert main(["job", "--chakra", str(trace), "--hosts", HOSTS, "-o", str(out)]) == 0
    data = yaml.safe_load(out.read_text())
    assert isinstance(data, dict)
    return data


@pytest.mark.slow
@pytest.mark.parametrize("source", ["built", "shipped"])
def test_a_trace_job_installs_its_groups_entries(
    source: str, env: tuple[Controller, list[InProcessSwitch]], tmp_path: Path
) -> None:
    if source == "shipped" and not DDP.exists():
        pytest.skip("shared Chakra traces not present")
    ctl, servers = env
    trace = _ddp_like(tmp_path) if source == "built" else DDP
    view = ctl.register(_job_file(trace, tmp_path / "job.yaml"))
    groups = {g["group"]: g for g in view["groups"]}
    expect = {"built": {"allreduce/0"}, "shipped": {"broadcast/0", "allreduce/1"}}[source]
    assert set(groups) == expect
    assert all(g["switches"] == ["s1"] for g in view["groups"])  # h1..h4 are on s1
    # every ring member sends: one classify entry per (group, source host) on s1, the
    # switch of h1..h4; s2 (h5's) carries none of the job's packets and holds only routes
    sources = {"allreduce/0": 4, "allreduce/1": 4, "broadcast/0": 3}
    ranges = sum(len(g["ranges"]) for g in view["groups"])
    got = read_back(servers[0])
    assert got == ctl.desired("s1")
    assert len(by_table(got, T_IDS)) == len(expect)
    assert len(by_table(got, T_CLASSIFY)) == sum(sources[g] for g in expect)
    assert len(by_table(got, T_DEADLINE)) == ranges
    s2 = read_back(servers[1])
    assert s2 == ctl.desired("s2") and {e.table for e in s2} == {T_LPM}
    ctl.remove(view["job"])
    for s in servers:
        assert {e.table for e in read_back(s)} == {"EchelonIngress.ipv4_lpm"}

"""echelonctl as a user meets it, over real HTTP: pipes, a switch that is down,
readable states, documented environment, aligned tables, per-job live counters."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane import cli
from controlplane.api import make_app
from controlplane.apimodels import StatsView
from controlplane.controller import Controller
from controlplane.registry import Registry
from echelon.constants import (
    NUM_PRIORITIES,
    REG_QUEUE_DEPTH,
    REG_QUEUE_DEPTH_MAX,
    REG_QUEUE_SOJOURN,
)
from echelon.topology import load
from echelon.waiting import wait_until
from p4client.bmruntime import RuntimeClient
from p4client.p4info import P4Info
from targets.process import free_port
from tests.controlplane.helpers import DEVICE_CONFIG, P4INFO, spec, write_topo
from tests.controlplane.inproc import InProcessSwitch, serving

BIN = Path(sys.executable).parent


class Live:
    """A controller on an in-process switch, its API on real HTTP."""

    def __init__(self, ctl: Controller, srv: InProcessSwitch | None, url: str) -> None:
        self.ctl, self.srv, self.url = ctl, srv, url

    def cli(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
        rc = cli.main(["--api", self.url, "--timeout", "10", *argv])
        out = capsys.readouterr()
        return rc, out.out, out.err


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    srv = InProcessSwitch()
    topo = load(write_topo(tmp_path / "t.yaml", [srv.addr], [srv.thrift_port]))
    ctl = Controller(topo, P4Info.load(P4INFO), Registry(tmp_path / "r.db"), DEVICE_CONFIG)
    ctl.start()
    try:
        assert ctl.wait_in_sync(10.0)
        with serving(make_app(ctl)) as url:
            yield Live(ctl, srv, url)
    finally:
        ctl.stop()
        srv.stop()


def test_help_documents_the_environment(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "ECHELON_API " in out and "ECHELON_API_TOKEN" in out and "stats --job" in out


def big_job(flows: int) -> dict[str, Any]:
    return {
        "job": "big",
        "echelonflows": [
            {
                "group": "g",
                "flows": [
                    {"src": "h1", "dst": "h4", "size": 1000, "offset": i * 1e-5}
                    for i in range(flows)
                ],
            }
        ],
    }


@pytest.mark.slow
def test_piped_to_head_no_traceback(live: Live) -> None:
    """The answer is far bigger than a pipe's buffer, so the writer meets a closed pipe."""
    live.ctl.register(big_job(3000))
    for cmd, first in (("--json show big", "{"), ("show big", "job big"), ("--json list", "[")):
        res = subprocess.run(
            f"{BIN}/echelonctl --api {live.url} {cmd} | head -1",
            shell=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.stdout.startswith(first), (cmd, res.stdout)
        assert "Traceback" not in res.stderr and "BrokenPipe" not in res.stderr, res.stderr


@pytest.mark.slow
def test_switch_down_stats_errs_and_status_says_why(
    live: Live, capsys: pytest.CaptureFixture[str]
) -> None:
    live.ctl.register(spec("a"))
    rc, out, err = live.cli(capsys, "stats")
    assert rc == 0 and "a " in out and not err
    assert live.srv is not None
    live.srv.stop()
    wait_until(
        lambda: not live.ctl.status()["switches"]["s1"]["connected"], 20, "the switch to be gone"
    )
    rc, out, err = live.cli(capsys, "stats")
    assert rc == 2
    assert err.startswith("error: switch s1: counters unavailable")
    assert "PACKETS" not in out  # no table of zeros as if nothing had happened
    rc, out, err = live.cli(capsys, "--json", "stats")
    assert rc == 2 and '"error"' in out
    rc, out, _ = live.cli(capsys, "status")
    assert rc == 0
    row = next(line for line in out.splitlines() if line.startswith("s1"))
    assert "is it running?" in row or "not connected" in row, row
    assert "UNAVAILABLE" not in out and "Cancelling" not in out


def test_unreachable_controller_names_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["--api", f"http://127.0.0.1:{free_port()}", "--timeout", "2", "status"])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot reach the controller" in err and "connection refused" in err
    assert "ECHELON_API" in err  # says how to point it elsewhere
    assert "Traceback" not in err


def test_per_job_live_counters(live: Live, capsys: pytest.CaptureFixture[str]) -> None:
    live.ctl.register(spec("a", groups=2))
    live.ctl.register(spec("b"))
    rc, out, _ = live.cli(capsys, "stats", "--job", "a", "--watch", "0.05", "--count", "2")
    assert rc == 0
    samples = [s for s in out.split("-- ") if s.strip()]
    assert len(samples) == 2
    rows = [line.split() for line in samples[1].splitlines() if line.startswith(("a ", "b "))]
    assert {r[0] for r in rows} == {"a"} and {r[1] for r in rows} == {"g0", "g1"}
    show = {g["group"]: g["priority"] for g in live.ctl.show("a")["groups"]}
    assert {r[1]: int(r[4]) for r in rows} == show  # PRIO column = installed level
    assert "PKT/S" in samples[1] and "spoofed_source" in samples[1]
    rc, _, err = live.cli(capsys, "stats", "--job", "nope")
    assert rc == 2 and "'nope' is not registered" in err and "'a'" in err
    rc, _, err = live.cli(capsys, "stats", "--watch", "0")
    assert rc == 2 and "--watch" in err


def test_stats_shows_each_priority_queue_and_resets_the_maximum(
    live: Live, capsys: pytest.CaptureFixture[str]
) -> None:
    """The queue view is what the switch's telemetry registers hold (written here as the
    egress would: port 4, priority 6 -> cell 4 * 8 + 6), read over its Thrift port."""
    assert live.srv is not None
    cell = 4 * NUM_PRIORITIES + 6
    with RuntimeClient(live.srv.thrift_port) as rt:
        rt.write_register(REG_QUEUE_DEPTH, cell, 3)
        rt.write_register(REG_QUEUE_DEPTH_MAX, cell, 9)
        rt.write_register(REG_QUEUE_SOJOURN, cell, 12_500)
    rc, out, err = live.cli(capsys, "stats")
    assert rc == 0 and not err
    (row,) = [line.split() for line in out.splitlines() if line.startswith("s1 ")]
    assert row == ["s1", "4", "6", "3", "9", "12,500"]
    queues = live.ctl.stats()["switches"]["s1"]["queues"]
    assert queues == [{"port": 4, "priority": 6, "depth": 3, "max_depth": 9, "sojourn_us": 12_500}]
    rc, out, err = live.cli(capsys, "stats", "--reset-max")
    assert rc == 0 and not err
    (row,) = [line.split() for line in out.splitlines() if line.startswith("s1 ")]
    assert row == ["s1", "4", "6", "3", "0", "12,500"]  # depth and sojourn stay


def test_stats_warns_when_queues_are_unreadable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A switch whose Thrift port does not answer: counters shown, queues a warning."""
    srv = InProcessSwitch()
    topo = load(write_topo(tmp_path / "t.yaml", [srv.addr]))  # a closed Thrift port
    ctl = Controller(topo, P4Info.load(P4INFO), Registry(tmp_path / "r.db"), DEVICE_CONFIG)
    ctl.start()
    try:
        assert ctl.wait_in_sync(10.0)
        with serving(make_app(ctl)) as url:
            rc = cli.main(["--api", url, "stats"])
        out, err = capsys.readouterr()
        assert rc == 0 and "PACKETS" in out
        assert err.startswith("warning: switch s1: queue depths unavailable"), err
    finally:
        ctl.stop()
        srv.stop()


def test_register_prints_unit_warnings(
    live: Live, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = copy.deepcopy(spec("slow"))
    job["echelonflows"][0]["flows"][1]["size"] = 8  # 8 bytes: meant 8 MB?
    f = tmp_path / "slow.yaml"
    f.write_text(yaml.safe_dump(job))
    rc, out, err = live.cli(capsys, "register", str(f))
    assert rc == 0 and "job slow" in out
    assert "warning: echelonflows[0].flows[1].size: 8 bytes is tiny" in err


def test_tables_align_and_carry_units() -> None:
    data = StatsView.model_validate(
        {
            "groups": [
                {"job": "a", "group": "g0", "echelon_id": 1, "class_id": 0, "priority": 7,
                 "packets": 5, "bytes": 5000},
                {"job": "long-job", "group": "g1", "echelon_id": 12, "class_id": 1,
                 "priority": 3, "packets": 123456, "bytes": 987654321},
            ],
            "unprioritized": {"plain": {"packets": 1, "bytes": 64}},
            "switches": {"s1": {"unprioritized": {"plain": {"packets": 1, "bytes": 64}}}},
        }
    )  # fmt: skip
    before = data.model_copy(deep=True)
    text = cli.render_stats(data, None, before, 1.0)
    lines = text.split("\n\n")[0].splitlines()
    assert lines[0].split()[-2:] == ["PKT/S", "MBIT/S"]
    # numbers are right-aligned: every row of the table ends in the same column
    assert len({len(line) for line in lines}) == 1, lines
    packets_end = lines[0].index("PACKETS") + len("PACKETS")
    assert all(line[packets_end - 1] != " " for line in lines), lines
    assert "987,654,321" in text


def test_watch_redraws_in_place_on_a_terminal_and_appends_in_a_pipe(
    live: Live, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    live.ctl.register(spec("a"))
    argv = ("stats", "--watch", "0.05", "--count", "2")
    rc, piped, _ = live.cli(capsys, *argv)
    assert rc == 0 and cli.CLEAR_SCREEN not in piped and piped.count("-- ") == 2
    monkeypatch.setattr(cli, "_is_terminal", lambda: True)
    rc, shown, _ = live.cli(capsys, *argv)
    assert rc == 0 and shown.count(cli.CLEAR_SCREEN) == 2  # each sample from the top
    assert shown.startswith(cli.CLEAR_SCREEN)

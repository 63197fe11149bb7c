"""The switch's command line: simple_switch_grpc's options."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from echelon.waiting import wait_until
from p4client.p4info import P4Info
from p4client.p4rt import SwitchConnection
from softswitch.errors import UsageError
from softswitch.main import main, parse_args
from targets.process import free_port
from tests.softswitch.helpers import JSON_PATH, P4INFO_PATH, PYTHON, ROOT


def test_parse_simple_switch_grpc_command_line() -> None:
    o = parse_args(
        [
            "--device-id",
            "3",
            "-i",
            "1@veth1",
            "-i",
            "2@veth2",
            "--thrift-port",
            "9191",
            "--log-console",
            "-L",
            "debug",
            "--no-p4",
            "--",
            "--grpc-server-addr",
            "127.0.0.1:9560",
            "--priority-queues",
            "8",
            "--cpu-port",
            "255",
        ]
    )
    assert o.ports == {1: "veth1", 2: "veth2"}
    assert (o.device_id, o.thrift_port, o.log_level, o.priority_queues) == (3, 9191, "debug", 8)
    assert o.grpc_addr == "127.0.0.1:9560" and o.cpu_port == 255 and o.log_console


def test_defaults_and_ignored_json() -> None:
    o = parse_args(["build/echelon.json"])
    assert (o.device_id, o.thrift_port, o.priority_queues) == (0, 9090, 1)
    assert o.grpc_addr == "127.0.0.1:9559" and o.ports == {}


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["-i", "veth1"], "interface"),
        (["-i", "x@veth1"], "interface"),
        (["-i", "1@a", "-i", "1@b"], "interface"),
        (["--", "--priority-queues", "0"], "priority-queues"),
        (["--bogus"], "arguments"),
        (["-L", "loud"], "arguments"),
        (["--thrift-port", "70000"], "thrift-port"),  # before: a traceback
    ],
)
def test_bad_arguments_name_the_field(argv: list[str], field: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_args(argv)
    assert exc.value.field == field


def test_main_prints_error_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-i", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: interface:") and "Traceback" not in err


@pytest.mark.slow
def test_p4info_at_start_is_committed_as_p4runtime_commits(tmp_path: Path) -> None:
    """``--p4info FILE JSON`` loads the program through the service's one commit path
    (its log line, digests wired to the primary), and P4Runtime reads it back."""
    grpc_addr = f"127.0.0.1:{free_port()}"
    log = tmp_path / "sw.log"
    argv = [PYTHON, "-m", "softswitch", "--thrift-port", "0", "--log-file", str(log)]
    argv += ["--p4info", str(P4INFO_PATH), str(JSON_PATH), "--", "--grpc-server-addr", grpc_addr]
    proc = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        wait_until(lambda: log.exists() and "ready grpc=" in log.read_text(), 30.0, "ready")
        assert "pipeline committed" in log.read_text()
        with SwitchConnection(grpc_addr) as sw:
            got = sw.get_pipeline_p4info()
        assert got is not None and got.proto == P4Info.load(P4INFO_PATH).proto
    finally:
        proc.terminate()
        assert proc.wait(10) == 0

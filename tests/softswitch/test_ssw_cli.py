"""Command lines: the switch's simple_switch_grpc options and the runtime CLI."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator

import pytest

from softswitch import cli
from softswitch.errors import UsageError
from softswitch.main import main, parse_args
from softswitch.queueing import PriorityRateQueues
from softswitch.runtime import RuntimeServer, send_commands
from tests.softswitch.helpers import free_port


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
    assert o.grpc_addr == "0.0.0.0:9559" and o.ports == {}


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["-i", "veth1"], "interface"),
        (["-i", "x@veth1"], "interface"),
        (["-i", "1@a", "-i", "1@b"], "interface"),
        (["--", "--priority-queues", "0"], "priority-queues"),
        (["--bogus"], "arguments"),
        (["-L", "loud"], "arguments"),
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


@pytest.fixture
def runtime() -> Iterator[tuple[RuntimeServer, PriorityRateQueues[bytearray]]]:
    q: PriorityRateQueues[bytearray] = PriorityRateQueues(8)
    q.add_port(1)
    q.add_port(2)
    srv = RuntimeServer(0, q, threading.Lock())
    srv.start()
    try:
        yield srv, q
    finally:
        srv.stop()


def test_runtime_port_applies_queue_commands(
    runtime: tuple[RuntimeServer, PriorityRateQueues[bytearray]],
) -> None:
    srv, q = runtime
    outs = send_commands(
        srv.port,
        [
            "set_queue_rate 100",
            "set_queue_depth 16 2",
            "set_queue_rate 5 1 7",
            "set_queue_depth 3 1 8",
            "set_queue_rate fast",
            "frobnicate",
        ],
    )
    assert outs[:3] == [[], [], []]
    assert outs[3] == ["Error: priority: 8 is not in 0..7"]
    assert outs[4] == ["Error: rate_pps: 'fast' is not a number"]
    assert outs[5] == ["*** Unknown syntax: frobnicate"]
    assert [x.rate for x in q.ports[1]] == [100.0] * 7 + [5.0]
    assert [x.depth for x in q.ports[2]] == [16] * 8
    assert [x.depth for x in q.ports[1]] == [64] * 8


def test_cli_reads_stdin(
    runtime: tuple[RuntimeServer, PriorityRateQueues[bytearray]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    srv, q = runtime
    monkeypatch.setattr("sys.stdin", io.StringIO("set_queue_depth 7\nnope\n"))
    assert cli.main(["--thrift-port", str(srv.port)]) == 0
    out = capsys.readouterr().out
    assert "RuntimeCmd: *** Unknown syntax: nope" in out
    assert all(x.depth == 7 for x in q.ports[1])


def test_cli_unreachable_exits_2(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("set_queue_rate 1\n"))
    assert cli.main(["--thrift-port", str(free_port())]) == 2
    assert capsys.readouterr().err.startswith("error: thrift-port:")

"""The switches' per-packet trace log (``make run TRACE=1``, ``topo.run --packet-trace``):
the command line of each target, the soft switch's acceptance of it, and a switch of
each kind writing it where it was asked to."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from echelon.waiting import wait_until
from softswitch.main import parse_args
from targets.process import TargetError, free_port
from targets.switch import TRACE_FILE_BYTES, TRACE_FILES, command_line, start_target
from tests.targets.kinds import KINDS
from topo.run import parse_args as run_args

ROOT = Path(__file__).resolve().parents[2]


def _options(argv: list[str]) -> list[str]:
    return argv[: argv.index("--")]


def test_bmv2_trace_log_goes_to_the_file_at_trace_level_flushed() -> None:
    trace = "/r/s1-trace.txt"
    argv = _options(command_line("bmv2", {1: "a"}, "127.0.0.1:1", 2, packet_trace=trace))
    # BMv2 refuses --log-console with --log-file ("are exclusive")
    assert "--log-console" not in argv
    assert argv[argv.index("--log-file") + 1] == "/r/s1-trace"  # BMv2 adds .txt
    assert argv[argv.index("-L") + 1] == "trace" and "--log-flush" in argv
    assert argv[argv.index("--log-file-max-size") + 1] == str(TRACE_FILE_BYTES)
    assert argv[argv.index("--log-file-max-files") + 1] == str(TRACE_FILES)
    with pytest.raises(TargetError, match="packet_trace"):
        command_line("bmv2", {}, "127.0.0.1:1", 2, packet_trace="/r/s1.log")
    plain = _options(command_line("bmv2", {1: "a"}, "127.0.0.1:1", 2))
    assert "--log-console" in plain and "--log-file" not in plain
    assert plain[plain.index("-L") + 1] == "info"


def test_soft_switch_takes_its_trace_command_line() -> None:
    argv = command_line("soft", {1: "a"}, "127.0.0.1:1", 2, packet_trace="/r/s1-trace.txt")
    opts = parse_args(argv[3:])  # after `python -m softswitch`
    assert opts.log_file == "/r/s1-trace.txt" and opts.log_level == "trace"
    assert not opts.log_console


def test_make_run_trace_passes_the_option(tmp_path: Path) -> None:
    assert run_args(["--packet-trace"]).packet_trace and not run_args([]).packet_trace
    show = "show-run-flags: ; @echo $(RUN_FLAGS)"

    def flags(*extra: str) -> str:
        cmd = ["make", "-s", "-C", str(ROOT), "--eval", show, "show-run-flags", *extra]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    assert "--packet-trace" in flags("TRACE=1").split()
    assert "--packet-trace" not in flags().split() + flags("TRACE=0").split()


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="starts switch processes (run under the lock)")
@pytest.mark.parametrize("kind", KINDS)
def test_switch_writes_its_trace_log(kind: str, tmp_path: Path) -> None:
    trace = tmp_path / "logs" / "s1-trace.txt"  # the folder does not exist yet
    target = start_target(
        kind,  # type: ignore[arg-type]
        {},
        f"127.0.0.1:{free_port()}",
        free_port(),
        log_path=tmp_path / "s1.log",
        packet_trace=trace,
    )
    try:
        assert target.packet_trace == trace.resolve()
        wait_until(lambda: trace.exists() and trace.stat().st_size > 0, 15.0, f"lines in {trace}")
    finally:
        target.stop()

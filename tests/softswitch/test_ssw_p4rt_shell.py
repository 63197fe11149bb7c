"""Interop: p4runtime-shell (in its own venv: it pins protobuf < 3.21) drives the soft switch.

The venv is made by ``make p4rt-shell-venv`` (reused when present, ~20 s when not).
The switch runs through the one launcher; the project's own client then reads back
what the shell wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from p4client.p4info import P4Info
from p4client.p4rt import SwitchConnection
from targets.process import free_port
from targets.switch import Target, start_target

ROOT = Path(__file__).resolve().parents[2]
P4INFO = ROOT / "p4src" / "build" / "echelon.p4info.txtpb"
SHELL_VENV = ROOT / os.environ.get("P4RT_VENV", ".venv-p4rt-shell")
SCRIPT = Path(__file__).with_name("p4rt_shell_script.py")


@pytest.fixture(scope="module")
def shell_python() -> Path:
    if not (SHELL_VENV / ".installed").exists():
        r = subprocess.run(
            ["make", "p4rt-shell-venv"], cwd=ROOT, capture_output=True, text=True, timeout=600
        )
        assert r.returncode == 0, r.stdout + r.stderr
    return SHELL_VENV / "bin" / "python"


@pytest.fixture
def switch(tmp_path: Path) -> Iterator[Target]:
    log = tmp_path / "sw.log"
    t = start_target("soft", {}, f"127.0.0.1:{free_port()}", free_port(), log_path=log)
    try:
        yield t
    finally:
        assert t.stop() == 0, log.read_text()


@pytest.mark.slow
def test_p4runtime_shell_programs_the_soft_switch(shell_python: Path, switch: Target) -> None:
    device_json = ROOT / "p4src" / "build" / "echelon.json"  # p4c's program, as for BMv2
    run = [str(shell_python), str(SCRIPT), switch.grpc_addr, str(P4INFO), str(device_json)]
    out = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"entries": 1, "prefix_len": 32, "port": 2, "counter_packets": 0}
    # What the shell wrote, as the project's client reads it (a backup: election 0,0).
    info = P4Info.load(P4INFO)
    with SwitchConnection(switch.grpc_addr, election_id=(0, 0), p4info=info) as sw:
        (route,) = sw.read_table_entries("ipv4_lpm")
        assert route.match_dict() == {"hdr.ipv4.dstAddr": (0x0A000102, 32)}
        assert route.params_dict() == {"dstAddr": 2, "port": 2}
        assert sw.read_counter("unprioritized_pkts", 0) == {0: (0, 0)}

"""Both targets, started by ``start_target``, answer BMv2's Thrift runtime API the same way:
the typed client and ``simple_switch_CLI`` set queues and read tables and counters."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from p4client.bmruntime import RuntimeApiError
from p4client.p4rt import SwitchConnection
from targets.process import free_port
from targets.switch import Target, start_target
from tests.softswitch.p4json import bmv2_json
from tests.targets.kinds import KINDS

ROOT = Path(__file__).resolve().parents[2]
P4INFO = ROOT / "p4src" / "build" / "echelon.p4info.txtpb"
VENV_CLI = str(Path(sys.executable).parent / "simple_switch_CLI")


@pytest.fixture(params=KINDS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    grpc_addr = f"127.0.0.1:{free_port()}"
    t = start_target(request.param, {}, grpc_addr, free_port(), log_path=tmp_path / "sw.log")
    try:
        with SwitchConnection(grpc_addr) as sw:
            sw.set_pipeline(P4INFO, bmv2_json(tmp_path).read_bytes())
            sw.insert(
                [
                    sw.table_entry(
                        "echelon_classify",
                        {"hdr.ipv4.srcAddr": "10.0.0.1", "hdr.echelon.echelon_id": 7},
                        "set_echelon",
                        {"class_id": 3, "prio": 6},
                    )
                ]
            )
        yield t
    finally:
        assert t.stop() in (0, -15), (tmp_path / "sw.log").read_text()


def test_typed_client_on_both_targets(target: Target) -> None:
    with target.runtime() as rt:
        rt.set_queue_rate(100, 1)
        rt.set_queue_depth(32)
        rt.set_queue_rate(0, 1)
        (e,) = rt.table_entries("EchelonIngress.echelon_classify")
        assert e.match == (("exact", 0x0A000001), ("exact", 7))
        assert (e.action, e.params) == ("EchelonIngress.set_echelon", (3, 6))
        rt.write_counter("EchelonIngress.echelon_pkts", 3, packets=5, nbytes=500)
        assert rt.read_counter("EchelonIngress.echelon_pkts", 3) == (5, 500)
        with pytest.raises(RuntimeApiError) as exc:
            rt.read_counter("EchelonIngress.nope", 0)
        assert exc.value.code == "INVALID_COUNTER_NAME"


def test_simple_switch_cli_on_both_targets(target: Target) -> None:
    lines = (
        "set_queue_rate 100 1\n"
        "table_dump EchelonIngress.echelon_classify\n"
        "counter_read EchelonIngress.echelon_pkts 3\n"
    )
    argv = [VENV_CLI, "--thrift-port", str(target.thrift_port)]
    res = subprocess.run(argv, input=lines, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "Action entry: EchelonIngress.set_echelon - 03, 06" in res.stdout, res.stdout
    assert "EchelonIngress.echelon_pkts[3]= (0 bytes, 0 packets)" in res.stdout
    assert "Error" not in res.stdout

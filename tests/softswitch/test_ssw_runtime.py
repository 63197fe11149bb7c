"""BMv2's Thrift runtime API on the soft switch: the typed client and both simple_switch_CLIs.

The server runs in-process (queues + the real P4Runtime service, no data plane);
the CLIs are real processes: PyPI's ``simple_switch_CLI`` from the venv and, when
installed, BMv2's own. Both load the BMv2 JSON through ``bm_get_config``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from p4client.bmruntime import RuntimeApiError, RuntimeClient
from p4client.p4rt import SwitchConnection
from softswitch.bm.pipeline import Pipeline
from softswitch.p4rt_server import P4RuntimeService, make_server
from softswitch.queueing import PriorityRateQueues
from softswitch.runtime import EMPTY_CONFIG, RuntimeServer
from targets.process import free_port
from tests.softswitch.helpers import P4INFO_PATH
from tests.softswitch.p4json import bmv2_json

VENV_CLI = str(Path(sys.executable).parent / "simple_switch_CLI")


def _bmv2_cli() -> str | None:
    """BMv2's own simple_switch_CLI: ``/usr/local/bin``'s, else the one beside
    ``simple_switch_grpc``; never a lookup on PATH, where the venv's (PyPI's) comes first."""
    candidates = [Path("/usr/local/bin/simple_switch_CLI")]
    grpc_switch = shutil.which("simple_switch_grpc")
    if grpc_switch is not None:
        candidates.append(Path(grpc_switch).resolve().parent / "simple_switch_CLI")
    return next((str(c) for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


BMV2_CLI = _bmv2_cli()
NO_BMV2_CLI = "BMv2's simple_switch_CLI is not in /usr/local/bin nor beside simple_switch_grpc"


@dataclass
class Rig:
    thrift: int
    grpc: str
    queues: PriorityRateQueues[bytearray]
    service: P4RuntimeService


@pytest.fixture
def rig() -> Iterator[Rig]:
    q: PriorityRateQueues[bytearray] = PriorityRateQueues(8)
    q.add_port(1)
    q.add_port(2)
    committed: list[Pipeline | None] = []
    service = P4RuntimeService(0, committed.append)
    grpc_srv, gport = make_server(service, "127.0.0.1:0")
    grpc_srv.start()
    rt = RuntimeServer(
        0, q, threading.Lock(), service, ports={1: "lo", 2: "no-such-if0"}, device_id=3
    )
    rt.start()
    try:
        yield Rig(rt.port, f"127.0.0.1:{gport}", q, service)
    finally:
        rt.stop()
        grpc_srv.stop(grace=0).wait(5)


def program(rig: Rig, device_config: bytes) -> None:
    """Pipeline + one /32 route, one deadline range, counter echelon_pkts[3] = (4, 400)."""
    with SwitchConnection(rig.grpc) as sw:
        sw.set_pipeline(P4INFO_PATH, device_config)
        sw.insert(
            [
                sw.table_entry(
                    "ipv4_lpm",
                    {"hdr.ipv4.dstAddr": ("10.0.0.1", 32)},
                    "ipv4_forward",
                    {"dstAddr": "00:00:0a:00:00:01", "port": 1},
                ),
                sw.table_entry(
                    "deadline_prio",
                    {"meta.class_id": 3, "hdr.echelon.deadline_us": (10, 2000)},
                    "set_deadline_prio",
                    {"prio": 5},
                    priority=1,
                ),
            ]
        )
    with RuntimeClient(rig.thrift) as rt:
        rt.write_counter("echelon_pkts", 3, packets=4, nbytes=400)


def test_queue_calls_reach_the_queues(rig: Rig) -> None:
    with RuntimeClient(rig.thrift) as rt:
        rt.set_queue_rate(100)
        rt.set_queue_depth(16, 2)
        rt.set_queue_rate(5, 1, 7)
        rt.set_queue_depth(3, 1, 0)
        with pytest.raises(RuntimeApiError) as exc:
            rt.set_queue_rate(1, 1, 8)  # only 8 priority queues
        assert exc.value.operation == "set_queue_rate"
        assert rt.time_elapsed_us() > 0
    assert [x.rate for x in rig.queues.ports[1]] == [100.0] * 7 + [5.0]
    assert [x.depth for x in rig.queues.ports[2]] == [16] * 8
    assert [x.depth for x in rig.queues.ports[1]] == [3] + [64] * 7


def test_reads_tables_counters_and_config(rig: Rig, tmp_path: Path) -> None:
    with RuntimeClient(rig.thrift) as rt:
        assert rt.get_config() == EMPTY_CONFIG  # no pipeline yet
        with pytest.raises(RuntimeApiError) as exc:
            rt.table_entries("EchelonIngress.ipv4_lpm")
        assert exc.value.code == "INVALID_TABLE_NAME"
    config = bmv2_json(tmp_path).read_text()
    program(rig, config.encode())
    with RuntimeClient(rig.thrift) as rt:
        assert rt.get_config() == config
        assert rt.get_config_md5() == hashlib.md5(config.encode()).digest()
        (lpm,) = rt.table_entries("EchelonIngress.ipv4_lpm")
        assert lpm.match == (("lpm", 0x0A000001, 32),)
        assert (lpm.action, lpm.params, lpm.priority) == (
            "EchelonIngress.ipv4_forward",
            (0x0A000001, 1),
            -1,
        )
        (rng,) = rt.table_entries("deadline_prio")  # aliases work too
        assert rng.match == (("exact", 3), ("range", 10, 2000))
        assert rng.priority == (1 << 31) - 2  # what BMv2 reports for P4Runtime priority 1
        assert rt.num_entries("EchelonIngress.echelon_classify") == 0
        assert rt.default_action("EchelonIngress.ipv4_lpm") == ("EchelonIngress.drop", ())
        assert rt.read_counter("EchelonIngress.echelon_pkts", 3) == (4, 400)
        rt.reset_counter("EchelonIngress.echelon_pkts")
        assert rt.read_counter("EchelonIngress.echelon_pkts", 3) == (0, 0)
        for name, index, code in [
            ("nope", 1, "INVALID_COUNTER_NAME"),
            ("echelon_pkts", 5000, "INVALID_INDEX"),
        ]:
            with pytest.raises(RuntimeApiError) as exc:
                rt.read_counter(name, index)
            assert exc.value.code == code


def test_unreachable_port_raises() -> None:
    with pytest.raises(RuntimeApiError) as exc:
        RuntimeClient(free_port(), timeout=2).connect()
    assert exc.value.code == "UNAVAILABLE"


def cli(binary: str, port: int, lines: str) -> str:
    res = subprocess.run(
        [binary, "--thrift-port", str(port)],
        input=lines,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


CLIS = [
    pytest.param(VENV_CLI, id="pypi-cli"),
    pytest.param(
        BMV2_CLI, id="bmv2-cli", marks=pytest.mark.skipif(BMV2_CLI is None, reason=NO_BMV2_CLI)
    ),
]


@pytest.mark.parametrize("binary", CLIS)
def test_simple_switch_cli_drives_it(rig: Rig, binary: str, tmp_path: Path) -> None:
    program(rig, bmv2_json(tmp_path).read_bytes())
    out = cli(
        binary,
        rig.thrift,
        "set_queue_rate 100 1\nset_queue_depth 7 2\n"
        "table_dump EchelonIngress.deadline_prio\ntable_dump EchelonIngress.ipv4_lpm\n"
        "counter_read EchelonIngress.echelon_pkts 3\n",
    )
    assert [x.rate for x in rig.queues.ports[1]] == [100.0] * 8
    assert [x.depth for x in rig.queues.ports[2]] == [7] * 8
    assert "RANGE     0000000a -> 000007d0" in out
    assert "Action entry: EchelonIngress.set_deadline_prio - 05" in out
    assert "LPM       0a000001/32" in out
    assert "Action entry: EchelonIngress.ipv4_forward - 0a000001, 01" in out
    assert "EchelonIngress.echelon_pkts[3]= (400 bytes, 4 packets)" in out
    assert "Error" not in out


@pytest.mark.parametrize("binary", CLIS)
def test_register_commands_as_bmv2(rig: Rig, binary: str, tmp_path: Path) -> None:
    """simple_switch_CLI's ``register_write``, ``register_read`` (one cell, all) and
    ``register_reset`` on the program's cells; names and indices checked as BMv2 does."""
    program(rig, bmv2_json(tmp_path).read_bytes())
    name = "EchelonEgress.queue_depth_max"
    out = cli(
        binary,
        rig.thrift,
        f"register_write {name} 9 4294967297\nregister_write {name} 2 5\n"
        f"register_write {name} 3 5\nregister_read {name} 9\n",
    )
    assert f"{name}[9]= 1" in out  # truncated to the register's 32 bits, as BMv2 does
    pl = rig.service.pipeline
    infos = pl.register_infos.values() if pl else ()
    cells = next(i.register.cells for i in infos if i.name == name)
    assert cells[:5] == [0, 0, 5, 5, 0] and cells[9] == 1
    with RuntimeClient(rig.thrift) as rt:
        assert rt.read_register(name, 3) == 5
        assert rt.read_register_all(name)[:10] == cells[:10]
        rt.write_register(name, 511, 8)
        assert cells[511] == 8
        for bad, code in (("no.such", "INVALID_REGISTER_NAME"), (name, "INVALID_INDEX")):
            with pytest.raises(RuntimeApiError) as exc:
                rt.read_register(bad, 512)
            assert exc.value.code == code
        rt.reset_register(name)
    assert not any(cells)


@pytest.mark.parametrize("binary", CLIS)
def test_show_ports_and_switch_info_answer_as_bmv2(rig: Rig, binary: str) -> None:
    """simple_switch_CLI's management commands: each data port with its interface and the
    kernel's state (``lo`` is up, a missing interface down), and the device's identity."""
    out = cli(binary, rig.thrift, "show_ports\nswitch_info\n")
    assert "Traceback" not in out and "Error" not in out, out
    lines = [line.removeprefix("RuntimeCmd:").strip() for line in out.splitlines()]
    rows = [line.split()[:3] for line in lines if line.split()[:1] in (["1"], ["2"])]
    assert ["1", "lo", "UP"] in rows and ["2", "no-such-if0", "DOWN"] in rows, out
    info = {k.strip(): v.strip() for k, sep, v in (x.partition(":") for x in lines) if sep}
    assert info["device_id"] == "3" and info["thrift_port"] == str(rig.thrift), out


@pytest.mark.skipif(BMV2_CLI is None, reason=NO_BMV2_CLI)
def test_bmv2_cli_sets_one_priority_queue(rig: Rig, tmp_path: Path) -> None:
    program(rig, bmv2_json(tmp_path).read_bytes())
    assert BMV2_CLI is not None
    cli(BMV2_CLI, rig.thrift, "set_queue_rate 5 1 7\nset_queue_depth 3 2 0\n")
    assert [x.rate == 5.0 for x in rig.queues.ports[1]] == [False] * 7 + [True]
    assert [x.depth for x in rig.queues.ports[2]] == [3] + [64] * 7

"""The README's "Your own job" commands, run as written against a real controller.

The commands are read from README.md (so the documented flow cannot drift from
what works): the controller command of the first block starts the daemon with a
soft switch for the topology, and the three commands of the second block check,
register and watch a job made from ``echelon example gpipe``. Only what must
change on a shared machine is changed: the topology is ``topo/star.yaml`` with
free gRPC/Thrift ports, the registry and API port are the test's own, and
``--watch`` stops after two samples.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from controlplane.client import ApiClient
from echelon.waiting import wait_until
from targets.process import free_port
from tests.controlplane.helpers import ROOT
from tests.controlplane.procs import Proc

pytestmark = pytest.mark.timeout(180)

BIN = Path(sys.executable).parent


def readme_blocks() -> list[list[str]]:
    """The ``sh`` blocks of the README's "Your own job" section, one command a line."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Your own job", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    return [
        [line.split("  #", 1)[0].strip() for line in b.splitlines() if line.strip()] for b in blocks
    ]


def localise(cmd: str, topo: Path, db: Path) -> str:
    return (
        cmd.replace(".venv/bin/", f"{BIN}/")
        .replace("topo/star.yaml", str(topo))
        .replace("run/own.db", str(db))
    )


@pytest.mark.slow
def test_readme_own_job_flow(tmp_path: Path) -> None:
    start, flow = readme_blocks()
    assert len(start) == 1 and len(flow) == 3, "README: one start command, three for the job"
    assert "register" in flow[1] and "stats --job" in flow[2] and "--watch" in flow[2]

    star = yaml.safe_load((ROOT / "topo" / "star.yaml").read_text())
    for sw in star["switches"].values():
        sw["grpc"] = f"127.0.0.1:{free_port()}"
        sw["thrift_port"] = free_port()
    topo = tmp_path / "star.yaml"
    topo.write_text(yaml.safe_dump(star))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = shlex.split(localise(start[0], topo, tmp_path / "run" / "own.db"))
    argv += ["--port", str(port), "--log-level", "warning"]
    daemon = Proc(argv, tmp_path / "daemon.log")
    env = dict(os.environ, ECHELON_API=url)

    def sh(cmd: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            cmd, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )

    try:
        with ApiClient(url, timeout=2) as api:

            def ready() -> bool:
                assert daemon.alive(), daemon.tail()
                return api.in_sync()

            wait_until(ready, 60, "README controller and its switch in sync", 0.1)
        made = sh(f"{BIN}/echelon example gpipe > my-job.yaml")
        assert made.returncode == 0, made.stderr
        job = yaml.safe_load((tmp_path / "my-job.yaml").read_text())["job"]
        assert job == "gpipe-demo"  # the name the README's commands use

        shown = sh(localise(flow[0], topo, tmp_path))
        assert shown.returncode == 0 and "band top" in shown.stdout, shown.stderr
        reg = sh(localise(flow[1], topo, tmp_path))
        assert reg.returncode == 0 and f"job {job}" in reg.stdout, reg.stderr
        watch = sh(localise(flow[2], topo, tmp_path) + " --count 2")
        assert watch.returncode == 0, watch.stderr
        samples = [b for b in watch.stdout.split("-- ") if b.strip()]
        assert len(samples) == 2, watch.stdout
        assert "PKT/S" in samples[1] and "MBIT/S" in samples[1]  # rates from the 2nd sample
        rows = [ln.split() for ln in samples[1].splitlines() if ln.startswith(job)]
        assert rows and all(len(r) == 9 for r in rows), samples[1]

        # `echelon show --topo` gives the levels the controller installed
        core = json.loads(sh(localise(flow[0], topo, tmp_path) + " --json").stdout)
        ctl = json.loads(sh(f"{BIN}/echelonctl --json show {job}").stdout)
        by_group = {g["group"]: g for g in ctl["groups"]}
        assert {ef["group"] for ef in core["echelons"]} == set(by_group)
        for ef in core["echelons"]:
            g = by_group[ef["group"]]
            assert ef["band"] == g["priority"], ef["group"]
            assert [tuple(r) for r in ef["ranges"]] == [
                (r["lo_us"], r["hi_us"], r["priority"]) for r in g["ranges"]
            ], ef["group"]
        # the job's groups are what `stats --job` listed, with their installed priority
        assert {r[1] for r in rows} == set(by_group)
        assert all(int(r[4]) == by_group[r[1]]["priority"] for r in rows)
    finally:
        daemon.stop(15)
    # the controller stopped the switch it started: its gRPC port is free again
    grpc = next(iter(star["switches"].values()))["grpc"]
    host, _, p = grpc.rpartition(":")
    import socket

    def port_free() -> bool:
        with socket.socket() as s:
            return s.connect_ex((host, int(p))) != 0

    wait_until(port_free, 15, "the README controller's switch to stop", 0.1)

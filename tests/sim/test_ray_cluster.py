"""The Ray sweep backend on a real two-node Ray cluster on this machine (127.0.0.1 only).

The cluster is ``bench.ray_local``: ``ray start --head`` plus a second node with its own
CPU, resources and temp dir, dashboard and usage stats off. Sweeps run as
``python -m sim sweep`` subprocesses (the CLI a user runs), so Ray is never imported
into the test process. Every process the cluster started is stopped by PID and
checked gone at the end.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from bench.ray_local import LocalCluster, Node
from echelon.waiting import wait_until
from sim.points import comparable
from sim.traces import write_trace
from sim.workloads import generate_mix

HAVE_RAY = importlib.util.find_spec("ray") is not None

if not HAVE_RAY and os.environ.get("CI"):
    pytest.fail("CI must run the Ray tests: `make test` installs requirements-ray.txt")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(not HAVE_RAY, reason="ray not installed (requirements-ray.txt)"),
]

#: 12 points of ~0.3-2 s each: long enough that a node dies in the middle of a task.
GRID = [
    "--mix", "hybrid,dp", "--policy", "echelon,fair,varys", "--seed", "0,1",
    "--levels", "ideal", "--jobs", "8", "--iterations", "3", "--net", "bigswitch",
    "--gbit", "10",
]  # fmt: skip
PROGRESS = re.compile(
    r"^\[\s*(\d+)/(\d+)\] point (\d+): (\S+) (\S+) (\S+) load=(\S+) seed=(\d+) .* on (.+)$"
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    c = LocalCluster()
    try:
        c.start_head(cpus=1)
        c.add_node(cpus=1, resources={"sim_worker": 1})
        yield c
    finally:
        seen = c.stop()
        c.remove_files()
        assert seen, "the cluster started no process?"


class Sweep:
    """``python -m sim sweep`` in a subprocess; stderr (progress) read as it comes."""

    def __init__(self, args: Sequence[str], out: Path, env: dict[str, str] | None = None):
        self.out = out
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sim", "sweep", *args, "--out", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def progress(self) -> list[re.Match[str]]:
        return [m for line in list(self.lines) if (m := PROGRESS.match(line))]

    def finish(self, timeout: float) -> list[dict[str, object]]:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        self._reader.join(10)
        assert rc == 0, "\n".join(self.lines[-30:])
        rows: list[dict[str, object]] = json.loads(self.out.read_text())
        return rows


def _points_running(cluster: LocalCluster, node: Node) -> list[int]:
    """Sweep points a worker process of ``node`` is computing right now (Ray titles the
    process ray::<task name> while the task runs)."""
    import psutil

    found = []
    for pid in cluster.pids(node):
        try:
            title = " ".join(psutil.Process(pid).cmdline())
        except psutil.NoSuchProcess:
            continue
        if m := re.match(r"ray::sweep-point-(\d+)", title):
            found.append(int(m[1]))
    return found


def _check_progress(sweep: Sweep, n: int) -> dict[int, str]:
    """One progress line per point, counted 1..n, every point once; point -> node."""
    marks = sweep.progress()
    assert sorted(int(m[1]) for m in marks) == list(range(1, n + 1))
    assert {int(m[2]) for m in marks} == {n}
    assert sorted(int(m[3]) for m in marks) == list(range(n)), "a point lost or repeated"
    labels = [(m[4], m[5], m[6], m[7], m[8]) for m in marks]
    assert len(set(labels)) == n
    return {int(m[3]): m[9] for m in marks}


def test_node_killed_mid_sweep_loses_no_point(cluster: LocalCluster, tmp_path: Path) -> None:
    pool = Sweep([*GRID, "--workers", "2"], tmp_path / "pool.json").finish(300)
    assert len(pool) == 12

    worker = cluster.nodes[1]
    worker_id = cluster.node_id(worker)
    sweep = Sweep([*GRID, "--ray-address", "auto"], tmp_path / "ray.json", cluster.driver_env())

    def busy() -> bool:
        return bool(_points_running(cluster, worker)) or sweep.proc.poll() is not None

    running: list[int] = []
    while not running:
        wait_until(busy, 240, "a sweep point to run on the second node", interval=0.1)
        assert sweep.proc.poll() is None, "\n".join(["sweep ended early:", *sweep.lines[-20:]])
        # freeze the node first: a point still titled as running now cannot finish there
        cluster.signal_node(worker, signal.SIGSTOP)
        running = _points_running(cluster, worker)
        if not running:  # it finished between the two looks: let the node go on
            cluster.signal_node(worker, signal.SIGCONT)
    killed = cluster.kill_node(worker)
    assert killed and not cluster.pids(worker)

    rows = sweep.finish(300)
    assert comparable(rows) == comparable(pool)  # same rows, same order, bit for bit
    where = _check_progress(sweep, 12)
    for i in running:  # interrupted on the killed node: run again on the head, counted once
        assert where[i] != f"node {worker_id[:8]}", (i, where)
    assert "1 shared input(s)" in "\n".join(sweep.lines)


def test_trace_sweep_shares_the_trace_once(cluster: LocalCluster, tmp_path: Path) -> None:
    hosts = [f"h{i}" for i in range(8)]
    jobs = generate_mix("hybrid", hosts, 10e9 / 8, n_jobs=4, load=0.5, iterations=2, seed=3)
    trace = write_trace(tmp_path / "t.json", jobs, {"kind": "bigswitch", "hosts": 8, "gbit": 10})
    args = ["--trace", str(trace), "--policy", "echelon,fair,fifo,varys", "--levels", "ideal,8"]
    pool = Sweep([*args, "--workers", "2"], tmp_path / "pool.json").finish(300)
    sweep = Sweep([*args, "--ray-address", cluster.address], tmp_path / "ray.json",
                  cluster.driver_env())  # fmt: skip
    rows = sweep.finish(300)
    assert len(rows) == 8
    assert comparable(rows) == comparable(pool)
    _check_progress(sweep, 8)
    assert "8 tasks, 1 shared input(s)" in "\n".join(sweep.lines)

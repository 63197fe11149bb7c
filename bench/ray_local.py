"""A Ray cluster of several nodes on this machine, listening on 127.0.0.1 only.

For the two-node test, :mod:`bench.ray_sweep` and trying ``--ray-address`` without a
real cluster::

    python -m bench.ray_local --nodes 2          # prints the lines to export; Ctrl-C stops it

Why not ``ray start --node-ip-address 127.0.0.1`` for every node: Ray 2.60's CLI
replaces 127.0.0.1 and ``localhost`` by the address this machine reaches the outside
with (``ray._private.services.resolve_ip_for_localhost``), so the node registers, and
its servers listen, on the external interface. With the Ray setting
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` it keeps 127.0.0.1, and its GCS, raylet and
agents then listen on 127.0.0.1 only -- but the same setting makes ``ray start
--address`` refuse to add a second node. So:

* the head is ``ray start --head --node-ip-address 127.0.0.1 ...`` with that setting;
* every other node is ``python -m bench.ray_local join ...``: Ray's own ``ray start``
  command, in a process where those two checks are switched off (127.0.0.1 kept,
  a second node allowed); nothing else of Ray is changed;
* a driver joining the cluster needs the setting too (:meth:`LocalCluster.driver_env`).

Each node has its own temp dir and its own free loopback ports; the dashboard and
usage stats are off. Each node is ``ray start --block`` in its own process group:
its processes are that process, its descendants and its process group, and
:meth:`LocalCluster.kill_node` / :meth:`LocalCluster.stop` signal exactly those PIDs
(never ``ray stop``, which stops every Ray process on the machine).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from echelon.errors import EchelonError
from echelon.waiting import WaitTimeout, wait_until
from targets.process import free_port

LOOPBACK = "127.0.0.1"
#: Environment of every node and of a driver: keep 127.0.0.1, no usage reports.
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
#: Printed by ``ray start --block`` once the node is up (Ray 2.60).
_READY = "block forever"


class ClusterError(EchelonError):
    """A local Ray node failed to start or to stop."""


@dataclass
class Node:
    """One ``ray start --block`` process and what it started."""

    name: str
    proc: subprocess.Popen[bytes]
    temp_dir: Path
    log: Path
    head: bool
    #: every process of the node ever listed: PID -> start time (a PID can be reused)
    seen: dict[int, float] = field(default_factory=dict)

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _started(pid: int) -> float | None:
    """Start time of a live (not zombie) process, None if there is none."""
    import psutil

    try:
        proc = psutil.Process(pid)
        return None if proc.status() == psutil.STATUS_ZOMBIE else float(proc.create_time())
    except psutil.NoSuchProcess:
        return None


def _alive(pid: int, started: float | None = None) -> bool:
    """``pid`` runs (and, given ``started``, is still the process that started then)."""
    now = _started(pid)
    return now is not None and (started is None or now == started)


class LocalCluster:
    """Head and worker nodes on 127.0.0.1, each in ``root/<name>`` (its Ray temp dir)."""

    def __init__(self, root: Path | None = None, python: str = sys.executable) -> None:
        # short root: Ray's unix sockets live under it (paths are limited to ~107 bytes)
        self.root = Path(root or tempfile.mkdtemp(prefix="raylocal-", dir="/tmp"))
        self.python = python
        self.nodes: list[Node] = []
        self.gcs_port = 0

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.gcs_port}"

    def driver_env(self) -> dict[str, str]:
        """Environment for a driver: ``--ray-address auto`` finds this cluster."""
        return {**RAY_ENV, "RAY_ADDRESS": self.address}

    def _ray_cli(self) -> list[str]:
        ray = Path(self.python).with_name("ray")
        return [str(ray) if ray.exists() else "ray", "start"]

    def _start(
        self, name: str, cmd: list[str], args: list[str], head: bool, timeout: float
    ) -> Node:
        temp = self.root / name
        temp.mkdir(parents=True, exist_ok=True)
        log = self.root / f"{name}.log"
        ports = [
            "--dashboard-agent-listen-port",
            "--dashboard-agent-grpc-port",
            "--metrics-export-port",
            "--runtime-env-agent-port",
        ]
        if head:
            ports += ["--ray-client-server-port", "--dashboard-port"]
        argv = [
            *cmd,
            "--block",
            "--node-ip-address",
            LOOPBACK,
            "--temp-dir",
            str(temp),
            "--disable-usage-stats",
            "--object-store-memory",
            str(128 * 2**20),
            *[x for opt in ports for x in (opt, str(free_port()))],
            *args,
        ]
        with log.open("wb") as out:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **RAY_ENV},
                # own process group (to find its processes), same session: with the
                # kernel's autogroup scheduling a new session would get its own CPU share
                process_group=0,
            )
        node = Node(name, proc, temp, log, head)
        self.nodes.append(node)

        def up() -> bool:
            if proc.poll() is not None:
                raise ClusterError(
                    f"ray node {name} exited ({proc.returncode}):\n{node.log_tail()}"
                )
            return _READY in log.read_text(errors="replace")

        try:
            wait_until(up, timeout, f"ray node {name} to start (log {log})", interval=0.1)
        finally:
            self.pids(node)  # remember them all, even if the node failed to come up
        return node

    def start_head(
        self, cpus: int = 1, resources: Mapping[str, float] | None = None, timeout: float = 180
    ) -> Node:
        """``ray start --head`` on 127.0.0.1 with its own GCS port and temp dir."""
        if self.nodes:
            raise ClusterError("the head is already started")
        self.gcs_port = free_port()
        args = ["--head", "--port", str(self.gcs_port), "--include-dashboard", "false"]
        args += ["--num-cpus", str(cpus), "--resources", json.dumps(dict(resources or {}))]
        return self._start("head", self._ray_cli(), args, True, timeout)

    def add_node(
        self, cpus: int = 1, resources: Mapping[str, float] | None = None, timeout: float = 180
    ) -> Node:
        """Another node joining the head (``python -m bench.ray_local join``)."""
        if not self.nodes:
            raise ClusterError("start the head first")
        name = f"node{len(self.nodes)}"
        args = ["--address", self.address, "--num-cpus", str(cpus)]
        args += ["--resources", json.dumps(dict(resources or {}))]
        return self._start(
            name, [self.python, "-m", "bench.ray_local", "join"], args, False, timeout
        )

    def pids(self, node: Node) -> list[int]:
        """Live processes of a node: its ``ray start``, descendants, process group, and
        every process listed by an earlier call that is still running."""
        import psutil

        found = {node.proc.pid} if _alive(node.proc.pid) else set()
        with contextlib.suppress(psutil.NoSuchProcess):
            found |= {c.pid for c in psutil.Process(node.proc.pid).children(recursive=True)}
        for p in psutil.process_iter():
            try:
                if os.getpgid(p.pid) == node.proc.pid:
                    found.add(p.pid)
            except (ProcessLookupError, PermissionError):
                continue
        live = {pid: t for pid in found if (t := _started(pid)) is not None}
        # and any process listed before that still runs (it may have left the group)
        live.update({pid: t for pid, t in node.seen.items() if _alive(pid, t)})
        node.seen.update(live)
        return sorted(live)

    def node_id(self, node: Node) -> str:
        """Ray's ID of ``node`` (from its raylet's command line)."""
        import psutil

        for pid in self.pids(node):
            with contextlib.suppress(psutil.NoSuchProcess):
                for arg in psutil.Process(pid).cmdline():
                    if arg.startswith("--node_id="):
                        return str(arg.split("=", 1)[1])
        raise ClusterError(f"no raylet found for ray node {node.name}")

    def signal_node(self, node: Node, sig: int) -> list[int]:
        """Send ``sig`` to every process of ``node`` (e.g. SIGSTOP to freeze it); the PIDs."""
        pids = self.pids(node)
        self._signal(pids, sig)
        return pids

    def _signal(self, pids: Sequence[int], sig: int) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def kill_node(self, node: Node, timeout: float = 30) -> list[int]:
        """SIGKILL every process of ``node`` (a crash, not a shutdown); the PIDs killed."""
        killed: set[int] = set()
        deadline = time.monotonic() + timeout
        while pids := self.pids(node):  # again: a raylet may fork while it is being killed
            killed |= set(pids)
            self._signal(pids, signal.SIGKILL)
            if time.monotonic() > deadline:
                raise ClusterError(f"ray node {node.name}: processes {pids} survive SIGKILL")
            time.sleep(0.05)
        node.proc.wait(timeout)
        return sorted(killed)

    def stop(self, grace: float = 5, timeout: float = 60) -> list[int]:
        """Stop every node, workers first: SIGTERM to each of their PIDs, SIGKILL to what
        is left after ``grace`` s. Returns every PID ever seen; all of them are gone."""
        for node in reversed(self.nodes):
            self._stop_node(node, grace, timeout)
        seen = {pid: t for n in self.nodes for pid, t in n.seen.items()}
        survivors = sorted(pid for pid, t in seen.items() if _alive(pid, t))
        if survivors:
            raise ClusterError(f"processes still running after stop: {survivors}")
        return sorted(seen)

    def _stop_node(self, node: Node, grace: float, timeout: float) -> None:
        self._signal(self.pids(node), signal.SIGTERM)

        def gone() -> bool:
            return not self.pids(node)

        try:
            wait_until(gone, grace, f"{node.name} to stop", interval=0.1)
        except WaitTimeout:
            self.kill_node(node, timeout)
        try:
            node.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"ray start of {node.name} did not exit") from None

    def remove_files(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _join(argv: Sequence[str]) -> None:
    """``ray start`` for a non-head node, keeping 127.0.0.1 (see the module docstring)."""
    ray_constants: Any = __import__("ray._private.ray_constants", fromlist=["x"])
    services: Any = __import__("ray._private.services", fromlist=["x"])
    scripts: Any = __import__("ray.scripts.scripts", fromlist=["x"])
    ray_constants.ENABLE_RAY_CLUSTER = True  # allow a second node ...
    services.resolve_ip_for_localhost = lambda host: host  # ... and keep 127.0.0.1
    sys.argv = ["ray", "start", *argv]
    scripts.main()


def main(argv: Sequence[str] | None = None, out: IO[str] = sys.stdout) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["join"]:
        _join(args[1:])
        return 0
    ap = argparse.ArgumentParser(
        prog="python -m bench.ray_local", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--nodes", type=int, default=2, help="head + N-1 worker nodes")
    ap.add_argument("--cpus", type=int, default=1, help="CPUs (parallel tasks) per node")
    ap.add_argument(
        "--dir", help="keep the nodes' temp dirs and logs here (default: a new /tmp dir, removed)"
    )
    opts = ap.parse_args(args)
    if opts.nodes < 1 or opts.cpus < 1:
        print("error: nodes/cpus: must be at least 1", file=sys.stderr)
        return 2
    cluster = LocalCluster(Path(opts.dir) if opts.dir else None)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        try:
            cluster.start_head(opts.cpus)
            for _ in range(opts.nodes - 1):
                cluster.add_node(opts.cpus)
            env = " ".join(f"{k}={v}" for k, v in cluster.driver_env().items())
            print(
                f"ray cluster: {opts.nodes} node(s) on {LOOPBACK}, head {cluster.address}", file=out
            )
            print(f"export {env}", file=out, flush=True)
            signal.pause()
        finally:  # Ctrl-C, SIGTERM or a node that failed to start: stop what was started
            print(f"stopped {len(cluster.stop())} processes", file=out)
            if not opts.dir:
                cluster.remove_files()  # logs too: pass --dir to keep them
    except KeyboardInterrupt:
        pass
    except (ClusterError, WaitTimeout) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM stops the cluster as Ctrl-C does."""
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())

"""Start and stop the real processes the integration tests drive (by PID, always).

Every port is picked free at run time (gRPC, thrift, API), so these tests can run
next to other engineers' switches on the same machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import httpx

from tests.controlplane.helpers import ROOT, wait_until
from topo.targets import free_port

PY = sys.executable


class Proc:
    """A child process in its own session, stopped with SIGTERM then SIGKILL."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.argv = argv
        self.log = log
        self._fh = log.open("ab")
        self.popen = subprocess.Popen(
            argv, cwd=ROOT, stdout=self._fh, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill9(self) -> None:
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        self.popen.wait(10)
        self._fh.close()

    def stop(self, timeout: float = 5.0) -> None:
        if self.alive():
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.popen.wait(timeout)
        self._fh.close()

    def tail(self) -> str:
        return self.log.read_text()[-3000:] if self.log.exists() else ""


def start_softswitch(grpc_port: int, log: Path) -> Proc:
    argv = [
        PY,
        "-m",
        "softswitch",
        "--thrift-port",
        str(free_port()),
        "--no-p4",
        "--",
        "--grpc-server-addr",
        f"127.0.0.1:{grpc_port}",
        "--priority-queues",
        "8",
    ]
    proc = Proc(argv, log)
    ch = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
    try:
        grpc.channel_ready_future(ch).result(timeout=20)
    except grpc.FutureTimeoutError:
        proc.stop()
        raise AssertionError(f"soft switch did not come up:\n{proc.tail()}") from None
    finally:
        ch.close()
    return proc


class Daemon:
    """The controller daemon on a free API port, plus an HTTP client for it."""

    def __init__(self, topo: Path, db: Path, log: Path, *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [
            PY,
            "-m",
            "controlplane.daemon",
            "--topo",
            str(topo),
            "--db",
            str(db),
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            *extra,
        ]
        self.proc = Proc(argv, log)

    def wait_ready(self, timeout: float = 30.0) -> dict[str, Any]:
        def ready() -> Any:
            if not self.proc.alive():
                raise AssertionError(f"controller exited:\n{self.proc.tail()}")
            st = self.get("/status")
            return st if all(s["in_sync"] for s in st["switches"].values()) else None

        try:
            return wait_until(ready, timeout, "controller in sync with every switch")  # type: ignore[no-any-return]
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.proc.tail()}") from None

    def request(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return httpx.request(method, self.url + path, json=body, timeout=30)

    def get(self, path: str) -> Any:
        r = self.request("GET", path)
        r.raise_for_status()
        return r.json()

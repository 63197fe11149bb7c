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

import httpx

from p4client.p4rt import P4RuntimeError
from targets.process import WaitTimeout, free_port, stop_process, wait_until
from targets.switch import Target, start_target
from tests.controlplane.helpers import ROOT

#: errors that mean "not up yet" while polling a process
RETRY: tuple[type[Exception], ...] = (httpx.HTTPError, OSError, P4RuntimeError)

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
        stop_process(self.popen, timeout)
        self._fh.close()

    def tail(self) -> str:
        return self.log.read_text()[-3000:] if self.log.exists() else ""


def start_softswitch(grpc_port: int, log: Path) -> Target:
    """The soft switch on ``127.0.0.1:grpc_port`` through the one launcher."""
    return start_target("soft", {}, f"127.0.0.1:{grpc_port}", free_port(), log_path=log)


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
            st: dict[str, Any] = wait_until(
                ready, timeout, "controller in sync with every switch", 0.05, RETRY
            )
            return st
        except WaitTimeout as exc:
            raise AssertionError(f"{exc}\n{self.proc.tail()}") from None

    def request(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return httpx.request(method, self.url + path, json=body, timeout=30)

    def get(self, path: str) -> Any:
        r = self.request("GET", path)
        r.raise_for_status()
        return r.json()

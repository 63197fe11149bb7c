"""Start and stop the real processes the integration tests drive (by PID, always).

Every port is picked free at run time (gRPC, thrift, API), so these tests can run
next to other engineers' switches on the same machine.
"""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path
from typing import Any

import httpx

from controlplane.daemon import DaemonExited, DaemonProcess
from echelon.waiting import WaitTimeout
from p4client.p4rt import P4RuntimeError
from targets.process import free_port, stop_process
from targets.switch import Target, start_target
from tests.controlplane.helpers import ROOT

#: errors that mean "not up yet" while polling a process
RETRY: tuple[type[Exception], ...] = (httpx.HTTPError, OSError, P4RuntimeError)


class Proc:
    """A command as written (the README's), in its own session, stopped by PID."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.log = log
        self._fh = log.open("ab")
        self.popen = subprocess.Popen(
            argv, cwd=ROOT, stdout=self._fh, stderr=subprocess.STDOUT, start_new_session=True
        )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        stop_process(self.popen, timeout)
        self._fh.close()

    def tail(self) -> str:
        return self.log.read_text()[-3000:] if self.log.exists() else ""


def start_softswitch(grpc_port: int, log: Path) -> Target:
    """The soft switch on ``127.0.0.1:grpc_port`` through the one launcher."""
    return start_target("soft", {}, f"127.0.0.1:{grpc_port}", free_port(), log_path=log)


class Daemon(DaemonProcess):
    """The controller daemon through the product's launcher, started at once, plus raw
    HTTP (the tests check status codes the typed client turns into exceptions)."""

    def __init__(
        self, topo: Path, db: Path, log: Path, *extra: str, ca: Path | None = None
    ) -> None:
        super().__init__(topo, db, log, "--log-level", "warning", *extra, ca=ca)
        self.verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca) if ca else True
        self.start()

    def wait_ready(self, timeout: float = 30.0) -> dict[str, Any]:
        """Wait until every switch is in sync; the daemon's /status then."""
        try:
            self.wait_in_sync(timeout, interval=0.05)
        except (WaitTimeout, DaemonExited) as exc:
            raise AssertionError(f"{exc}\n{self.log.read_text()[-3000:]}") from None
        st: dict[str, Any] = self.get("/status")
        return st

    def request(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return httpx.request(method, self.url + path, json=body, timeout=30, verify=self.verify)

    def get(self, path: str) -> Any:
        r = self.request("GET", path)
        r.raise_for_status()
        return r.json()

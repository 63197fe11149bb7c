"""Run the controller daemon for the demo as a child process, and talk to its HTTP API
(through the one API client, :class:`controlplane.client.ApiClient`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from controlplane.client import ApiClient, ApiError, ControllerUnreachable
from echelon.errors import EchelonError
from targets.process import stop_process, wait_until


class ControllerError(EchelonError):
    """The controller daemon failed to start or rejected a request."""


class ControllerProcess:
    """``python -m controlplane.daemon`` on a topology, stopped by PID."""

    def __init__(self, topo_path: str, out_dir: Path, port: int, idle_level: str = "keep") -> None:
        self.topo_path = topo_path
        self.idle_level = idle_level
        self.out = out_dir
        self.base = f"http://127.0.0.1:{port}"
        self.port = port
        self.api = ApiClient(self.base, timeout=30)
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        #: where agents report progress (``echelon-online`` runs only; the daemon
        #: re-plans online, other policies' runs send no reports, so nothing moves)
        self.progress_socket = (out_dir / "progress.sock").resolve()

    def start(self, timeout: float = 60.0) -> None:
        db = self.out / "controller.db"
        for stale in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
            stale.unlink(missing_ok=True)  # a fresh registry per run
        self._log = (self.out / "logs" / "controller.log").open("ab")
        argv = [sys.executable, "-m", "controlplane.daemon", "--topo", self.topo_path,
                "--db", str(db), "--port", str(self.port), "--policy", "fifo",
                "--replan", "online", "--progress-socket", str(self.progress_socket),
                "--idle-level", self.idle_level]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        wait_until(self._in_sync, timeout, "controller API and switches in sync", 0.2)

    def _in_sync(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise ControllerError(f"controller exited with {self.proc.returncode}; "
                                  f"see {self.out / 'logs' / 'controller.log'}")  # fmt: skip
        return self.api.in_sync()

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            return self.api.call(method, path, body)
        except (ApiError, ControllerUnreachable) as exc:
            raise ControllerError(f"{method} {path}: {exc}") from exc

    def get(self, path: str) -> Any:
        """The JSON of ``GET path`` (the demo's report keeps the API's own shape)."""
        return self._call("GET", path)

    def register(self, desc: dict[str, Any]) -> dict[str, Any]:
        try:
            reply = self.api.register(desc)
        except (ApiError, ControllerUnreachable) as exc:
            raise ControllerError(f"register {desc.get('job')!r}: {exc}") from exc
        for w in reply.warnings:
            print(f"warning: job {reply.job}: {w}")
        self.wait_in_sync()
        return reply.model_dump(mode="json", exclude_unset=True)

    def set_policy(self, name: str) -> None:
        try:
            self.api.set_policy(name)
        except (ApiError, ControllerUnreachable) as exc:
            raise ControllerError(f"policy {name}: {exc}") from exc
        self.wait_in_sync()

    def wait_in_sync(self, timeout: float = 30.0) -> None:
        wait_until(self._in_sync, timeout, "switches in sync with the controller", 0.1)

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout)
        self.proc = None
        if self._log:
            self._log.close()
            self._log = None

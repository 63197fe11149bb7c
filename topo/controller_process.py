"""Run the controller daemon for the demo as a child process (through the one launcher,
:class:`controlplane.daemon.DaemonProcess`), and talk to its HTTP API (through the one
API client, :class:`controlplane.client.ApiClient`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from controlplane.client import ApiError, ControllerUnreachable
from controlplane.daemon import DaemonProcess
from echelon.errors import EchelonError

T = TypeVar("T")


class ControllerError(EchelonError):
    """The controller daemon rejected a request or did not answer it."""


class ControllerProcess(DaemonProcess):
    """The demo's daemon: a fresh registry in ``out_dir``, FIFO at start-up, online
    re-planning from the agents' datagrams, stopped by PID."""

    def __init__(self, topo_path: str, out_dir: Path, port: int, idle_level: str = "keep") -> None:
        #: where agents report progress (``echelon-online`` runs only; the daemon
        #: re-plans online, other policies' runs send no reports, so nothing moves)
        self.progress_socket = (out_dir / "progress.sock").resolve()
        self.db = out_dir / "controller.db"
        super().__init__(topo_path, self.db, out_dir / "logs" / "controller.log",
                         "--policy", "fifo", "--replan", "online",
                         "--progress-socket", str(self.progress_socket),
                         "--idle-level", idle_level, port=port)  # fmt: skip

    def start(self, timeout: float = 60.0) -> None:
        """Start on a fresh registry and wait until the switches are in sync."""
        for stale in (self.db, *(self.db.with_name(self.db.name + s) for s in ("-wal", "-shm"))):
            stale.unlink(missing_ok=True)
        super().start()
        self.wait_in_sync(timeout, interval=0.2)

    def _api(self, what: str, call: Callable[..., T], *args: Any) -> T:
        """``call(*args)`` on :attr:`api`; an error answer or none is a
        :class:`ControllerError` saying ``what`` failed."""
        try:
            return call(*args)
        except (ApiError, ControllerUnreachable) as exc:
            raise ControllerError(f"{what}: {exc}") from exc

    def get(self, path: str) -> Any:
        """The JSON of ``GET path`` (the demo's report keeps the API's own shape)."""
        return self._api(f"GET {path}", self.api.call, "GET", path)

    def register(self, desc: dict[str, Any]) -> None:
        reply = self._api(f"register {desc.get('job')!r}", self.api.register, desc)
        for w in reply.warnings:
            print(f"warning: job {reply.job}: {w}")
        self.wait_in_sync()

    def set_policy(self, name: str) -> None:
        self._api(f"policy {name}", self.api.set_policy, name)
        self.wait_in_sync()

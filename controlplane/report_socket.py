"""Progress reports over a local datagram socket (``--progress-socket PATH``).

The HTTP endpoint (``POST /progress``) is the documented API. This is the same
report, one JSON object per ``AF_UNIX`` datagram, for hosts that share the
controller's file system but not its network namespace -- the demo's Mininet
hosts, whose loopback is not the controller's. Snapshots need no answer (a lost
one is repaired by the next, :mod:`controlplane.inflight`), so a datagram fits:
no connection, no head-of-line blocking, nothing for a dead reporter to hold.
Access is the socket file's permissions (created 0600: only the controller's
user may report), which is why it carries no bearer token.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from echelon.errors import EchelonError

log = logging.getLogger(__name__)

#: Largest report accepted (a snapshot lists group names of one job).
MAX_DATAGRAM = 65536


class ProgressSocket:
    """Receives report datagrams on ``path`` and hands each decoded body to ``handle``."""

    def __init__(self, path: str | Path, handle: Callable[[Any], object]) -> None:
        self.path = Path(path)
        self.handle = handle
        self.rejected = 0
        if self.path.exists() and not self.path.is_socket():
            raise EchelonError(
                f"--progress-socket: {self.path} exists and is not a socket (not replaced)"
            )
        self.path.unlink(missing_ok=True)  # a previous controller's stale socket
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        old = os.umask(0o177)
        try:
            self.sock.bind(str(self.path))
        except OSError as exc:
            self.sock.close()
            raise EchelonError(f"--progress-socket: cannot bind {self.path}: {exc}") from None
        finally:
            os.umask(old)
        self._thread = threading.Thread(target=self._run, name="progress-socket", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Close and remove the socket; also when it was never started (the daemon's
        API failed to start: its error, not this, is what the log must show)."""
        self.sock.close()  # recv in the thread fails with OSError and the thread ends
        if self._thread.ident is not None:
            self._thread.join(timeout=5.0)
        self.path.unlink(missing_ok=True)

    def _run(self) -> None:
        while True:
            try:
                data = self.sock.recv(MAX_DATAGRAM)
            except OSError:
                return
            try:
                self.handle(json.loads(data))
            except (ValueError, EchelonError) as exc:
                self.rejected += 1
                log.warning("progress datagram rejected: %s", exc)

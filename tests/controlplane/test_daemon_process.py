"""The one launcher of the daemon as a child process (:class:`DaemonProcess`): a
daemon that exits is reported at once with its exit status and log, not after the
deadline of the in-sync wait."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from controlplane.daemon import DaemonExited, DaemonProcess

pytestmark = pytest.mark.slow  # a daemon start: about 2.5 s


def test_a_daemon_that_exits_is_reported_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "ctl.log"
    d = DaemonProcess(tmp_path / "missing.yaml", tmp_path / "r.db", log, "--log-level", "warning")
    d.start()
    try:
        t0 = time.monotonic()
        with pytest.raises(DaemonExited, match=f"exited with 2; see {log}"):
            d.wait_in_sync(timeout=60)
        assert time.monotonic() - t0 < 30  # long before the deadline
        assert "error: --topo:" in log.read_text()  # the daemon's own message, in the log
    finally:
        d.close()

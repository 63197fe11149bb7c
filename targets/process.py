"""The process helpers every launcher, test and benchmark shares.

``free_port`` picks a port for a process about to be started;
``stop_process`` stops a child by PID: SIGCONT (a frozen switch cannot handle
SIGTERM), SIGTERM, then SIGKILL after a deadline; ``pythonpath`` makes a child Python
import this source tree. Waiting on a condition with a deadline is
:func:`echelon.waiting.wait_until`.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

from echelon.errors import EchelonError
from echelon.waiting import wait_until

#: This source tree: the folder that holds the top-level packages.
SOURCE_TREE = Path(__file__).resolve().parents[1]


class TargetError(EchelonError):
    """A switch target (or another child process) failed to start, answer or stop."""


#: Where :func:`free_port` looks: below Linux's default ephemeral range (32768-60999),
#: from which outgoing connections take their source ports.
PORT_RANGE = (20000, 32768)
_handed_out: set[int] = set()


def free_port() -> int:
    """An unused TCP port on 127.0.0.1 (for a process about to listen on it).

    Why not ``bind(port 0)``: that hands out an ephemeral port, which any outgoing
    connection (a gRPC channel, an HTTP client) may take as its source port between
    the choice and the listener's bind -- a CI run lost a controller that way
    ("address already in use"). So the port comes from below the ephemeral range, and
    one process never gets the same port twice (several are often chosen before any
    is listened on)."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(*PORT_RANGE)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise EchelonError(f"no free TCP port in {PORT_RANGE[0]}-{PORT_RANGE[1] - 1} on 127.0.0.1")


def port_open(addr: str) -> bool:
    """Whether ``host:port`` accepts a TCP connection (``0.0.0.0`` means localhost)."""
    host, _, port = addr.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    try:
        with socket.create_connection((host, int(port)), timeout=0.2):
            return True
    except OSError:
        return False


def pythonpath(tree: str | Path = SOURCE_TREE) -> str:
    """``PYTHONPATH`` for a child Python process: ``tree`` first, then the parent's own.

    Why: the child then imports ``tree``'s packages (by default the same code as the
    parent) even where the installed package points at another checkout."""
    return os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH")) if p)


def stop_process(proc: subprocess.Popen[Any], timeout: float = 10.0) -> int:
    """SIGCONT + SIGTERM ``proc``, SIGKILL if it is still there after ``timeout``; its status."""
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        except ProcessLookupError:
            proc.wait()
    return int(proc.returncode)


def freeze_process(pid: int, timeout: float = 5.0) -> None:
    """SIGSTOP ``pid`` and wait until every thread of it is stopped (state T in /proc):
    kill() returns before a thread running on another core has taken the signal, and a
    frame sent in that window would still be served."""
    os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: _all_stopped(pid), timeout, f"process {pid} to stop", interval=0.001)


def _all_stopped(pid: int) -> bool:
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                # the state follows the parenthesised command name, which may hold spaces
                if fh.read().rsplit(")", 1)[1].split()[0] != "T":
                    return False
    except (FileNotFoundError, ProcessLookupError):
        return False
    return True

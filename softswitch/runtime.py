"""The runtime command port (stands in for simple_switch's Thrift port).

A line-based text protocol on 127.0.0.1:<thrift-port>: the client sends one
simple_switch_CLI command per line; the switch answers with zero or more
output lines followed by a line holding only ``END_MARK``. Supported commands
are the queue settings the project uses::

    set_queue_rate <pps> [<port> [<priority>]]
    set_queue_depth <pkts> [<port> [<priority>]]

(no port = every queue of every port; a port alone = each of its priority
queues; with a priority = that queue only), plus ``show_stats`` for debugging.
Errors are answered with an ``Error: ...`` line, unknown commands with
simple_switch_CLI's ``*** Unknown syntax: ...``.
"""

from __future__ import annotations

import logging
import socket
import socketserver
import threading
from collections.abc import Callable

from softswitch.errors import UsageError
from softswitch.queueing import PriorityRateQueues

log = logging.getLogger("softswitch.runtime")

END_MARK = "."


def _int(field: str, text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise UsageError(field, f"{text!r} is not an integer") from None


def _number(field: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UsageError(field, f"{text!r} is not a number") from None


def execute(
    line: str,
    queues: PriorityRateQueues[bytearray],
    lock: threading.Lock,
    stats: Callable[[], str] | None = None,
) -> list[str]:
    """Run one command line; the output lines simple_switch_CLI would print."""
    words = line.split()
    if not words:
        return []
    cmd, args = words[0], words[1:]
    try:
        if cmd in ("set_queue_rate", "set_queue_depth"):
            if not 1 <= len(args) <= 3:
                raise UsageError(cmd, f"usage: {cmd} <value> [<egress_port> [<priority>]]")
            port = _int("egress_port", args[1]) if len(args) > 1 else None
            prio = _int("priority", args[2]) if len(args) > 2 else None
            with lock:
                if cmd == "set_queue_rate":
                    queues.set_rate(_number("rate_pps", args[0]), port, prio)
                else:
                    queues.set_depth(_int("depth_pkts", args[0]), port, prio)
            log.info("runtime: %s", line.strip())
            return []
        if cmd == "show_stats" and stats is not None:
            return stats().splitlines()
    except UsageError as err:
        return [f"Error: {err}"]
    return [f"*** Unknown syntax: {line.strip()}"]


class RuntimeServer:
    """Threaded TCP server answering command lines; one thread per connection."""

    def __init__(
        self,
        port: int,
        queues: PriorityRateQueues[bytearray],
        lock: threading.Lock,
        stats: Callable[[], str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                for raw in self.rfile:
                    text = raw.decode("utf-8", "replace")  # cannot raise: bad bytes become U+FFFD
                    out = execute(text, outer.queues, outer.lock, outer.stats)
                    reply = "".join(f"{o}\n" for o in out) + END_MARK + "\n"
                    self.wfile.write(reply.encode())
                    self.wfile.flush()

        class Server(socketserver.ThreadingTCPServer):
            allow_reuse_address = True
            daemon_threads = True

        self.queues = queues
        self.lock = lock
        self.stats = stats
        try:
            self._server = Server((host, port), Handler)
        except OSError as exc:
            raise UsageError("thrift-port", f"cannot listen on {host}:{port}: {exc}") from None
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="runtime", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def send_commands(
    port: int, lines: list[str], host: str = "127.0.0.1", timeout: float = 10.0
) -> list[list[str]]:
    """Send command lines to a switch; each command's output lines."""
    results: list[list[str]] = []
    with socket.create_connection((host, port), timeout=timeout) as sock:
        f = sock.makefile("rw", encoding="utf-8", newline="\n")
        for line in lines:
            f.write(line.rstrip("\n") + "\n")
            f.flush()
            out: list[str] = []
            for reply in f:
                reply = reply.rstrip("\n")
                if reply == END_MARK:
                    break
                out.append(reply)
            else:
                raise ConnectionError("switch closed the runtime connection")
            results.append(out)
    return results

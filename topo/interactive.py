"""The demo's interactive side: the Mininet CLI before, during or after the traffic,
with a ``ports`` command, and the live per-port line while traffic runs.

Why a module: ``topo.run`` decides *when* (``--cli before|during|after``); this
module knows *how*: Mininet's CLI, extended with ``ports`` (per-port and
per-priority packet counts from the switches' pcaps, :mod:`topo.portview`), and
a ticker thread that prints the same counts as one line every few seconds when
no CLI holds the terminal.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from mininet.cli import CLI
from mininet.log import output, setLogLevel

from topo import portview
from topo.portview import PortView

CLI_MODES = ("auto", "before", "during", "after", "never")
T = TypeVar("T")


def resolve_cli(mode: str, headless: bool, tty: bool) -> str:
    """``before|during|after|never``: ``--headless`` wins; ``auto`` is the CLI after the
    runs when stdin is a terminal (the old behaviour). An explicit mode opens the CLI
    even without a terminal: its commands can then come from a pipe."""
    if headless or mode == "never":
        return "never"
    if mode == "auto":
        return "after" if tty else "never"
    return mode


class EchelonCLI(CLI):  # type: ignore[misc]
    """Mininet's CLI plus ``ports``: per-port packets in/out and out per priority."""

    def __init__(self, mn: Any, view: PortView | None, **kw: Any) -> None:
        self.view = view
        super().__init__(mn, **kw)

    def do_ports(self, _line: str) -> None:
        """Per-port packets in/out and sent per priority, from the switches' pcaps
        (start the demo with --pcap / make run PCAP=1)."""
        if self.view is None:
            print("no per-port view: start the demo with --pcap (make run PCAP=1)")
            return
        print(portview.table(self.view.poll()))

    def waitForNode(self, node: Any) -> None:
        """Mininet forwards what arrives on stdin, byte by byte, into the shell of the
        node running a command (for interactive programs). With commands from a file or
        pipe (``make run CLI=during < cmds.txt``) that pours the rest of the file into
        h1's shell; so only a terminal is forwarded, and otherwise the node's output is
        printed until the command ends and the next line is read as a CLI command."""
        if self.isatty():
            super().waitForNode(node)
            return
        while node.waiting:
            try:
                output(node.monitor(timeoutms=200))
            except KeyboardInterrupt:
                node.sendInt()


def open_cli(mn: Any, view: PortView | None, when: str) -> None:
    hint = {
        "before": "exit the CLI to start the traffic",
        "during": "traffic is running; 'ports' shows per-port counts; exit returns to the run",
        "after": "all runs are done; exit to tear down",
    }[when]
    print(f"*** Mininet CLI ({hint}); try: h1 ping -c 1 h4, ports", flush=True)
    setLogLevel("output")  # the CLI prints command output at this level
    try:
        EchelonCLI(mn, view, stdin=sys.stdin)
    finally:
        setLogLevel("warning")


def run_with_cli(mn: Any, view: PortView | None, work: Callable[[], T]) -> T:
    """``work()`` in a thread while the CLI holds the terminal; when the CLI exits,
    wait for ``work`` and return its result (or raise its error)."""
    box: list[T] = []
    errors: list[BaseException] = []

    def body() -> None:
        try:
            box.append(work())
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    t = threading.Thread(target=body, name="demo-traffic", daemon=True)
    t.start()
    open_cli(mn, view, "during")
    if t.is_alive():
        print("*** CLI closed; waiting for the traffic to finish", flush=True)
    while t.is_alive():
        t.join(0.5)  # short joins: a signal to the main thread is handled promptly
    if errors:
        raise errors[0]
    return box[0]


class Ticker:
    """Prints the per-port line every ``interval`` s until stopped (a context manager)."""

    def __init__(self, view: PortView, interval: float) -> None:
        self.view = view
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="port-ticker", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            print("    " + portview.one_line(self.view.poll()), flush=True)

    def __enter__(self) -> Ticker:
        if self.interval > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

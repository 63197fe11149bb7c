"""The soft switch's real P4Runtime service, in-process on a free port (no data plane).

Replaces a hand-written fake server: the controller's unit tests talk to the same
servicer (validation, arbitration, per-update errors) the switch process runs.
``writes`` counts Write RPCs, so tests can check how many requests a change took.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc

from controlplane.controller import Controller
from controlplane.registry import Registry
from echelon.topology import load
from p4client.p4info import P4Info
from softswitch.bm.pipeline import Pipeline
from softswitch.p4rt_server import P4RuntimeService, make_server
from softswitch.queueing import PriorityRateQueues
from softswitch.runtime import RuntimeServer
from tests.controlplane.helpers import DEVICE_CONFIG, P4INFO, write_topo


class CountingService(P4RuntimeService):
    """The real servicer, counting Write RPCs."""

    def __init__(self) -> None:
        super().__init__(0, self._committed)
        self.writes = 0

    def _committed(self, pl: Pipeline | None) -> None:
        """No data plane behind this service: a committed pipeline has nowhere to go."""

    def Write(self, request: Any, context: grpc.ServicerContext) -> Any:
        """gRPC's Write handler."""
        self.writes += 1
        return super().Write(request, context)


class InProcessSwitch:
    """A :class:`CountingService` served on ``127.0.0.1:<free port>``, and BMv2's Thrift
    runtime services on another (``thrift_port``: register reads for the queue view);
    ``stop()`` ends every stream, as a switch going away does."""

    def __init__(self) -> None:
        self.service = CountingService()
        self.server, self.port = make_server(self.service, "127.0.0.1:0")
        self.server.start()
        self.runtime = RuntimeServer(0, PriorityRateQueues(8), threading.Lock(), self.service)
        self.runtime.start()

    @property
    def thrift_port(self) -> int:
        return self.runtime.port

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def writes(self) -> int:
        return self.service.writes

    def stop(self) -> None:
        self.server.stop(grace=0).wait(5)
        self.runtime.stop()


@contextlib.contextmanager
def controller_and_switches(
    tmp_path: Path, n: int = 2
) -> Iterator[tuple[Controller, list[InProcessSwitch]]]:
    """A started controller on ``n`` in-process switches in a chain (``write_topo``), in
    sync; all stopped on exit."""
    servers = [InProcessSwitch() for _ in range(n)]
    topo = load(
        write_topo(tmp_path / "t.yaml", [s.addr for s in servers], [s.thrift_port for s in servers])
    )
    c = Controller(topo, P4Info.load(P4INFO), Registry(tmp_path / "r.db"), DEVICE_CONFIG)
    c.start()
    try:
        assert c.wait_in_sync(10.0)
        yield c, servers
    finally:
        c.stop()
        for s in servers:
            s.stop()


@contextlib.contextmanager
def running_controller(tmp_path: Path) -> Iterator[Controller]:
    """A started controller on one in-process switch, in sync; both stopped on exit."""
    with controller_and_switches(tmp_path, 1) as (c, _):
        yield c


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` served over real HTTP on a free loopback port (uvicorn in a thread), for
    tests that run ``echelonctl`` as a process; the server is stopped on exit."""
    import threading

    import uvicorn

    from echelon.waiting import wait_until
    from targets.process import free_port

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, name="api", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 10, "the API server to listen")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)

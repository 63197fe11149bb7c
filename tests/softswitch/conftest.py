"""Fixtures: an in-process P4Runtime server (no data plane) and clients for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from softswitch.bm.pipeline import Pipeline
from softswitch.p4rt_server import P4RuntimeService, make_server
from tests.softswitch.helpers import Client, Names, load_p4info


class ServerHandle:
    def __init__(self, service: P4RuntimeService, addr: str) -> None:
        self.service = service
        self.addr = addr
        self.committed: list[Pipeline | None] = []


@pytest.fixture
def server() -> Iterator[ServerHandle]:
    handle: ServerHandle | None = None

    def on_commit(pl: Pipeline | None) -> None:
        assert handle is not None
        handle.committed.append(pl)

    service = P4RuntimeService(0, on_commit)
    srv, port = make_server(service, "127.0.0.1:0")
    handle = ServerHandle(service, f"127.0.0.1:{port}")
    srv.start()
    try:
        yield handle
    finally:
        srv.stop(grace=0).wait(5)


@pytest.fixture
def names() -> Names:
    return Names(load_p4info())


@pytest.fixture
def client(server: ServerHandle) -> Iterator[Client]:
    c = Client(server.addr, election=10)
    try:
        msg = c.arbitrate()
        assert msg.arbitration.status.code == 0
        yield c
    finally:
        c.close()


@pytest.fixture
def primed(client: Client, names: Names) -> Client:
    """A primary client on a server that has the echelon pipeline."""
    client.push_pipeline(names.p4info)
    return client

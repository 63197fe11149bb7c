"""Fault injection: the Thrift runtime port under greedy clients.

Before: every connection got a thread with no bound and no idle timeout, and a
message declaring a huge string was buffered until it arrived.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from echelon.waiting import wait_until
from p4client.bmruntime import RuntimeClient
from softswitch.p4rt_server import P4RuntimeService
from softswitch.queueing import PriorityRateQueues
from softswitch.runtime import RuntimeServer


@pytest.fixture
def server() -> Iterator[RuntimeServer]:
    q: PriorityRateQueues[bytearray] = PriorityRateQueues(8)
    q.add_port(1)
    rt = RuntimeServer(
        0,
        q,
        threading.Lock(),
        P4RuntimeService(0, lambda _pl: None),
        max_connections=4,
        idle_timeout=1.0,
    )
    rt.start()
    try:
        yield rt
    finally:
        rt.stop()


def closed_by_peer(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except (BlockingIOError, TimeoutError):
        return False
    except OSError:
        return True


@pytest.mark.slow
def test_connections_bounded_and_idle_ones_closed(server: RuntimeServer) -> None:
    socks = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(6)]
    try:
        for s in socks:
            s.settimeout(0.05)
        wait_until(lambda: server.refused == 2, 10.0, "two connections refused")
        # the held ones go after the idle timeout, and a real client gets in
        wait_until(lambda: all(closed_by_peer(s) for s in socks[:4]), 15.0, "idle closed")
        with RuntimeClient(server.port) as rt:
            rt.set_queue_rate(100, port=1)
    finally:
        for s in socks:
            s.close()


def test_huge_declared_string_is_refused_not_buffered(server: RuntimeServer) -> None:
    s = socket.create_connection(("127.0.0.1", server.port))
    try:
        # strict binary message header, then a method name that claims 200 MB
        s.sendall(struct.pack("!iI", -2147418111, 200 << 20) + b"abc")
        s.settimeout(5.0)
        assert s.recv(1) == b""  # closed at once instead of waiting for 200 MB
    finally:
        s.close()
    with RuntimeClient(server.port) as rt:
        rt.set_queue_rate(100, port=1)


@pytest.mark.slow
def test_trickling_client_is_closed(server: RuntimeServer) -> None:
    """Before: the idle timeout applied per read, so a byte every 0.3 s (< 1 s)
    held the connection forever."""
    s = socket.create_connection(("127.0.0.1", server.port))
    s.settimeout(0.05)
    header = struct.pack("!iI", -2147418111, 1000)  # a method name of 1,000 bytes
    sent = 0
    t0 = time.monotonic()
    try:

        def trickle_until_closed() -> bool:
            nonlocal sent
            if closed_by_peer(s):
                return True
            try:
                s.sendall(header[sent : sent + 1] if sent < len(header) else b"a")
            except OSError:
                return True
            sent += 1
            return False

        wait_until(trickle_until_closed, 10.0, "trickling connection closed", 0.3)
        assert time.monotonic() - t0 < 3.0
    finally:
        s.close()

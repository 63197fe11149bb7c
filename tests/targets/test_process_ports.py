"""``targets.process.free_port``: a port a listener can take, not one a connection may."""

from __future__ import annotations

import socket

from targets.process import PORT_RANGE, free_port


def test_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)  # never the same twice in one process
    assert all(PORT_RANGE[0] <= p < PORT_RANGE[1] for p in ports)
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral_low = int(f.read().split()[0])
    assert max(ports) < ephemeral_low  # outgoing connections do not take these
    for p in ports[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))  # free when handed out


def test_a_taken_port_is_skipped() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        assert taken not in {free_port() for _ in range(50)}

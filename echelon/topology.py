"""Topology files: hosts, switches, links, and the routes derived from them.

A topology is a YAML (or JSON) file; the controller, the Mininet launcher, the
host agent and the simulator's cross-check all read it through :func:`load`::

    name: star
    switches:
      s1: {device_id: 0, grpc: "127.0.0.1:9559", thrift_port: 9090}
    hosts:
      h1: {ip: 10.0.0.1, mac: "00:00:00:00:00:01"}
      h2: {ip: 10.0.0.2, mac: "00:00:00:00:00:02"}
    links:
      - {a: h1, b: s1, b_port: 1, bw_mbit: 10}
      - {a: h2, b: s1, b_port: 2, bw_mbit: 10, bottleneck: true}

A link joins node ``a`` to node ``b``; a switch end names its port (``a_port`` /
``b_port``). ``bw_mbit`` limits the link (both directions; ``host_bw_mbit``, where
given, the direction a host end sends into instead), ``delay_ms`` delays it
where the kernel has ``netem``; ``bottleneck: true`` gives each switch egress of
the link a strict-priority queue discipline keyed on DSCP (see docs/topology.md).
"""

from __future__ import annotations

import ipaddress
import itertools
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, WithJsonSchema
from pydantic.functional_validators import PlainValidator

from echelon.errors import SpecError, UnknownHostError
from echelon.specs import (
    Flag,
    Name,
    NonNegative,
    Positive,
    SpecModel,
    SpecWarning,
    Text,
    bounded_int,
    fail,
    read_file,
    validate,
)

_MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,14}$")  # fits a Linux interface name prefix


@dataclass(frozen=True)
class Host:
    name: str
    ip: str
    mac: str


@dataclass(frozen=True)
class Switch:
    name: str
    device_id: int
    grpc: str
    thrift_port: int


@dataclass(frozen=True)
class Route:
    """How ``switch`` forwards packets for ``host``: out of ``port``, rewriting the
    destination MAC to ``next_hop_mac`` (the host's own MAC on the last hop)."""

    switch: str
    host: str
    prefix: str
    port: int
    next_hop_mac: str


@dataclass(frozen=True)
class Topology:
    name: str
    hosts: Mapping[str, Host]
    switches: Mapping[str, Switch]
    links: tuple[Link, ...]

    def neighbours(self, node: str) -> list[tuple[Link, str]]:
        return [(lk, lk.other(node)) for lk in self.links if node in (lk.a, lk.b)]

    def path(self, src: str, dst: str) -> list[str]:
        """Shortest node path from ``src`` to ``dst`` (BFS; ties broken by file order)."""
        prev: dict[str, str | None] = {src: None}
        todo = deque([src])
        while todo:
            node = todo.popleft()
            if node == dst:
                break
            if node != src and node in self.hosts:
                continue  # hosts do not forward
            for _, nxt in self.neighbours(node):
                if nxt not in prev:
                    prev[nxt] = node
                    todo.append(nxt)
        if dst not in prev:
            raise SpecError("links", f"no path from {src} to {dst}")
        out = [dst]
        while (p := prev[out[-1]]) is not None:
            out.append(p)
        return out[::-1]

    def switch_path(self, src: str, dst: str) -> tuple[str, ...]:
        """The switches a packet from host ``src`` to host ``dst`` crosses, each taking
        the next hop of its own route to ``dst`` (:meth:`routes`), as the data plane
        forwards it -- not the BFS from ``src``, which may break a tie the other way.
        These are the switches that must classify the packet. Each next hop is one
        hop closer to ``dst``, so the walk ends. Memoised: the topology is immutable
        and the controller asks it for every group it plans."""
        memo: dict[tuple[str, str], tuple[str, ...]]
        memo = self.__dict__.setdefault("_switch_paths", {})
        key = (src, dst)
        if key not in memo:
            out: list[str] = []
            node = self.path(src, dst)[1] if src != dst else dst  # a host to itself: none
            while node != dst:
                out.append(node)
                node = self.path(node, dst)[1]
            memo[key] = tuple(out)
        return memo[key]

    def routes(self, switch: str) -> list[Route]:
        """One /32 route per host for ``switch``, along shortest paths."""
        out = []
        for host in self.hosts.values():
            hops = self.path(switch, host.name)
            nxt = hops[1]
            link = next(lk for lk, other in self.neighbours(switch) if other == nxt)
            port = link.port_of(switch)
            assert port is not None  # validated in load()
            mac = host.mac if nxt == host.name else _switch_mac(nxt, link.port_of(nxt))
            out.append(Route(switch, host.name, f"{host.ip}/32", port, mac))
        return out


#: Capacity given to a link whose file entry has no ``bw_mbit`` (unshaped veth): 10 Gbit/s.
UNSHAPED_LINK_BYTES_S = 10e9 / 8


class TopologyNetwork:
    """A topology file as the core's ``Network`` (``echelon.schedule.Network``).

    Each cable becomes two directed links ``a>b`` and ``b>a`` with the cable's
    ``bw_mbit`` (a host's own direction ``host_bw_mbit`` where given; unshaped
    cables get ``unshaped_bytes_s``); paths are the file's
    shortest paths, the ones the controller installs. The controller schedules
    on it and the simulator predicts the emulation with it, so both see the same
    bottleneck.
    """

    def __init__(self, topo: Topology, unshaped_bytes_s: float = UNSHAPED_LINK_BYTES_S) -> None:
        self.topology = topo
        caps: dict[str, float] = {}
        for lk in topo.links:
            for src, dst in ((lk.a, lk.b), (lk.b, lk.a)):
                mbit = lk.host_rate() if src in topo.hosts else lk.bw_mbit
                caps[f"{src}>{dst}"] = unshaped_bytes_s if mbit is None else mbit * 1e6 / 8
        self._links = caps
        self._paths: dict[tuple[str, str], tuple[str, ...]] = {}

    @property
    def links(self) -> Mapping[str, float]:
        return self._links

    def path(self, src: str, dst: str) -> tuple[str, ...]:
        key = (src, dst)
        if key not in self._paths:
            for h in key:
                if h not in self.topology.hosts:
                    raise UnknownHostError(
                        "hosts", f"{h} is not a host of topology {self.topology.name}"
                    )
            hops = self.topology.path(src, dst)
            self._paths[key] = tuple(f"{u}>{v}" for u, v in itertools.pairwise(hops))
        return self._paths[key]


def _switch_mac(switch: str, port: int | None) -> str:
    """A stable locally-administered MAC for a switch port (next hop between switches)."""
    digest = sum(ord(c) * 31**i for i, c in enumerate(switch)) & 0xFFFF
    return f"02:ec:{digest >> 8:02x}:{digest & 0xFF:02x}:00:{(port or 0) & 0xFF:02x}"


def load(path: str | Path) -> Topology:
    """Read and validate a topology file; raise :class:`SpecError` naming the bad field."""
    return parse(read_file(path), default_name=Path(path).stem)


def one_switch(name: str, grpc: str, thrift_port: int) -> dict[str, Any]:
    """A topology file's data: switch ``s1`` (device 0) at ``grpc`` with host h<p>
    (10.0.0.p) on its port p, p = 1..4, unshaped links.

    Why here: the packet tests (PTF's port p is host h<p>) and the benchmarks hand a
    controller the one switch they drive, and must describe it the same way."""
    hosts = {f"h{p}": {"ip": f"10.0.0.{p}", "mac": f"00:00:0a:00:00:{p:02x}"} for p in range(1, 5)}
    return {
        "name": name,
        "switches": {"s1": {"grpc": grpc, "thrift_port": thrift_port}},
        "hosts": hosts,
        "links": [{"a": h, "b": "s1", "b_port": int(h[1:])} for h in hosts],
    }


def _ipv4(value: Any) -> str:
    text = value if isinstance(value, str) else ""
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        raise fail(f"not an IPv4 address: {value!r}") from None
    return text


def _mac(value: Any) -> str:
    text = value.lower() if isinstance(value, str) else ""
    if not _MAC.match(text):
        raise fail(f"not a MAC address: {value!r}")
    return text


def _grpc(value: Any) -> str:
    if not isinstance(value, str) or not re.match(r"^[\w.\-\[\]:]+:\d+$", value):
        raise fail(f"must be host:port, got {value!r}")
    return value


def _node_name(value: Any) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise fail("names are 1-15 chars: a letter, then [A-Za-z0-9_-]")
    return value


IPv4 = Annotated[str, PlainValidator(_ipv4), WithJsonSchema({"type": "string", "format": "ipv4"})]
MAC = Annotated[
    str, PlainValidator(_mac), WithJsonSchema({"type": "string", "pattern": _MAC.pattern})
]
GrpcAddress = Annotated[
    str, PlainValidator(_grpc), WithJsonSchema({"type": "string", "description": "host:port"})
]
NodeName = Annotated[
    str, PlainValidator(_node_name), WithJsonSchema({"type": "string", "pattern": _NAME.pattern})
]


Port: Any = bounded_int(0, 65535, "switch port (1..510 on BMv2)")


class HostModel(SpecModel):
    """A host of the topology file: its one interface's address."""

    ip: IPv4
    mac: MAC


class SwitchModel(SpecModel):
    """A switch of the topology file: how the controller reaches it."""

    device_id: bounded_int(0, 2**64 - 1, "P4Runtime device ID") = 0  # type: ignore[valid-type]
    grpc: GrpcAddress
    thrift_port: bounded_int(1, 65535, "BMv2 Thrift runtime port") = 9090  # type: ignore[valid-type]


class Link(SpecModel):
    """A cable from node ``a`` to node ``b``; switch ends name their port. The file's
    entry as validated is the topology's link (:func:`parse` checks the ends)."""

    a: Name
    b: Name
    a_port: Port | None = None  # type: ignore[valid-type]
    b_port: Port | None = None  # type: ignore[valid-type]
    bw_mbit: Positive | None = Field(None, description="Mbit/s, both directions")
    delay_ms: NonNegative = Field(0.0, description="milliseconds (where netem exists)")
    bottleneck: Flag = False
    #: The host end's sending direction (its uplink), Mbit/s, where it differs from
    #: ``bw_mbit``: lets an experiment take a host's NIC out of the contention while the
    #: switch's direction towards it stays the (prioritised) bottleneck.
    host_bw_mbit: Positive | None = Field(
        None, description="Mbit/s of the host end's sending direction (default bw_mbit)"
    )

    def host_rate(self) -> float | None:
        """Mbit/s of the direction the host end sends into (``None``: unlimited)."""
        return self.bw_mbit if self.host_bw_mbit is None else self.host_bw_mbit

    def port_of(self, node: str) -> int | None:
        port: int | None = self.a_port if node == self.a else self.b_port
        return port

    def other(self, node: str) -> str:
        return self.b if node == self.a else self.a


class TopologyFile(SpecModel):
    """A topology file (``topo/*.yaml``)."""

    name: Text | None = None
    switches: Annotated[dict[NodeName, SwitchModel], Field(min_length=1)]
    hosts: Annotated[dict[NodeName, HostModel], Field(min_length=1)]
    links: Annotated[tuple[Link, ...], Field(min_length=1)]


def topology_warnings(data: Any) -> list[SpecWarning]:
    """Plausible-unit checks of a valid topology file (``bw_mbit: 10000000`` is bit/s)."""
    out = []
    for i, lk in enumerate(validate(TopologyFile, data).links):
        if lk.bw_mbit is not None and lk.bw_mbit > 1e6:
            out.append(
                SpecWarning(
                    f"links[{i}].bw_mbit",
                    f"{lk.bw_mbit:g} Mbit/s is {lk.bw_mbit / 1e6:g} Tbit/s: bw_mbit is in "
                    f"Mbit/s (if you gave bit/s, write {lk.bw_mbit / 1e6:g})",
                )
            )
        if lk.delay_ms >= 1000:
            out.append(
                SpecWarning(
                    f"links[{i}].delay_ms",
                    f"{lk.delay_ms:g} ms is {lk.delay_ms / 1000:g} s: delay_ms is in "
                    "milliseconds (if you gave µs, divide by 1000)",
                )
            )
    return out


def parse(data: Any, default_name: str = "topology") -> Topology:
    """Validate a topology (the typed :class:`TopologyFile`, then what spans fields)."""
    if not isinstance(data, dict):
        raise SpecError("topology", "must be a mapping with hosts, switches and links")
    for key in ("hosts", "switches"):
        if not isinstance(data.get(key), dict) or not data[key]:
            raise SpecError(key, "must be a non-empty mapping of name -> attributes")
    m = validate(TopologyFile, data)
    hosts = {n: Host(n, h.ip, h.mac) for n, h in m.hosts.items()}
    switches = {n: Switch(n, s.device_id, s.grpc, s.thrift_port) for n, s in m.switches.items()}
    for n in hosts.keys() & switches.keys():
        raise SpecError(f"hosts.{n}", "name used by a switch too")
    _unique([h.ip for h in hosts.values()], "hosts.*.ip")
    _unique([h.mac for h in hosts.values()], "hosts.*.mac")
    _unique([s.grpc for s in switches.values()], "switches.*.grpc")
    links = tuple(_link(i, v, hosts, switches) for i, v in enumerate(m.links))
    used: set[tuple[str, int]] = set()
    for i, lk in enumerate(links):
        for node, port in ((lk.a, lk.a_port), (lk.b, lk.b_port)):
            if port is not None:
                if (node, port) in used:
                    raise SpecError(f"links[{i}]", f"port {port} of {node} used twice")
                used.add((node, port))
    topo = Topology(m.name or default_name, hosts, switches, links)
    for h in hosts:
        if len(topo.neighbours(h)) != 1:
            raise SpecError(f"hosts.{h}", "a host needs exactly one link")
    for s in switches:
        topo.routes(s)  # every host reachable from every switch
    return topo


def _link(i: int, v: Link, hosts: Mapping[str, Host], switches: Mapping[str, Switch]) -> Link:
    where = f"links[{i}]"
    for end in ("a", "b"):
        node = getattr(v, end)
        port = getattr(v, f"{end}_port")
        if node not in hosts and node not in switches:
            raise SpecError(f"{where}.{end}", f"unknown node {node!r}")
        if node in switches:
            if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 511:
                raise SpecError(f"{where}.{end}_port", f"switch port 1..510 required: {port!r}")
        elif port is not None:
            raise SpecError(f"{where}.{end}_port", "hosts have one interface: give no port")
    if v.host_bw_mbit is not None and (v.a in hosts) == (v.b in hosts):
        raise SpecError(f"{where}.host_bw_mbit", "only a link between a host and a switch "
                        "has a host end's direction")  # fmt: skip
    return v


def _unique(values: list[str], field: str) -> None:
    seen: set[str] = set()
    for val in values:
        if val in seen:
            raise SpecError(field, f"{val} appears twice")
        seen.add(val)

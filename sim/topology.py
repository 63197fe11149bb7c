"""Networks for the simulator: leaf-spine, fat-tree and emulation topology files.

Every class implements the ``Network`` protocol of :mod:`echelon.schedule`
(``links``: name -> capacity in bytes/s, ``path(src, dst)``: tuple of link names),
so the same object is handed to the policies and to the engine. The big switch
is the core's :class:`echelon.network.BigSwitch` (``BigSwitch.uniform(hosts, bytes_per_s)``).

Multipath topologies pick one path per (src, dst) pair with a stable hash (ECMP
without per-flow re-hashing), so a run is deterministic and reproducible.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from echelon.errors import SpecError, UnknownHostError
from echelon.network import BigSwitch
from echelon.schedule import Network
from echelon.topology import Topology, TopologyNetwork, load

#: Capacity given to links a topology file leaves unlimited (bytes/s, ~8 Tbit/s).
UNLIMITED_BYTES_PER_S = 1e12
#: What :func:`make_network` takes for a key a description leaves out: the one copy of
#: the defaults that the CLI's network options and :func:`sim.summary.describe_network` use.
NETWORK_DEFAULTS: dict[str, Any] = dict(kind="bigswitch", gbit=100, oversubscription=1.0, hosts=16,
                                        leaves=4, hosts_per_leaf=4, spines=2, k=4)  # fmt: skip


def gbit(x: float) -> float:
    """Gigabit/s to bytes/s."""
    return x * 1e9 / 8


def _ecmp(src: str, dst: str, n: int) -> int:
    return zlib.crc32(f"{src}>{dst}".encode()) % n


@dataclass(frozen=True)
class LeafSpine:
    """Two-tier Clos: ``leaves`` leaf switches with ``hosts_per_leaf`` hosts each,
    ``spines`` spines, every leaf linked to every spine.

    ``oversubscription`` is host bandwidth under a leaf divided by its uplink
    bandwidth (1.0 = non-blocking). Hosts are ``h0 .. h{N-1}``, leaf by leaf.
    """

    leaves: int = 4
    hosts_per_leaf: int = 4
    spines: int = 2
    host_bytes_per_s: float = gbit(100)
    oversubscription: float = 1.0
    _links: dict[str, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("leaves", "hosts_per_leaf", "spines"):
            if getattr(self, name) < 1:
                raise SpecError(f"leafspine.{name}", "must be at least 1")
        if self.host_bytes_per_s <= 0 or self.oversubscription <= 0:
            raise SpecError("leafspine.oversubscription", "bandwidth and ratio must be positive")
        up = self.hosts_per_leaf * self.host_bytes_per_s / (self.spines * self.oversubscription)
        links: dict[str, float] = {}
        for h in self.hosts:
            links[f"up:{h}"] = self.host_bytes_per_s
            links[f"down:{h}"] = self.host_bytes_per_s
        for leaf in range(self.leaves):
            for sp in range(self.spines):
                links[f"l{leaf}>s{sp}"] = up
                links[f"s{sp}>l{leaf}"] = up
        object.__setattr__(self, "_links", links)

    @property
    def hosts(self) -> list[str]:
        return [f"h{i}" for i in range(self.leaves * self.hosts_per_leaf)]

    @property
    def links(self) -> Mapping[str, float]:
        return self._links

    def leaf_of(self, host: str) -> int:
        return _host_index(host, len(self.hosts)) // self.hosts_per_leaf

    def path(self, src: str, dst: str) -> tuple[str, ...]:
        if src == dst:
            return ()
        ls, ld = self.leaf_of(src), self.leaf_of(dst)
        if ls == ld:
            return (f"up:{src}", f"down:{dst}")
        sp = _ecmp(src, dst, self.spines)
        return (f"up:{src}", f"l{ls}>s{sp}", f"s{sp}>l{ld}", f"down:{dst}")


@dataclass(frozen=True)
class FatTree:
    """k-ary fat-tree (Al-Fares et al.): k pods of k/2 edge and k/2 aggregation
    switches, (k/2)^2 cores, k^3/4 hosts ``h0 ..``. ``oversubscription`` divides
    the edge->aggregation and aggregation->core capacities."""

    k: int = 4
    host_bytes_per_s: float = gbit(100)
    oversubscription: float = 1.0
    _links: dict[str, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.k < 2 or self.k % 2:
            raise SpecError("fattree.k", f"must be an even number >= 2, got {self.k}")
        if self.host_bytes_per_s <= 0 or self.oversubscription <= 0:
            raise SpecError("fattree.oversubscription", "bandwidth and ratio must be positive")
        half = self.k // 2
        core_bw = self.host_bytes_per_s / self.oversubscription
        links: dict[str, float] = {}
        for h in self.hosts:
            links[f"up:{h}"] = self.host_bytes_per_s
            links[f"down:{h}"] = self.host_bytes_per_s
        for pod in range(self.k):
            for e in range(half):
                for a in range(half):
                    links[f"p{pod}e{e}>a{a}"] = core_bw
                    links[f"p{pod}a{a}>e{e}"] = core_bw
            for a in range(half):
                for c in range(half):
                    links[f"p{pod}a{a}>c{a * half + c}"] = core_bw
                    links[f"c{a * half + c}>p{pod}a{a}"] = core_bw
        object.__setattr__(self, "_links", links)

    @property
    def hosts(self) -> list[str]:
        return [f"h{i}" for i in range(self.k**3 // 4)]

    @property
    def links(self) -> Mapping[str, float]:
        return self._links

    def _where(self, host: str) -> tuple[int, int]:
        half = self.k // 2
        i = _host_index(host, len(self.hosts))
        return i // (half * half), (i // half) % half

    def path(self, src: str, dst: str) -> tuple[str, ...]:
        if src == dst:
            return ()
        half = self.k // 2
        (ps, es), (pd, ed) = self._where(src), self._where(dst)
        if (ps, es) == (pd, ed):
            return (f"up:{src}", f"down:{dst}")
        h = _ecmp(src, dst, half * half)
        a = h // half
        if ps == pd:
            return (f"up:{src}", f"p{ps}e{es}>a{a}", f"p{pd}a{a}>e{ed}", f"down:{dst}")
        core = a * half + h % half
        return (
            f"up:{src}",
            f"p{ps}e{es}>a{a}",
            f"p{ps}a{a}>c{core}",
            f"c{core}>p{pd}a{a}",
            f"p{pd}a{a}>e{ed}",
            f"down:{dst}",
        )


def _host_index(host: str, n: int) -> int:
    if not host.startswith("h") or not host[1:].isdigit() or int(host[1:]) >= n:
        raise UnknownHostError("hosts", f"{host} is not a host of this topology (h0..h{n - 1})")
    return int(host[1:])


def make_network(spec: Mapping[str, Any]) -> Network:
    """Build a network from a dict (the ``network`` section of a trace/sweep).

    ``{"kind": "bigswitch", "hosts": 16, "gbit": 100}``,
    ``{"kind": "leafspine", "leaves": 4, "hosts_per_leaf": 4, "spines": 2, "gbit": 100,
    "oversubscription": 2}``, ``{"kind": "fattree", "k": 4, "gbit": 100}`` or
    ``{"kind": "file", "path": "topo/star.yaml"}``.
    """
    s = {**NETWORK_DEFAULTS, **spec}
    kind = s["kind"]
    bw = gbit(float(s["gbit"]))
    over = float(s["oversubscription"])
    try:
        if kind == "bigswitch":
            n = int(s["hosts"])
            if n < 1:
                raise SpecError("network.hosts", "must be at least 1")
            return BigSwitch.uniform([f"h{i}" for i in range(n)], bw)
        if kind == "leafspine":
            return LeafSpine(int(s["leaves"]), int(s["hosts_per_leaf"]), int(s["spines"]), bw, over)
        if kind == "fattree":
            return FatTree(int(s["k"]), bw, over)
        if kind == "file":
            return file_network(str(spec["path"]))
    except (TypeError, ValueError, KeyError) as exc:
        if isinstance(exc, SpecError):
            raise
        raise SpecError("network", f"bad network description {dict(spec)!r}: {exc}") from exc
    raise SpecError("network.kind", f"unknown network kind {kind!r}")


def file_network(topology: Topology | str | Path) -> TopologyNetwork:
    """An emulation topology (its YAML file, or the file read) as a network, the links it
    leaves unlimited at :data:`UNLIMITED_BYTES_PER_S`: ``make_network``'s ``file`` kind."""
    if not isinstance(topology, Topology):
        topology = load(str(topology))
    return TopologyNetwork(topology, UNLIMITED_BYTES_PER_S)


def hosts_of(net: Network) -> list[str]:
    """Host names of a network, in order (``up:<h>`` links define the hosts).

    The order decides job placement, so it must not depend on the process: an
    unordered ``hosts`` (the big switch's frozenset iterates in string-hash order,
    which differs between interpreters) is replaced by the links' order."""
    hosts = getattr(net, "hosts", None)
    if hosts is not None and not isinstance(hosts, set | frozenset):
        return list(hosts)
    topo = getattr(net, "topology", None)
    if topo is not None:
        return list(topo.hosts)
    return [name[3:] for name in net.links if name.startswith("up:")]

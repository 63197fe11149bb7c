"""The big-switch network model: every host hangs off one non-blocking switch.

Each host has an uplink ``up:<h>`` (host -> switch) and a downlink ``down:<h>``
(switch -> host); a flow crosses its source's uplink and its destination's
downlink. This is the abstraction Varys and Sincronia schedule on, and matches
the star topology where the only contention is at host ports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from echelon.errors import SpecError, UnknownHostError


class BigSwitch:
    """:class:`echelon.schedule.Network` with one up and one down link per host."""

    def __init__(self, host_capacity: Mapping[str, float]) -> None:
        links: dict[str, float] = {}
        for h, cap in host_capacity.items():
            if isinstance(cap, bool) or not isinstance(cap, int | float) or not cap > 0:
                raise SpecError(f"capacity.{h}", f"must be a positive bytes/s value, got {cap!r}")
            links[f"up:{h}"] = float(cap)
            links[f"down:{h}"] = float(cap)
        if not links:
            raise SpecError("capacity", "a network needs at least one host")
        self._hosts = frozenset(host_capacity)
        self._links = MappingProxyType(links)

    @classmethod
    def uniform(cls, hosts: Iterable[str], bytes_per_s: float) -> BigSwitch:
        return cls(dict.fromkeys(hosts, bytes_per_s))

    @property
    def hosts(self) -> frozenset[str]:
        return self._hosts

    @property
    def links(self) -> Mapping[str, float]:
        return self._links

    def path(self, src: str, dst: str) -> tuple[str, ...]:
        for end, h in (("src", src), ("dst", dst)):
            if h not in self._hosts:
                raise UnknownHostError(f"path.{end}", f"unknown host {h!r}")
        if src == dst:
            return ()
        return (f"up:{src}", f"down:{dst}")

    def __repr__(self) -> str:
        return f"BigSwitch({len(self._hosts)} hosts)"

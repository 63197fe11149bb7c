"""Per-port, per-priority packet counts of the demo's switches, read from their pcaps.

With ``python -m topo.run --pcap DIR`` every switch writes BMv2's per-port
captures into ``DIR/<switch>/`` (``IFACE_in.pcap``, ``IFACE_out.pcap``; BMv2
and the soft switch alike). This module tails those files while the switch runs
and counts, per switch port, the frames received and the frames sent, the sent
IPv4 frames split by the priority the switch gave them (its DSCP is
``prio << 3``, :func:`echelon.constants.priority_for_dscp`): what each egress
priority queue served. Why from the pcaps: neither target exposes per-port or
per-queue packet counters over its runtime API, and the captures are the same
files on both.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from echelon.constants import priority_for_dscp
from echelon.pcap import PcapRecord, PcapTail, pcap_names


def egress_priority(frame: bytes) -> int | None:
    """The priority an IPv4 frame left the switch with (from its DSCP); None if not IPv4."""
    if len(frame) < 16 or frame[12:14] != b"\x08\x00":
        return None
    try:
        return priority_for_dscp(frame[15] >> 2)
    except ValueError:  # not a class selector: not set by the switch
        return None


@dataclass
class PortCounts:
    """Frames in and out of one switch port; ``out_prio`` counts sent IPv4 frames by priority."""

    rx: int = 0
    tx: int = 0
    out_prio: Counter[int] = field(default_factory=Counter)

    def minus(self, other: PortCounts) -> PortCounts:
        return PortCounts(self.rx - other.rx, self.tx - other.tx, self.out_prio - other.out_prio)


class PortView:
    """Tails every capture of the switches in ``ports`` ({switch: {port: interface}})."""

    def __init__(self, pcap_root: Path, ports: Mapping[str, Mapping[int, str]]) -> None:
        self.counts: dict[tuple[str, int], PortCounts] = {}
        self._lock = threading.Lock()  # polled by the ticker, the CLI and the run
        self._tails: list[tuple[tuple[str, int], PcapTail, PcapTail]] = []
        for sw, pmap in sorted(ports.items()):
            for port, iface in sorted(pmap.items()):
                name_in, name_out = pcap_names(iface)
                d = pcap_root / sw
                self._tails.append(((sw, port), PcapTail(d / name_in), PcapTail(d / name_out)))
                self.counts[(sw, port)] = PortCounts()

    def poll(self) -> dict[tuple[str, int], PortCounts]:
        """Read what was captured since the last poll; a copy of the running totals."""
        with self._lock:
            self._poll()
            return self.snapshot()

    def _poll(self) -> None:
        for key, tin, tout in self._tails:
            c = self.counts[key]
            c.rx += len(tin.read_new())
            sent: list[PcapRecord] = tout.read_new()
            c.tx += len(sent)
            for r in sent:
                prio = egress_priority(r.data)
                if prio is not None:
                    c.out_prio[prio] += 1

    def snapshot(self) -> dict[tuple[str, int], PortCounts]:
        return {k: PortCounts(c.rx, c.tx, Counter(c.out_prio)) for k, c in self.counts.items()}


def delta(
    after: Mapping[tuple[str, int], PortCounts], before: Mapping[tuple[str, int], PortCounts]
) -> dict[tuple[str, int], PortCounts]:
    return {k: c.minus(before.get(k, PortCounts())) for k, c in after.items()}


def table(counts: Mapping[tuple[str, int], PortCounts]) -> str:
    """One row per switch port: packets in, packets out, and out per priority 7..0."""
    prios = sorted({p for c in counts.values() for p in c.out_prio}, reverse=True)
    head = f"{'switch':<8} {'port':>4} {'in pkts':>9} {'out pkts':>9}"
    head += "".join(f" {'out p' + str(p):>8}" for p in prios)
    lines = [head]
    for (sw, port), c in sorted(counts.items()):
        row = f"{sw:<8} {port:>4} {c.rx:>9} {c.tx:>9}"
        row += "".join(f" {c.out_prio.get(p, 0):>8}" for p in prios)
        lines.append(row)
    return "\n".join(lines)


def one_line(counts: Mapping[tuple[str, int], PortCounts]) -> str:
    """A compact live line: ``s1 p1 in/out 120/3 p2 ...``."""
    parts = [f"{sw} p{port} {c.rx}/{c.tx}" for (sw, port), c in sorted(counts.items())]
    return "ports in/out pkts: " + "  ".join(parts)


def as_json(counts: Mapping[tuple[str, int], PortCounts]) -> list[dict[str, object]]:
    return [
        {
            "switch": sw,
            "port": port,
            "in_pkts": c.rx,
            "out_pkts": c.tx,
            "out_pkts_by_priority": {str(p): n for p, n in sorted(c.out_prio.items())},
        }
        for (sw, port), c in sorted(counts.items())
    ]

"""Smallest group first: a scheduling policy written outside the project (docs/policies.md).

Serve whole EchelonFlow groups, the one with the fewest bytes left first; inside a
group, flows with earlier ideal finishes (offsets) first. Use it by reference, with
this file's folder on PYTHONPATH::

    python -m sim run --mix hybrid --jobs 4 --policy smallest_first:SmallestFirst
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from echelon.model import EchelonFlow, FlowKey
from echelon.schedule import Network, Schedule


class SmallestFirst:
    name = "smallest-first"

    def schedule(
        self,
        echelons: Sequence[EchelonFlow],
        network: Network,
        remaining: Mapping[FlowKey, int] | None = None,
        now: float = 0.0,
    ) -> Schedule:
        left = remaining or {}

        def bytes_left(ef: EchelonFlow) -> int:
            return sum(left.get(ef.key(f), f.size) for f in ef.flows)

        order = sorted(echelons, key=lambda ef: (bytes_left(ef), ef.t_ref, ef.name))
        rank: dict[FlowKey, int] = {}
        base = 0
        for ef in order:
            offsets = sorted({f.offset for f in ef.flows})
            for f in ef.flows:
                rank[ef.key(f)] = base + offsets.index(f.offset)
            base += len(offsets)
        return Schedule(self.name, tuple(ef.name for ef in order), rank)

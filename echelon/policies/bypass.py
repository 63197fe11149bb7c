"""The starvation guard's memory: which groups have passed an overdue group.

Why a memory: lateness alone is not starvation. In an overloaded batch a group is
late behind a peer or two and is then served; lifting it above every size class
there makes the lifted groups share the link and all finish late (on one link,
against the exact optimum, that was the guard's whole cost: docs/model.md §5.1).
Starvation is being passed again and again, which in steady state is what small
jobs' groups do to a large job's. So the guard (step 7 of
:mod:`echelon.policies.echelon`) lifts an overdue group only once
:data:`BYPASS` distinct groups have been ranked ahead of it on a link it uses, at
re-plans where it was already overdue: a bounded bypass.

The memory belongs to one run. A policy object is asked again at every re-plan of
a run; a call whose ``now`` is earlier than the previous call's starts a new run
(the one-link oracle plays many instances through one object), and a group that
leaves the table is forgotten (instance names are unique within a run).
"""

from __future__ import annotations

import math

import numpy as np

from echelon.policies.table import FlowTable, Ints

#: Distinct groups that may pass an overdue group (ranked ahead of it on a link it
#: uses while it is overdue) before the guard lifts it. 1 lifts at the first pass
#: (one link 1.0053 / max 1.245 against the optimum); 2 and more leave one link as
#: without the guard (1.0026 / 1.167); of those, 2 keeps the steady state closest to
#: the guard without the count, 4 lets a small job's slowdown grow
#: (docs/measurements/scheduling.md).
BYPASS = 2

_NONE = np.iinfo(np.int64).max


class Passers:
    """Per live group, the names of the groups that passed it while it was overdue."""

    def __init__(self, limit: int | None = None) -> None:
        #: a group with this many passers is not looked at again (the guard asks no more)
        self.limit = limit
        self._by: dict[str, set[str]] = {}
        self._now = -math.inf

    def count(self, t: FlowTable, rank: Ints, overdue: Ints, now: float) -> Ints:
        """Record this re-plan's passes and return, per group, how many distinct
        groups have passed it so far (at most a little over ``limit``).

        ``rank``: the flows' ranks without the guard (0 first); ``overdue``: per flow,
        1 where its group is overdue. A group ``b`` passes an overdue group ``a`` on a
        link both have live flows on when ``b``'s best rank there is ahead of ``a``'s.
        """
        if now < self._now:
            self._by = {}
        self._now = now
        names = t.names
        present = set(names)
        self._by = {n: s for n, s in self._by.items() if n in present}
        live = t.remaining > 0
        od_group = np.zeros(len(names), dtype=bool)
        od_group[t.ech[live & (overdue == 1)]] = True
        if self.limit is not None:
            full = [i for i, n in enumerate(names) if len(self._by.get(n, ())) >= self.limit]
            od_group[full] = False
        if od_group.any():
            ok = live[t.inc_flow]
            flows = t.inc_flow[ok]
            best = np.full((len(names), len(t.cap)), _NONE)
            np.minimum.at(best, (t.ech[flows], t.inc_link[ok]), rank[flows])
            lifted = np.nonzero(od_group)[0]
            mine = best[lifted][:, None, :]  # overdue group x 1 x link
            ahead = (best[None, :, :] < mine) & (mine < _NONE)
            for a, b in zip(*np.nonzero(ahead.any(axis=2)), strict=True):
                self._by.setdefault(names[lifted[a]], set()).add(names[b])
        return np.fromiter((len(self._by.get(n, ())) for n in names), np.int64, len(names))

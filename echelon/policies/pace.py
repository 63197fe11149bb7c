"""The starvation guard's clock: how late a flow is against its own job's pace.

Latest finishes come from each job's timeline with infinite bandwidth
(:mod:`echelon.paradigms.plan`). A job whose own flows queue on its links (an FSDP
job's prefetched all-gathers, any job the network bounds when alone) is past them
with nobody else in its way. Measured from them, the guard would lift such a job
above every size class for good: that takes the links from the small jobs and gains
the job nothing, its own traffic being what holds it (the Chakra mix of
docs/evaluation.md: every job slower than under ``echelon-v1``,
docs/measurements/scheduling.md).

So the guard's reference for a flow is fixed when the flow is first seen: the
*own-pace finish* ``F``, where its job's live flows alone would put it (every link
serving them one at a time, by latest finish, at full capacity, from that moment),
and the flow's reference is ``max(latest, F) + (F - first seen)``: other jobs may
make a flow take about twice as long as its job alone would before its group counts
as starved. A group seen for the first time is never overdue yet, whatever its
latest finish says: starvation is something the guard must have watched happen.

That bound holds each wait, not their sum. Two equal jobs that take turns on a link
(the interleaving scenario incompatible-2) can let the same one win every turn: each of
the other's waits stays inside the bound, and it waits again next iteration (emulated:
1.42x / 2.25x its time alone against fair sharing's 1.74x for both). So the memory also
keeps when the guard last lifted a group of each job, and a job lifted within the last
``window`` of its group's bottleneck times is lifted at a tighter bound (``again``):
a job starved once is not made to wait as long again (1.57-1.63x / 1.62-1.75x). A job never
lifted keeps the loose bound, which the policy's order needs to follow the optimum on
one link (docs/model.md).

The memory is keyed by flow and latest finish, so a flow of another run with the
same name is new; an earlier ``now`` than the last call's starts a new run (the
:class:`echelon.schedule.Policy` contract).
"""

from __future__ import annotations

import math

import numpy as np

from echelon.model import FlowKey
from echelon.policies.table import Floats, FlowTable, Ints, layout_finish


def own_pace_finish(t: FlowTable, due: Floats, now: float) -> Floats:
    """Per flow: when it would finish if only its own job's live flows used the links,
    each link serving them one at a time at full capacity in (latest finish ``due``,
    index) order from ``now`` (finished flows: ``now``)."""
    return layout_finish(t, (t.index, due), now, alone=True)


class OwnPace:
    """Remembers each flow's guard reference from the call that first saw it, and when
    the guard last lifted a group of each job."""

    def __init__(self) -> None:
        self._ref: dict[tuple[FlowKey, float], float] = {}
        self._last = -math.inf
        self._lifted: dict[str, float] = {}

    def reference(self, t: FlowTable, due: Floats, now: float) -> Floats:
        """Per flow of ``t``: ``max(due, F) + (F - seen)`` with ``F`` its own-pace finish
        as of ``seen``, the call that first saw it (this one for a new flow)."""
        if now < self._last:
            self._ref.clear()
            self._lifted.clear()
        self._last = now
        ids = list(zip(t.keys, due.tolist(), strict=True))
        known = np.array([self._ref.get(i, math.nan) for i in ids], dtype=np.float64)
        fresh = np.flatnonzero(np.isnan(known))
        if len(fresh):
            own = own_pace_finish(t, due, now)[fresh]
            known[fresh] = np.maximum(due[fresh], own) + (own - now)
        # only the flows of this table are kept: a finished group's entries go with it
        self._ref = dict(zip(ids, known.tolist(), strict=True))
        return known

    def limits(
        self, t: FlowTable, p: Floats, now: float, loose: float, again: float, window: float
    ) -> Floats:
        """Per echelon, the guard's bound in bottleneck times ``p``: ``again`` if the guard
        lifted a group of its job less than ``window`` of its own ``p`` ago, else
        ``loose``."""
        since = np.array([now - self._lifted.get(j, -math.inf) for j in t.job_names], dtype=float)
        return np.where(since[t.job] < window * p, again, loose)

    def lift(self, t: FlowTable, lifted: Ints, now: float) -> None:
        """Note the jobs of the groups the guard lifts at ``now`` (``lifted``: per flow, 1
        where its group is lifted)."""
        for e in np.unique(t.ech[lifted.astype(bool)]).tolist():
            self._lifted[t.job_names[int(t.job[e])]] = now

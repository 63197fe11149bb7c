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

The memory is keyed by flow and latest finish, so a flow of another run with the
same name is new; an earlier ``now`` than the last call's starts a new run (the
:class:`echelon.schedule.Policy` contract).
"""

from __future__ import annotations

import math

import numpy as np

from echelon.model import FlowKey
from echelon.policies.table import Floats, FlowTable, layout_finish


def own_pace_finish(t: FlowTable, due: Floats, now: float) -> Floats:
    """Per flow: when it would finish if only its own job's live flows used the links,
    each link serving them one at a time at full capacity in (latest finish ``due``,
    index) order from ``now`` (finished flows: ``now``)."""
    return layout_finish(t, (t.index, due), now, alone=True)


class OwnPace:
    """Remembers each flow's guard reference from the call that first saw it."""

    def __init__(self) -> None:
        self._ref: dict[tuple[FlowKey, float], float] = {}
        self._last = -math.inf

    def reference(self, t: FlowTable, due: Floats, now: float) -> Floats:
        """Per flow of ``t``: ``max(due, F) + (F - seen)`` with ``F`` its own-pace finish
        as of ``seen``, the call that first saw it (this one for a new flow)."""
        if now < self._last:
            self._ref.clear()
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

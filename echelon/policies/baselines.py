"""Per-flow baselines with no notion of groups: fair sharing, FIFO, SRPT, EDF.

They rank flows individually (``echelon_order`` is empty); equal ranks share
bandwidth. They are what a switch does without knowing the formation.
"""

from __future__ import annotations

import numpy as np

from echelon.policies.table import FlowTable, Ints, TablePolicy, dense_rank
from echelon.schedule import Schedule


class _PerFlow(TablePolicy):
    def decide(self, t: FlowTable, now: float) -> Schedule:
        rank = self.rank(t) if len(t.keys) else np.zeros(0, dtype=np.int64)
        return Schedule(self.name, (), dict(zip(t.keys, rank.tolist(), strict=True)))

    def rank(self, t: FlowTable) -> Ints:
        raise NotImplementedError


class FairPolicy(_PerFlow):
    """Per-flow max-min fair sharing: every flow has rank 0 (TCP-like)."""

    name = "fair"
    #: Why the controller refuses it (:func:`echelon.policies.not_installable`).
    not_installable = (
        "per-flow max-min fair sharing needs a queue per flow (or fair queueing); "
        "8 strict-priority queues serve one level before the next, and all of fair's "
        "flows on one level share it FIFO, by arrival, not fairly"
    )

    def rank(self, t: FlowTable) -> Ints:
        return np.zeros(len(t.keys), dtype=np.int64)


class FifoPolicy(_PerFlow):
    """First come first served: by the EchelonFlow's ``t_ref``, then flow index."""

    name = "fifo"

    def rank(self, t: FlowTable) -> Ints:
        return dense_rank(t.t_ref[t.ech], t.index)


class SrptPolicy(_PerFlow):
    """Shortest remaining processing time, per flow (bytes left)."""

    name = "srpt"

    def rank(self, t: FlowTable) -> Ints:
        return dense_rank(t.remaining)


class EdfPolicy(_PerFlow):
    """Earliest deadline first, per flow, on the ideal finish ``t_ref + A(j)``."""

    name = "edf"

    def rank(self, t: FlowTable) -> Ints:
        return dense_rank(t.deadline)

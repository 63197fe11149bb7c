"""The policy's ranks for the flows of the live groups, asked from the engine's arrays.

A :class:`echelon.policies.table.TablePolicy` decides on a
:class:`~echelon.policies.table.FlowTable`; its ``schedule()`` builds that table by
walking EchelonFlow objects and a dict of remaining bytes, which on a coflow trace
(~50k flows in flight, a re-plan at every coflow arrival and completion) was over
90 % of a run. Here the per-flow columns are appended once, when a flow is created,
and a re-plan slices them: the table is the one ``build_table`` would give (same
rows, same order), built in numpy. Ranks come back as an array in row order. Any
other :class:`echelon.schedule.Policy` is asked through ``schedule()``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from echelon.model import EchelonFlow, Flow, FlowKey
from echelon.policies.baselines import FifoPolicy
from echelon.policies.table import (
    FlowTable,
    TablePolicy,
    check_unique,
    incidences,
    job_ids,
    name_ranks,
)
from echelon.quantize import FlowRows, flow_level_array, rank_array, us_of
from echelon.schedule import Network, Policy, Schedule
from sim.core.state import GrowArray

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]

#: Rank of a flow the policy left out: served last.
UNRANKED = int(np.iinfo(np.int64).max)


class Ranker:
    """Per-flow columns of every flow created so far (global flow ids), and the
    policy call on the live groups' rows."""

    def __init__(
        self, policy: Policy, network: Network, capacity: Floats, levels: int | None
    ) -> None:
        self.policy = policy
        self.net = network
        self.cap = capacity
        self.levels = levels
        self.table_policy = isinstance(policy, TablePolicy)
        # the per-flow baselines' decide() is a dict of their rank(): take the array itself
        # (building and reading back a dict of every flow in flight cost ~15 s of fifo's
        # run on the FB2010 coflow trace)
        self._per_flow = getattr(type(policy), "decide", None) is FifoPolicy.decide
        self.keys: list[FlowKey] = []
        self.index = GrowArray(np.int64)
        self.offset = GrowArray(np.float64)
        self.slack = GrowArray(np.float64)
        self.size = GrowArray(np.float64)  # the Flow's size (what "registered" tells)
        self.path = GrowArray(np.int64)  # row of ``paths``
        #: bytes still to send as last seen: ceil(wire bytes) until it is sent,
        #: ``max(1, ceil(rem))`` in flight (refreshed at each call), 0 once done
        self.remaining = GrowArray(np.float64)
        self.paths: list[tuple[int, ...]] = []
        self._path_rows: dict[tuple[int, ...], int] = {}
        self._matrix: Ints = np.zeros((0, 1), dtype=np.int64)

    def add(
        self,
        keys: Sequence[FlowKey],
        flows: Sequence[Flow],
        paths: Sequence[tuple[int, ...]],
        wire_bytes: Sequence[float],
    ) -> None:
        """Columns of new flows (the next ids, in order)."""
        rows = self._path_rows
        for p in paths:
            if p not in rows:
                rows[p] = len(self.paths)
                self.paths.append(p)
        n = len(flows)
        self.keys += keys
        self.index.extend(np.fromiter((f.index for f in flows), dtype=np.int64, count=n))
        self.offset.extend(np.fromiter((f.offset for f in flows), dtype=np.float64, count=n))
        self.slack.extend(np.fromiter((f.slack for f in flows), dtype=np.float64, count=n))
        self.size.extend(np.fromiter((f.size for f in flows), dtype=np.float64, count=n))
        self.path.extend(np.fromiter((rows[p] for p in paths), dtype=np.int64, count=n))
        self.remaining.extend(np.ceil(np.asarray(wire_bytes, dtype=np.float64)))

    def _path_matrix(self) -> Ints:
        if self._matrix.shape[0] < len(self.paths):
            width = max(1, *(len(p) for p in self.paths))
            m = np.full((len(self.paths), width), -1, dtype=np.int64)
            for i, p in enumerate(self.paths):
                m[i, : len(p)] = p
            self._matrix = m
        return self._matrix

    def table(
        self, groups: Sequence[EchelonFlow], first: Sequence[int], told: bool
    ) -> tuple[FlowTable, Ints]:
        """The FlowTable of ``groups`` (group ``i``'s flows have ids from ``first[i]``),
        as ``build_table`` gives it; ``told``: remaining bytes, else registered sizes.
        Returns the table and its rows' flow ids."""
        names = [ef.name for ef in groups]
        check_unique(names)
        counts, gids = _flow_ids(groups, first)
        keys = list(
            itertools.chain.from_iterable(
                self.keys[a : a + len(ef.flows)] for a, ef in zip(first, groups, strict=True)
            )
        )
        inc_flow, inc_link = incidences(self._path_matrix()[self.path.data[gids]])
        rem = (self.remaining if told else self.size).data[gids]
        job, job_names = job_ids(groups)
        t = FlowTable(
            keys=keys,
            names=names,
            weight=np.array([ef.weight for ef in groups], dtype=np.float64),
            t_ref=np.array([ef.t_ref for ef in groups], dtype=np.float64),
            name_rank=name_ranks(names),
            ech=np.repeat(np.arange(len(groups), dtype=np.int64), counts),
            index=self.index.data[gids],
            offset=self.offset.data[gids],
            slack=self.slack.data[gids],
            remaining=np.maximum(rem, 0.0),
            inc_flow=inc_flow,
            inc_link=inc_link,
            cap=self.cap.copy(),
            job=job,
            job_names=job_names,
        )
        return t, gids

    def ranks(
        self,
        groups: Sequence[EchelonFlow],
        first: Sequence[int],
        told: bool,
        now: float,
    ) -> tuple[Ints, Ints]:
        """``(flow ids, ranks)`` of every flow of ``groups``: the policy's ranks, or with
        ``levels`` the negated echelon levels (higher level: served first); flows the
        policy left out get :data:`UNRANKED`."""
        live, ranks = None, None
        if self.table_policy:
            assert isinstance(self.policy, TablePolicy)
            t, gids = self.table(groups, first, told)
            if self._per_flow:  # decide() is a dict of rank() and no group order
                ranks = self.policy.rank(t)  # type: ignore[attr-defined]
                if self.levels is None:
                    return gids, ranks
                sched = Schedule(self.policy.name, (), {})
            else:
                sched = self.policy.decide(t, now)
            keys, group = t.keys, t.ech
            # as TablePolicy.schedule: the quantiser skips finished flows
            live = t.remaining > 0
        else:
            counts, gids = _flow_ids(groups, first)
            keys = [self.keys[g] for g in gids.tolist()]
            group = np.repeat(np.arange(len(groups), dtype=np.int64), counts)
            rem = self.remaining.data[gids].astype(np.int64).tolist()
            remaining = dict(zip(keys, rem, strict=True)) if told else None
            sched = self.policy.schedule(groups, self.net, remaining, now)
        if self.levels is None:
            return gids, rank_array(sched.flow_rank, keys, UNRANKED)
        rows = FlowRows(keys, group, us_of(self.offset.data[gids]), live)
        lv = flow_level_array(sched, groups, tuple(range(1, self.levels)), rows, ranks)
        return gids, -lv


def _flow_ids(groups: Sequence[EchelonFlow], first: Sequence[int]) -> tuple[Ints, Ints]:
    """Flows per group, and the ids of all their flows (a group's ids are consecutive)."""
    counts = np.fromiter((len(ef.flows) for ef in groups), dtype=np.int64, count=len(groups))
    starts = np.cumsum(counts) - counts
    gids = np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(
        np.asarray(first, dtype=np.int64) - starts, counts
    )
    return counts, gids

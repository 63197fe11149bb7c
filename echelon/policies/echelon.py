"""The EchelonFlow policy (v2): size classes, virtual deadlines, DAG slack.

What it computes at each re-plan (reasoning: docs/model.md §5.1; measurements:
docs/measurements/model.md, docs/evaluation.md):

1. **Latest finish.** Flow ``j`` is due at ``t_ref + A(j) + slack(j)``: the latest
   arrival that does not lengthen its iteration in the contention-free timeline
   (``Flow.slack``, from the job's DAG). A stage's gradient all-reduce that only
   its own optimizer step waits for yields to an activation another stage is
   blocked on.
2. **Group key and size class.** Each group gets v1's modified-due-date key
   ``k = (p + max(0, t_ref + s - Γ - now)) / w`` (``p``: coflow bottleneck,
   ``Γ``: effective bottleneck, ``s``: the group's smallest slack) and the class
   ``floor(log10(k / 1 ms))``. Smaller classes go first (SEBF across orders of
   magnitude, which keeps the mean low).
3. **Virtual deadlines.** Groups in (class, key) order are laid out whole on
   every link; ``E`` is how late that serial layout would make each group's
   formation. Lateness up to a *grace* of ``LATENESS_GRACE`` (3) median bottleneck
   times of the group's class counts whole, beyond it only ``β = 1/4``; a flow's
   virtual deadline is its latest finish plus that.
4. **Once more, interleaved.** The serial layout overstates a group's lateness when
   other groups' flows with time to spare can let it pass: the flows are laid out
   again in (class, virtual deadline, latest finish) order, ``E`` is re-measured on
   that layout and step 3's rule gives the final virtual deadlines.
5. **Rank = (class, virtual deadline, latest finish).** Inside a class flows go by
   virtual deadline, whichever group they belong to: a group's early flows pass
   another group's late ones (interleaving). Peers only a few typical group-lengths
   late are served one after another (least summed delay); a group the serial order
   would make later than that keeps only a quarter of the excess as urgency, so a
   job is not starved behind many peers of its class (bounded tail). ``β = 1``
   serves a class in serial (key) order with interleaving: lowest mean, longest
   tail; ``β = 0`` without the grace is plain EDF inside a class: shortest tail,
   higher mean (peers progress in lockstep and stop overlapping one job's
   computation with another's communication).

6. **Single-flow moves.** Groups whose bytes left all cross one path (the same for
   both) may interleave across classes, flow by flow: where a late group's flow follows
   another group's on that path, it is moved ahead of it, or that flow behind the late
   group's run, if the layout's total formation delay drops (at most ``FLOW_TRIALS``
   per re-plan, from the head; ``interchange.flow_interchange``). This is what an
   echelon whose first flow is due now needs beside a smaller group whose later flows
   have time to spare: its first flow ahead, its later ones behind (the one-link
   maximum 1.167 -> 1.119, docs/measurements/scheduling.md). ``echelon-nomove`` goes
   without it.

7. **Starvation guard.** A group already overdue by more than ``OVERDUE`` (1) of its
   own bottleneck times leaves its class: all such groups share one rank above every
   class, except one alone on all its links, which keeps its flows' order (sharing
   there only serves its early flows later; the one-link maximum 1.119 -> 1.050,
   docs/measurements/scheduling.md). Overdue is measured against each flow's *own
   pace* (``pace.py``): the later of its latest finish and where its job's own flows
   alone would have finished it, plus that own-pace time once more, fixed when the
   flow was first seen; for a job the guard lifted within the last ``LIFT_MEMORY``
   (10) of its bottleneck times the bound is ``OVERDUE_AGAIN`` (1/2): each wait is
   bounded, and a job starved once is not made to wait as long again, iteration after
   iteration. Without the guard the size classes starve a large job for as long as
   small jobs' traffic keeps its links busy (a job iterating at 20x its contention-free
   time in steady state, docs/measurements/scheduling.md); sharing, not an order among
   the overdue groups, is what keeps every job's compute busy. Measured from the latest
   finish alone (the infinite-bandwidth timeline) it lifted jobs that only their own
   traffic holds, and groups merely queued behind peers of a closed batch.
   ``echelon-noguard`` is the policy without it.

Between steps 3 and 4, one pass of adjacent interchanges of each class's group
order, judged on the interleaved layout, repairs where the key puts a group after
one it should precede (``interchange.py``; only pairs whose paths are nested). It
is what brings the policy within 0.5 % of the one-link optimum (docs/model.md); the
ablation ``echelon-noswap`` goes without it, ``echelon-swapany`` swaps any pair that
shares a link.

Ranks are interleaved across groups, so the quantiser maps them to levels flow by
flow (``Schedule.interleaved``); the data plane's deadline ranges express that.

The variant ``echelon-jobtier`` replaces the groups' size classes with two *job*
tiers: the smallest jobs whose work (their busiest link's time for all they have
left) adds up to at most ``TIER_SHARE`` of the largest job's go strictly first,
the rest share one tier by virtual deadline. It trades about a point of mean for
five to ten points of tail on the evaluation's ``hybrid`` mix (docs/measurements/model.md); it
is not the default because its demo plan hinged on a strict-priority race (docs/demo.md).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Literal

import numpy as np
import numpy.typing as npt

from echelon.policies.group import mdd_key
from echelon.policies.interchange import (
    FLOW_TRIALS,
    SWAP_TRIALS,
    flow_interchange,
    interchange,
)
from echelon.policies.pace import OwnPace
from echelon.policies.table import (
    Floats,
    FlowTable,
    Ints,
    TablePolicy,
    bottlenecks,
    contested_groups,
    dense_rank,
    group_lateness,
    segments,
    serial_finish,
)
from echelon.schedule import Schedule

#: Ratio between consecutive size classes of the modified-due-date key.
CLASS_BASE = 10.0
#: Keys below this many seconds all fall in class 0.
CLASS_UNIT_S = 1e-3
#: Share of its serial-order lateness (beyond the grace below) a group's virtual
#: deadlines are pushed back by.
LATENESS_SHARE = 0.25
#: Grace, in median bottleneck times of the group's size class: serial-order lateness up
#: to this counts whole (peers served one after another), only the rest by the share.
LATENESS_GRACE = 3.0
#: Starvation guard: a group already overdue (past the own-pace reference of its first
#: flow with bytes left, ``pace.py``) by more than this many of its own bottleneck times
#: leaves its size class; all such groups that share a link with another group's bytes
#: share one rank above every class (max-min between them).
OVERDUE = 1.0
#: ... and by more than this many for a job the guard lifted less than
#: :data:`LIFT_MEMORY` of the group's bottleneck times ago (``pace.py``: a job starved
#: once is not made to wait as long again). Measured: docs/measurements/scheduling.md.
OVERDUE_AGAIN = 0.5
LIFT_MEMORY = 10.0
#: Tier 0 holds the smallest jobs whose work adds up to at most this share of the largest's.
TIER_SHARE = 0.3


def group_keys(
    t: FlowTable, now: float, slack: Floats, p_gamma: tuple[Floats, Floats] | None = None
) -> Floats:
    """v1's modified-due-date key per group, with ``t_ref`` moved by the group's slack
    (``p_gamma``: :func:`bottlenecks` of ``t`` if already computed)."""
    p, gamma = bottlenecks(t) if p_gamma is None else p_gamma
    lead = np.full(len(t.names), np.inf)
    np.minimum.at(lead, t.ech, slack)
    lead[~np.isfinite(lead)] = 0.0
    return mdd_key(t, now, p, gamma, lead)


def size_class(key: Floats) -> Ints:
    """``floor(log_B(key / unit))``, clamped at 0 (keys below one unit share class 0)."""
    scaled = np.maximum(key, CLASS_UNIT_S) / CLASS_UNIT_S
    return np.floor(np.log(scaled) / math.log(CLASS_BASE) + 1e-12).astype(np.int64)


def lateness_grace(p: Floats, cls: Ints, alive: npt.NDArray[np.bool_]) -> Floats:
    """Per group, :data:`LATENESS_GRACE` times the median bottleneck time ``p`` of the
    live groups of its class (0 where the class has none)."""
    grace = np.zeros(len(p))
    c_live, p_live = cls[alive], p[alive]
    if not len(c_live):
        return grace
    # each class's live bottlenecks as one sorted run (np.median's values without its
    # per-call cost: this runs at every re-plan)
    order = np.lexsort((p_live, c_live))
    c_sorted, p_sorted = c_live[order], p_live[order]
    starts = np.flatnonzero(np.concatenate(([True], c_sorted[1:] != c_sorted[:-1])))
    values, median = p_sorted.tolist(), []
    for lo, hi in itertools.pairwise([*starts.tolist(), len(order)]):
        mid = (lo + hi) // 2
        median.append(values[mid] if (hi - lo) % 2 else (values[mid - 1] + values[mid]) / 2)
    classes = c_sorted[starts]
    at = np.minimum(np.searchsorted(classes, cls), len(classes) - 1)
    member = classes[at] == cls
    grace[member] = LATENESS_GRACE * np.array(median)[at[member]]
    return grace


def counted_lateness(late: Floats, grace: Floats, share: float) -> Floats:
    """Lateness up to ``grace`` counts whole, the rest by ``share`` (β)."""
    return np.minimum(late, grace) + share * np.maximum(late - grace, 0.0)


def job_work(t: FlowTable) -> Floats:
    """Per job: seconds its busiest link needs for all the job's bytes left in ``t``."""
    n_jobs = int(t.job.max()) + 1 if len(t.job) else 0
    work = np.zeros(n_jobs)
    _f, e, lk, secs, _ = segments(t)
    if not len(e):
        return work
    cell = t.job[e] * len(t.cap) + lk
    cells, inverse = np.unique(cell, return_inverse=True)
    np.maximum.at(work, cells // len(t.cap), np.bincount(inverse, weights=secs))
    return work


def job_tiers(work: Floats, share: float = TIER_SHARE) -> Ints:
    """0 for the smallest jobs whose work sums to at most ``share`` of the largest
    job's (ties in job-id order), 1 for the others."""
    tier = np.ones(len(work), dtype=np.int64)
    if len(work):
        order = np.argsort(work, kind="stable")
        small = np.cumsum(work[order]) <= share * work.max()
        tier[order[small]] = 0
    return tier


def overdue_groups(t: FlowTable, due: Floats, p: Floats, now: float, limit: float | Floats) -> Ints:
    """Per flow, 1 where its group is already more than ``limit`` (per echelon, or one
    for all) bottleneck times ``p`` past the reference ``due`` of its first flow with
    bytes left (0 elsewhere)."""
    first = np.full(len(t.names), np.inf)
    np.minimum.at(first, t.ech, np.where(t.remaining > 0, due, np.inf))
    behind = np.maximum(now - first, 0.0)
    return (behind > limit * p)[t.ech].astype(np.int64)


class EchelonPolicy(TablePolicy):
    """Ours (v2): rank flows by (size class of their group, virtual deadline).

    The switches exist for the ablations in docs/evaluation.md (registered in
    :data:`ABLATIONS`): ``slack=False`` reads every slack as 0; ``tiers`` is
    ``"size"`` (the policy: each group in the size class ``floor(log10(key / 1 ms))``
    of its key, smaller classes strictly first), ``"job"`` (two job tiers,
    :func:`job_tiers`) or ``"none"`` (one class for all); ``share`` is β;
    ``grace=False`` counts all serial lateness by β (with ``share=0``: EDF inside a
    class) and makes no interchange; ``interleave=False`` serves groups whole in
    (class, key) order, virtual-deadline order inside each group; ``swaps`` is the most
    interchanges judged per re-plan (0: none) and ``pairs`` which neighbours may swap
    (:func:`echelon.policies.interchange.interchange`); ``moves`` is the most
    single-flow moves judged per re-plan (step 6; 0: none).
    """

    name = "echelon"

    def __init__(
        self,
        slack: bool = True,
        tiers: Literal["job", "size", "none"] = "size",
        share: float = LATENESS_SHARE,
        interleave: bool = True,
        grace: bool = True,
        swaps: int = SWAP_TRIALS,
        pairs: Literal["nested", "any"] = "nested",
        overdue: float | None = OVERDUE,
        again: float = OVERDUE_AGAIN,
        moves: int = FLOW_TRIALS,
    ) -> None:
        if tiers not in ("job", "size", "none"):
            raise ValueError(f"tiers must be 'job', 'size' or 'none', got {tiers!r}")
        if pairs not in ("nested", "any"):
            raise ValueError(f"pairs must be 'nested' or 'any', got {pairs!r}")
        self.use_slack = slack
        self.tiers = tiers
        self.share = share
        self.graced = grace
        self.swaps = swaps
        self.pairs: Literal["nested", "any"] = pairs
        self.interleave = interleave
        self.overdue = overdue
        self.again = again
        self.moves = moves
        self._pace = OwnPace()  # the guard's memory: one object per run

    def decide(self, t: FlowTable, now: float) -> Schedule:
        order, rank = self.rank_flows(t, now)
        return Schedule(
            self.name,
            tuple(t.names[i] for i in order.tolist()),
            dict(zip(t.keys, rank.tolist(), strict=True)),
            interleaved=self.interleave,
        )

    def rank_flows(self, t: FlowTable, now: float) -> tuple[Ints, Ints]:
        """``(group order, flow ranks)`` as arrays: :meth:`decide` without building the
        Schedule's dict (the controller's incremental planner reads the arrays)."""
        slack = t.slack if self.use_slack else np.zeros_like(t.slack)
        p_gamma = bottlenecks(t)
        key = group_keys(t, now, slack, p_gamma)
        if self.tiers == "job":
            cls = job_tiers(job_work(t))[t.job]
        elif self.tiers == "size":
            cls = size_class(key)
        else:
            cls = np.zeros(len(key), dtype=np.int64)
        order = np.lexsort((t.name_rank, t.t_ref, key, cls))
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order))
        due = t.deadline + slack
        live = t.remaining > 0
        alive = np.zeros(len(t.names), dtype=bool)
        alive[t.ech[live]] = True
        grace = lateness_grace(p_gamma[0], cls, alive) if self.graced else np.zeros(len(cls))

        def from_lateness(late: Floats) -> Floats:
            return due + counted_lateness(late, grace, self.share)[t.ech]

        if self.graced:
            # one pass of adjacent interchanges (interchange.py; none when swaps is 0),
            # which also lays the chosen order out interleaved: the serial layout
            # overstates how late a group is when another group's flows with time to
            # spare can let it pass, so the lateness measured once more on the
            # interleaved layout gives the final deadlines
            position, late = interchange(
                t, position, cls, due, from_lateness, now, self.swaps, self.pairs
            )
            order = np.argsort(position, kind="stable")
            virtual = from_lateness(late)
        else:
            virtual = from_lateness(group_lateness(t, serial_finish(t, position, now), due))
        keys: tuple[Floats | Ints, ...] = (
            (cls[t.ech], virtual, due) if self.interleave else (position[t.ech], virtual)
        )
        if self.interleave and self.graced and self.moves > 0:
            # step 6: single flows moved where the group order cannot say it
            keys = (flow_interchange(t, dense_rank(*keys), position[t.ech], due, now, self.moves),)
        if self.overdue is None:
            return order, dense_rank(*keys)
        # the starvation guard: the flows of overdue groups leave their class and share
        # one rank above every class (max-min between them: all their keys are 0)
        reference = self._pace.reference(t, due, now)
        bound = self._pace.limits(t, p_gamma[0], now, self.overdue, self.again, LIFT_MEMORY)
        lifted = overdue_groups(t, reference, p_gamma[0], now, bound)
        self._pace.lift(t, lifted, now)
        if lifted.any():
            # ... where they contend: a lifted group alone on its links keeps its own
            # order (sharing would only serve its early flows later)
            lifted = lifted * contested_groups(t)[t.ech]
        calm = 1 - lifted
        rank = dense_rank(calm, *(calm * k for k in keys))
        return order, rank


#: Ablations of :class:`EchelonPolicy` (docs/evaluation.md), by policy name.
ABLATIONS: dict[str, Callable[[], EchelonPolicy]] = {
    "echelon-noslack": lambda: EchelonPolicy(slack=False),
    "echelon-noclass": lambda: EchelonPolicy(tiers="none"),
    "echelon-jobtier": lambda: EchelonPolicy(tiers="job", grace=False),
    "echelon-edf": lambda: EchelonPolicy(share=0.0, grace=False),
    "echelon-serial": lambda: EchelonPolicy(share=1.0),
    "echelon-grouped": lambda: EchelonPolicy(interleave=False),
    "echelon-nograce": lambda: EchelonPolicy(grace=False),
    "echelon-noswap": lambda: EchelonPolicy(swaps=0),
    "echelon-nomove": lambda: EchelonPolicy(moves=0),
    "echelon-swapany": lambda: EchelonPolicy(pairs="any"),
    "echelon-noguard": lambda: EchelonPolicy(overdue=None),
}

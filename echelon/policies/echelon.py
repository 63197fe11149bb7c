"""The EchelonFlow policy (v2): job tiers, virtual deadlines, DAG slack.

What it computes at each re-plan (reasoning and measurements: docs/model.md,
docs/evaluation.md):

1. **Latest finish.** Flow ``j`` is due at ``t_ref + A(j) + slack(j)``: the latest
   arrival that does not lengthen its iteration in the contention-free timeline
   (``Flow.slack``, from the job's DAG). A stage's gradient all-reduce that only
   its own optimizer step waits for yields to an activation another stage is
   blocked on.
2. **Job tiers.** A job's work is the time its busiest link needs for everything
   the job has left in the plan (all its live groups). Jobs in order of work,
   smallest first: the longest run of them whose work adds up to at most
   ``α = 0.3`` of the largest job's is *tier 0*, served strictly ahead of every
   other job (tier 1). Small jobs finish their iterations at once (the mean), and
   the large jobs, which decide the tail, share what is left by deadline instead
   of waiting for one another.
3. **Virtual deadlines.** Groups in (tier, key) order, where the key is v1's
   modified due date ``(p + max(0, t_ref + s - Γ - now)) / w`` (``p``: coflow
   bottleneck, ``Γ``: effective bottleneck, ``s``: the group's smallest slack), are
   laid out whole on every link; ``E`` is how late that serial layout would make
   each group's formation. A flow's virtual deadline is its latest finish plus
   ``β · E`` (``β = 1/4``).
4. **Rank = (tier, virtual deadline).** Inside a tier flows go by virtual
   deadline, whichever group or job they belong to: a group's early flows pass
   another group's late ones (interleaving), and a group the serial order would
   make late keeps most of its urgency (bounded tail). ``β = 1`` serves a tier in
   serial (key) order with interleaving: lowest mean, longest tail; ``β = 0`` is
   plain EDF inside a tier.

Ranks are interleaved across groups, so the quantiser maps them to levels flow by
flow (``Schedule.interleaved``); the data plane's deadline ranges express that.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import numpy as np

from echelon.policies.group import mdd_key
from echelon.policies.table import (
    Floats,
    FlowTable,
    Ints,
    TablePolicy,
    bottlenecks,
    dense_rank,
    segments,
    serial_finish,
)
from echelon.schedule import Schedule

#: Ratio between consecutive size classes of the modified-due-date key.
CLASS_BASE = 10.0
#: Keys below this many seconds all fall in class 0.
CLASS_UNIT_S = 1e-3
#: Share of its serial-order lateness a group's virtual deadlines are pushed back by.
LATENESS_SHARE = 0.25
#: Tier 0 holds the smallest jobs whose work adds up to at most this share of the largest's.
TIER_SHARE = 0.3


def group_keys(t: FlowTable, now: float, slack: Floats) -> Floats:
    """v1's modified-due-date key per group, with ``t_ref`` moved by the group's slack."""
    p, gamma = bottlenecks(t)
    lead = np.full(len(t.names), np.inf)
    np.minimum.at(lead, t.ech, slack)
    lead[~np.isfinite(lead)] = 0.0
    return mdd_key(t, now, p, gamma, lead)


def size_class(key: Floats) -> Ints:
    """``floor(log_B(key / unit))``, clamped at 0 (keys below one unit share class 0)."""
    scaled = np.maximum(key, CLASS_UNIT_S) / CLASS_UNIT_S
    return np.floor(np.log(scaled) / math.log(CLASS_BASE) + 1e-12).astype(np.int64)


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


class EchelonPolicy(TablePolicy):
    """Ours (v2): rank flows by (tier of their job, virtual deadline).

    The switches exist for the ablation in docs/evaluation.md (registered in
    :data:`ABLATIONS`): ``slack=False`` reads every slack as 0; ``tiers`` is
    ``"job"`` (the policy), ``"size"`` (the previous revision: each *group* in the
    size class ``floor(log10(key / 1 ms))`` of its key, smaller classes strictly
    first) or ``"none"`` (one tier); ``share`` is β (0: EDF inside a tier);
    ``interleave=False`` serves groups whole in (tier, key) order, virtual-deadline
    order inside each group.
    """

    name = "echelon"

    def __init__(
        self,
        slack: bool = True,
        tiers: Literal["job", "size", "none"] = "job",
        share: float = LATENESS_SHARE,
        interleave: bool = True,
    ) -> None:
        if tiers not in ("job", "size", "none"):
            raise ValueError(f"tiers must be 'job', 'size' or 'none', got {tiers!r}")
        self.use_slack = slack
        self.tiers = tiers
        self.share = share
        self.interleave = interleave

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
        key = group_keys(t, now, slack)
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
        late = np.zeros(len(t.names))
        live = t.remaining > 0
        np.maximum.at(late, t.ech[live], (serial_finish(t, position, now) - due)[live])
        virtual = due + self.share * late[t.ech]
        if self.interleave:
            # flows with the same tier and virtual deadline share a rank (max-min)
            rank = dense_rank(cls[t.ech], virtual)
        else:
            rank = dense_rank(position[t.ech], virtual)
        return order, rank


#: Ablations of :class:`EchelonPolicy` (docs/evaluation.md), by policy name.
ABLATIONS: dict[str, Callable[[], EchelonPolicy]] = {
    "echelon-noslack": lambda: EchelonPolicy(slack=False),
    "echelon-notier": lambda: EchelonPolicy(tiers="none"),
    "echelon-sizeclass": lambda: EchelonPolicy(tiers="size"),
    "echelon-edf": lambda: EchelonPolicy(share=0.0),
    "echelon-serial": lambda: EchelonPolicy(share=1.0),
    "echelon-grouped": lambda: EchelonPolicy(interleave=False),
}

"""Policies that order whole groups: echelon-v1 (our first policy), coflow, Varys SEBF,
SEBF + EDF inside groups, Sincronia BSSI.

Each returns an ``echelon_order`` and flow ranks that are lexicographic in
(position of the flow's group, rank inside the group).
"""

from __future__ import annotations

import numpy as np

from echelon.policies.table import (
    Floats,
    FlowTable,
    Ints,
    TablePolicy,
    bottlenecks,
    dense_rank,
    link_loads,
)
from echelon.schedule import Schedule


def _schedule(policy: str, t: FlowTable, order: Ints, intra: Ints | None) -> Schedule:
    """Ranks: groups in ``order``; inside a group by ``intra`` (dense, per flow) or shared."""
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order))
    if intra is None:
        rank = pos[t.ech]
    else:
        width = np.zeros(len(order), dtype=np.int64)
        np.maximum.at(width, t.ech, intra + 1)
        base = np.zeros(len(order), dtype=np.int64)
        base[order] = np.concatenate(([0], np.cumsum(width[order])[:-1]))
        rank = base[t.ech] + intra
    return Schedule(
        policy,
        tuple(t.names[i] for i in order.tolist()),
        dict(zip(t.keys, rank.tolist(), strict=True)),
    )


def intra_edf(t: FlowTable) -> Ints:
    """Dense rank of each flow's offset inside its echelon (EDF on ``t_ref + A(j)``)."""
    if not len(t.ech):
        return np.zeros(0, dtype=np.int64)
    global_rank = dense_rank(t.ech, t.offset)
    first = np.full(len(t.names), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, t.ech, global_rank)
    return global_rank - first[t.ech]


def mdd_key(t: FlowTable, now: float, p: Floats, gamma: Floats, lead: Floats) -> Floats:
    """``(p + max(0, t_ref + lead - Γ - now)) / weight`` per group (the modified due date,
    minus ``now``, of a one-machine job of length ``p`` due at ``t_ref + lead + p - Γ``)."""
    key: Floats = (p + np.maximum(t.t_ref + lead - gamma - now, 0.0)) / t.weight
    return key


def mdd_order(t: FlowTable, now: float, use_offsets: bool) -> Ints:
    """Modified-due-date order of groups, generalised to formations.

    A group served alone and without interruption from ``s`` (EDF inside) is
    ``max(0, s + Γ - t_ref)`` late, where Γ is its effective bottleneck; it keeps
    its bottleneck busy for ``p`` (the coflow bottleneck). That is a one-machine
    job of length ``p`` due at ``t_ref + p - Γ``, and the modified due date rule
    for total tardiness picks the smallest ``max(due, now + p)``. Key (minus
    ``now``, per weight): ``(p + max(0, t_ref - Γ - now)) / weight``; ties by
    ``t_ref`` then name. With ``A == 0`` (Γ = p) and every ``t_ref <= now`` it is
    exactly Varys' SEBF.
    """
    p, gamma = bottlenecks(t)
    if not use_offsets:
        gamma = p
    key = mdd_key(t, now, p, gamma, np.zeros(len(p)))
    return np.lexsort((t.name_rank, t.t_ref, key))


class _GroupPolicy(TablePolicy):
    """Ranks flows by (group position, intra-group rank); subclasses only say how
    groups are ordered and, optionally, flows inside."""

    def decide(self, t: FlowTable, now: float) -> Schedule:
        return _schedule(self.name, t, self.order(t, now), self.intra(t))

    def order(self, t: FlowTable, now: float) -> Ints:
        raise NotImplementedError

    def intra(self, t: FlowTable) -> Ints | None:
        """``None``: every flow of a group shares its group's rank."""
        return None


class EchelonV1Policy(_GroupPolicy):
    """Our first policy, kept as a baseline: inter-group modified due date on the
    formation, intra-group EDF. Its key equals Varys' whenever ``t_ref`` is not in
    the future, which is every group the paradigm builders make at release time."""

    name = "echelon-v1"

    def order(self, t: FlowTable, now: float) -> Ints:
        return mdd_order(t, now, True)

    def intra(self, t: FlowTable) -> Ints | None:
        return intra_edf(t)


class CoflowPolicy(_GroupPolicy):
    """echelon-v1 with ``A`` treated as 0 and no intra-group order: what a Coflow
    scheduler would do with the same groups (an ablation)."""

    name = "coflow"

    def order(self, t: FlowTable, now: float) -> Ints:
        return mdd_order(t, now, False)


class VarysPolicy(_GroupPolicy):
    """Varys SEBF: smallest bottleneck ``max_l bytes_l / cap_l`` (per weight) first;
    ties by arrival (``t_ref``), then name."""

    name = "varys"

    def order(self, t: FlowTable, now: float) -> Ints:
        key = bottlenecks(t)[0] / t.weight
        return np.lexsort((t.name_rank, t.t_ref, key))


class SebfEdfPolicy(VarysPolicy):
    """Varys' SEBF order between groups, EDF on ``t_ref + A(j)`` inside each group:
    the part of echelon-v1's gain that does not need the formation between groups."""

    name = "sebf-edf"

    def intra(self, t: FlowTable) -> Ints | None:
        return intra_edf(t)


class SincroniaPolicy(_GroupPolicy):
    """Sincronia's BSSI: repeatedly take the most loaded link and put last the
    group with the smallest weight per unit of work on it, then discount the
    weights of the other groups on that link."""

    name = "sincronia"

    def order(self, t: FlowTable, now: float) -> Ints:
        return bssi_order(t)


def bssi_order(t: FlowTable) -> Ints:
    """BSSI in O(n) vectorised work per step (O(n^2) total, not O(n^2 * links)).

    Groups with nothing left go first (in name order): they finish at once.
    Ties on the ratio put the larger name last, so equal groups come in name order.
    """
    load = link_loads(t)
    weight: Floats = t.weight.copy()
    alive = load.sum(axis=1) > 0
    port = load.sum(axis=0)
    last_first: list[int] = []
    while alive.any():
        b = int(np.argmax(port))
        col = load[:, b]
        idx = np.flatnonzero(alive & (col > 0))
        if not len(idx):  # float residue of finished groups: this link is idle
            port[b] = 0.0
            if port.max() <= 0:
                port = load[alive].sum(axis=0)
            continue
        ratio = weight[idx] / col[idx]
        ties = idx[ratio == ratio.min()]
        k = int(ties[np.argmax(t.name_rank[ties])])
        weight[idx] = np.maximum(weight[idx] - weight[k] * col[idx] / col[k], 0.0)
        alive[k] = False
        port -= load[k]
        last_first.append(k)
    done = np.flatnonzero(load.sum(axis=1) <= 0)
    done = done[np.argsort(t.name_rank[done], kind="stable")]
    return np.concatenate((done, np.array(last_first[::-1], dtype=np.int64))).astype(np.int64)

"""Exact optimum on one link, to measure how far a policy is from the best schedule.

The instance: EchelonFlows whose flows all cross one link of capacity 1 (sizes in
seconds of link time), each group released at ``release[name]``, preemption
allowed. The objective is the total weighted *formation delay*
``Σ_g w_g · max(0, max_j (C_j - A(j)) - t_ref)``: how long the group's consumer
(a chain that needs flow ``j`` at ``t_ref + A(j)``) is held up, which is what a
late group costs its job's iteration.

Exact because, for any regular objective on one preemptive machine with release
times, some optimal schedule is a priority list over flows; given the order in
which flows complete, the ``k``-th one completes exactly when the first ``k``
are all done, which takes the subset's release-constrained makespan. So the
optimum is the best of ``n!`` orders, evaluated with a table of ``2^n`` subset
makespans (``n <= 8``: 40,320 orders, vectorised).

The simulator's engine plays a policy on the same instance (``ONE_LINK``, sizes
in bytes by :func:`scaled`; :func:`sim.eval.headline.policy_cost`), so its cost
over :func:`optimum` is the policy's ratio to the optimum.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from echelon.errors import SpecError
from echelon.model import EchelonFlow, Flow, FlowKey, completion_time
from echelon.network import BigSwitch
from echelon.schedule import Schedule

#: Largest instance the exact search accepts (n! orders).
MAX_FLOWS = 8
#: Bytes per second of link time: policies see sizes in whole bytes, so one unit of
#: size is this many bytes (rounding to bytes is then negligible).
_SCALE = 1_000_000
#: The one link ``a -> b`` (its up- and downlink), ``_SCALE`` bytes per second.
ONE_LINK = BigSwitch.uniform(["a", "b"], float(_SCALE))


@dataclass(frozen=True)
class Instance:
    """Groups on the one link ``a -> b`` and when each is released."""

    groups: tuple[EchelonFlow, ...]
    release: Mapping[str, float]

    def flows(self) -> list[tuple[EchelonFlow, Flow]]:
        return [(ef, f) for ef in self.groups for f in ef.flows]


def formation_delay(inst: Instance, finish: Mapping[FlowKey, float]) -> float:
    """``Σ_g w_g · max(0, max_j (C_j - A(j)) - t_ref)``."""
    return sum(
        ef.weight * max(0.0, completion_time(ef, {f.index: finish[ef.key(f)] for f in ef.flows}))
        for ef in inst.groups
    )


def optimum(inst: Instance) -> float:
    """The least formation delay of any preemptive schedule (exact, ``n <= 8``)."""
    pairs = inst.flows()
    n = len(pairs)
    if not 1 <= n <= MAX_FLOWS:
        raise SpecError("instance", f"exact search takes 1..{MAX_FLOWS} flows, got {n}")
    size = np.array([f.size for _, f in pairs], dtype=np.float64)
    rel = np.array([inst.release[ef.name] for ef, _ in pairs], dtype=np.float64)
    due = np.array([ef.t_ref + f.offset for ef, f in pairs], dtype=np.float64)
    weight = np.array([ef.weight for ef, _ in pairs], dtype=np.float64)
    group = np.array([i for i, ef in enumerate(inst.groups) for _ in ef.flows], dtype=np.int64)
    makespan = _subset_makespans(size, rel)
    perms = np.array(list(itertools.permutations(range(n))), dtype=np.int64)
    masks = np.cumsum(1 << perms, axis=1)
    done = np.empty_like(masks, dtype=np.float64)
    np.put_along_axis(done, perms, makespan[masks], axis=1)  # done[:, j] = C_j
    return float(_delays(done, due, weight, group).min())


def _delays(done: np.ndarray, due: np.ndarray, weight: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Per row of ``done`` (each flow's finish under one order), the total weighted
    formation delay; ``due`` is each flow's ``t_ref + A(j)``, ``group`` its group."""
    late = done - due  # C_j - (t_ref + A(j))
    cost = np.zeros(len(done))
    for g in np.unique(group):
        cols = np.flatnonzero(group == g)
        cost += weight[cols[0]] * np.maximum(late[:, cols].max(axis=1), 0.0)
    return cost


def _subset_makespans(size: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """Makespan of every subset with release times: ``max_r (r + Σ_{j: r_j >= r} p_j)``."""
    n = len(size)
    out = np.zeros(1 << n)
    for mask in range(1, 1 << n):
        members = [j for j in range(n) if mask >> j & 1]
        out[mask] = max(rel[k] + sum(size[j] for j in members if rel[j] >= rel[k]) for k in members)
    return out


class MyopicOptimum:
    """Reference, not a policy for switches: at every decision, the exact best order of
    the flows released so far, as if nothing else would arrive.

    Played by the simulator like any policy (asked at releases and group
    finishes), it is the best a policy can do that knows everything about the present
    and nothing about the future. Its ratio to :func:`optimum` is the part of the gap
    that no online policy re-planned at those events closes.

    A policy is not told when flows finished, so a partly served group's sunk lateness
    is unknown to it: the order is therefore searched again only when a group arrives
    (then over the live flows, sunk lateness ignored) and kept at group finishes, which
    makes it exact when nothing arrives later (tested).
    """

    name = "myopic-optimum"

    def __init__(self) -> None:
        self._rank: dict[FlowKey, int] = {}
        self._now = -math.inf
        self._seen: dict[str, tuple[float, tuple[tuple[float, float], ...]]] = {}

    def schedule(
        self,
        echelons: Sequence[EchelonFlow],
        network: object,
        remaining: Mapping[FlowKey, int] | None = None,
        now: float = 0.0,
    ) -> Schedule:
        live = [
            ef.key(f) for ef in echelons for f in ef.flows
            if (remaining or {}).get(ef.key(f), f.size) > 0
        ]  # fmt: skip
        same = all(self._seen.get(ef.name) == _signature(ef) for ef in echelons)
        if now >= self._now and live and same and all(k in self._rank for k in live):
            self._now = now  # no arrival since the last search: keep its order
            return Schedule(self.name, tuple(ef.name for ef in echelons), self._rank, True)
        # in key order, whatever order the groups come in: ties between equally good
        # orders go the same way however the caller lists the groups
        rows = sorted(
            (ef.key(f), left / _SCALE, ef.t_ref + f.offset, ef.weight, g)
            for g, ef in enumerate(echelons)
            for f in ef.flows
            if (left := (remaining or {}).get(ef.key(f), f.size)) > 0
        )
        if not 1 <= len(rows) <= MAX_FLOWS:
            raise SpecError("instance", f"myopic search takes 1..{MAX_FLOWS} live flows")
        size, due, weight, group = (np.array([r[i] for r in rows]) for i in range(1, 5))
        perms = np.array(list(itertools.permutations(range(len(rows)))), dtype=np.int64)
        done = np.empty(perms.shape, dtype=np.float64)
        np.put_along_axis(done, perms, now + np.cumsum(size[perms], axis=1), axis=1)
        best = perms[int(np.argmin(_delays(done, due, weight, group)))]
        self._rank = {rows[j][0]: pos for pos, j in enumerate(best.tolist())}
        self._now = now
        self._seen = {ef.name: _signature(ef) for ef in echelons}
        return Schedule(self.name, tuple(ef.name for ef in echelons), self._rank, True)


def _signature(ef: EchelonFlow) -> tuple[float, tuple[tuple[float, float], ...]]:
    """What tells one instance's group from another's of the same name."""
    return ef.t_ref, tuple((float(f.size), f.offset) for f in ef.flows)


def scaled(groups: Sequence[EchelonFlow]) -> list[EchelonFlow]:
    """The groups with sizes in bytes (``_SCALE`` per unit); times stay in seconds."""
    out = []
    for ef in groups:
        flows = tuple(
            Flow(f.index, f.src, f.dst, f.size * _SCALE, f.offset, f.slack) for f in ef.flows
        )
        out.append(EchelonFlow(ef.name, ef.job, ef.group, flows, ef.t_ref, ef.weight))
    return out


def random_instance(rng: random.Random, max_flows: int = MAX_FLOWS) -> Instance:
    """2-4 groups, 1-``max_flows`` flows in all, sizes 1-10, staggered offsets, releases
    in [0, 10] and ``t_ref`` 0-5 after the release."""
    n_groups = rng.randint(2, 4)
    n_flows = rng.randint(n_groups, max_flows)
    counts = [1] * n_groups
    for _ in range(n_flows - n_groups):
        counts[rng.randrange(n_groups)] += 1
    groups, release = [], {}
    for g, count in enumerate(counts):
        steps = sorted(rng.randint(0, 12) for _ in range(count - 1))
        offsets = [0.0, *(float(s) for s in steps)]
        flows = tuple(Flow(j, "a", "b", rng.randint(1, 10), offsets[j]) for j in range(count))
        r = float(rng.randint(0, 10))
        name = f"g{g}"
        groups.append(EchelonFlow(name, name, "g", flows, r + rng.randint(0, 5)))
        release[name] = r
    return Instance(tuple(groups), release)

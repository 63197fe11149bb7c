"""Collective operations as explicit point-to-point flows between hosts.

A switch only sees host-to-host flows, so every collective is expanded into the
transfers a ring (or pairwise) implementation makes. ``producers`` names, per
host, the task whose end makes that host's input ready; the returned lists hold,
per host, the handles of the flows that host receives (its consumers wait on them).

Approximation: the 2(N-1) steps of a ring are all released when the input is
ready rather than one after another. Each ring link carries the same bytes either
way, so a flow-level simulator sees the same link load and completion time of the
whole collective; only the step-by-step pipelining is not modelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise

from echelon.paradigms.plan import PlanBuilder


def _chunk(size: int, parts: int) -> int:
    return -(-size // parts)


def ring(
    b: PlanBuilder,
    group: str,
    hosts: Sequence[str],
    size: int,
    producers: Mapping[str, str | None],
    steps_per_host: int,
    chunk: int,
) -> dict[str, list[int]]:
    """``steps_per_host`` ring steps; in each, host i sends ``chunk`` bytes to host i+1."""
    received: dict[str, list[int]] = {h: [] for h in hosts}
    n = len(hosts)
    if n < 2 or size <= 0:
        return received
    for _step in range(steps_per_host):
        for i, src in enumerate(hosts):
            dst = hosts[(i + 1) % n]
            received[dst].append(b.flow(group, src, dst, chunk, producers[src]))
    return received


def ring_allreduce(
    b: PlanBuilder,
    group: str,
    hosts: Sequence[str],
    size: int,
    producers: Mapping[str, str | None],
) -> dict[str, list[int]]:
    """Ring all-reduce of ``size`` bytes: reduce-scatter then all-gather, 2(N-1) steps
    of ``size/N`` bytes per host."""
    n = len(hosts)
    return ring(b, group, hosts, size, producers, 2 * (n - 1), _chunk(size, max(n, 1)))


def ring_allgather(
    b: PlanBuilder,
    group: str,
    hosts: Sequence[str],
    size: int,
    producers: Mapping[str, str | None],
) -> dict[str, list[int]]:
    """Ring all-gather of a ``size``-byte tensor sharded over the hosts: N-1 steps."""
    n = len(hosts)
    return ring(b, group, hosts, size, producers, n - 1, _chunk(size, max(n, 1)))


ring_reducescatter = ring_allgather
"""Reduce-scatter moves the same bytes as all-gather, in the same ring pattern."""


def all_to_all(
    b: PlanBuilder,
    group: str,
    hosts: Sequence[str],
    pair_bytes: int,
    producers: Mapping[str, str | None],
) -> dict[str, list[int]]:
    """Every host sends ``pair_bytes`` to every other host (MoE dispatch/combine)."""
    received: dict[str, list[int]] = {h: [] for h in hosts}
    if pair_bytes <= 0:
        return received
    for src in hosts:
        for dst in hosts:
            if dst != src:
                received[dst].append(b.flow(group, src, dst, pair_bytes, producers[src]))
    return received


def chain(
    b: PlanBuilder,
    group: str,
    hosts: Sequence[str],
    size: int,
    producers: Mapping[str, str | None],
) -> dict[str, list[int]]:
    """``hosts[0] -> hosts[1] -> ... -> hosts[-1]``, ``size`` bytes per hop: a pipelined
    broadcast from ``hosts[0]`` (NCCL's ring broadcast); reversed, a reduce to the last."""
    received: dict[str, list[int]] = {h: [] for h in hosts}
    if size <= 0:
        return received
    for src, dst in pairwise(hosts):
        received[dst].append(b.flow(group, src, dst, size, producers[src]))
    return received


def star(
    b: PlanBuilder,
    group: str,
    root: str,
    hosts: Sequence[str],
    pair_bytes: int,
    producers: Mapping[str, str | None],
    to_root: bool,
) -> dict[str, list[int]]:
    """One flow of ``pair_bytes`` between ``root`` and every other host: into the root
    (gather) or out of it (scatter)."""
    received: dict[str, list[int]] = {h: [] for h in hosts}
    if pair_bytes <= 0:
        return received
    for h in hosts:
        if h == root:
            continue
        src, dst = (h, root) if to_root else (root, h)
        received[dst].append(b.flow(group, src, dst, pair_bytes, producers[src]))
    return received

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

from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise

from echelon.paradigms.plan import PlanBuilder


def _chunk(size: int, parts: int) -> int:
    return -(-size // parts)


def _flows(
    b: PlanBuilder,
    group: str,
    hosts: Sequence[str],
    sends: Iterable[tuple[str, str, int]],
    producers: Mapping[str, str | None],
) -> dict[str, list[int]]:
    """Add the flows ``sends`` (source, destination, bytes), each released when its
    source's producer ends: every collective below is its list of sends."""
    received: dict[str, list[int]] = {h: [] for h in hosts}
    for src, dst, size in sends:
        received[dst].append(b.flow(group, src, dst, size, producers[src]))
    return received


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
    n = len(hosts)
    steps = steps_per_host if n >= 2 and size > 0 else 0
    sends = ((src, hosts[(i + 1) % n], chunk) for _ in range(steps) for i, src in enumerate(hosts))
    return _flows(b, group, hosts, sends, producers)


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
    """Ring all-gather of a ``size``-byte tensor sharded over the hosts: N-1 steps.
    Reduce-scatter moves the same bytes in the same ring pattern, so it is this too."""
    n = len(hosts)
    return ring(b, group, hosts, size, producers, n - 1, _chunk(size, max(n, 1)))


def all_to_all(
    b: PlanBuilder,
    group: str,
    hosts: Sequence[str],
    pair_bytes: int,
    producers: Mapping[str, str | None],
) -> dict[str, list[int]]:
    """Every host sends ``pair_bytes`` to every other host (MoE dispatch/combine)."""
    pairs = [(s, d) for s in hosts for d in hosts if d != s] if pair_bytes > 0 else []
    return _flows(b, group, hosts, ((s, d, pair_bytes) for s, d in pairs), producers)


def chain(
    b: PlanBuilder,
    group: str,
    hosts: Sequence[str],
    size: int,
    producers: Mapping[str, str | None],
) -> dict[str, list[int]]:
    """``hosts[0] -> hosts[1] -> ... -> hosts[-1]``, ``size`` bytes per hop: a pipelined
    broadcast from ``hosts[0]`` (NCCL's ring broadcast); reversed, a reduce to the last."""
    hops = pairwise(hosts) if size > 0 else []
    return _flows(b, group, hosts, ((s, d, size) for s, d in hops), producers)


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
    others = [h for h in hosts if h != root] if pair_bytes > 0 else []
    pairs = ((h, root) if to_root else (root, h) for h in others)
    return _flows(b, group, hosts, ((s, d, pair_bytes) for s, d in pairs), producers)

"""A recorded job: each rank's compute steps and the communication between them.

The job format of a training job taken from an execution trace
(:mod:`echelon.chakra.convert` writes it from a Chakra trace; a user may write
one by hand). It describes *what ran*, not a paradigm's model of it:

* ``steps``: each rank's device compute in the order its stream ran it, as steps
  of ``compute_s`` seconds (one task at a time per host, like every paradigm);
* ``comms``: every communication operation -- a collective over all hosts or a
  point-to-point ``send`` -- with ``size_bytes``, the step whose end releases it
  (``after``) and the steps that wait for its data (``before``).

``ranks: 1`` is an SPMD job: one rank's program, run by every host (the usual
case of a data-parallel trace recorded on one rank); otherwise rank ``r`` runs on
``hosts[r]`` and ``ranks`` equals the number of hosts.

The arrangement comes out of :class:`~echelon.paradigms.plan.PlanBuilder` like
every paradigm's: a flow's ideal finish is the ideal start of the step that
waits for it; a flow nobody waits for ideally finishes when released. Each
``group`` is one EchelonFlow. Collectives become flows by a stated algorithm
(``collectives.py``; all flows of a collective are released when each sender's
``after`` step ends):

==================  =============================================================
``all_reduce``      ring: 2(N-1) steps, host i -> i+1, ⌈S/N⌉ bytes each
``all_gather``,     ring: N-1 steps of ⌈S/N⌉ (S is the whole tensor)
``reduce_scatter``
``broadcast``       chain from ``root`` around the ring, S bytes per hop (NCCL's
                    pipelined ring broadcast); ``reduce`` the same chain *into* root
``all_to_all``      direct: every ordered pair ⌈S/N⌉ bytes
``gather``,         direct: every host <-> root, ⌈S/N⌉ bytes
``scatter``
``send``            one flow ``src`` -> ``dst`` (ranks), S bytes
==================  =============================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated

from pydantic import Field

from echelon.errors import SpecError
from echelon.paradigms import collectives
from echelon.paradigms.base import Paradigm
from echelon.paradigms.plan import PlanBuilder
from echelon.specs import Count, Index, Name, PositiveBytes, Seconds, SpecModel, Text

#: Collective operations and whether they have a root.
OPS: dict[str, bool] = {
    "all_reduce": False,
    "all_gather": False,
    "reduce_scatter": False,
    "all_to_all": False,
    "broadcast": True,
    "reduce": True,
    "gather": True,
    "scatter": True,
    "send": False,
}

MAX_STEPS = 100_000


class DagStep(SpecModel):
    """A stretch of one rank's device compute, run without waiting for communication."""

    rank: Index = 0
    compute_s: Seconds
    name: Text = ""


class DagComm(SpecModel):
    """One communication operation (a collective, or a ``send`` between two ranks)."""

    group: Name
    op: Name
    size_bytes: PositiveBytes
    after: Annotated[tuple[Index, ...], Field(max_length=4096)] = ()
    before: Annotated[tuple[Index, ...], Field(max_length=4096)] = ()
    root: Index = 0
    src: Index = 0
    dst: Index = 0
    name: Text = ""


class DagParams(SpecModel):
    ranks: Count = 1
    steps: Annotated[tuple[DagStep, ...], Field(max_length=MAX_STEPS)] = ()
    comms: Annotated[tuple[DagComm, ...], Field(min_length=1, max_length=MAX_STEPS)]


def parse(p: DagParams, hosts: tuple[str, ...]) -> DagParams:
    """Checks that span fields: ranks against hosts, step and rank references."""
    if p.ranks != 1 and p.ranks != len(hosts):
        raise SpecError(
            "ranks", f"must be 1 (SPMD) or the number of hosts ({len(hosts)}), got {p.ranks}"
        )
    if len(hosts) < 2:
        raise SpecError("hosts", "a job with communication needs at least two hosts")
    for i, s in enumerate(p.steps):
        if s.rank >= p.ranks:
            raise SpecError(f"steps[{i}].rank", f"must be < ranks ({p.ranks}), got {s.rank}")
    n = len(hosts)
    for i, c in enumerate(p.comms):
        where = f"comms[{i}]"
        if c.op not in OPS:
            raise SpecError(f"{where}.op", f"unknown operation {c.op!r} (known: {sorted(OPS)})")
        for key in ("after", "before"):
            for k, s in enumerate(getattr(c, key)):
                if s >= len(p.steps):
                    raise SpecError(
                        f"{where}.{key}[{k}]", f"no step {s} (the job has {len(p.steps)})"
                    )
        if c.op == "send":
            if p.ranks == 1:
                raise SpecError(f"{where}.op", "a send names ranks: it needs ranks = hosts")
            for key in ("src", "dst"):
                if getattr(c, key) >= n:
                    raise SpecError(f"{where}.{key}", f"must be a rank < {n}")
            if c.src == c.dst:
                raise SpecError(f"{where}.dst", "a send to its own rank moves nothing")
            for key, rank in (("after", c.src), ("before", c.dst)):
                for k, s in enumerate(getattr(c, key)):
                    if p.steps[s].rank != rank:
                        raise SpecError(f"{where}.{key}[{k}]", f"step {s} is not on rank {rank}")
        elif c.root >= n:
            raise SpecError(f"{where}.root", f"must be a rank < {n}, got {c.root}")
        ranks = [p.steps[s].rank for s in c.after]
        if len(set(ranks)) < len(ranks):
            raise SpecError(f"{where}.after", "at most one releasing step per rank")
    return p


def _expand(
    b: PlanBuilder, c: DagComm, hosts: Sequence[str], producers: Mapping[str, str | None]
) -> dict[str, list[int]]:
    """The flows of one operation; per host, the handles of the flows it receives."""
    n = len(hosts)
    order = list(hosts[c.root :]) + list(hosts[: c.root])  # the ring, from the root
    part = -(-c.size_bytes // n)
    if c.op == "all_reduce":
        return collectives.ring_allreduce(b, c.group, list(hosts), c.size_bytes, producers)
    if c.op in ("all_gather", "reduce_scatter"):
        return collectives.ring_allgather(b, c.group, list(hosts), c.size_bytes, producers)
    if c.op == "all_to_all":
        return collectives.all_to_all(b, c.group, list(hosts), part, producers)
    if c.op == "broadcast":
        return collectives.chain(b, c.group, order, c.size_bytes, producers)
    if c.op == "reduce":
        return collectives.chain(b, c.group, order[1:] + order[:1], c.size_bytes, producers)
    if c.op in ("gather", "scatter"):
        return collectives.star(
            b, c.group, hosts[c.root], list(hosts), part, producers, c.op == "gather"
        )
    src, dst = hosts[c.src], hosts[c.dst]  # send
    return {dst: [b.flow(c.group, src, dst, c.size_bytes, producers[src])]}


def build(b: PlanBuilder, hosts: tuple[str, ...], p: DagParams) -> None:
    spmd = p.ranks == 1
    programs: dict[str, list[int]] = {h: [] for h in hosts}
    for i, step in enumerate(p.steps):
        for h in hosts if spmd else (hosts[step.rank],):
            programs[h].append(i)

    def on(step: int) -> tuple[str, ...]:
        """The hosts that run ``step`` (every host in an SPMD job)."""
        return hosts if spmd else (hosts[p.steps[step].rank],)

    waits: dict[tuple[int, str], list[int]] = {}
    for c in p.comms:
        producers: dict[str, str | None] = dict.fromkeys(hosts)
        for k in c.after:
            for h in on(k):
                producers[h] = b.tid(f"s{k}@{h}")
        received = _expand(b, c, hosts, producers)
        for k in c.before:
            for h in on(k):
                waits.setdefault((k, h), []).extend(received.get(h, ()))
    for h in hosts:
        for i in programs[h]:
            b.task(f"s{i}@{h}", h, p.steps[i].compute_s, after_flows=waits.get((i, h), ()))


PARADIGM = Paradigm(
    "dag",
    "a recorded job: per-rank compute steps and the collectives/sends between them "
    "(echelon job --chakra)",
    DagParams,
    parse,
    build,
)

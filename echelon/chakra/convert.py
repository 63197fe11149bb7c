"""From a Chakra trace to a ``dag`` job description (:mod:`echelon.paradigms.dag`).

The mapping, per rank (docs/chakra.md has the worked example):

* **Device timeline.** A rank's device compute is its non-CPU compute nodes
  (``is_cpu_op`` false; COMP and memory nodes) on one stream, in node-id order
  (ids are the recorded order). CPU operators (``is_cpu_op`` true) and zero-size
  communication calls (PyTorch's ``c10d::allreduce_`` etc., the CPU side of a
  collective) are bookkeeping: they launch device work asynchronously, take no
  device time and move no bytes; their dependency edges are kept.
* **Traffic** is every COMM_SEND/COMM_RECV and every COMM_COLL with a
  ``comm_size``. It is released where it stands in the stream, after every
  kernel before it (NCCL's stream waits for the compute stream at launch); a
  collective's position is after its own data dependencies.
* **Consumers.** The data of an operation C is consumed by (a) C's descendants
  through ``data_deps`` and (b) the nodes recorded after C that read C's buffer:
  those that depend on one of C's input producers (a collective works in place,
  and the converter records its input, not a new tensor version). The launching
  ``c10d::`` call is not an input. The first kernel (or traffic op) of the
  stream after C that descends from a consumer waits for C.
* **Steps.** The stream is cut at every release and every wait into steps
  (``compute_s`` = the sum of their kernels' ``duration_micros``); ``after`` and
  ``before`` of each operation name steps.
* **Groups** (``group_by="consumer"``, the default; ``"op"``: one per operation).
  Operations consumed by one computation form one EchelonFlow: the
  *phase* of a step is the number of releases before it on its rank, and the
  operations whose first waiting step lies in the same phase (the same stretch
  of compute between two releases) share a group. Operations nobody waits for
  share a group per phase of their release (the iteration's end consumes them).
* **Ranks.** A single file is SPMD (``ranks: 1``): every host runs it. A
  directory has one file per rank and needs as many hosts; the k-th collective
  of every rank is one collective (NCCL's call order), point-to-point ops match
  by (src, dst, tag) in order.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from echelon.chakra.trace import (
    Collective,
    Node,
    NodeType,
    RankTrace,
    Trace,
    TraceError,
    read_trace,
)
from echelon.errors import SpecError

#: Chakra collective -> the ``dag`` paradigm's ``op`` (barrier moves no bytes).
OPS = {
    Collective.ALL_REDUCE: "all_reduce",
    Collective.REDUCE: "reduce",
    Collective.ALL_GATHER: "all_gather",
    Collective.GATHER: "gather",
    Collective.SCATTER: "scatter",
    Collective.BROADCAST: "broadcast",
    Collective.ALL_TO_ALL: "all_to_all",
    Collective.REDUCE_SCATTER: "reduce_scatter",
    Collective.REDUCE_SCATTER_BLOCK: "reduce_scatter",
}
_KIND = {"all_reduce": "allreduce", "send": "p2p"}


def is_traffic(n: Node) -> bool:
    """A communication node that moves bytes (not a zero-size CPU-side call)."""
    if n.type in (NodeType.COMM_SEND, NodeType.COMM_RECV):
        return True
    return n.type is NodeType.COMM_COLL and n.comm_size > 0


def is_kernel(n: Node) -> bool:
    """Device compute: a non-communication node that is not a CPU operator."""
    return not n.is_comm and not n.is_cpu_op and n.type is not NodeType.METADATA


@dataclass
class _Op:
    """A traffic node of one rank, where it is released and where it is waited for."""

    node: Node
    pos: int
    after: int | None = None  # step index on its rank (None: at the iteration's start)
    before: int | None = None  # first step on its rank that waits for it
    key: tuple[int, int] = (0, 0)  # its group: (0, phase waited in) or (1, phase released in)


@dataclass
class _Rank:
    trace: RankTrace
    steps: list[tuple[int, str]] = field(default_factory=list)  # (compute µs, label)
    ops: list[_Op] = field(default_factory=list)


def _waits(
    rt: RankTrace, ops: list[_Op], order: list[tuple[int, int, int]]
) -> dict[int, list[_Op]]:
    """For each stream item, the traffic ops it is the first to wait for (module doc)."""
    by_id = {n.id: n for n in rt.nodes}
    users: dict[int, list[int]] = {}
    for n in rt.nodes:
        for d in n.data_deps:
            users.setdefault(d, []).append(n.id)
    out: dict[int, list[_Op]] = {}
    for o in ops:
        inputs = [d for d in o.node.data_deps if not by_id[d].is_comm]
        seeds = set(users.get(o.node.id, ()))
        seeds.update(r for d in inputs for r in users.get(d, ()) if r > o.pos)
        seeds.discard(o.node.id)
        reach = _closure(seeds, users)
        for _pos, _kind, nid in order[bisect_right(order, (o.pos, 1, o.node.id)) :]:
            if nid in reach:
                out.setdefault(nid, []).append(o)
                break
    return out


def _analyse(rt: RankTrace) -> _Rank:
    """Cut one rank's stream into steps; find each traffic op's release and wait step."""
    ops = [_Op(n, max((n.id, *n.data_deps))) for n in rt.nodes if is_traffic(n)]
    order = sorted(
        [(n.id, 0, n.id) for n in rt.nodes if is_kernel(n)] + [(o.pos, 1, o.node.id) for o in ops]
    )
    waits = _waits(rt, ops, order)
    duration = {n.id: n.duration_us for n in rt.nodes}
    op_of = {o.node.id: o for o in ops}
    rank = _Rank(rt, ops=ops)
    phases: list[int] = []  # per step: releases before it
    kernels: list[int] = []  # of the open step
    us = 0
    has_waits = False
    releases = 0
    last: int | None = None  # the last closed step

    def close() -> None:
        nonlocal us, has_waits, last
        rank.steps.append((us, _label(kernels)))
        phases.append(releases)
        last = len(rank.steps) - 1
        kernels.clear()
        us, has_waits = 0, False

    for _pos, kind, nid in order:
        waiting = waits.get(nid, ())
        if waiting:
            if kernels:
                close()
            for o in waiting:
                o.before = len(rank.steps)
            has_waits = True
        if kind == 1:
            if kernels or has_waits:
                close()
            op_of[nid].after = last
            op_of[nid].key = (1, releases)
            releases += 1
        else:
            us += duration[nid]
            kernels.append(nid)
    if kernels or has_waits:
        close()
    for o in ops:
        if o.before is not None:
            o.key = (0, phases[o.before])
    return rank


def _closure(seeds: set[int], users: dict[int, list[int]]) -> set[int]:
    seen = set(seeds)
    stack = list(seeds)
    while stack:
        for u in users.get(stack.pop(), ()):
            if u not in seen:
                seen.add(u)
                stack.append(u)
    return seen


def _label(ids: list[int]) -> str:
    if not ids:
        return "wait"
    if len(ids) == 1:
        return f"1 kernel, node {ids[0]}"
    return f"{len(ids)} kernels, nodes {ids[0]}-{ids[-1]}"


# ---------------------------------------------------------------- the job


def _collectives(
    ranks: list[_Rank], base: list[int]
) -> list[tuple[tuple[int, int], dict[str, Any]]]:
    """The k-th collective of every rank is one collective: check they agree."""
    per = [[o for o in r.ops if o.node.type is NodeType.COMM_COLL] for r in ranks]
    for r, ops in enumerate(per):
        if len(ops) != len(per[0]):
            raise TraceError(
                ranks[r].trace.where(),
                f"{len(ops)} collectives with a comm_size, rank 0 has {len(per[0])}: "
                "every rank must call the same collectives",
            )
    out = []
    for k, ref in enumerate(per[0]):
        members = [ops[k] for ops in per]
        for r, o in enumerate(members):
            for attr in ("comm_type", "comm_size"):
                if getattr(o.node, attr) != getattr(ref.node, attr):
                    raise TraceError(
                        ranks[r].trace.where(o.node.id, attr),
                        f"is {getattr(o.node, attr)}, but the same collective (#{k}) on rank 0 "
                        f"(node {ref.node.id}) has {getattr(ref.node, attr)}",
                    )
        ctype = ref.node.comm_type
        if ctype == Collective.BARRIER:
            continue
        try:
            op = OPS[Collective(ctype if ctype is not None else -1)]
        except (ValueError, KeyError):
            raise TraceError(
                ranks[0].trace.where(ref.node.id, "comm_type"),
                f"unknown collective type {ctype} (known: "
                + ", ".join(f"{c.value} {c.name}" for c in Collective)
                + ")",
            ) from None
        out.append(
            (
                ref.key,
                {
                    "op": op,
                    "size_bytes": ref.node.comm_size,
                    "after": [
                        base[r] + o.after for r, o in enumerate(members) if o.after is not None
                    ],
                    "before": [
                        base[r] + o.before for r, o in enumerate(members) if o.before is not None
                    ],
                    "root": ref.node.attr_int("root") or 0,
                    "name": f"{ref.node.name} (node {ref.node.id})",
                },
            )
        )
    return out


def _p2p(ranks: list[_Rank], base: list[int]) -> list[tuple[tuple[int, int], dict[str, Any]]]:
    """Sends matched to receives by (src, dst, tag), in order (MPI's non-overtaking rule)."""
    n = len(ranks)
    recvs: dict[tuple[int, int, int], list[_Op]] = {}
    sends: list[tuple[int, _Op]] = []
    for r, rank in enumerate(ranks):
        for o in rank.ops:
            if o.node.type is NodeType.COMM_COLL:
                continue
            peer_field = "comm_dst" if o.node.type is NodeType.COMM_SEND else "comm_src"
            peer = getattr(o.node, peer_field)
            if peer is None or not 0 <= peer < n or peer == r:
                raise TraceError(
                    rank.trace.where(o.node.id, peer_field),
                    f"must name another rank of the trace (0..{n - 1}), got {peer}",
                )
            if o.node.type is NodeType.COMM_SEND:
                sends.append((r, o))
            else:
                recvs.setdefault((peer, r, o.node.comm_tag), []).append(o)
    out = []
    for r, o in sends:
        dst = o.node.comm_dst
        assert dst is not None
        queue = recvs.get((r, dst, o.node.comm_tag))
        if not queue:
            raise TraceError(
                ranks[r].trace.where(o.node.id, "comm_dst"),
                f"send to rank {dst} (tag {o.node.comm_tag}) has no matching receive in "
                f"{ranks[dst].trace.where()}",
            )
        recv = queue.pop(0)
        out.append(
            (
                recv.key,
                {
                    "op": "send",
                    "size_bytes": o.node.comm_size or recv.node.comm_size,
                    "src": r,
                    "dst": dst,
                    "after": [] if o.after is None else [base[r] + o.after],
                    "before": [] if recv.before is None else [base[dst] + recv.before],
                    "name": f"{o.node.name} (rank {r} node {o.node.id}) -> node {recv.node.id}",
                },
            )
        )
    for (src, dst, tag), left in recvs.items():
        if left:
            raise TraceError(
                ranks[dst].trace.where(left[0].node.id, "comm_src"),
                f"receive from rank {src} (tag {tag}) has no matching send in "
                f"{ranks[src].trace.where()}",
            )
    return out


#: How operations form groups: by the computation that consumes them (the module doc),
#: or one group per operation (a Coflow per collective, as ``dp_allreduce`` models buckets).
GROUPINGS = ("consumer", "op")


def job_from_trace(
    trace: Trace, hosts: Sequence[str], name: str = "", group_by: str = "consumer"
) -> dict[str, Any]:
    """The ``dag`` job description of ``trace`` on ``hosts`` (module doc for the mapping)."""
    if group_by not in GROUPINGS:
        raise SpecError("--group-by", f"must be one of {list(GROUPINGS)}, got {group_by!r}")
    hosts = list(hosts)
    if len(trace.ranks) > 1 and len(hosts) != len(trace.ranks):
        raise SpecError(
            "--hosts",
            f"{Path(trace.source).name} has {len(trace.ranks)} ranks: give as many hosts, "
            f"got {len(hosts)}",
        )
    ranks = [_analyse(rt) for rt in trace.ranks]
    steps: list[dict[str, Any]] = []
    base: list[int] = []
    for r, rank in enumerate(ranks):
        base.append(len(steps))
        steps += [{"rank": r, "compute_s": us / 1e6, "name": label} for us, label in rank.steps]
    ops = _collectives(ranks, base) + _p2p(ranks, base)
    if not ops:
        raise TraceError(
            trace.ranks[0].where(), "no communication with a comm_size: nothing to schedule"
        )
    if group_by == "op":
        ops = [((2, i), c) for i, (_, c) in enumerate(ops)]
    names: dict[tuple[int, int], str] = {}
    for i, key in enumerate(sorted({k for k, _ in ops})):
        kinds = sorted({_KIND.get(c["op"], c["op"].replace("_", "")) for k, c in ops if k == key})
        names[key] = f"{'+'.join(kinds)}/{i}" + ("-unwaited" if key[0] == 1 else "")
    comms = [{"group": names[k], **c} for k, c in ops]
    source = Path(trace.source).name
    version = str(trace.ranks[0].metadata.get("schema", trace.ranks[0].version) or "?")
    kernels = sum(1 for rt in trace.ranks for n in rt.nodes if is_kernel(n))
    return {
        "job": name or _job_name(source),
        "paradigm": "dag",
        "hosts": hosts,
        "description": (
            f"from the Chakra trace {source} (schema {version}, "
            f"{sum(len(rt.nodes) for rt in trace.ranks)} nodes, {len(trace.ranks)} rank file(s)): "
            f"{kernels} device kernels in {len(steps)} steps, {len(comms)} communication ops"
        ),
        "ranks": len(trace.ranks),
        "steps": steps,
        "comms": comms,
    }


def _job_name(source: str) -> str:
    stem = source[:-3] if source.endswith(".et") else source
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in stem) or "trace"


def job_from_path(
    path: str | Path, hosts: Sequence[str], name: str = "", group_by: str = "consumer"
) -> dict[str, Any]:
    """Read a trace file or directory and convert it (:func:`job_from_trace`)."""
    return job_from_trace(read_trace(path), hosts, name, group_by)

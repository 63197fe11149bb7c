"""Reading Chakra execution traces: typed nodes, one rank per file, checked DAGs.

A Chakra trace (MLCommons) is one file per rank: a stream of length-delimited
protobuf messages (a varint length, then the message), first one
``GlobalMetadata``, then one ``Node`` per operation. This module splits the
stream and decodes each message with the protobuf classes of
:mod:`echelon.chakra.protobuf` into :class:`Node` records and checks what a
scheduler relies on: known node types, dependencies on nodes that exist, no
cycle, no duplicate ids. Every problem is a :class:`TraceError` (a
:class:`~echelon.errors.SpecError`) whose field names the file, the node id and
the node's field, e.g. ``ddp.et: node 17.data_deps: ...``: the CLIs print it on
one line.

What a node *means* for the network (collectives, point-to-point matching,
CPU-side bookkeeping) is :mod:`echelon.chakra.convert`'s business; this module
keeps every attribute so that nothing is lost on the way.
"""

from __future__ import annotations

import graphlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any

from echelon.chakra.protobuf import CLASSES, AttrValue, DecodeError, attributes
from echelon.errors import SpecError


class NodeType(IntEnum):
    """``enum NodeType`` of et_def.proto."""

    INVALID = 0
    METADATA = 1
    MEM_LOAD = 2
    MEM_STORE = 3
    COMP = 4
    COMM_SEND = 5
    COMM_RECV = 6
    COMM_COLL = 7


class Collective(IntEnum):
    """``enum CollectiveCommType`` of et_def.proto."""

    ALL_REDUCE = 0
    REDUCE = 1
    ALL_GATHER = 2
    GATHER = 3
    SCATTER = 4
    BROADCAST = 5
    ALL_TO_ALL = 6
    REDUCE_SCATTER = 7
    REDUCE_SCATTER_BLOCK = 8
    BARRIER = 9


class TraceError(SpecError):
    """A Chakra trace that cannot be read or used; ``field`` names file, node and field."""


@dataclass(frozen=True, slots=True)
class Node:
    """One operation of a rank's trace (``message Node``), times in microseconds."""

    id: int
    name: str
    type: NodeType
    ctrl_deps: tuple[int, ...]
    data_deps: tuple[int, ...]
    start_us: int
    duration_us: int
    attrs: Mapping[str, AttrValue]

    def attr_int(self, key: str) -> int | None:
        v = self.attrs.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    @property
    def is_cpu_op(self) -> bool:
        """The ``is_cpu_op`` attribute: a host-side (CPU) operator, not a device kernel."""
        return bool(self.attrs.get("is_cpu_op", False))

    @property
    def comm_type(self) -> int | None:
        return self.attr_int("comm_type")

    @property
    def comm_size(self) -> int:
        """Bytes the operation moves (``comm_size``; 0 when absent)."""
        return self.attr_int("comm_size") or 0

    @property
    def comm_src(self) -> int | None:
        return self.attr_int("comm_src")

    @property
    def comm_dst(self) -> int | None:
        return self.attr_int("comm_dst")

    @property
    def comm_tag(self) -> int:
        return self.attr_int("comm_tag") or 0

    @property
    def is_comm(self) -> bool:
        return self.type in (NodeType.COMM_SEND, NodeType.COMM_RECV, NodeType.COMM_COLL)


@dataclass(frozen=True)
class RankTrace:
    """One rank's file: its schema version, metadata attributes and nodes in file order."""

    path: str
    rank: int
    version: str
    metadata: Mapping[str, AttrValue]
    nodes: tuple[Node, ...]

    def where(self, node: int | None = None, field: str = "") -> str:
        """An error location: ``file: node ID.field``."""
        name = Path(self.path).name
        if node is None:
            return name
        return f"{name}: node {node}" + (f".{field}" if field else "")


@dataclass(frozen=True)
class Trace:
    """Every rank of a job: one file (``ranks`` has one entry) or a directory."""

    source: str
    ranks: tuple[RankTrace, ...]


# ----------------------------------------------------------------- decoding


def _node(m: Any) -> Node:
    """A decoded ``Node`` message as a :class:`Node` (``inputs``/``outputs`` not needed)."""
    try:
        kind = NodeType(m.type)
    except ValueError:
        raise _BadType(m.id, m.type) from None
    if kind is NodeType.INVALID:
        raise _BadType(m.id, m.type)
    return Node(m.id, m.name, kind, tuple(m.ctrl_deps), tuple(m.data_deps),
                m.start_time_micros, m.duration_micros, attributes(m.attr))  # fmt: skip


class _BadType(Exception):
    def __init__(self, nid: int, value: int) -> None:
        self.nid, self.value = nid, value


def _length(buf: bytes, pos: int) -> tuple[int, int]:
    """The varint length prefix at ``pos`` and where the message starts; ``ValueError``
    when the file ends inside it (the messages themselves are protobuf's to decode)."""
    result = shift = 0
    for p in range(pos, min(len(buf), pos + 10)):
        result |= (buf[p] & 0x7F) << shift
        if buf[p] < 0x80:
            return result, p + 1
        shift += 7
    raise ValueError("ends inside a varint")


def decode(buf: bytes, path: str, rank: int = 0) -> RankTrace:
    """A rank's trace from the bytes of its file (``path`` only names it in errors)."""
    name = Path(path).name
    end = len(buf)
    pos = 0
    records = 0
    version = ""
    metadata: dict[str, AttrValue] = {}
    nodes: list[Node] = []
    meta_class, node_class = CLASSES["GlobalMetadata"], CLASSES["Node"]
    while pos < end:
        what = "the GlobalMetadata" if records == 0 else f"node record #{records}"
        try:
            length, body = _length(buf, pos)
        except ValueError:
            raise TraceError(
                name, f"truncated: {what} (byte {pos}) ends inside its length"
            ) from None
        if body + length > end:
            raise TraceError(
                name,
                f"truncated: {what} (byte {pos}) needs {length} bytes, the file has "
                f"{end - body} left",
            )
        try:
            if records == 0:
                gm = meta_class.FromString(buf[body : body + length])
                version, metadata = gm.version, attributes(gm.attr)
            else:
                nodes.append(_node(node_class.FromString(buf[body : body + length])))
        except DecodeError as exc:
            raise TraceError(
                f"{name}: {what}", f"malformed at byte {pos} (where the record starts): {exc}"
            ) from None
        except _BadType as exc:
            raise TraceError(
                f"{name}: node {exc.nid}.type",
                f"unknown node type {exc.value} (known: "
                + ", ".join(f"{t.value} {t.name}" for t in NodeType if t.value)
                + ")",
            ) from None
        pos = body + length
        records += 1
    if records == 0:
        raise TraceError(name, "empty: no GlobalMetadata, no nodes")
    trace = RankTrace(path, rank, version, metadata, tuple(nodes))
    check(trace)
    return trace


def check(trace: RankTrace) -> None:
    """Duplicate ids, data dependencies on missing nodes and cycles are :class:`TraceError`s.

    Why ``data_deps`` only: they are the execution DAG. Chakra's own feeder
    (``ETFeeder``, which ASTRA-sim runs) resolves a node's ``data_deps`` and
    ignores ``ctrl_deps``; PyTorch-converted traces put the call-tree parent
    there, often a node the converter dropped (the shipped DDP trace has 1,296
    ``ctrl_deps`` on absent nodes, and some on the node itself). They are kept
    on :class:`Node` as recorded, never followed."""
    ids: set[int] = set()
    for n in trace.nodes:
        if n.id in ids:
            raise TraceError(trace.where(n.id, "id"), "appears twice in the trace")
        ids.add(n.id)
    for n in trace.nodes:
        for d in n.data_deps:
            if d not in ids:
                raise TraceError(
                    trace.where(n.id, "data_deps"), f"depends on node {d}, which the trace lacks"
                )
            if d == n.id:
                raise TraceError(trace.where(n.id, "data_deps"), "depends on itself (a cycle)")
    # the standard library's topological sorter finds a cycle; it lists each node
    # before the nodes that depend on it, reversed: each node before its dependency
    try:
        graphlib.TopologicalSorter({n.id: n.data_deps for n in trace.nodes}).prepare()
    except graphlib.CycleError as exc:
        cycle = list(reversed(exc.args[1]))
        raise TraceError(
            trace.where(cycle[0], "data_deps"),
            "dependency cycle: " + " -> ".join(str(c) for c in cycle),
        ) from None


# ----------------------------------------------------------------- files

_RANK = re.compile(r"\.(\d+)\.et$")


def read_file(path: str | Path, rank: int) -> RankTrace:
    """One rank's file (:func:`read_trace` names its rank)."""
    try:
        buf = Path(path).read_bytes()
    except OSError as exc:
        raise TraceError(str(path), f"cannot read: {exc.strerror or exc}") from None
    return decode(buf, str(path), rank)


def read_trace(path: str | Path) -> Trace:
    """A file (one rank) or a directory of per-rank files ``<name>.<rank>.et``, ranks 0..N-1."""
    p = Path(path)
    if not p.is_dir():
        return Trace(str(path), (read_file(p, 0),))
    files = sorted(f for f in p.iterdir() if f.suffix == ".et")
    if not files:
        raise TraceError(str(path), "no .et files in the directory")
    ranked: dict[int, Path] = {}
    for f in files:
        m = _RANK.search(f.name)
        if not m:
            raise TraceError(f.name, "a rank file must be named <name>.<rank>.et")
        r = int(m.group(1))
        if r in ranked:
            raise TraceError(f.name, f"rank {r} also in {ranked[r].name}")
        ranked[r] = f
    missing = sorted(set(range(len(ranked))) - set(ranked))
    if missing:
        raise TraceError(str(path), f"ranks must be 0..{len(ranked) - 1}; missing {missing}")
    return Trace(str(path), tuple(read_file(ranked[r], r) for r in range(len(ranked))))

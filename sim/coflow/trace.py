"""Coflow-benchmark traces (``FB2010-1Hr-150-0.txt`` and friends) in, flows out.

The format of the coflow-benchmark project (the standard workload of
coflow-scheduling research)::

    <ports> <coflows>
    <id> <arrival ms> <mappers> <mapper port>... <reducers> <reducer port>:<shuffle MB>...

Each reducer's shuffle is split evenly over the coflow's mappers (the trace logs
sizes at reducers only), one flow per (mapper, reducer) pair; a MB is 2^20 bytes,
as the trace's producer counts it. Ports are rack-level: a mapper and a reducer on
the same port still cross that port's up- and downlink (the fabric is the rack's
uplink to the core), which is how coflowsim treats them too.

Why a parser of its own: the trace is 700k flows and the simulator must read it in
well under a second, with errors that name the line and the field, so it is
tokenised once into numpy arrays rather than into Python objects per flow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from echelon.errors import SpecError

MB = 1 << 20

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Coflow:
    """One line of the trace: arrival in ms, mapper ports, (reducer port, MB) pairs."""

    id: str
    arrival_ms: float
    mappers: tuple[int, ...]
    reducers: tuple[tuple[int, float], ...]

    @property
    def n_flows(self) -> int:
        return len(self.mappers) * len(self.reducers)


@dataclass(frozen=True)
class CoflowTrace:
    """A parsed trace: number of ports and the coflows in file order."""

    ports: int
    coflows: tuple[Coflow, ...]

    @property
    def n_flows(self) -> int:
        return sum(c.n_flows for c in self.coflows)


def _int(tok: str, line: int, field: str, lo: int = 0, hi: int | None = None) -> int:
    try:
        v = int(tok)
    except ValueError:
        raise SpecError(f"line {line}.{field}", f"expected an integer, got {tok!r}") from None
    if v < lo or (hi is not None and v >= hi):
        bound = f"in [{lo}, {hi})" if hi is not None else f">= {lo}"
        raise SpecError(f"line {line}.{field}", f"must be {bound}, got {v}")
    return v


def _parse_coflow(toks: list[str], line: int, ports: int) -> Coflow:
    if len(toks) < 4:
        raise SpecError(
            f"line {line}",
            f"a coflow needs <id> <arrival ms> <mappers> ... <reducers> ..., got {len(toks)} "
            "fields",
        )
    cid = toks[0]
    try:
        arrival = float(toks[1])
    except ValueError:
        raise SpecError(f"line {line}.arrival", f"expected milliseconds, got {toks[1]!r}") from None
    if not math.isfinite(arrival) or arrival < 0:
        raise SpecError(f"line {line}.arrival", f"must be a finite time >= 0, got {toks[1]}")
    n_map = _int(toks[2], line, "mappers")
    if len(toks) < 4 + n_map:
        raise SpecError(
            f"line {line}.mappers", f"says {n_map} mappers but the line ends after {len(toks) - 3}"
        )
    mappers = tuple(_int(toks[3 + i], line, f"mappers[{i}]", 0, ports) for i in range(n_map))
    n_red = _int(toks[3 + n_map], line, "reducers")
    rest = toks[4 + n_map :]
    if len(rest) != n_red:
        raise SpecError(f"line {line}.reducers", f"says {n_red} reducers but {len(rest)} follow")
    reducers = []
    for i, tok in enumerate(rest):
        where = f"reducers[{i}]"
        port, sep, mb = tok.partition(":")
        if not sep:
            raise SpecError(f"line {line}.{where}", f"expected <port>:<MB>, got {tok!r}")
        p = _int(port, line, f"{where}.port", 0, ports)
        try:
            size = float(mb)
        except ValueError:
            raise SpecError(f"line {line}.{where}.MB", f"expected a number, got {mb!r}") from None
        if not math.isfinite(size) or size <= 0:
            raise SpecError(f"line {line}.{where}.MB", f"must be positive, got {mb}")
        reducers.append((p, size))
    return Coflow(cid, arrival, mappers, tuple(reducers))


def parse_coflow_trace(text: str) -> CoflowTrace:
    """Parse the text of a trace; raise :class:`SpecError` naming line and field."""
    lines = text.splitlines()
    head = lines[0].split() if lines else []
    if len(head) != 2:
        raise SpecError("line 1", "expected '<ports> <coflows>'")
    ports = _int(head[0], 1, "ports", 1)
    count = _int(head[1], 1, "coflows")
    coflows = []
    seen: dict[str, int] = {}
    for no, raw in enumerate(lines[1:], start=2):
        toks = raw.split()
        if not toks:
            continue
        cf = _parse_coflow(toks, no, ports)
        if cf.id in seen:
            raise SpecError(f"line {no}.id", f"coflow {cf.id} already on line {seen[cf.id]}")
        seen[cf.id] = no
        coflows.append(cf)
    if len(coflows) != count:
        raise SpecError("line 1.coflows", f"says {count} coflows but the file has {len(coflows)}")
    return CoflowTrace(ports, tuple(coflows))


def load_coflow_trace(path: str | Path) -> CoflowTrace:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SpecError("coflow-trace", f"cannot read {path}: {exc.strerror}") from None
    return parse_coflow_trace(text)


@dataclass(frozen=True)
class FlowArrays:
    """Every flow of a trace as arrays, grouped by coflow in arrival order.

    Flows of coflow ``c`` are ``first[c] : first[c] + count[c]``, reducer-major
    (all flows into the first reducer, then the second, ...), so a formation
    where reducers consume in order has non-decreasing offsets in index order.
    """

    ports: int
    names: list[str]  # per coflow
    arrival: Floats  # per coflow, seconds
    first: Ints  # per coflow
    count: Ints  # per coflow
    src: Ints  # per flow
    dst: Ints  # per flow
    size: Floats  # per flow, bytes
    reducer: Ints  # per flow: reducer position inside its coflow

    @property
    def n_flows(self) -> int:
        return int(self.src.shape[0])


def flow_arrays(trace: CoflowTrace, coflowsim_sizes: bool = False) -> FlowArrays:
    """Arrays of the trace's flows: each reducer's bytes split evenly over the mappers.

    ``coflowsim_sizes`` applies coflowsim's rounding: a reducer's bytes rounded up to
    whole MB and then to a multiple of ``mappers`` MB, and every flow at least 1 MB.
    Coflows without mappers or reducers have no flows (coflowsim ignores them).
    """
    order = sorted(range(len(trace.coflows)), key=lambda i: (trace.coflows[i].arrival_ms, i))
    cfs = [trace.coflows[i] for i in order if trace.coflows[i].n_flows > 0]
    n = sum(c.n_flows for c in cfs)
    src = np.empty(n, dtype=np.int64)
    dst = np.empty(n, dtype=np.int64)
    size = np.empty(n, dtype=np.float64)
    red = np.empty(n, dtype=np.int64)
    first = np.zeros(len(cfs), dtype=np.int64)
    pos = 0
    for c, cf in enumerate(cfs):
        first[c] = pos
        m = len(cf.mappers)
        maps = np.asarray(cf.mappers, dtype=np.int64)
        r_port = np.array([p for p, _ in cf.reducers], dtype=np.int64)
        r_bytes = np.array([mb for _, mb in cf.reducers], dtype=np.float64) * MB
        if coflowsim_sizes:
            whole = np.ceil(np.floor(r_bytes) / MB)
            r_bytes = np.ceil(whole / m) * m * MB
            per = np.maximum(r_bytes / m, MB)
        else:
            per = r_bytes / m
        k = m * len(cf.reducers)
        src[pos : pos + k] = np.tile(maps, len(cf.reducers))
        dst[pos : pos + k] = np.repeat(r_port, m)
        size[pos : pos + k] = np.repeat(per, m)
        red[pos : pos + k] = np.repeat(np.arange(len(cf.reducers)), m)
        pos += k
    return FlowArrays(
        ports=trace.ports,
        names=[cf.id for cf in cfs],
        arrival=np.array([cf.arrival_ms / 1000.0 for cf in cfs], dtype=np.float64),
        first=first,
        count=np.array([cf.n_flows for cf in cfs], dtype=np.int64),
        src=src,
        dst=dst,
        size=size,
        reducer=red,
    )

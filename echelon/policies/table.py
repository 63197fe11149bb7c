"""Flat numpy view of a set of EchelonFlows, shared by every policy.

Policies must rank 10,000 concurrent EchelonFlows in seconds, so the Python
objects are walked once into arrays (one row per flow, one per flow-link
incidence) and everything after that is vectorised.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from echelon.errors import SpecError
from echelon.model import EchelonFlow, FlowKey
from echelon.schedule import Network, Schedule

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class FlowTable:
    """Arrays over all flows (``f``), echelons (``e``) and flow-link incidences (``i``)."""

    keys: list[FlowKey]
    names: list[str]  # per echelon, input order
    weight: Floats  # e
    t_ref: Floats  # e
    name_rank: Ints  # e: position of the name in sorted order (deterministic ties)
    ech: Ints  # f: echelon position
    index: Ints  # f: flow index inside its echelon
    offset: Floats  # f: A(j) in seconds
    slack: Floats  # f: total float in the job's timeline (seconds)
    remaining: Floats  # f: bytes still to send
    inc_flow: Ints  # i
    inc_link: Ints  # i
    cap: Floats  # per link, bytes/s
    job: Ints  # e: the echelon's training job, dense ids in job-name order
    job_names: tuple[str, ...]  # per dense job id: the job's name (stable across calls)

    @property
    def deadline(self) -> Floats:
        """Ideal finish ``t_ref + A(j)`` per flow."""
        return self.t_ref[self.ech] + self.offset

    @property
    def latest(self) -> Floats:
        """Latest finish that keeps the iteration on time: ``t_ref + A(j) + slack(j)``."""
        return self.deadline + self.slack


def build_table(
    echelons: Sequence[EchelonFlow],
    network: Network,
    remaining: Mapping[FlowKey, int] | None = None,
) -> FlowTable:
    """Walk the EchelonFlows once; paths are looked up once per (src, dst) pair."""
    names = [ef.name for ef in echelons]
    check_unique(names)
    flows = [f for ef in echelons for f in ef.flows]
    count = len(flows)
    keys = [(ef.name, f.index) for ef in echelons for f in ef.flows]
    size = np.fromiter((f.size for f in flows), dtype=np.float64, count=count)
    rem = (
        np.fromiter(
            (remaining.get(k, f.size) for k, f in zip(keys, flows, strict=True)),
            dtype=np.float64,
            count=count,
        )
        if remaining
        else size
    )
    pair_ids: dict[tuple[str, str], int] = {}
    pair_of = np.fromiter(
        (pair_ids.setdefault((f.src, f.dst), len(pair_ids)) for f in flows),
        dtype=np.int64,
        count=count,
    )
    link_names = list(network.links)
    link_pos = {name: i for i, name in enumerate(link_names)}
    paths = [[link_pos[x] for x in network.path(a, b)] for a, b in pair_ids]
    width = max((len(p) for p in paths), default=0)
    table = np.full((len(paths), max(width, 1)), -1, dtype=np.int64)
    for i, p in enumerate(paths):
        table[i, : len(p)] = p
    inc_flow, inc_link = incidences(table[pair_of])
    job, job_names = job_ids(echelons)
    return FlowTable(
        keys=keys,
        names=names,
        weight=np.array([ef.weight for ef in echelons], dtype=np.float64),
        t_ref=np.array([ef.t_ref for ef in echelons], dtype=np.float64),
        name_rank=name_ranks(names),
        ech=np.repeat(np.arange(len(echelons), dtype=np.int64), [len(e.flows) for e in echelons]),
        index=np.fromiter((f.index for f in flows), dtype=np.int64, count=count),
        offset=np.fromiter((f.offset for f in flows), dtype=np.float64, count=count),
        slack=np.fromiter((f.slack for f in flows), dtype=np.float64, count=count),
        remaining=np.maximum(rem, 0.0),
        inc_flow=inc_flow,
        inc_link=inc_link,
        cap=np.array([network.links[x] for x in link_names], dtype=np.float64),
        job=job,
        job_names=job_names,
    )


def check_unique(names: Sequence[str]) -> None:
    """Policies key their ties and the switch its groups by name: two live EchelonFlows
    with one name would be one group. Raises naming the first repeated name."""
    if len(set(names)) != len(names):
        dup = next(n for i, n in enumerate(names) if n in names[:i])
        raise SpecError(f"{dup}.name", "two active EchelonFlows share this name")


def name_ranks(names: Sequence[str]) -> Ints:
    """Each name's position in sorted order: the deterministic last tie-break. Sorted in
    Python: a few dozen strings, where numpy's object sort costs more."""
    out = np.empty(len(names), dtype=np.int64)
    out[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    return out


def incidences(hops: Ints) -> tuple[Ints, Ints]:
    """``(flow row, link)`` of every hop in a flow x hop matrix of link ids padded with
    -1. Without padding (every path as long as the longest) it is a reshape."""
    if hops.shape[1] and bool(hops[:, -1].min(initial=0) >= 0):
        flows = np.repeat(np.arange(hops.shape[0], dtype=np.int64), hops.shape[1])
        return flows, hops.ravel().astype(np.int64, copy=False)
    flows, hop = np.nonzero(hops >= 0)
    return flows.astype(np.int64, copy=False), hops[flows, hop].astype(np.int64, copy=False)


def job_ids(echelons: Sequence[EchelonFlow]) -> tuple[Ints, tuple[str, ...]]:
    """Dense job id per echelon, numbered in sorted job-name order (deterministic ties),
    and the job names by id (in Python: a few dozen strings, where numpy's object sort
    costs more)."""
    jobs = [ef.job for ef in echelons]
    names = tuple(sorted(set(jobs)))
    pos = {j: i for i, j in enumerate(names)}
    return np.fromiter((pos[j] for j in jobs), dtype=np.int64, count=len(jobs)), names


def segments(t: FlowTable) -> tuple[Ints, Ints, Ints, Floats, Ints]:
    """Flow-link incidences with bytes left, sorted by (echelon, link, flow index).

    Returns ``(flow, echelon, link, seconds_on_link, segment_starts)``: a segment
    is the run of one echelon's flows on one link.
    """
    live = t.remaining[t.inc_flow] > 0
    f, lk = t.inc_flow[live], t.inc_link[live]
    e = t.ech[f]
    order = _int_lexsort(t.index[f], lk, e)
    f, lk, e = f[order], lk[order], e[order]
    secs = t.remaining[f] / t.cap[lk]
    new = np.ones(len(f), dtype=bool)
    if len(f):
        new[1:] = (e[1:] != e[:-1]) | (lk[1:] != lk[:-1])
    return f, e, lk, secs, np.flatnonzero(new)


def _int_lexsort(*keys: npt.NDArray[np.generic]) -> Ints:
    """``np.lexsort(keys)``; for non-negative integer keys whose combined value fits in
    62 bits, one stable argsort of that value (a third of the time of a three-key
    lexsort on a re-plan's table; same order: both sorts are stable)."""
    if not len(keys[0]):
        return np.zeros(0, dtype=np.int64)
    if any(k.dtype.kind not in "iu" for k in keys):
        return np.lexsort(keys)
    combined = np.zeros(len(keys[0]), dtype=np.int64)
    room = 1
    for k in reversed(keys):  # most significant first
        lo, hi = int(k.min()), int(k.max())
        room *= hi + 1
        if lo < 0 or room >= 1 << 62:
            return np.lexsort(keys)
        combined = combined * (hi + 1) + k
    return np.argsort(combined, kind="stable")


def bottlenecks(t: FlowTable) -> tuple[Floats, Floats]:
    """``(p, Γ)`` per echelon from one pass: the coflow bottleneck and the effective one.

    ``p = max_l P_l(last)`` is Varys' bottleneck ``max_l bytes_l / cap_l``, where
    ``P_l(j)`` is the time link ``l`` needs for the echelon's flows up to ``j`` (index
    order) at full capacity. ``Γ = max over links l, flows j on l of (P_l(j) - A(j))``
    is how long after starting the echelon alone its formation is complete: served
    alone from ``now``, the echelon is on time iff ``now + Γ <= t_ref``. Echelons
    with nothing left get 0 for both.
    """
    n = len(t.names)
    f, e, _lk, secs, starts = segments(t)
    p = np.zeros(n, dtype=np.float64)
    gamma = np.zeros(n, dtype=np.float64)
    if not len(f):
        return p, gamma
    csum = np.cumsum(secs)
    first = np.zeros(len(f), dtype=bool)
    first[starts] = True
    seg_id = np.cumsum(first) - 1
    base = (csum - secs)[starts]
    prefix = csum - base[seg_id]
    seg_e = e[starts]
    e_starts = np.flatnonzero(np.r_[True, seg_e[1:] != seg_e[:-1]])
    ends = np.r_[starts[1:], len(f)] - 1
    p[seg_e[e_starts]] = np.maximum.reduceat(prefix[ends], e_starts)
    seg_max = np.maximum.reduceat(prefix - t.offset[f], starts)
    gamma[seg_e[e_starts]] = np.maximum.reduceat(seg_max, e_starts)
    return p, gamma


def link_loads(t: FlowTable) -> Floats:
    """Dense (echelon x link) matrix of seconds of work left, column-major.

    Column-major because BSSI repeatedly reads the column of the bottleneck link.
    """
    _f, e, lk, secs, _ = segments(t)
    out = np.zeros((len(t.names), len(t.cap)), dtype=np.float64, order="F")
    np.add.at(out, (e, lk), secs)
    return out


def contested_groups(t: FlowTable) -> Ints:
    """Per group, 1 where a link it has bytes left on also carries another group's bytes
    left, else 0 (a group alone on all its links: no order between groups touches it)."""
    _f, e, lk, _secs, starts = segments(t)
    out = np.zeros(len(t.names), dtype=np.int64)
    if len(starts):
        seg_e, seg_link = e[starts], lk[starts]  # one row per (group, link)
        groups_on = np.bincount(seg_link, minlength=len(t.cap))
        np.maximum.at(out, seg_e, (groups_on[seg_link] > 1).astype(np.int64))
    return out


def dense_rank(*keys: npt.NDArray[np.generic]) -> Ints:
    """Rank rows by the lexicographic ``keys`` (first key most significant); equal
    rows share a rank, ranks are 0..k-1 without gaps."""
    if not len(keys[0]):
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort(tuple(reversed(keys)))
    new = np.zeros(len(order), dtype=bool)
    new[0] = True
    for k in keys:
        sk = k[order]
        new[1:] |= sk[1:] != sk[:-1]
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = np.cumsum(new) - 1
    return ranks


class TablePolicy:
    """Base of every policy: build the :class:`FlowTable` once, then decide on it.

    Subclasses implement :meth:`decide`; :meth:`schedule` is the ``Policy`` protocol.
    """

    name = ""

    def schedule(
        self,
        echelons: Sequence[EchelonFlow],
        network: Network,
        remaining: Mapping[FlowKey, int] | None = None,
        now: float = 0.0,
    ) -> Schedule:
        t = build_table(echelons, network, remaining)
        sched = self.decide(t, now)
        done = t.remaining <= 0
        if not done.any():
            return sched
        live = frozenset(k for k, d in zip(t.keys, done.tolist(), strict=True) if not d)
        return replace(sched, live=live)

    def decide(self, t: FlowTable, now: float) -> Schedule:
        raise NotImplementedError


def serial_finish(t: FlowTable, position: Ints, now: float) -> Floats:
    """Finish time of every flow if each link served whole groups in ``position`` order
    (group -> place, 0 first), a group's flows in index order, at full capacity.

    A flow's finish is the latest over the links it crosses, so on a path this is
    an upper bound that ignores pipelining across links; finished flows get ``now``.
    """
    return layout_finish(t, (t.index, position[t.ech]), now)


def layout_finish(
    t: FlowTable, keys: tuple[npt.NDArray[np.generic], ...], now: float, alone: bool = False
) -> Floats:
    """Finish time of every flow if each link served its flows one at a time, at full
    capacity, in the order of the per-flow ``keys`` (``np.lexsort`` convention: the
    last key is the most significant); same bound and conventions as
    :func:`serial_finish`. ``alone``: every job on links of its own (its flows queue
    only behind its own)."""
    live = t.remaining[t.inc_flow] > 0
    f, lk = t.inc_flow[live], t.inc_link[live]
    queue = t.job[t.ech[f]] * len(t.cap) + lk if alone else lk
    done = incidence_finish(queue, t.remaining[f] / t.cap[lk], tuple(k[f] for k in keys), now)
    return flow_finish(t, f, done, now)


def flow_finish(t: FlowTable, inc_flow: Ints, done: Floats, now: float) -> Floats:
    """Per flow, when its last incidence (``inc_flow``, finished at ``done``) is done;
    ``now`` for a flow with none."""
    out = np.full(len(t.keys), now, dtype=np.float64)
    np.maximum.at(out, inc_flow, done)
    return out


def incidence_finish(
    link: Ints, secs: Floats, keys: tuple[npt.NDArray[np.generic], ...], now: float
) -> Floats:
    """Per flow-link incidence (``secs`` of its link's time), when its link finishes it,
    serving its incidences one at a time at full capacity from ``now`` in ``keys``
    order (lexsort convention); the rows come back in the order they came in."""
    order = _int_lexsort(*keys, link)
    lk, s = link[order], secs[order]
    done = np.cumsum(s)
    if len(lk):
        # where each link's run of incidences starts (np.r_ avoided: it is slow for the
        # small tables of a controller's re-plan)
        first = np.concatenate(([0], np.flatnonzero(lk[1:] != lk[:-1]) + 1))
        done -= np.repeat((done - s)[first], np.diff(np.append(first, len(lk))))
    out = np.empty(len(order), dtype=np.float64)
    out[order] = now + done
    return out


def group_lateness(t: FlowTable, finish: Floats, due: Floats) -> Floats:
    """Per group, ``max(0, max_j (finish_j - due_j))`` over its flows with bytes left."""
    live = t.remaining > 0
    late = np.zeros(len(t.names))
    np.maximum.at(late, t.ech[live], (finish - due)[live])
    return late


def path_ids(t: FlowTable) -> Ints:
    """Per flow, an id shared by the flows whose bytes left cross the very same links
    (-1 for a flow with none left)."""
    live = t.remaining[t.inc_flow] > 0
    fi, li = t.inc_flow[live], t.inc_link[live]
    out = np.full(len(t.keys), -1, dtype=np.int64)
    if not len(fi):
        return out
    by_flow = np.argsort(fi, kind="stable")  # each flow's incidences stay in hop order
    fi, li = fi[by_flow], li[by_flow]
    flows, start, count = np.unique(fi, return_index=True, return_counts=True)
    row, hop = np.repeat(np.arange(len(flows)), count), np.arange(len(fi)) - np.repeat(start, count)
    base = len(t.cap) + 1
    width = int(count.max())
    if width * math.log2(base) < 62:  # each path one integer (first hop most significant,
        # so ids come in the order of the padded rows below): a 1-d unique
        code = np.zeros(len(flows), dtype=np.int64)
        np.add.at(code, row, (li + 1) * base ** (width - 1 - hop))
        out[flows] = np.unique(code, return_inverse=True)[1]
        return out
    padded = np.full((len(flows), width), -1, dtype=np.int64)
    padded[row, hop] = li
    out[flows] = np.unique(padded, axis=0, return_inverse=True)[1].ravel()
    return out


def group_paths(t: FlowTable, path: Ints) -> Ints:
    """Per group, the path id all its flows with bytes left share (-1 where they do not)."""
    live = path >= 0
    lo = np.full(len(t.names), np.iinfo(np.int64).max)
    hi = np.full(len(t.names), -1, dtype=np.int64)
    np.minimum.at(lo, t.ech[live], path[live])
    np.maximum.at(hi, t.ech[live], path[live])
    return np.where(lo == hi, lo, -1)

"""From ranks to the K strict-priority levels of a switch.

The data plane can only look at (echelon ID, ``deadline_us`` = A(j) in µs), so a
schedule is turned into, per EchelonFlow, a *band* of levels (its position in
the inter-group order) and *deadline ranges* that split its offsets inside the
band (intra-group order). Rules (checked by tests):

* bands follow ``echelon_order``: a higher-ordered echelon never gets a lower
  level than a lower-ordered one;
* with more echelons than levels, the first ``K-1`` get one level each and the
  tail shares the lowest level (it is served fairly among itself, and after
  everything above it);
* spare levels (fewer echelons than levels) are dealt round-robin, top echelon
  first, to echelons that have more distinct rank classes than levels, so the
  most important formations get intra-group ordering first;
* inside a band, offsets are cut into contiguous classes, earlier offsets on
  higher levels; the ranges of one echelon cover ``0..2^32-1`` without overlap;
* level 0 (best-effort) is never used for a registered echelon.

An *interleaved* schedule (``Schedule.interleaved``: groups' ranks interleave)
gets no bands: the distinct ranks of all flows are cut into ``K-1`` contiguous
runs, one level each, and every echelon's deadline ranges follow its flows'
levels over its offsets (flows with the same offset, which the switch cannot
tell apart, take the best level among them). Ranges may then go up and down
with the offset; the data plane's range table allows any level per range.

:func:`flow_levels` is the per-flow view the simulator uses. For group bands
it is computed *from* :func:`quantize`'s ranges, so it is exactly what the switch
does; for interleaved schedules from the same best level per offset the ranges
are cut from (over arrays: the simulator asks at every re-plan), which the
property tests check against the ranges. For per-flow policies (no
``echelon_order``) it is the ideal per-flow mapping of ranks onto levels, which a
real switch could only approximate; :func:`quantize` then falls back to ordering
echelons by their best flow rank.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from echelon.constants import ECHELON_LEVELS, MAX_DEADLINE_US, PRIO_MAX
from echelon.errors import SpecError
from echelon.model import EchelonFlow, FlowKey
from echelon.schedule import DeadlineRange, EchelonLevels, Schedule

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


def quantize(
    schedule: Schedule,
    echelons: Sequence[EchelonFlow],
    levels: Sequence[int] = ECHELON_LEVELS,
) -> dict[str, EchelonLevels]:
    """Bands and deadline ranges for every EchelonFlow, keyed by its name."""
    if schedule.interleaved:
        return _quantize_flows(schedule, echelons, _levels(levels))
    return _quantize(schedule, echelons, _levels(levels))


def _quantize_flows(
    schedule: Schedule, echelons: Sequence[EchelonFlow], desc: Sequence[int]
) -> dict[str, EchelonLevels]:
    """Per-flow levels (interleaved schedules): ranges follow each flow's level."""
    rows = FlowRows.of(echelons)
    live = _live_rows(schedule, rows)
    level = rank_levels(rank_array(schedule.flow_rank, rows.keys), desc, live).tolist()
    us, pool = rows.us.tolist(), _pool(rows.group, live, len(echelons)).tolist()
    out: dict[str, EchelonLevels] = {}
    bounds = np.searchsorted(rows.group, np.arange(len(echelons) + 1)).tolist()
    for e, ef in enumerate(echelons):
        pairs = [(us[i], level[i]) for i in range(bounds[e], bounds[e + 1]) if pool[i]]
        out[ef.name] = offset_levels(ef.name, pairs)
    return out


def offset_levels(name: str, levels: Iterable[tuple[int, int]]) -> EchelonLevels:
    """One EchelonFlow's deadline ranges from ``(offset_us, level)`` of its flows: flows
    the switch cannot tell apart (same offset) take the best level among them, and each
    run of equal levels over the sorted offsets is one range; the ranges cover the field."""
    runs = _runs(levels)
    ranges = tuple(
        DeadlineRange(
            0 if i == 0 else lo,
            runs[i + 1][0] - 1 if i + 1 < len(runs) else MAX_DEADLINE_US,
            lv,
        )
        for i, (lo, lv) in enumerate(runs)
    )
    return EchelonLevels(name, max(lv for _, lv in runs), ranges)


def _runs(pairs: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``(offset_us, value)`` of some flows of one EchelonFlow as the switch sees them:
    per distinct offset the largest value among its flows, and of each run of equal
    values over the sorted offsets its first offset: ``[(first offset_us, value)]``."""
    rows = np.array(list(pairs), dtype=np.int64).reshape(-1, 2)
    offsets, best = _offset_best(np.zeros(len(rows), dtype=np.int64), rows[:, 0], rows[:, 1])
    runs: list[tuple[int, int]] = []
    for us, value in zip(offsets.tolist(), best.tolist(), strict=True):
        if not runs or value != runs[-1][1]:
            runs.append((us, value))
    return runs


@dataclass(frozen=True)
class FlowRows:
    """The flows of a list of EchelonFlows as arrays, one row per flow in list order
    (a group's flows consecutive, in index order): what the quantiser reads of them.

    Why arrays: the simulator asks for every flow's level at each re-plan (thousands of
    flows, tens of thousands of re-plans per steady-state run); it keeps its flows as
    columns and builds this view without walking the objects."""

    keys: list[FlowKey]
    group: Ints  # position of the flow's EchelonFlow in the list
    us: Ints  # offset as the data plane matches it (:func:`us_of`)
    live: npt.NDArray[np.bool_] | None = None  # bytes left; None: ``Schedule.live`` says

    @classmethod
    def of(cls, echelons: Sequence[EchelonFlow]) -> FlowRows:
        flows = [f for ef in echelons for f in ef.flows]
        offsets = np.fromiter((f.offset for f in flows), dtype=np.float64, count=len(flows))
        counts = [len(ef.flows) for ef in echelons]
        return cls(
            [(ef.name, f.index) for ef in echelons for f in ef.flows],
            np.repeat(np.arange(len(echelons), dtype=np.int64), counts),
            us_of(offsets),
        )


def us_of(offsets: Floats) -> Ints:
    """Offsets in seconds as the data plane matches them: whole µs (``offset_us`` over an
    array: ``np.rint`` rounds half to even, as ``round`` does), clamped to 32 bits."""
    us: Ints = np.minimum(np.rint(offsets * 1e6), MAX_DEADLINE_US).astype(np.int64)
    return us


def rank_array(flow_rank: Mapping[FlowKey, int], keys: list[FlowKey], missing: int = 0) -> Ints:
    """The ranks of ``keys`` in that order (``missing`` for flows the schedule omits).

    Policies built on a FlowTable give ranks in the table's key order; that is checked
    (cheaply: same key objects) before the fast read, else keys are looked up."""
    n = len(keys)
    if isinstance(flow_rank, dict) and len(flow_rank) == n and list(flow_rank) == keys:
        return np.fromiter(flow_rank.values(), dtype=np.int64, count=n)
    return np.fromiter((flow_rank.get(k, missing) for k in keys), dtype=np.int64, count=n)


def rank_levels(
    ranks: Ints, desc: Sequence[int], live: npt.NDArray[np.bool_] | None = None
) -> Ints:
    """Distinct ranks cut into ``len(desc)`` contiguous runs, best run on the top level.

    Only the ranks of flows with bytes left (``live``) are cut: a finished flow sends
    nothing, so a level spent on it is a level the live flows lose. A finished flow
    takes the level of the run its rank falls in (or the next run).
    """
    pool = ranks if live is None or not live.any() else ranks[live]
    distinct = np.unique(pool)
    if not len(distinct):
        return np.zeros(0, dtype=np.int64)
    sizes = _split(len(distinct), min(len(desc), len(distinct)))
    tops = distinct[np.cumsum(sizes) - 1]  # highest rank of each run
    run = np.minimum(np.searchsorted(tops, ranks, side="left"), len(tops) - 1)
    out: Ints = np.asarray(desc[: len(tops)], dtype=np.int64)[run]
    return out


def _live_rows(schedule: Schedule, rows: FlowRows) -> npt.NDArray[np.bool_] | None:
    if rows.live is not None or schedule.live is None:
        return rows.live
    live = schedule.live
    return np.fromiter((k in live for k in rows.keys), dtype=np.bool_, count=len(rows.keys))


def _pool(group: Ints, live: npt.NDArray[np.bool_] | None, n_groups: int) -> npt.NDArray[np.bool_]:
    """The rows a group's deadline ranges are cut on: its live flows, or all of its
    flows when none is live."""
    if live is None:
        return np.ones(len(group), dtype=np.bool_)
    has_live = np.zeros(n_groups, dtype=np.bool_)
    has_live[group[live]] = True
    pool: npt.NDArray[np.bool_] = live | ~has_live[group]
    return pool


def _offset_best(group: Ints, us: Ints, level: Ints) -> tuple[Ints, Ints]:
    """The distinct ``(group, offset)`` cells, sorted, as ``group * (MAX_DEADLINE_US + 1)
    + us``, and the best level among the flows of each: flows of a group with the same
    offset are one flow to the switch. The one place that rule is computed (ranges,
    :func:`offset_levels`; per-flow levels, :func:`_offset_lookup`)."""
    cell = group * (MAX_DEADLINE_US + 1) + us
    order = np.argsort(cell, kind="stable")
    cell, lv = cell[order], level[order]
    if not len(cell):
        return cell, lv
    starts = np.flatnonzero(np.concatenate(([True], cell[1:] != cell[:-1])))
    best: Ints = np.maximum.reduceat(lv, starts)
    return cell[starts], best


def _offset_lookup(
    rows: FlowRows, level: Ints, live: npt.NDArray[np.bool_] | None, n_groups: int
) -> Ints:
    """Per row, the level :func:`offset_levels`' ranges of its group give its offset:
    the best level at the group's largest pool offset not above the row's (the first
    range starts at 0, and a group's first flow has offset 0)."""
    pool = _pool(rows.group, live, n_groups)
    stride = MAX_DEADLINE_US + 1
    cells, best = _offset_best(rows.group[pool], rows.us[pool], level[pool])
    at = np.searchsorted(cells, rows.group * stride + rows.us, side="right") - 1
    first = np.searchsorted(cells, rows.group * stride, side="left")
    out: Ints = best[np.maximum(at, first)]
    return out


def _quantize(
    schedule: Schedule, echelons: Sequence[EchelonFlow], desc: Sequence[int]
) -> dict[str, EchelonLevels]:
    order = _group_order(schedule, echelons)
    if len(order) >= len(desc):  # every band is one level: no intra-group classes needed
        classes: list[list[tuple[int, int]]] = [[] for _ in order]
    else:
        classes = [_classes(ef, schedule.flow_rank, schedule.live) for ef in order]
    bands = _bands([len(c) for c in classes], desc)
    out: dict[str, EchelonLevels] = {}
    for ef, cls, band in zip(order, classes, bands, strict=True):
        if len(band) == 1:  # the common case with many groups: one range, whole field
            out[ef.name] = EchelonLevels(ef.name, band[0], (_full(band[0]),))
            continue
        ranges = []
        start = 0
        for i, size in enumerate(_split(len(cls), len(band))):
            lo = 0 if i == 0 else cls[start][0]
            start += size
            hi = cls[start][0] - 1 if start < len(cls) else MAX_DEADLINE_US
            ranges.append(DeadlineRange(lo, hi, band[i]))
        out[ef.name] = EchelonLevels(ef.name, band[0], tuple(ranges))
    return out


def _full(priority: int) -> DeadlineRange:
    return DeadlineRange(0, MAX_DEADLINE_US, priority)


def level_of(levels: EchelonLevels, offset_us: int) -> int:
    """The level the data plane gives a packet of this echelon carrying ``offset_us``."""
    key = min(max(offset_us, 0), MAX_DEADLINE_US)
    i = bisect_right([r.lo_us for r in levels.ranges], key) - 1
    return levels.ranges[i].priority if i >= 0 else levels.priority


def flow_levels(
    schedule: Schedule,
    echelons: Sequence[EchelonFlow],
    levels: Sequence[int] = ECHELON_LEVELS,
) -> dict[FlowKey, int]:
    """The level of every flow (the K-queue view a simulator uses)."""
    rows = FlowRows.of(echelons)
    got = flow_level_array(schedule, echelons, levels, rows).tolist()
    return dict(zip(rows.keys, got, strict=True))


def flow_level_array(
    schedule: Schedule,
    echelons: Sequence[EchelonFlow],
    levels: Sequence[int] = ECHELON_LEVELS,
    rows: FlowRows | None = None,
    ranks: Ints | None = None,
) -> Ints:
    """:func:`flow_levels` as an array over ``rows`` (``FlowRows.of(echelons)`` unless
    given: a caller that holds the flows as arrays passes its own, and may pass the
    rows' ranks in place of ``schedule.flow_rank``, which group bands still read)."""
    desc = _levels(levels)
    rows = FlowRows.of(echelons) if rows is None else rows
    live = _live_rows(schedule, rows)
    if ranks is None:
        ranks = rank_array(schedule.flow_rank, rows.keys)
    if not schedule.echelon_order:
        return rank_levels(ranks, desc, live)
    if schedule.interleaved:
        level = rank_levels(ranks, desc, live)
        return _offset_lookup(rows, level, live, len(echelons))
    q = _quantize(schedule, echelons, desc)
    bounds = np.searchsorted(rows.group, np.arange(len(echelons) + 1)).tolist()
    out = np.empty(len(rows.keys), dtype=np.int64)
    for e, ef in enumerate(echelons):
        ranges = q[ef.name].ranges
        lo, hi = bounds[e], bounds[e + 1]
        if len(ranges) == 1:
            out[lo:hi] = ranges[0].priority
            continue
        los = np.array([r.lo_us for r in ranges], dtype=np.int64)
        prio = np.array([r.priority for r in ranges], dtype=np.int64)
        out[lo:hi] = prio[np.searchsorted(los, rows.us[lo:hi], side="right") - 1]
    return out


def _levels(levels: Sequence[int]) -> list[int]:
    out = sorted(set(levels), reverse=True)
    if not out or len(out) != len(levels):
        raise SpecError("levels", f"need distinct priority levels, got {list(levels)}")
    if out[-1] < 1 or out[0] > PRIO_MAX:
        raise SpecError("levels", f"echelon levels must lie in 1..{PRIO_MAX}, got {list(levels)}")
    return out


def _group_order(schedule: Schedule, echelons: Sequence[EchelonFlow]) -> list[EchelonFlow]:
    """Echelons in schedule order; ones the order omits follow, by best flow rank."""
    pos = {name: i for i, name in enumerate(schedule.echelon_order)}
    listed = sorted((ef for ef in echelons if ef.name in pos), key=lambda ef: pos[ef.name])
    rest = [ef for ef in echelons if ef.name not in pos]
    rank = schedule.flow_rank

    def best(ef: EchelonFlow) -> tuple[int, str]:
        return (min((rank.get((ef.name, f.index), 0) for f in ef.flows), default=0), ef.name)

    return listed + sorted(rest, key=best)


def _classes(
    ef: EchelonFlow, rank: Mapping[FlowKey, int], live: frozenset[FlowKey] | None = None
) -> list[tuple[int, int]]:
    """``(first offset_us, rank)`` of each run of equally ranked offsets, in offset order.

    The switch can only separate flows by offset, so a class is a run of
    consecutive distinct offsets whose (best) rank is the same. Finished flows
    (not in ``live``) are left out unless the whole group has finished: their
    offsets fall into a neighbouring class, where they cost no level.
    """
    name = ef.name
    flows = [f for f in ef.flows if live is None or (name, f.index) in live] or list(ef.flows)
    us = us_of(np.array([f.offset for f in flows], dtype=np.float64)).tolist()
    # the best rank is the smallest: the largest of the negated ranks
    runs = _runs(zip(us, (-rank.get((name, f.index), 0) for f in flows), strict=True))
    return [(us, -r) for us, r in runs]


def _bands(usable: Sequence[int], desc: Sequence[int]) -> list[list[int]]:
    """Levels of each echelon's band, top echelon first (see the module docstring)."""
    n, k = len(usable), len(desc)
    if n >= k:
        return [[desc[i]] for i in range(k - 1)] + [[desc[-1]]] * (n - k + 1)
    width = [1] * n
    spare = k - n
    while spare:
        gave = False
        for i in range(n):
            if spare and width[i] < usable[i]:
                width[i] += 1
                spare -= 1
                gave = True
        if not gave:
            break
    out, cursor = [], 0
    for w in width:
        out.append(list(desc[cursor : cursor + w]))
        cursor += w
    return out


def _split(items: int, parts: int) -> list[int]:
    """Sizes of ``parts`` contiguous chunks of ``items`` (earlier chunks get the extra)."""
    parts = max(1, min(parts, items))
    q, r = divmod(items, parts)
    return [q + (1 if i < r else 0) for i in range(parts)]

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

:func:`flow_levels` is the per-flow view the simulator uses. For group
schedules it is computed *from* :func:`quantize`'s ranges, so it is exactly what
the switch does. For per-flow policies (no ``echelon_order``) it is the ideal
per-flow mapping of ranks onto levels, which a real switch could only
approximate; :func:`quantize` then falls back to ordering echelons by their best
flow rank.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence

from echelon.constants import ECHELON_LEVELS, MAX_DEADLINE_US, PRIO_MAX
from echelon.errors import SpecError
from echelon.model import EchelonFlow, FlowKey, offset_us
from echelon.schedule import DeadlineRange, EchelonLevels, Schedule


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
    level = _rank_levels(schedule, echelons, desc)
    live = schedule.live
    out: dict[str, EchelonLevels] = {}
    for ef in echelons:
        flows = [f for f in ef.flows if live is None or ef.key(f) in live] or list(ef.flows)
        out[ef.name] = offset_levels(ef.name, [(_us(f.offset), level[ef.key(f)]) for f in flows])
    return out


def offset_levels(name: str, levels: Iterable[tuple[int, int]]) -> EchelonLevels:
    """One EchelonFlow's deadline ranges from ``(offset_us, level)`` of its flows: flows
    the switch cannot tell apart (same offset) take the best level among them, and each
    run of equal levels over the sorted offsets is one range; the ranges cover the field."""
    best: dict[int, int] = {}
    for us, lv in levels:
        best[us] = max(best.get(us, lv), lv)
    runs: list[tuple[int, int]] = []
    for us in sorted(best):
        if not runs or best[us] != runs[-1][1]:
            runs.append((us, best[us]))
    ranges = tuple(
        DeadlineRange(
            0 if i == 0 else lo,
            runs[i + 1][0] - 1 if i + 1 < len(runs) else MAX_DEADLINE_US,
            lv,
        )
        for i, (lo, lv) in enumerate(runs)
    )
    return EchelonLevels(name, max(lv for _, lv in runs), ranges)


def _rank_levels(
    schedule: Schedule, echelons: Sequence[EchelonFlow], desc: Sequence[int]
) -> dict[FlowKey, int]:
    """Distinct ranks cut into ``len(desc)`` contiguous runs, best run on the top level.

    Only the ranks of flows with bytes left (``Schedule.live``) are cut: a finished
    flow sends nothing, so a level spent on it is a level the live flows lose. A
    finished flow takes the level of the run its rank falls in (or the next run).
    """
    rank = schedule.flow_rank
    keys = [ef.key(f) for ef in echelons for f in ef.flows]
    live = schedule.live
    pool = keys if live is None else [k for k in keys if k in live]
    distinct = sorted({rank.get(k, 0) for k in pool or keys})
    tops: list[int] = []  # highest rank of each run
    run_levels: list[int] = []
    pos = 0
    for i, size in enumerate(_split(len(distinct), min(len(desc), len(distinct)))):
        pos += size
        tops.append(distinct[pos - 1])
        run_levels.append(desc[i])

    def level(r: int) -> int:
        return run_levels[min(bisect_left(tops, r), len(tops) - 1)]

    return {k: level(rank.get(k, 0)) for k in keys}


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
    desc = _levels(levels)
    if schedule.echelon_order:
        q = (_quantize_flows if schedule.interleaved else _quantize)(schedule, echelons, desc)
        out: dict[FlowKey, int] = {}
        for ef in echelons:
            ranges = q[ef.name].ranges
            if len(ranges) == 1:
                prio = ranges[0].priority
                out.update(((ef.name, f.index), prio) for f in ef.flows)
                continue
            los = [r.lo_us for r in ranges]
            for f in ef.flows:
                i = bisect_right(los, _us(f.offset)) - 1
                out[(ef.name, f.index)] = ranges[i].priority
        return out
    return _rank_levels(schedule, echelons, desc)


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
    best: dict[int, int] = {}
    for f in flows:
        us = _us(f.offset)
        r = rank.get((name, f.index), 0)
        if us not in best or r < best[us]:
            best[us] = r
    out: list[tuple[int, int]] = []
    for us in sorted(best):
        if not out or best[us] != out[-1][1]:
            out.append((us, best[us]))
    return out


def _us(offset: float) -> int:
    """An offset as the data plane matches it: whole µs (``offset_us``), clamped to 32 bits."""
    return min(offset_us(offset), MAX_DEADLINE_US)


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

"""Adjacent pairwise interchange of the group order, judged on the interleaved layout.

The echelon policy lays groups out in (class, key) order and derives virtual
deadlines from how late that order makes each group (docs/model.md §5.1). The
modified-due-date key is a rule of thumb: where a group's key counts late flows
with much slack, it can put that group after one it should precede. One pass of
adjacent interchanges repairs the cases a local move can: for neighbours ``a, b``
of one class where ``b`` is late and one group's links are all links of the other
(*nested* paths; on one link every pair is), the swap is kept if the total
formation delay of the *interleaved* layout (the one the switch will actually
follow) drops.

Why only nested pairs: the layout times each link on its own. Where two groups
share only part of their paths, a swap moves one ahead on the shared hop while its
other hops still time it against traffic the swap does not move, so what the swap
buys depends on when those hops deliver. The one such swap we followed end to end
(the emulated demo, docs/demo.md) made a plan whose outcome a 1.5 % change in link
rate decides (22 flows moved by up to 179 ms); restricted to nested pairs the
interchange makes no swap there, keeps its whole gain on one link and is within
seed noise of the unrestricted one on the cluster (docs/measurements/model.md). ``pairs="any"``
(the ablation ``echelon-swapany``) tries every pair that shares a link.

Judging a swap does not redo the whole layout: swapping neighbours changes the
serial layout only for ``a`` and ``b`` on the links they share, and the
interleaved layout only on the links ``a`` or ``b`` cross, so only those links'
flows are re-laid out and only their groups re-scored. A re-plan tries at most
:data:`SWAP_TRIALS` candidate pairs (a partly shared pair turned down counts), from
the head of the order, so its cost is bounded
whatever the number of groups (the groups at the head are the ones being served;
the others are looked at again when they get there, at a later re-plan).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from echelon.policies.table import (
    Floats,
    FlowTable,
    Ints,
    dense_rank,
    flow_finish,
    group_lateness,
    group_paths,
    incidence_finish,
    path_ids,
)

#: Most candidate pairs judged per re-plan, from the head of the order (bounds the
#: refinement's cost at any scale). Under strict priority the head is what is being
#: served; 4 and 16 gave the same one-link ratio and cluster numbers within seed noise
#: (docs/measurements/model.md), and each trial costs a controller's re-plan ~0.1 ms.
SWAP_TRIALS = 4
#: Up to this many live flow-link incidences a trial lays the whole table out again;
#: above it only the links the pair crosses (a controller's re-plan of a few dozen
#: groups is below, the simulator's large batches above).
WHOLE_RELAYOUT_MAX = 512


@dataclass
class _Csr:
    """Rows ``order[start[k]:start[k + 1]]`` of the items whose key is ``k``."""

    order: Ints
    start: Ints

    @classmethod
    def of(cls, keys: Ints, n: int) -> _Csr:
        order = np.argsort(keys, kind="stable")
        return cls(order, np.searchsorted(keys[order], np.arange(n + 1)))

    def rows(self, k: int) -> Ints:
        return self.order[self.start[k] : self.start[k + 1]]

    def rows_of(self, ks: Ints) -> Ints:
        """The rows of every key in ``ks``, concatenated (vectorised; a few keys by
        slicing, which is several numpy calls fewer: a re-plan makes ~5 per trial)."""
        if len(ks) <= 4:
            if not len(ks):
                return self.order[:0]
            return np.concatenate(
                [self.order[self.start[k] : self.start[k + 1]] for k in ks.tolist()]
            )
        lo, hi = self.start[ks], self.start[ks + 1]
        n = hi - lo
        offsets = np.cumsum(n) - n  # where each key's rows begin in the output
        rows: Ints = self.order[np.arange(int(n.sum())) + np.repeat(lo - offsets, n)]
        return rows


def _shared_links(la: Ints, lb: Ints) -> tuple[Ints, Ints, Ints]:
    """``np.intersect1d(la, lb, assume_unique=True, return_indices=True)`` for the few
    links of two groups, in Python (a tenth of its cost there; it runs for every
    neighbour pair the scan looks at)."""
    at_b = {x: i for i, x in enumerate(lb.tolist())}
    common = sorted((x, i, at_b[x]) for i, x in enumerate(la.tolist()) if x in at_b)
    shared, ia, ib = (
        (np.array(c, dtype=np.int64) for c in zip(*common, strict=True))
        if common
        else (la[:0],) * 3
    )
    return shared, ia, ib


def interchange(
    t: FlowTable,
    position: Ints,
    cls: Ints,
    due: Floats,
    virtual_of: Callable[[Floats], Floats],
    now: float,
    trials: int = SWAP_TRIALS,
    pairs: Literal["nested", "any"] = "nested",
    relayout: Literal["auto", "whole", "local"] = "auto",
) -> tuple[Ints, Floats]:
    """The group order (``position``: group -> place) after one pass of adjacent
    interchanges, and each group's lateness (``>= 0``) on the interleaved layout of that
    order; ``virtual_of(late)`` turns per-group serial lateness into per-flow virtual
    deadlines (the policy's grace and share). ``pairs``: which neighbours may swap --
    ``"nested"`` (one's links are all links of the other) or ``"any"`` (they share a
    link). Every pair of one class that shares a link and whose second group is late
    counts as one of the ``trials``, also one that ``pairs`` turns down: that keeps the
    scan at the head of the order and its cost bounded. ``relayout``: how a trial is
    judged -- the whole table laid out again (``"whole"``) or only the pair's links
    (``"local"``); ``"auto"`` chooses by size (:data:`WHOLE_RELAYOUT_MAX`). Both give
    the same result (tested)."""
    if pairs not in ("nested", "any"):
        raise ValueError(f"pairs must be 'nested' or 'any', got {pairs!r}")
    if relayout not in ("auto", "whole", "local"):
        raise ValueError(f"relayout must be 'auto', 'whole' or 'local', got {relayout!r}")
    live_flow = t.remaining > 0
    live_inc = live_flow[t.inc_flow]
    fi, li = t.inc_flow[live_inc], t.inc_link[live_inc]
    if not len(fi):
        return position, np.zeros(len(t.names))
    n_groups, n_links, n_flows = len(t.names), len(t.cap), len(t.keys)
    gi = t.ech[fi]
    secs = t.remaining[fi] / t.cap[li]
    # (group, link) cells: each group's time on each of its links
    cell, cell_inv = np.unique(gi * n_links + li, return_inverse=True)
    cell_secs = np.bincount(cell_inv, weights=secs)
    links_of = _Csr.of(cell // n_links, n_groups)  # rows index `cell`
    by_link = _Csr.of(li, n_links)
    by_flow = _Csr.of(fi, n_flows)
    live_flows = np.flatnonzero(live_flow)
    by_group = _Csr.of(t.ech[live_flows], n_groups)
    flows_of = _Csr(live_flows[by_group.order], by_group.start)  # live flows per group
    position = position.copy()
    flow_cls = cls[t.ech]

    def layout(pos: Ints) -> tuple[Floats, Floats, Floats, Floats, Floats, Floats]:
        """Serial layout (per incidence), its lateness, virtual deadlines, interleaved
        layout (per incidence, per flow) and per-group lateness, from scratch."""
        s_inc = incidence_finish(li, secs, (t.index[fi], pos[gi]), now)
        serial = flow_finish(t, fi, s_inc, now)
        serial_late = group_lateness(t, serial, due)
        virtual = virtual_of(serial_late)
        i_inc = incidence_finish(li, secs, (pos[gi], due[fi], virtual[fi], flow_cls[fi]), now)
        inter = flow_finish(t, fi, i_inc, now)
        return s_inc, serial_late, virtual, i_inc, inter, group_lateness(t, inter, due)

    s_inc, serial_late, virtual, i_inc, inter, late = layout(position)
    # a small table is laid out again whole for each trial (fewer numpy calls than the
    # bookkeeping below, which pays off only where the pair's links are a small part)
    whole = len(fi) <= WHOLE_RELAYOUT_MAX if relayout == "auto" else relayout == "whole"

    shift = np.zeros(n_links)
    alive = np.diff(flows_of.start) > 0
    seq = [int(g) for g in np.argsort(position, kind="stable") if alive[g]]
    tried = 0
    for k in range(len(seq) - 1):
        a, b = seq[k], seq[k + 1]
        if cls[a] != cls[b] or late[b] <= 0:
            continue
        cells_a, cells_b = links_of.rows(a), links_of.rows(b)
        la, lb = cell[cells_a] % n_links, cell[cells_b] % n_links
        shared, ia, ib = _shared_links(la, lb)
        if not len(shared):
            continue
        if tried >= trials:
            break
        tried += 1
        if pairs == "nested" and len(shared) < min(len(la), len(lb)):
            continue  # partly shared paths: not for the layout to judge (module docstring)
        if whole:
            trial_pos = position.copy()
            trial_pos[a], trial_pos[b] = position[b], position[a]
            trial_late = layout(trial_pos)[5]
            if float((t.weight * (trial_late - late)).sum()) < -1e-12:
                position, late = trial_pos, trial_late
                seq[k], seq[k + 1] = b, a
            continue
        # serial layout with b before a: on shared links a moves back by b's time there
        # and b forward by a's; elsewhere nothing changes (`shift`: per link, zero
        # outside the shared ones between trials)
        fa, fb = flows_of.rows(a), flows_of.rows(b)
        ra, rb = by_flow.rows_of(fa), by_flow.rows_of(fb)  # incidences, flow by flow
        shift[shared] = cell_secs[cells_b[ib]]
        va = s_inc[ra] + shift[li[ra]]
        shift[shared] = cell_secs[cells_a[ia]]
        vb = s_inc[rb] - shift[li[rb]]
        shift[shared] = 0.0
        trial_serial_late = serial_late.copy()
        for g, f_g, v in ((a, fa, va), (b, fb, vb)):
            n_inc = by_flow.start[f_g + 1] - by_flow.start[f_g]  # live links per flow
            finish = np.maximum.reduceat(v, np.cumsum(n_inc) - n_inc)  # its last link
            trial_serial_late[g] = max(0.0, float((finish - due[f_g]).max()))
        trial_virtual = virtual.copy()
        ab_flows = np.concatenate([fa, fb])
        trial_virtual[ab_flows] = virtual_of(trial_serial_late)[ab_flows]
        trial_pos = position.copy()
        trial_pos[a], trial_pos[b] = position[b], position[a]
        # interleaved layout again, on the links a or b cross
        touched = np.union1d(la, lb)
        rows = by_link.rows_of(touched)
        f_r = fi[rows]
        fin = incidence_finish(
            li[rows],
            secs[rows],
            (trial_pos[gi[rows]], due[f_r], trial_virtual[f_r], flow_cls[f_r]),
            now,
        )
        trial_inc = i_inc.copy()
        trial_inc[rows] = fin
        flows = np.unique(f_r)
        trial_inter = inter.copy()
        frows = by_flow.rows_of(flows)
        trial_inter[flows] = now
        np.maximum.at(trial_inter, fi[frows], trial_inc[frows])
        groups = np.unique(t.ech[flows])
        gflows = flows_of.rows_of(groups)
        trial_late = np.zeros(n_groups)
        np.maximum.at(trial_late, t.ech[gflows], trial_inter[gflows] - due[gflows])
        w = t.weight[groups]
        delta = float(
            (w * (np.maximum(trial_late[groups], 0.0) - np.maximum(late[groups], 0.0))).sum()
        )
        if delta < -1e-12:
            position = trial_pos
            s_inc[ra], s_inc[rb] = va, vb
            serial_late = trial_serial_late
            virtual = trial_virtual
            i_inc, inter = trial_inc, trial_inter
            late[groups] = np.maximum(trial_late[groups], 0.0)
            seq[k], seq[k + 1] = b, a
    return position, late


#: Most flow moves judged per re-plan (:func:`flow_interchange`), from the head of the
#: order; 1, 4 and 16 gave the same one-link ratio (docs/measurements/scheduling.md).
FLOW_TRIALS = 4


def flow_interchange(
    t: FlowTable, rank: Ints, tie: Ints, due: Floats, now: float, trials: int = FLOW_TRIALS
) -> Ints:
    """Per flow, ``rank`` after one pass of single-flow moves between groups that each
    keep all their bytes on one path (the same one).

    Where flow ``y`` follows ``x`` of another group on that path and ``y``'s group is
    late on the layout (flows one at a time in (``rank``, ``tie``) order on every link),
    two moves are judged: ``y`` just ahead of ``x``, and ``x`` just behind the run of
    ``y``'s group that follows it; the one that lowers the total formation delay most
    is kept. Groups move whole in :func:`interchange`, in one size class; this moves
    one flow, across classes, which is what an echelon whose first flow is due now
    beside a group whose later flows have time to spare needs. One path only: there
    the layout times a move exactly (the module docstring's reason for nested pairs).
    Equal ranks stay equal (they share); the result is dense."""
    path = path_ids(t)
    on_path = (path >= 0) & (group_paths(t, path)[t.ech] == path)
    cand = np.flatnonzero(on_path)
    if len(cand) < 2 or trials <= 0:
        return rank
    cand = cand[np.lexsort((tie[cand], rank[cand], path[cand]))]  # by path, then rank
    x_all, y_all = cand[:-1], cand[1:]
    pair = (path[x_all] == path[y_all]) & (t.ech[x_all] != t.ech[y_all])
    pair &= rank[x_all] < rank[y_all]
    if not pair.any():
        return rank
    live_inc = t.remaining[t.inc_flow] > 0
    fi, li = t.inc_flow[live_inc], t.inc_link[live_inc]
    secs = t.remaining[fi] / t.cap[li]
    by_link = _Csr.of(li, len(t.cap))
    inc = incidence_finish(li, secs, (tie[fi], rank[fi]), now)
    late = group_lateness(t, flow_finish(t, fi, inc, now), due)
    new = 2 * rank  # even: a move puts a flow on an odd value between two others
    tried = 0
    head_first = np.argsort(rank[x_all[pair]], kind="stable")
    for x, y in zip(
        x_all[pair][head_first].tolist(), y_all[pair][head_first].tolist(), strict=True
    ):
        if late[t.ech[y]] <= 0 or new[y] <= new[x]:
            continue
        if tried >= trials:
            break
        tried += 1
        same = cand[path[cand] == path[x]]
        same = same[np.lexsort((tie[same], new[same]))]
        after = same[int(np.flatnonzero(same == x)[0]) + 1 :]
        same_group = t.ech[after] == t.ech[y]  # the run: y's group's flows right after x
        run = after[: len(after) if same_group.all() else int(np.argmin(same_group))]
        ahead = new.copy()
        ahead[y] = new[x] - 1
        trials_here = [ahead]
        if len(run) > 1:
            behind = new.copy()
            behind[x] = new[run[-1]] + 1
            trials_here.append(behind)
        rows = by_link.rows_of(np.unique(li[fi == x]))
        best: tuple[float, Ints, Floats, Floats] | None = None
        for trial in trials_here:
            trial_inc = inc.copy()
            trial_inc[rows] = incidence_finish(
                li[rows], secs[rows], (tie[fi[rows]], trial[fi[rows]]), now
            )
            trial_late = group_lateness(t, flow_finish(t, fi, trial_inc, now), due)
            gain = float((t.weight * (trial_late - late)).sum())
            if gain < -1e-12 and (best is None or gain < best[0]):
                best = (gain, trial, trial_inc, trial_late)
        if best is not None:
            new, inc, late = 2 * dense_rank(best[1]), best[2], best[3]
    return dense_rank(new)

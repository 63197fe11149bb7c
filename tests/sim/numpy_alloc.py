"""Test oracle: the numpy allocator the engine used before :mod:`sim.core.alloc`.

Strict priority across levels, max-min fair inside a level, vectorised with numpy
instead of compiled. The product uses :mod:`sim.core.alloc` only; this module
stays under tests/ as a second, independent implementation to compare it with
(``tests/sim/test_fastalloc.py``), next to the pure-Python reference of
``tests/sim/test_alloc.py``.

This is the fluid model of a network of strict-priority switches whose queues
are shared fairly by the flows of one level (what per-flow fair queueing or
many TCP-like senders converge to). Levels are served in ascending key order
(key 0 first); each level is max-min filled ("progressive filling") against
the capacity left over by the levels before it.

Flows are given as rows of a padded link-index matrix ``paths`` (shape
``n x hops``); the padding value is ``n_links`` and refers to a virtual link of
infinite capacity, so every row can be treated alike without Python loops.

Why two code paths: a level with one flow (common for per-flow policies such
as EDF or SRPT, where ranks are all distinct) needs no water-filling at all –
its rate is simply the smallest residual capacity on its path – and a Python
loop over a few small levels is far cheaper than numpy's per-call overhead.
Large levels (fair sharing, coflows) use the vectorised progressive filling.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Relative tolerance when deciding that a link is saturated.
_REL_EPS = 1e-9
#: Levels with at most this many flows are filled with plain Python.
_SMALL = 6
#: Re-check which flows are blocked by saturated links after this many flows.
_FILTER_EVERY = 48


def allocate(paths: IntArray, keys: IntArray, capacity: FloatArray) -> FloatArray:
    """Rates (bytes/s) for flows with link rows ``paths`` and priority ``keys``.

    ``capacity`` has one entry per real link; the padding index ``len(capacity)``
    in ``paths`` means "no link". Lower keys are served strictly first.
    """
    n = paths.shape[0]
    rates = np.zeros(n, dtype=np.float64)
    if n == 0:
        return rates
    n_links = capacity.shape[0]
    resid = np.empty(n_links + 1, dtype=np.float64)
    resid[:n_links] = capacity
    resid[n_links] = np.inf
    if keys.min() == keys.max():  # one level: plain max-min fairness
        rates[:] = _fill_numpy(np.arange(n), paths, resid, n_links)
        return rates
    order = np.argsort(keys, kind="stable")
    seq_keys = keys[order]
    # Residual capacities live in a Python list while small levels are filled (scalar
    # access to numpy arrays is slow) and in a numpy array for large levels. Levels
    # are visited in windows of about _FILTER_EVERY flows; only a window is ever
    # converted to Python objects.
    resid_list: list[float] = resid.tolist()
    while len(order):
        bounds = np.flatnonzero(seq_keys[1:] != seq_keys[:-1]) + 1
        k = int(np.searchsorted(bounds, _FILTER_EVERY))
        cut = int(bounds[k]) if k < len(bounds) else len(order)
        inner = bounds[:k].tolist()
        win = order[:cut]
        win_ids = win.tolist()
        win_rows = paths[win].tolist()
        for lo, hi in zip([0, *inner], [*inner, cut], strict=True):
            if hi - lo == 1:  # a lone flow takes the smallest residual on its path
                row = win_rows[lo]
                r = min([resid_list[lk] for lk in row])
                if r > 0.0:
                    rates[win_ids[lo]] = r
                    for lk in row:
                        resid_list[lk] -= r
            elif hi - lo <= _SMALL:
                got = _fill_small(win_rows[lo:hi], resid_list, n_links)
                for i, r in enumerate(got):
                    rates[win_ids[lo + i]] = r
            else:
                resid = np.array(resid_list)
                rates[win[lo:hi]] = _fill_numpy(win[lo:hi], paths, resid, n_links)
                resid_list = resid.tolist()
        if cut == len(order):
            break
        # Residuals only shrink, so a flow crossing a saturated link will get nothing:
        # drop all such flows at once instead of visiting their levels one by one.
        tail = order[cut:]
        alive = (np.array(resid_list)[paths[tail]] > 0.0).all(axis=1)
        order = tail[alive]
        seq_keys = seq_keys[cut:][alive]
    return rates


def _fill_small(rows: list[list[int]], resid: list[float], pad: int) -> list[float]:
    """Progressive filling for a handful of flows (link rows ``rows``), in Python.

    Flows crossing a saturated link get nothing (the common case at low priority).
    """
    rates = [0.0] * len(rows)
    links = {}
    for m, row in enumerate(rows):
        if min([resid[lk] for lk in row]) > 0.0:
            links[m] = [lk for lk in row if lk != pad]
    live = list(links)
    while live:
        count: dict[int, int] = {}
        for m in live:
            for lk in links[m]:
                count[lk] = count.get(lk, 0) + 1
        if not count:  # flows without links: unconstrained (caller avoids this)
            for m in live:
                rates[m] = math.inf
            break
        share = {lk: resid[lk] / c for lk, c in count.items()}
        inc = max(min(share.values()), 0.0)
        limit = inc * (1.0 + _REL_EPS)
        full = {lk for lk, sh in share.items() if sh <= limit}
        for lk, c in count.items():
            resid[lk] -= inc * c
        for m in live:
            rates[m] += inc
        for lk in full:
            resid[lk] = 0.0
        live = [m for m in live if not any(lk in full for lk in links[m])]
    return rates


def _fill_numpy(members: IntArray, paths: IntArray, resid: FloatArray, pad: int) -> FloatArray:
    """Vectorised progressive filling of one level.

    Works on the level's own links only (remapped to 0..U-1) and updates link
    counts incrementally, so one filling round is a handful of numpy calls on
    small arrays.
    """
    sub = paths[members]
    used = np.bincount(sub.ravel(), minlength=pad + 1) > 0
    uniq = np.flatnonzero(used)
    lut = np.zeros(pad + 1, dtype=np.int64)
    lut[uniq] = np.arange(uniq.shape[0])
    inv = lut[sub]
    inv_flat = inv.ravel()
    cap = resid[uniq].copy()
    cnt = np.bincount(inv_flat, minlength=uniq.shape[0]).astype(np.float64)
    if uniq[-1] == pad:
        cnt[-1] = 0.0  # the virtual "no link" never constrains
    live = np.ones(members.shape[0], dtype=bool)
    got = np.zeros(members.shape[0])
    share = np.empty(uniq.shape[0])
    while True:
        share.fill(np.inf)
        np.divide(cap, cnt, out=share, where=cnt > 0)
        inc = float(share.min())
        if inc == np.inf:  # remaining flows cross no real link
            got[live] = np.inf
            break
        inc = max(inc, 0.0)
        cap -= inc * cnt
        got[live] += inc
        full = share <= inc * (1.0 + _REL_EPS)
        cap[full] = 0.0
        hit = live & full[inv].any(axis=1)
        live &= ~hit
        if not live.any():
            break
        cnt -= np.bincount(inv[hit].ravel(), minlength=uniq.shape[0])
        if uniq[-1] == pad:
            cnt[-1] = 0.0
    real = uniq != pad
    resid[uniq[real]] = cap[real]
    return got

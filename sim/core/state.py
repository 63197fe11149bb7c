"""Compact numpy state of the flows in flight.

The engine touches every active flow at every event (advance the fluid,
find the next finish), so the active set lives in dense arrays, compacted in bulk
when flows have left: each event costs O(active flows) compiled work, never
O(all flows ever simulated).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from sim.core.alloc import advance_and_mark, allocate_live, time_to_next
from sim.core.heads import advance_heads, allocate_heads, build_heads, time_to_next_moving

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]

#: Largest (links + 1)^2 for which pair heads keep a scratch table of every pair.
_MAX_PAIRS = 1 << 22


class GrowArray:
    """An append-only numpy array with amortised O(1) appends (capacity doubling)."""

    def __init__(self, dtype: Any, capacity: int = 1024) -> None:
        self._buf: npt.NDArray[Any] = np.zeros(capacity, dtype=dtype)
        self.size = 0

    def append(self, value: Any) -> None:
        if self.size == self._buf.shape[0]:
            new = np.zeros(self._buf.shape[0] * 2, dtype=self._buf.dtype)
            new[: self.size] = self._buf
            self._buf = new
        self._buf[self.size] = value
        self.size += 1

    def extend(self, values: npt.NDArray[Any]) -> None:
        need = self.size + len(values)
        if need > self._buf.shape[0]:
            new = np.zeros(max(need, self._buf.shape[0] * 2), dtype=self._buf.dtype)
            new[: self.size] = self._buf[: self.size]
            self._buf = new
        self._buf[self.size : need] = values
        self.size = need

    @property
    def data(self) -> npt.NDArray[Any]:
        """The whole buffer (indices ``>= size`` are unused); writable in place."""
        return self._buf


class ActiveFlows:
    """Flows currently sending, kept sorted by (rank key, release order).

    Sorted because the allocator serves keys in ascending order: keeping the order
    between policy calls means an allocation needs no sort (the policy changes keys
    only at re-plans, new flows mostly come with one). Ties keep release order (a
    release sequence number), as a stable sort of the release-ordered flows would.
    A finished flow is only marked ``dead`` and dropped in bulk once many are, so an
    event costs one compiled pass over the arrays. When every live flow has a rank
    of its own and a two-link path, only the first flow of each path can get a rate
    and the allocation walks those pair heads alone (:mod:`sim.core.heads`).
    """

    def __init__(self, capacity: npt.NDArray[np.float64], heads: bool = True) -> None:
        self.capacity = capacity
        self.pad = len(capacity)
        self.gid: Ints = np.zeros(0, dtype=np.int64)
        self.seq: Ints = np.zeros(0, dtype=np.int64)
        self.key: Ints = np.zeros(0, dtype=np.int64)
        self.rem: Floats = np.zeros(0)
        self.rate: Floats = np.zeros(0)
        self.paths: Ints = np.zeros((0, 1), dtype=np.int64)
        self.dead: npt.NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        self.n_dead = 0
        self._released = 0
        self._sorted = True
        #: pair heads allowed at all (tests switch them off to compare)
        self.heads_ok = heads and self.pad * self.pad <= _MAX_PAIRS
        self.heads = False
        self._tail: Ints = np.zeros(0, dtype=np.int64)
        self._nxt: Ints = np.zeros(0, dtype=np.int64)
        self._hpos: Ints = np.zeros(0, dtype=np.int64)
        self._hu: Ints = np.zeros(0, dtype=np.int64)
        self._hd: Ints = np.zeros(0, dtype=np.int64)
        self._h = np.zeros(1, dtype=np.int64)
        self._moving: Ints = np.zeros(self.pad + 1, dtype=np.int64)
        self._n_moving = 0
        self._out = np.zeros(1)
        #: seconds to the next finish as the last allocation found it, until a flow moves
        self._next: float | None = None

    def __len__(self) -> int:
        """Flows still sending."""
        return int(self.gid.shape[0]) - self.n_dead

    def add(
        self,
        gids: Sequence[int],
        paths: Sequence[tuple[int, ...]],
        sizes: Sequence[float],
        keys: Ints,
    ) -> None:
        width = max(self.paths.shape[1], *(len(p) for p in paths))
        if width > self.paths.shape[1]:
            wider = np.full((self.paths.shape[0], width), self.pad, dtype=np.int64)
            wider[:, : self.paths.shape[1]] = self.paths
            self.paths = wider
        rows = np.full((len(gids), width), self.pad, dtype=np.int64)
        for i, p in enumerate(paths):
            rows[i, : len(p)] = p
        n, n0 = len(gids), len(self.key)
        self.gid = np.concatenate((self.gid, np.asarray(gids, dtype=np.int64)))
        self.seq = np.concatenate((self.seq, np.arange(self._released, self._released + n)))
        self._released += n
        self.key = np.concatenate((self.key, keys))
        self.rem = np.concatenate((self.rem, np.asarray(sizes, dtype=np.float64)))
        self.rate = np.concatenate((self.rate, np.zeros(n)))
        self.paths = np.concatenate((self.paths, rows))
        self.dead = np.concatenate((self.dead, np.zeros(n, dtype=np.bool_)))
        self._next = None
        # new flows come last in release order, so only their keys can break the order;
        # under pair heads they may also share a rank or a pair: decide again
        tail = self.key[max(n0 - 1, 0) :]
        if self.heads or bool(np.any(tail[1:] < tail[:-1])):
            self._sorted = False

    def rekey(self, rank: Ints) -> None:
        """New rank keys (``rank[gid]``) after a re-plan."""
        self.compact(force=True)
        self.key = rank[self.gid]
        self._sorted = False

    def compact(self, force: bool = False) -> None:
        """Drop dead flows from the arrays once they are many (or when ``force``)."""
        if not self.n_dead or (not force and self.n_dead * 4 < max(len(self.gid), 16384)):
            return
        self._take(~self.dead)
        self.n_dead = 0
        if self.heads:  # positions moved
            self._build_heads()

    def _take(self, sel: npt.NDArray[Any]) -> None:
        self.gid, self.seq, self.key = self.gid[sel], self.seq[sel], self.key[sel]
        self.rem, self.rate = self.rem[sel], self.rate[sel]
        self.paths, self.dead = self.paths[sel], self.dead[sel]

    def _sort(self) -> None:
        self.compact(force=True)
        if len(self.key) > 1:
            k0, k1 = self.key[:-1], self.key[1:]  # compared, not subtracted: ranks reach int64 max
            if bool(np.any((k1 < k0) | ((k1 == k0) & (self.seq[1:] < self.seq[:-1])))):
                self._take(np.lexsort((self.seq, self.key)))
        self._sorted = True
        self.heads = (
            self.heads_ok
            and self.paths.shape[1] == 2
            and bool(np.all(self.paths < self.pad))
            and bool(np.all(self.key[1:] != self.key[:-1]))
        )
        if self.heads:
            self._build_heads()

    def _build_heads(self) -> None:
        """Pair heads of the current (rank-sorted) arrays; no flow moves yet."""
        n = len(self.gid)
        if not len(self._tail):
            self._tail = np.full(self.pad * self.pad, -1, dtype=np.int64)
        self._nxt = np.empty(n, dtype=np.int64)
        self._hpos = np.empty(n, dtype=np.int64)
        self._hu = np.empty(n, dtype=np.int64)
        self._hd = np.empty(n, dtype=np.int64)
        self._h[0] = build_heads(
            self.paths, self.dead, self.pad, self._nxt, self._hpos, self._hu, self._hd, self._tail
        )
        self.rate[:] = 0.0
        self._n_moving = 0
        self._next = None

    def allocate(self) -> None:
        """Strict priority across keys, max-min fair inside one (:mod:`sim.core.alloc`)."""
        if not self._sorted:
            self._sort()
        else:
            self.compact()
        if not len(self.gid):
            self._next = math.inf
            return
        if self.heads:
            self._n_moving = allocate_heads(
                self._hpos,
                self._hu,
                self._hd,
                int(self._h[0]),
                self.capacity,
                self.rate,
                self.rem,
                self._moving,
                self._n_moving,
                self._out,
            )
            self._next = float(self._out[0])
        else:
            self._next = allocate_live(
                self.paths, self.key, self.capacity, self.dead, self.rem, self.rate
            )

    def set_rates(self, rate: Floats) -> None:
        """Rates computed elsewhere, for the live flows in array order."""
        self.compact(force=True)
        self.heads = False
        self.rate[:] = rate
        self._next = None

    def time_to_next(self) -> float:
        """Seconds until the next flow finishes at the current rates (inf if none)."""
        if self._next is not None:  # the allocation's own answer, same operations
            return self._next
        if self.heads:
            return float(time_to_next_moving(self.rem, self.rate, self._moving, self._n_moving))
        return float(time_to_next(self.rem, self.rate)) if len(self.gid) else math.inf

    def advance_and_pop(self, dt: float, time_eps: float) -> list[int]:
        """Advance the fluid by ``dt`` seconds; return (in id order) the flows with
        less than ``time_eps`` seconds (or 1e-6 bytes) of sending left, now dead."""
        n = len(self.gid)
        if n == self.n_dead:
            return []
        if dt > 0.0:
            self._next = None
        if self.heads:
            done = np.empty(self._n_moving, dtype=np.int64)
            nd = advance_heads(
                self.gid,
                self.rem,
                self.rate,
                self.dead,
                self.paths,
                self._nxt,
                self._hpos,
                self._hu,
                self._hd,
                self._h,
                self._moving,
                self._n_moving,
                dt,
                time_eps,
                done,
            )
        else:
            done = np.empty(n, dtype=np.int64)
            nd = advance_and_mark(self.gid, self.rem, self.rate, self.dead, dt, time_eps, done)
        self.n_dead += nd
        if nd:
            self._next = None
        return sorted(done[:nd].tolist())

    def live(self) -> tuple[Ints, Floats]:
        """Ids and remaining bytes of the flows still sending (compacts first)."""
        self.compact(force=True)
        return self.gid, self.rem

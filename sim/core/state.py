"""Compact numpy state of the flows in flight.

The engine touches every active flow at every event (advance the fluid,
find the next finish), so the active set lives in dense arrays that are
compacted when flows leave: each event costs O(active flows) numpy work, never
O(all flows ever simulated).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt


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

    @property
    def data(self) -> npt.NDArray[Any]:
        """The whole buffer (indices ``>= size`` are unused); writable in place."""
        return self._buf


class ActiveFlows:
    """Flows currently sending: ids, remaining bytes, rates and padded link rows."""

    def __init__(self, n_links: int) -> None:
        self.pad = n_links
        self.gid: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.rem: npt.NDArray[np.float64] = np.zeros(0)
        self.rate: npt.NDArray[np.float64] = np.zeros(0)
        self.paths: npt.NDArray[np.int64] = np.zeros((0, 1), dtype=np.int64)

    def __len__(self) -> int:
        return int(self.gid.shape[0])

    def add(
        self, gids: Sequence[int], paths: Sequence[tuple[int, ...]], sizes: Sequence[float]
    ) -> None:
        width = max(self.paths.shape[1], *(len(p) for p in paths))
        if width > self.paths.shape[1]:
            wider = np.full((self.paths.shape[0], width), self.pad, dtype=np.int64)
            wider[:, : self.paths.shape[1]] = self.paths
            self.paths = wider
        rows = np.full((len(gids), width), self.pad, dtype=np.int64)
        for i, p in enumerate(paths):
            rows[i, : len(p)] = p
        self.gid = np.concatenate((self.gid, np.asarray(gids, dtype=np.int64)))
        self.rem = np.concatenate((self.rem, np.asarray(sizes, dtype=np.float64)))
        self.rate = np.concatenate((self.rate, np.zeros(len(gids))))
        self.paths = np.concatenate((self.paths, rows))

    def time_to_next(self) -> float:
        """Seconds until the next flow finishes at the current rates (inf if none)."""
        if not len(self):
            return math.inf
        moving = self.rate > 0
        if not moving.any():
            return math.inf
        return float((self.rem[moving] / self.rate[moving]).min())

    def advance(self, dt: float) -> None:
        if dt > 0 and len(self):
            self.rem -= self.rate * dt

    def pop_finished(self, time_eps: float) -> list[int]:
        """Remove and return (in id order) the flows with less than ``time_eps``
        seconds of sending left."""
        if not len(self):
            return []
        done = self.rem <= self.rate * time_eps + 1e-6
        if not done.any():
            return []
        out = sorted(self.gid[done].tolist())
        keep = ~done
        self.gid = self.gid[keep]
        self.rem = self.rem[keep]
        self.rate = self.rate[keep]
        self.paths = self.paths[keep]
        return out

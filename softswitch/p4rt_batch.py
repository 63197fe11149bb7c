"""Table writes from a serialized WriteRequest: the compiled decoder, then runs of columns.

Why: decoding each entry from the parsed protobuf in Python (``FastWriter``)
cost ~4 µs per INSERT, which held the soft switch level with BMv2. Here the
request's bytes go to :func:`softswitch.p4rt_kernel.decode_write` (numba),
which returns one row of ints per update; consecutive plain updates of the same
kind, table and action form a *run*, and a run is applied from its columns:
the keys, calls and stored entries are built by ``zip``/``map`` (no Python
code per entry) and an INSERT run enters the table in one
:meth:`Table.insert_many`. A read returns the stored bytes of the request's
``TableEntry`` parsed (for a plain entry they are the canonical entry).

Updates that are not plain go, in their place in the request's order, through
the same path as before (``FastWriter`` then the codec), so every refusal still
comes from the codec with its reason. numba is a dependency of the project
(wheels on PyPI; ``sim/`` uses it too); its kernel is loaded or compiled in a
background thread when the service starts (:func:`start_loading`) and writes
take the upb path until then or if it cannot load.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np
from finsy.proto import p4r

from softswitch import p4rt_layout as k
from softswitch.errors import SwitchError
from softswitch.p4rt_fast import _K, FastWriter, _TableSpec
from softswitch.tables import EXACT, RANGE, ActionCall, ActionFn, Table

log = logging.getLogger("softswitch.p4rt")

Decoder = Callable[..., tuple[int, Any, Any]]
_INSERT, _MODIFY = p4r.Update.INSERT, p4r.Update.MODIFY

_lock = threading.Lock()
_decoder: Decoder | None = None
_thread: threading.Thread | None = None


def load_kernel() -> Decoder | None:
    """Import the kernel and run it once (loads it from numba's cache, or compiles it:
    seconds on a machine's first run). ``None`` when numba is not usable."""
    global _decoder
    if _decoder is not None:
        return _decoder
    try:
        from softswitch import p4rt_kernel

        p4rt_kernel.decode_write(
            np.frombuffer(b"\x08\x00", dtype=np.uint8),
            np.zeros((1, 3), dtype=np.int64),
            np.zeros((1, 1), dtype=np.int64),
            np.zeros((1, 1, 5), dtype=np.int64),
            np.zeros((1, 1, 2), dtype=np.int64),
            np.zeros((1, 1, 1, 3), dtype=np.int64),
        )
    except Exception as exc:  # no numba, or it failed to compile: the upb path remains
        log.warning("compiled write decoder unavailable (%s): using the Python path", exc)
        return None
    with _lock:
        _decoder = p4rt_kernel.decode_write
    log.info("compiled write decoder loaded")
    return _decoder


def start_loading() -> None:
    """Load the kernel in a daemon thread (once per process)."""
    global _thread
    with _lock:
        if _thread is not None or _decoder is not None:
            return
        _thread = threading.Thread(target=load_kernel, name="p4rt-kernel", daemon=True)
        _thread.start()


def decoder() -> Decoder | None:
    """The kernel once loaded, else ``None``."""
    return _decoder


@dataclass(frozen=True)
class _Recipe:
    """How to build one table's keys and calls from a run's columns."""

    spec: _TableSpec
    key_parts: tuple[tuple[int, bool], ...]  # per position: (column, is a pair)
    calls: tuple[tuple[ActionFn, tuple[int, ...]], ...]  # per action index: fn, param columns
    needs: tuple[list[int], ...]  # columns a run reads: [no action, action 0, action 1, ...]


@dataclass(frozen=True)
class Run:
    """Consecutive updates ``[start, end)`` of one kind, table and action (or not plain)."""

    start: int
    end: int
    plain: bool
    kind: int
    table: int
    action: int


class KernelTables:
    """A pipeline's writable tables as the kernel's arrays, and their recipes."""

    def __init__(self, fast: FastWriter) -> None:
        specs = list(fast.specs.items())
        nt = max(1, len(specs))
        nf = max([1, *(len(s.fields) for _t, s in specs)])
        slots = [
            sum(1 if kind == _K[EXACT] else 2 for _p, kind, _w, _m in s.fields.values())
            for _t, s in specs
        ]
        na = max([1, *(len(s.actions) for _t, s in specs)])
        npar = max([1, *(len(a.param_ids) for _t, s in specs for a in s.actions.values())])
        self.tbl = np.zeros((nt, 3), dtype=np.int64)
        self.tmpl = np.zeros((nt, max([1, *slots])), dtype=np.int64)
        self.fld = np.zeros((nt, nf, 5), dtype=np.int64)
        self.act = np.zeros((nt, na, 2), dtype=np.int64)
        self.par = np.zeros((nt, na, npar, 3), dtype=np.int64)
        self.recipes: list[_Recipe] = []
        for t, ((tid, spec), nslots) in enumerate(zip(specs, slots, strict=True)):
            self.recipes.append(self._table(t, tid, spec, nslots))

    def _table(self, t: int, tid: int, spec: _TableSpec, nslots: int) -> _Recipe:
        by_pos = sorted(
            (pos, fid, kind, width) for fid, (pos, kind, width, _m) in spec.fields.items()
        )
        cols: dict[int, int] = {}
        col = k.VALUES
        parts: list[tuple[int, bool]] = []
        required = 0
        for pos, _fid, kind, width in by_pos:
            cols[pos] = col
            paired = kind != _K[EXACT]
            parts.append((col, paired))
            if kind == _K[RANGE]:
                self.tmpl[t, col - k.VALUES + 1] = (1 << width) - 1
            if not paired:
                required |= 1 << pos
            col += 2 if paired else 1
        writable = all(w <= k.MAX_WIDTH for _p, _f, _k, w in by_pos)
        for i, (fid, (pos, kind, width, _m)) in enumerate(sorted(spec.fields.items())):
            self.fld[t, i] = (fid, kind, width, cols[pos], (1 << pos) if kind == _K[EXACT] else 0)
        calls: list[tuple[ActionFn, tuple[int, ...]]] = []
        j = 0
        for aid, a in sorted(spec.actions.items()):
            if any(w > k.MAX_WIDTH for w in a.widths):
                continue  # not plain here: its entries take the upb path
            self.act[t, j] = (aid, len(a.param_ids))
            for i, (pid, width, pos) in enumerate(
                zip(a.param_ids, a.widths, a.positions, strict=True)
            ):
                self.par[t, j, i] = (pid, width, k.VALUES + nslots + pos)
            by_position = sorted(zip(a.positions, range(len(a.positions)), strict=True))
            calls.append((a.fn, tuple(k.VALUES + nslots + pos for pos, _i in by_position)))
            j += 1
        flags = (k.T_WRITABLE if writable else 0) | (k.T_PRIORITY if spec.needs_priority else 0)
        self.tbl[t] = (tid, flags, required)
        base = [k.TE_START, k.TE_END, k.PRIORITY]
        for c, paired in parts:
            base += [c, c + 1] if paired else [c]
        needs = (base, *([*base, *pcols] for _fn, pcols in calls))
        return _Recipe(spec, tuple(parts), tuple(calls), needs)

    def decode(self, decode: Decoder, data: bytes) -> tuple[Any, Any] | None:
        """(header, rows) of a request, or ``None``: parse it with upb instead."""
        status, hdr, rows = decode(
            np.frombuffer(data, dtype=np.uint8), self.tbl, self.tmpl, self.fld, self.act, self.par
        )
        return None if status else (hdr, rows)

    def runs(self, rows: Any) -> Iterator[Run]:
        """Runs of consecutive updates with the same status, kind, table and action."""
        n = rows.shape[0]
        if not n:
            return
        head = rows[:, k.STATUS : k.ACTION + 1]
        cut = np.flatnonzero((head[1:] != head[:-1]).any(axis=1)) + 1
        starts = [0, *cut.tolist()]
        ends = [*cut.tolist(), n]
        for s, e, (status, kind, table, action) in zip(
            starts, ends, head[starts].tolist(), strict=True
        ):
            yield Run(s, e, status == 0, kind, table, action)

    def columns(
        self, data: bytes, rows: Any, run: Run
    ) -> tuple[list[Any], list[int], list[ActionCall] | None, list[bytes]]:
        """(keys, priorities, calls, stored entries) of a plain run."""
        recipe = self.recipes[run.table]
        need = recipe.needs[run.action + 1]
        cols = dict(zip(need, rows[run.start : run.end, need].T.tolist(), strict=True))
        n = run.end - run.start
        parts = [
            zip(cols[c], cols[c + 1], strict=True) if paired else cols[c]
            for c, paired in recipe.key_parts
        ]
        keys = list(zip(*parts, strict=True)) if parts else [()] * n
        calls: list[ActionCall] | None = None
        if run.action >= 0:
            fn, pcols = recipe.calls[run.action]
            args = list(zip(*(cols[c] for c in pcols), strict=True)) if pcols else repeat((), n)
            calls = list(zip(repeat(fn, n), args, strict=True))
        payloads = list(map(data.__getitem__, map(slice, cols[k.TE_START], cols[k.TE_END])))
        return keys, cols[k.PRIORITY], calls, payloads

    def apply(
        self,
        data: bytes,
        rows: Any,
        parsed: Any,
        other: Callable[[p4r.Update, set[Table]], SwitchError | None],
    ) -> list[SwitchError | None]:
        """Every update of a decoded request in order, under the server's lock: plain
        runs from their columns, the others (``parsed``: upb's updates) through
        ``other``; deferred lookup views are rebuilt before returning."""
        results: list[SwitchError | None] = [None] * len(rows)
        touched: set[Table] = set()
        try:
            for run in self.runs(rows):
                if not run.plain:
                    for i in range(run.start, run.end):
                        results[i] = other(parsed[i], touched)
                    continue
                table = self.recipes[run.table].spec.table
                keys, prios, calls, payloads = self.columns(data, rows, run)
                touched.add(table)
                if run.kind == _INSERT:
                    assert calls is not None
                    for i, err in table.insert_many(keys, prios, calls, payloads).items():
                        results[run.start + i] = err
                    continue
                for i in range(run.end - run.start):
                    try:
                        if run.kind == _MODIFY:
                            assert calls is not None
                            table.modify(keys[i], prios[i], calls[i], payloads[i], defer=True)
                        else:
                            table.delete(keys[i], prios[i], defer=True)
                    except SwitchError as err:
                        results[run.start + i] = err
        finally:
            for table in touched:
                table.flush()
        return results

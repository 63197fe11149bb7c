"""What every benchmark shares: its run as a command, the timing of one call and the
percentile of a sample -- one implementation each, so two benchmarks' numbers mean
the same thing."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TypeVar

from controlplane.daemon import DEFAULT_JSON
from echelon.errors import EchelonError

T = TypeVar("T")


def run_cli(body: Callable[[], int | None], target: str = "soft") -> int:
    """Run a benchmark's ``body`` as a command: its exit status (None is 0); an
    :class:`EchelonError`, or ``--target bmv2`` without the compiled program, is
    ``error: ...`` on stderr and exit status 2 (a bad input is never a traceback)."""
    try:
        if target == "bmv2" and not DEFAULT_JSON.exists():
            raise EchelonError("--target: bmv2 needs p4src/build/echelon.json (make p4)")
        return body() or 0
    except EchelonError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def timed(fn: Callable[[], T]) -> tuple[T, float, float]:
    """``fn()``, its wall time and this process's CPU time (user + sys), in seconds
    (on the shared machine CPU time, not wall time, is the measure of a computation)."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``xs``, nearest rank (a sample value, no interpolation)."""
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]

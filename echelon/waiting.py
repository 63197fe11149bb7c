"""Waiting on a condition with a deadline: the one polling loop of every package.

Why in the core: a bare ``sleep`` is never synchronisation (docs/conventions.md), and
the packages that wait -- the switch launcher and process helpers (``targets``), the
controller daemon, the emulation, the host agent waiting for its go file -- may all
import ``echelon`` but not each other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from echelon.errors import EchelonError

T = TypeVar("T")


class WaitTimeout(EchelonError):
    """A :func:`wait_until` deadline passed; the message names what was awaited."""


def wait_until(
    cond: Callable[[], T | None],
    timeout: float,
    what: str,
    interval: float = 0.02,
    retry_on: tuple[type[Exception], ...] = (),
) -> T:
    """Poll ``cond`` until it returns a truthy value and return that value.

    Exceptions of the types in ``retry_on`` mean "not ready yet" (e.g. a refused
    connection); any other exception propagates at once. At the deadline raise
    :class:`WaitTimeout` naming ``what`` (and the last retried error).
    """
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while True:
        try:
            got = cond()
        except retry_on as exc:
            last = exc
        else:
            if got:
                return got
            last = None
        if time.monotonic() > deadline:
            why = f" (last: {last})" if last is not None else ""
            raise WaitTimeout(f"timed out after {timeout:.1f}s waiting for {what}{why}")
        time.sleep(interval)  # the polling interval of a deadline wait

"""Progress of long simulator work on stderr: a bar on a terminal, periodic lines otherwise.

Why: ``python -m sim.eval --quick`` runs for minutes and a 16-job ``sim run``
for seconds; without a sign of life users kill them. stdout stays for results
(tables, JSON, file names), so everything here goes to stderr, and ``quiet``
silences it (``--quiet`` on the CLIs).

* On a terminal (``stream.isatty()``) one line is redrawn in place (``\\r``), at
  most :data:`REDRAW_S` apart, with a bar, the count, the elapsed time and an
  estimate of the time left; :meth:`Progress.close` ends the line.
* Otherwise (a pipe, a log file, CI) a plain line is written at most every
  ``interval`` seconds, and always for the last step, so logs stay short.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from sim.core.config import levels_label
from sim.points import Done
from sim.sweep import print_progress

REDRAW_S = 0.1
BAR = 24


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60}:{s % 60:02d}"


class Progress:
    """``done`` out of ``total`` steps of ``label``; call :meth:`update`, then :meth:`close`."""

    def __init__(
        self,
        label: str,
        total: float,
        unit: str = "",
        stream: TextIO | None = None,
        quiet: bool = False,
        interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval
        self.clock = clock
        self.start = clock()
        self._last = -float("inf")
        self._drawn = False
        self.done = 0.0

    def text(self, done: float, note: str = "") -> str:
        """The progress line for ``done`` steps (without ``\\r`` or newline)."""
        frac = min(1.0, done / self.total) if self.total > 0 else 1.0
        elapsed = self.clock() - self.start
        left = f", ~{_clock(elapsed / frac - elapsed)} left" if 0 < frac < 1 else ""
        count = f"{done:g}/{self.total:g}{(' ' + self.unit) if self.unit else ''}"
        bar = ""
        if self.tty:
            fill = round(frac * BAR)
            bar = "[" + "#" * fill + "." * (BAR - fill) + "] "
        line = f"{self.label}: {bar}{count} ({frac:.0%}) {_clock(elapsed)}{left}"
        return f"{line}  {note}" if note else line

    def update(self, done: float, note: str = "") -> None:
        self.done = done
        if self.quiet:
            return
        now = self.clock()
        final = done >= self.total
        if self.tty:
            if final or now - self._last >= REDRAW_S:
                self.stream.write("\r\x1b[K" + self.text(done, note))
                self.stream.flush()
                self._last, self._drawn = now, True
        elif final or now - self._last >= self.interval:
            self.stream.write(self.text(done, note) + "\n")
            self.stream.flush()
            self._last = now

    def close(self) -> None:
        if not self.quiet and self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


def sweep_progress(total: int, quiet: bool = False, label: str = "sweep") -> Callable[[Done], None]:
    """What :func:`sim.sweep.run_sweep` calls per finished point: a bar on a terminal;
    otherwise :func:`sim.sweep.print_progress`'s line per point (which names the point
    and where it ran; the Ray tests read them); nothing when ``quiet``."""
    if quiet:
        return lambda _done: None
    bar = Progress(label, total, "points")
    if not bar.tty:
        return print_progress

    def report(done: Done) -> None:
        p = done.point
        lvl = levels_label(p.levels)
        bar.update(done.finished, f"last: {p.mix} {p.policy} {lvl}")
        if done.finished >= done.total:
            bar.close()

    return report


def stage(text: str, quiet: bool = False, stream: TextIO | None = None) -> None:
    """One line naming the step a long command is starting (``[eval 3/7] ...``)."""
    if not quiet:
        out = stream if stream is not None else sys.stderr
        out.write(text + "\n")
        out.flush()

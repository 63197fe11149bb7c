"""Writes in phases: one WriteRequest per run of updates that may share one.

P4Runtime does not order the updates inside one WriteRequest, so a DELETE never shares
a request with an INSERT or MODIFY (the order :func:`controlplane.entries.plan_updates`
chose must hold on the switch). A failed phase reports which steps did apply, so the
caller can undo exactly those.
"""

from __future__ import annotations

from controlplane.entries import Step
from p4client.p4rt import P4RuntimeError, P4RuntimeWriteError, SwitchConnection


class PhaseError(Exception):
    """A phase failed: its error, the steps applied before it and in it, the batch."""

    def __init__(self, error: P4RuntimeError, applied: list[Step], batch: list[Step]) -> None:
        super().__init__(str(error))
        self.error = error
        self.applied = applied
        self.batch = batch


def _phases(steps: list[Step]) -> list[list[Step]]:
    """Split into runs that may share one WriteRequest: a DELETE never shares a
    request with an INSERT/MODIFY, because a request's updates are unordered."""
    out: list[list[Step]] = []
    for s in steps:
        is_del = s.kind == "DELETE"
        if out and (out[-1][0].kind == "DELETE") == is_del:
            out[-1].append(s)
        else:
            out.append([s])
    return out


def write_phases(conn: SwitchConnection, steps: list[Step]) -> None:
    """Write ``steps`` phase by phase (:func:`_phases`); a failed phase raises
    :class:`PhaseError` with the steps that did apply."""
    applied: list[Step] = []
    for batch in _phases(steps):
        try:
            conn.write_entries([(s.kind, s.entry) for s in batch])
        except P4RuntimeWriteError as exc:
            ok = set(exc.succeeded_indices)
            done = [s for i, s in enumerate(batch) if i in ok]
            raise PhaseError(exc, applied + done, batch) from None
        except P4RuntimeError as exc:
            raise PhaseError(exc, applied, batch) from None
        applied += batch

"""What a switch's sync reports, and the error that refuses a change it cannot take.

Kept apart from :mod:`controlplane.switchsync` (the agent that owns the connection) so
that the controller and the API can name a switch's state and the 503 without reaching
into the agent's machinery.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from p4client.p4rt import P4RuntimeError

#: Arbitration events kept for ``status``.
ARBITRATION_LOG = 20


class SwitchUnavailableError(P4RuntimeError):
    """A change cannot be acknowledged because ``switch`` cannot take it now (not
    connected, not in sync, its agent failed): HTTP 503 naming the switch and why."""

    def __init__(self, switch: str, reason: str) -> None:
        super().__init__("UNAVAILABLE", f"switch {switch}: {reason}")
        self.message = reason  # the API's detail: "switches.<name>: <reason>"
        self.field = f"switches.{switch}"
        self.switch = switch
        self.reason = reason


@dataclass
class SyncStatus:
    """Counters and flags ``/status`` reports, every field as it is
    (:func:`controlplane.views.switch_view`); "primary" is read live off the connection."""

    connected: bool = False
    in_sync: bool = False
    pipeline_cookie: int | None = None
    pipeline_pushes: int = 0
    reconciles: int = 0
    updates_written: int = 0
    last_error: str | None = None
    #: the last reconciliation: updates written and seconds spent (read-back + diff + write)
    last_reconcile_updates: int = 0
    last_reconcile_s: float = 0.0
    #: anti-entropy: checks done, times the switch differed from the installed set
    #: (foreign writes, lost entries, writes of unknown outcome), repairs that succeeded
    verifications: int = 0
    #: verifications whose lock-free read overlapped a write and was taken again
    verify_rereads: int = 0
    drift_detected: int = 0
    drift_repairs: int = 0
    last_drift: str | None = None
    #: arbitration: times this controller became primary or stopped being primary,
    #: and the last arbitration updates received
    arbitration_changes: int = 0
    #: times the agent's loop failed with an unexpected error and was restarted
    agent_failures: int = 0
    arbitration: deque[dict[str, Any]] = field(
        default_factory=lambda: deque(maxlen=ARBITRATION_LOG)
    )


def arbitration_refusal(why: str) -> str | None:
    """Why we are not primary, if a stream error is the switch refusing our arbitration
    (P4Runtime: INVALID_ARGUMENT for an election ID in use, PERMISSION_DENIED for a role)."""
    if why.startswith(("INVALID_ARGUMENT", "PERMISSION_DENIED")):
        return f"the switch refused our arbitration: {why}"
    return None

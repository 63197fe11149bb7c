"""One switch as the controller sees it: connection, pipeline, reconciliation, writes.

A :class:`SwitchAgent` owns a background thread that (re)connects with backoff,
becomes primary, makes sure the switch runs our pipeline (comparing the cookie,
pushing it only when missing or different, so a controller restart does not wipe
the tables), then *reconciles*: reads every entry back, and applies the minimal
difference to the desired set. After that, registrations call :meth:`apply`,
which writes only the difference against the cached installed set.

Writes go phase by phase (see :func:`controlplane.entries.plan_updates`), one
WriteRequest per phase, because P4Runtime does not order the updates inside one
request. If a phase fails, every step that did apply is undone in reverse, so a
refused registration leaves the switch exactly as it was.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from controlplane.entries import Step, TableFullError, apply_steps, count_by_table, plan_updates
from controlplane.p4info import P4Info, TableEntry
from controlplane.p4rt import (
    P4RuntimeConnectionError,
    P4RuntimeError,
    P4RuntimeWriteError,
    SwitchConnection,
)
from echelon.topology import Switch

log = logging.getLogger(__name__)

BACKOFF_MIN_S = 0.05
BACKOFF_MAX_S = 2.0


@dataclass
class AgentStatus:
    """Counters and flags ``/status`` reports; "primary" is read live off the connection."""

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


class SwitchAgent:
    """Keeps one switch in sync with the desired entries the controller computes.

    ``desired`` is a callback into the controller (called with the controller
    lock held by the caller's thread, see :meth:`_sync`); ``lock`` is that lock.
    """

    def __init__(
        self,
        switch: Switch,
        p4info: P4Info,
        device_config: bytes,
        election_id: tuple[int, int],
        desired: Callable[[str], set[TableEntry]],
        lock: threading.RLock,
        role: str = "",
        connect_timeout: float = 3.0,
    ) -> None:
        self.switch = switch
        self.p4info = p4info
        self.device_config = device_config
        self.cookie = p4info.cookie(device_config)
        self.election_id = election_id
        self.role = role
        self.connect_timeout = connect_timeout
        self._desired = desired
        self._lock = lock
        self.conn: SwitchConnection | None = None
        self.installed: set[TableEntry] = set()
        self.status = AgentStatus()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.synced = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"agent-{switch.name}", daemon=True)

    @property
    def name(self) -> str:
        return self.switch.name

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():  # never started when the daemon failed to listen
            self._thread.join(timeout=5.0)
        if self.conn is not None:
            self.conn.close()

    def wait_in_sync(self, timeout: float) -> bool:
        with self.synced:
            return self.synced.wait_for(lambda: self.status.in_sync, timeout)

    # ------------------------------------------------------------ background loop

    def _run(self) -> None:
        backoff = BACKOFF_MIN_S
        while not self._stop.is_set():
            conn = self.conn
            if conn is not None and conn.is_alive and self.status.in_sync:
                if conn.is_primary:
                    self._wake.wait(1.0)
                    self._wake.clear()
                    continue
                # preempted by a controller with a higher election ID: stop writing,
                # and reconcile from scratch once this one is primary again
                self._mark_down(f"{self.name}: another controller is primary")
            try:
                self._connect_and_sync()
                backoff = BACKOFF_MIN_S
            except (P4RuntimeError, OSError) as exc:
                self._mark_down(str(exc))
                log.info("%s: %s; retrying in %.2f s", self.name, exc, backoff)
                self._wake.wait(backoff)  # backoff between attempts, not synchronisation
                self._wake.clear()
                backoff = min(BACKOFF_MAX_S, backoff * 2)

    def _on_break(self, conn: SwitchConnection) -> None:
        if conn is self.conn:
            self._mark_down(conn.stream_error or "stream closed")
            self._wake.set()

    def _mark_down(self, why: str) -> None:
        with self.synced:
            self.status.connected = self.conn is not None and self.conn.is_alive
            self.status.in_sync = False
            self.status.last_error = why

    def _connect_and_sync(self) -> None:
        if self.conn is None or not self.conn.is_alive:
            if self.conn is not None:
                self.conn.close()
            conn = SwitchConnection(
                self.switch.grpc, self.switch.device_id, self.election_id, self.role
            )
            conn.on_stream_break(self._on_break)
            conn.on_arbitration(lambda _: self._wake.set())
            self.conn = conn
            conn.connect(self.connect_timeout)
            self.status.connected = True
        conn = self.conn
        if not conn.is_primary:
            raise P4RuntimeConnectionError(
                "PERMISSION_DENIED", f"{self.name}: another controller is primary"
            )
        if conn.get_pipeline_cookie() != self.cookie:
            conn.set_pipeline(self.p4info, self.device_config)
            self.status.pipeline_pushes += 1
            log.info("%s: pipeline pushed (cookie %#x)", self.name, self.cookie)
        conn.p4info = self.p4info
        self.status.pipeline_cookie = self.cookie
        with self._lock:
            t0 = time.perf_counter()
            current = set(conn.read_table_entries())
            desired = self._desired(self.name)
            steps = plan_updates(current, desired, self._sizes())
            self._write(steps, current)
            self.installed = desired
            self.status.reconciles += 1
            self.status.last_reconcile_updates = len(steps)
            self.status.last_reconcile_s = time.perf_counter() - t0
        with self.synced:
            self.status.in_sync = True
            self.status.last_error = None
            self.synced.notify_all()

    # ------------------------------------------------------------ writes

    def _sizes(self) -> dict[str, int]:
        return {t.name: t.size for t in self.p4info.tables()}

    def apply(self, desired: set[TableEntry]) -> list[Step] | None:
        """Bring the switch from the installed set to ``desired`` (caller holds the lock).

        Returns the applied steps, or ``None`` when the switch is not in sync (it
        will be reconciled on reconnect). Raises :class:`TableFullError` if the
        switch refused an insert for lack of space; the switch is then unchanged.
        """
        if not self.status.in_sync or self.conn is None or not self.conn.is_primary:
            return None
        steps = plan_updates(self.installed, desired, self._sizes())
        try:
            self._write(steps, self.installed)
        except P4RuntimeError as exc:
            if not isinstance(exc, P4RuntimeConnectionError) and exc.code != "PERMISSION_DENIED":
                raise
            # unreachable or preempted: the change stands, this switch is reconciled later
            self._mark_down(str(exc))
            self._wake.set()
            return None
        self.installed = desired
        return steps

    def undo(self, steps: list[Step]) -> None:
        """Revert steps :meth:`apply` made (another switch refused the same change)."""
        if self.conn is None or not self.status.in_sync:
            return
        inverse = [s.inverse() for s in reversed(steps)]
        try:
            _write_phases(self.conn, inverse)
            self.installed = apply_steps(self.installed, inverse)
        except P4RuntimeError as exc:
            self._mark_down(f"undo failed: {exc}")
            self._wake.set()

    def _write(self, steps: list[Step], before: set[TableEntry]) -> None:
        assert self.conn is not None
        try:
            _write_phases(self.conn, steps)
            self.status.updates_written += len(steps)
        except _PhaseError as pe:
            err = pe.error
            if isinstance(err, P4RuntimeConnectionError):
                raise err from None
            undo = [s.inverse() for s in reversed(pe.applied)]
            try:
                _write_phases(self.conn, undo)
            except P4RuntimeError as exc:
                self._mark_down(f"rollback failed: {exc}")
                self._wake.set()
            if isinstance(err, P4RuntimeWriteError) and err.resource_exhausted:
                bad = [
                    pe.batch[s.index].entry.table
                    for s in err.failed
                    if s.code == "RESOURCE_EXHAUSTED" and s.index < len(pe.batch)
                ]
                table = bad[0] if bad else pe.batch[0].entry.table
                needed = count_by_table(apply_steps(before, steps)).get(table, 0)
                raise TableFullError(
                    table, needed, self.p4info.table(table).size, f"switch {self.name} is full"
                ) from None
            raise err from None

    def entry_counts(self) -> dict[str, int]:
        return count_by_table(self.installed)


class _PhaseError(Exception):
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


def _write_phases(conn: SwitchConnection, steps: list[Step]) -> None:
    applied: list[Step] = []
    for batch in _phases(steps):
        try:
            conn.write_entries([(s.kind, s.entry) for s in batch])
        except P4RuntimeWriteError as exc:
            ok = set(exc.succeeded_indices)
            done = [s for i, s in enumerate(batch) if i in ok]
            raise _PhaseError(exc, applied + done, batch) from None
        except P4RuntimeError as exc:
            raise _PhaseError(exc, applied, batch) from None
        applied += batch

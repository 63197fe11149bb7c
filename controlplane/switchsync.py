"""The controller's per-switch sync: connection, pipeline, reconciliation, writes.

A :class:`SwitchSync` owns a background thread that (re)connects with backoff,
becomes primary, makes sure the switch runs our pipeline (comparing the cookie,
pushing it only when missing or different, so a controller restart does not wipe
the tables), then *reconciles*: reads every entry back, and applies the minimal
difference to the desired set. After that, registrations call :meth:`apply`,
which writes only the difference against the cached installed set.

The agent never trusts that cache further than it has checked: a write
whose outcome is not fully known (per-update statuses missing) or that fails in a
way that implies the switch is not what we think (NOT_FOUND, ALREADY_EXISTS) is
followed by a read-back and a reconciliation; every ``verify_interval`` seconds the
switch is read and compared with the installed set (cheaply: a fingerprint of the
raw entries, decoded and diffed only when it changed), so a foreign write, a second
controller or a lost entry is noticed, logged, counted in ``status`` and repaired.

Writes go phase by phase (:mod:`controlplane.phased_writes`); if a phase fails, every
step that did apply is undone in reverse, so a refused change leaves the switch as it was.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping

from finsy.proto import p4r

from controlplane.entries import (
    Step,
    TableFullError,
    apply_steps,
    count_by_table,
    plan_delta,
    plan_updates,
)
from controlplane.phased_writes import PhaseError, write_phases
from controlplane.syncstatus import SwitchUnavailableError, SyncStatus, arbitration_refusal
from echelon.errors import EchelonError
from echelon.topology import Switch
from p4client.codec import default_entry_reads, entry_from_proto
from p4client.p4info import P4Info, TableEntry
from p4client.p4rt import (
    P4RuntimeConnectionError,
    P4RuntimeError,
    P4RuntimeWriteError,
    SwitchConnection,
)
from p4client.tls import TlsFiles

log = logging.getLogger(__name__)

BACKOFF_MIN_S = 0.05
BACKOFF_MAX_S = 2.0
#: Seconds a (re)connection may take to reach the switch and be arbitrated.
CONNECT_TIMEOUT_S = 3.0
#: Seconds between two verifications of the switch against the installed set.
VERIFY_INTERVAL_S = 5.0
#: A verification that a change overlapped is retried this many times, this many
#: seconds apart, outside the lock before it is done under the lock.
STALE_RETRIES = 3
STALE_RETRY_S = 0.1
#: Per-update codes that mean the switch is not in the state the controller assumed.
DRIFT_CODES = frozenset({"NOT_FOUND", "ALREADY_EXISTS"})


class _Unsettled(Exception):
    """A write's outcome is not fully known, or the switch is not what the sync
    believed: the caller must read the switch back before deciding anything."""


class SwitchSync:
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
        defaults: frozenset[TableEntry] = frozenset(),
        tls: TlsFiles | None = None,
    ) -> None:
        self.switch = switch
        self.tls = tls
        self.p4info = p4info
        self.device_config = device_config
        self.cookie = p4info.cookie(device_config)
        self.election_id = election_id
        self.role = role
        self.verify_interval = VERIFY_INTERVAL_S
        self._desired = desired
        self._lock = lock
        #: the default entries the controller owns: read back with the entries (a
        #: wildcard Read does not return defaults), compared and repaired alike; kept
        #: out of ``installed`` (the controller's desired set, which changes diff)
        self.defaults = defaults
        self._reads = [
            p4r.Entity(table_entry=p4r.TableEntry()),
            *default_entry_reads(p4info, sorted({e.table for e in defaults})),
        ]
        self.conn: SwitchConnection | None = None
        self.installed: set[TableEntry] = set()
        self.status = SyncStatus()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._verify_now = threading.Event()
        self._next_verify = 0.0
        #: fingerprint of the raw entries last read and found equal to ``_fp_of``
        self._fp: bytes | None = None
        self._fp_of: set[TableEntry] | None = None
        self._decoded: dict[bytes, TableEntry] = {}  # last verification's, by entry bytes
        self._write_gen = 0  # seqlock: odd while a write is in flight (see verify)
        self._stale_skips = 0
        self._was_primary: bool | None = None
        #: why this controller may not write the switch although it is up (a backup, or
        #: the switch refused our arbitration, e.g. our election ID is taken); changes
        #: are then refused (HTTP 503) rather than accepted and never installed
        self.not_primary: str | None = None
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

    def resync(self, why: str) -> None:
        """Forget what was believed installed: read back and reconcile to the desired set."""
        self._mark_down(why)
        self._wake.set()

    def request_verify(self) -> None:
        """Verify the switch against the installed set as soon as possible."""
        self._verify_now.set()
        self._wake.set()

    # ------------------------------------------------------------ background loop

    def unavailable(self) -> str | None:
        """Why a change cannot be written to this switch now (``None``: it can). A
        change is acknowledged only when every switch took it, so each of these makes
        the API answer 503 instead of a 201 that nothing installs."""
        if not self._thread.is_alive():
            return f"agent thread not running (last error: {self.status.last_error})"
        conn = self.conn
        if conn is None or not conn.is_alive:
            return f"not connected ({self.status.last_error or 'connecting'})"
        if not conn.is_primary:
            return self.not_primary or "this controller is not primary"
        if not self.status.in_sync:
            return f"not in sync yet ({self.status.last_error or 'reconciling'})"
        return None

    def _run(self) -> None:
        """The agent loop, restarted (after a backoff) when it fails unexpectedly: an
        agent that died silently left the API acknowledging changes nobody wrote."""
        backoff = BACKOFF_MIN_S
        while not self._stop.is_set():
            try:
                self._loop()
                return
            except Exception as exc:
                self.status.agent_failures += 1
                log.exception("%s: agent failed; restarting in %.2f s", self.name, backoff)
                self._mark_down(f"agent failed: {type(exc).__name__}: {exc}")
                self._wake.wait(backoff)  # backoff between restarts, not synchronisation
                self._wake.clear()
                backoff = min(BACKOFF_MAX_S, backoff * 2)

    def _loop(self) -> None:
        backoff = BACKOFF_MIN_S
        while not self._stop.is_set():
            conn = self.conn
            if conn is not None and conn.is_alive and self.status.in_sync:
                if conn.is_primary:
                    wait = max(0.0, min(1.0, self._next_verify - time.monotonic()))
                    self._wake.wait(wait)
                    self._wake.clear()
                    if self._verify_now.is_set() or time.monotonic() >= self._next_verify:
                        self._verify_now.clear()
                        self._next_verify = time.monotonic() + self.verify_interval
                        try:
                            self.verify("periodic check")
                        except (EchelonError, OSError) as exc:
                            self._mark_down(f"verification failed: {exc}")
                    continue
                # preempted by a controller with a higher election ID: stop writing,
                # and reconcile from scratch once this one is primary again
                self._mark_down(f"{self.name}: another controller is primary")
            try:
                self._connect_and_sync()
                backoff = BACKOFF_MIN_S
            except (EchelonError, OSError) as exc:
                self._mark_down(str(exc))
                log.info("%s: %s; retrying in %.2f s", self.name, exc, backoff)
                self._wake.wait(backoff)  # backoff between attempts, not synchronisation
                self._wake.clear()
                backoff = min(BACKOFF_MAX_S, backoff * 2)

    def _on_break(self, conn: SwitchConnection) -> None:
        if conn is self.conn:
            # a stream the switch ended because it refused our arbitration stays "not
            # primary" (this callback can run after connect() recorded the refusal);
            # any other break means the switch went away: down, not someone else's
            self.not_primary = arbitration_refusal(conn.stream_error or "")
            self._mark_down(conn.stream_error or "stream closed")
            self._wake.set()

    def _on_arbitration(self, conn: SwitchConnection) -> None:
        """Log and record every arbitration update; losing primary stops the claim at once."""
        if conn is not self.conn:
            return
        now = conn.is_primary
        event = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "primary": now,
            "code": conn.arbitration_code,
            "primary_election_id": list(conn.primary_election_id or ()) or None,
        }
        with self.synced:
            self.status.arbitration.append(event)
            if self._was_primary is not None and self._was_primary != now:
                self.status.arbitration_changes += 1
                log.warning(
                    "%s: arbitration: this controller is %s (primary election id %s)",
                    self.name,
                    "primary again" if now else "no longer primary",
                    conn.primary_election_id,
                )
            self._was_primary = now
        self.not_primary = (
            None
            if now
            else f"another controller is primary (election id {conn.primary_election_id})"
        )
        if not now:
            self._mark_down(
                f"{self.name}: another controller is primary "
                f"(election id {conn.primary_election_id}, {conn.arbitration_code})"
            )
        self._wake.set()

    def _mark_down(self, why: str) -> None:
        with self.synced:
            self.status.connected = self.conn is not None and self.conn.is_alive
            self.status.in_sync = False
            self.status.last_error = why
            self._fp = None

    def _connect_and_sync(self) -> None:
        if self.conn is None or not self.conn.is_alive:
            if self.conn is not None:
                self.conn.close()
            conn = SwitchConnection(
                self.switch.grpc, self.switch.device_id, self.election_id, self.role, tls=self.tls
            )
            conn.on_stream_break(self._on_break)
            conn.on_arbitration(self._on_arbitration)
            self.conn = conn
            self._was_primary = None
            try:
                conn.connect(CONNECT_TIMEOUT_S)
            except P4RuntimeConnectionError:
                self.not_primary = arbitration_refusal(conn.stream_error or "")
                raise
            self.status.connected = True
        conn = self.conn
        if not conn.is_primary:
            raise P4RuntimeConnectionError(
                "PERMISSION_DENIED", f"{self.name}: another controller is primary"
            )
        pushed = conn.get_pipeline_cookie() != self.cookie
        if pushed:
            conn.set_pipeline(self.p4info, self.device_config)
            self.status.pipeline_pushes += 1
            log.info("%s: pipeline pushed (cookie %#x)", self.name, self.cookie)
        conn.p4info = self.p4info
        self.status.pipeline_cookie = self.cookie
        with self._lock:
            t0 = time.perf_counter()
            current = self._read_current(conn)
            desired = self._desired(self.name)
            steps = plan_updates(current, desired | self.defaults, self._sizes())
            if steps and not pushed:
                # the switch already ran our program and differs (a higher-id primary's
                # changes, writes while we were away or down): a repair like any other
                self._record_drift(steps, "reconcile on (re)connect")
            try:
                self._write(steps, current)
            except _Unsettled as exc:
                raise P4RuntimeError("ABORTED", f"{self.name}: reconcile: {exc}") from None
            self.installed = desired
            self.status.reconciles += 1
            self.status.last_reconcile_updates = len(steps)
            self.status.last_reconcile_s = time.perf_counter() - t0
        with self.synced:
            self.status.in_sync = True
            self.status.last_error = None
            self._next_verify = time.monotonic() + self.verify_interval
            self.synced.notify_all()

    # ------------------------------------------------------------ anti-entropy

    def verify(self, reason: str) -> bool:
        """Read the switch and compare it with the installed set; repair any difference.

        Cheap when nothing changed: the raw entries' fingerprint is compared with the
        one of the last read that matched; only a new one is decoded and compared. All
        that runs outside the controller lock (5,000 entries take tens of ms) against a
        snapshot of the installed set (replaced, never mutated); a write that overlapped
        (seqlock) or a changed set makes it stale and it is redone under the lock, as
        is any repair. Returns whether the switch differed."""
        conn = self.conn
        gen = self._write_gen
        snapshot = self.installed
        done: tuple[bytes, set[TableEntry] | None] | None = None
        if conn is not None and self.status.in_sync and conn.is_primary and not gen % 2:
            try:
                done = self._check(conn, snapshot)
            except P4RuntimeError:
                done = None  # read again under the lock: the error surfaces there
        stale = done is None or self._write_gen != gen or self.installed is not snapshot
        if stale and self._stale_skips < STALE_RETRIES and self.status.in_sync:
            # a change overlapped: try again shortly rather than read thousands of
            # entries while holding every registration up
            self.status.verify_rereads += 1
            self._stale_skips += 1
            self._next_verify = time.monotonic() + STALE_RETRY_S
            return False
        self._stale_skips = 0
        with self._lock:
            if self.conn is not conn or self._write_gen != gen or self.installed is not snapshot:
                done = None
            conn = self.conn
            if conn is None or not self.status.in_sync or not conn.is_primary:
                return False
            if done is None:
                done = self._check(conn, self.installed)
            fp, current = done
            self.status.verifications += 1
            if current is None:  # same fingerprint as the last match, or equal sets
                self._fp, self._fp_of = fp, self.installed
                return False
            differed = self._repair(current, self.installed, reason)
            if not differed:
                self._fp, self._fp_of = fp, self.installed
            return differed

    def _check(
        self, conn: SwitchConnection, expected: set[TableEntry]
    ) -> tuple[bytes, set[TableEntry] | None]:
        """(fingerprint, ``None`` if the switch holds ``expected``, else its entries);
        an entry's decoded form is kept by its bytes until the next check."""
        raw = conn.read_entities(*self._reads)
        parts = [e.SerializeToString(deterministic=True) for e in raw]
        fp = _digest(parts)
        if fp == self._fp and self._fp_of is expected:
            return fp, None
        cache = self._decoded
        fresh: dict[bytes, TableEntry] = {}
        for part, e in zip(parts, raw, strict=True):
            entry = cache.get(part)
            if entry is None:
                entry = entry_from_proto(self.p4info, e.table_entry)
            fresh[part] = entry
        self._decoded = fresh
        current = set(fresh.values())
        same = current == (expected | self.defaults if self.defaults else expected)
        return fp, None if same and len(fresh) == len(raw) else current

    def _repair(
        self, current: set[TableEntry], target: set[TableEntry], reason: str, count: bool = True
    ) -> bool:
        """Write the difference ``current`` -> ``target``, logged and counted as drift
        (always when not ``count``: the caller already saw it); return whether it differed.
        The owned default entries are part of every target."""
        target = target | self.defaults
        if current == target and count:
            return False
        steps = plan_updates(current, target, self._sizes())
        self._record_drift(steps, reason)
        self._fp = None
        try:
            self._write(steps, current)
        except _Unsettled as exc:
            raise P4RuntimeError("ABORTED", f"{self.name}: repair: {exc}") from None
        self.status.drift_repairs += 1
        return True

    def _read_current(self, conn: SwitchConnection) -> set[TableEntry]:
        """Every entry and every owned default entry on the switch, decoded."""
        return {
            entry_from_proto(self.p4info, e.table_entry) for e in conn.read_entities(*self._reads)
        }

    def _record_drift(self, steps: list[Step], reason: str) -> None:
        """Log and count a difference about to be repaired by ``steps`` (default entries
        included): its inserts are the missing entries, its deletes the strays, its
        modifies the changed ones (:func:`plan_updates` diffed them by key)."""
        kinds = Counter(st.kind for st in steps)
        missing, stray, changed = kinds["INSERT"], kinds["DELETE"], kinds["MODIFY"]
        what = f"{reason}: {missing} missing, {stray} stray, {changed} changed"
        log.warning(
            "%s: switch differs from the controller's state (%s); repairing", self.name, what
        )
        self.status.drift_detected += 1
        self.status.last_drift = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {what}"

    # ------------------------------------------------------------ writes

    def _sizes(self) -> dict[str, int]:
        return {t.name: t.size for t in self.p4info.tables()}

    def apply(
        self,
        desired: set[TableEntry],
        gone: set[TableEntry],
        new: set[TableEntry],
        counts: Mapping[str, int],
    ) -> list[Step]:
        """Bring the switch from the installed set to ``desired``, which the controller
        built as ``(installed - gone) | new`` (caller holds the lock): only ``gone`` and
        ``new`` are diffed (:func:`plan_delta`), never the whole set. ``counts``: the
        installed set's entries per table, which the controller keeps for the set it
        built the delta on (``count_by_table``).

        Returns the applied steps. Raises :class:`SwitchUnavailableError` when the
        switch is not in sync, or became unreachable or preempted during the write (it
        is reconciled on reconnect; the caller undoes the other switches). Raises
        :class:`TableFullError` if the switch refused an insert for lack of space;
        the switch is then unchanged.
        A write whose outcome is unknown, or refused with NOT_FOUND/ALREADY_EXISTS,
        is followed by a read-back and a repair towards ``desired``.

        Diffing only the delta (tested equal to the full diff) is exact because an
        in-sync switch's installed set is the set the controller built the delta on:
        both start from the same reconciliation and take the same changes (an undone
        change is undone on both).
        """
        conn = self.conn
        why = self.unavailable()
        if why is not None or conn is None:
            raise SwitchUnavailableError(self.name, why or "not connected")
        before = self.installed
        steps = plan_delta(before, gone, new, counts, self._sizes())
        try:
            try:
                self._write(steps, before)
            except _Unsettled as exc:
                self._converge(conn, desired, before, f"write: {exc}")
        except P4RuntimeError as exc:
            if not isinstance(exc, P4RuntimeConnectionError) and exc.code != "PERMISSION_DENIED":
                raise
            # unreachable or preempted: not acknowledged; reconciled when it is back
            self._mark_down(str(exc))
            self._wake.set()
            raise SwitchUnavailableError(self.name, str(exc)) from None
        self.installed = desired
        return steps

    def _converge(
        self, conn: SwitchConnection, desired: set[TableEntry], before: set[TableEntry], why: str
    ) -> None:
        """Read back, write the difference to ``desired``; if the switch refuses that,
        bring it back to ``before`` (read back again) and re-raise."""
        try:
            # counted even when the read-back already matches: the error was the drift
            self._repair(self._read_current(conn), desired, why, count=False)
        except (TableFullError, P4RuntimeWriteError):
            try:
                self._repair(self._read_current(conn), before, "restore after refusal")
            except EchelonError as exc:
                self._mark_down(f"restore failed: {exc}")
                self._wake.set()
            raise
        except P4RuntimeError as exc:
            self._mark_down(str(exc))
            self._wake.set()
            raise

    def undo(self, steps: list[Step]) -> None:
        """Revert steps :meth:`apply` made (another switch refused the same change)."""
        if self.conn is None or not self.status.in_sync:
            return
        inverse = [s.inverse() for s in reversed(steps)]
        try:
            self._write_phases(inverse)
            self.installed = apply_steps(self.installed, inverse)
        except (P4RuntimeError, PhaseError) as exc:
            self._mark_down(f"undo failed: {exc}")
            self._wake.set()

    def _write_phases(self, steps: list[Step]) -> None:
        """:func:`write_phases` inside the write seqlock (see verify)."""
        assert self.conn is not None
        self._write_gen += 1
        try:
            write_phases(self.conn, steps)
        finally:
            self._write_gen += 1

    def _write(self, steps: list[Step], before: set[TableEntry]) -> None:
        """Write ``steps``; on a known refusal undo what applied and raise it; raise
        :class:`_Unsettled` when the switch's state is not known any more."""
        assert self.conn is not None
        self._fp = None
        try:
            self._write_phases(steps)
            self.status.updates_written += len(steps)
        except PhaseError as pe:
            err = pe.error
            if isinstance(err, P4RuntimeConnectionError):
                raise err from None
            if isinstance(err, P4RuntimeWriteError):
                if not err.outcome_known:
                    raise _Unsettled(f"outcome unknown ({err.code}: {err.message})") from None
                drift = [s for s in err.failed if s.code in DRIFT_CODES]
                if drift:
                    raise _Unsettled(f"switch said {drift[0].code}: {drift[0].message}") from None
            undo = [s.inverse() for s in reversed(pe.applied)]
            try:
                self._write_phases(undo)
            except (PhaseError, P4RuntimeError) as exc:
                raise _Unsettled(f"rollback failed: {exc}") from None
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

    @property
    def alive(self) -> bool:
        """Whether the agent's thread runs (a dead one cannot sync)."""
        return self._thread.is_alive()


def _digest(parts: list[bytes]) -> bytes:
    """Order-independent digest of raw entries (no decoding: the cheap comparison)."""
    h = hashlib.sha256()
    for part in sorted(parts):
        h.update(len(part).to_bytes(4, "big"))
        h.update(part)
    return h.digest()

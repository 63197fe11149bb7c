"""Durable registrations: jobs, their echelon IDs and class slots, and settings.

One SQLite file in WAL mode. With ``sync="normal"`` (the default) a commit is
written to the WAL file before :meth:`Registry.commit` returns, so a
registration the API acknowledged survives ``kill -9`` of the controller (the
soak test's fault); the WAL is fsync'd at checkpoints, so an OS crash or power
loss may lose the last commits. ``sync="full"`` fsyncs the WAL on every commit
(survives power loss; measured 1–5 ms more per registration, docs/controller.md).
The controller holds its own lock around a whole registration; the registry's
transaction (``begin`` ... ``commit``/``rollback``) lets it write the switches
*inside* the transaction and roll the registration back if the switches refuse
it, so nothing is half-applied.

IDs are allocated lowest-free-first, so they are reused after a removal and a
restart recomputes exactly the same entries from the file.

A file that cannot be opened, fails ``PRAGMA quick_check`` or has another schema
is refused at start with a :class:`RegistryError` naming ``registry`` (the daemon
prints ``error: registry: ...`` and exits 2). While running, :meth:`check_integrity`
(every ``check_interval`` seconds once :meth:`start_checks` ran) re-checks the file
through a fresh connection; after a failure every change is refused (HTTP 503)
instead of writing into a damaged file. A database locked by another process is
a :class:`RegistryUnavailableError` (HTTP 503), not a 500.

The open file's identity (device, inode) is recorded at start and compared with the
path before every transaction and every commit: a registry deleted or replaced
under a running daemon used to keep answering 201 into an unlinked file, and a
restart then found none of those jobs. Now every change is refused (HTTP 503) and
``/status`` shows ``integrity_ok: false`` with the reason.

A file that holds tables of another program (no ``jobs``/``groups``/``settings``
but others) is refused rather than having the registry's tables added to it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from echelon.constants import MAX_ECHELON_ID
from echelon.errors import SpecError

log = logging.getLogger(__name__)

#: The columns each table must have (a file with another schema is refused).
_COLUMNS = {
    "jobs": ["job_id", "seq", "spec"],
    "groups": ["job_id", "grp", "echelon_id", "class_id"],
    "settings": ["key", "value"],
}
#: ``PRAGMA synchronous`` choices (see the module docstring).
SYNC_MODES = ("normal", "full")
#: Seconds between integrity checks of a running daemon's registry.
CHECK_INTERVAL_S = 60.0
#: Seconds SQLite waits for a lock held by another process before giving up.
BUSY_TIMEOUT_S = 2.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id  TEXT PRIMARY KEY,
    seq     INTEGER NOT NULL,
    spec    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS groups (
    job_id     TEXT NOT NULL REFERENCES jobs(job_id) ON DELETE CASCADE,
    grp        TEXT NOT NULL,
    echelon_id INTEGER NOT NULL UNIQUE,
    class_id   INTEGER NOT NULL UNIQUE,
    PRIMARY KEY (job_id, grp)
);
CREATE TABLE IF NOT EXISTS settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""


class RegistryError(SpecError):
    """Base of registry errors: a :class:`~echelon.errors.SpecError`, so ``field`` names
    what was wrong and ``message`` why, as everywhere (HTTP 400 unless a subclass says)."""


class DuplicateJobError(RegistryError):
    """A job with this ID is already registered."""


class UnknownJobError(RegistryError):
    """No job with this ID is registered."""


class IdsExhaustedError(RegistryError):
    """No free echelon ID or class slot is left."""


class RegistryUnavailableError(RegistryError):
    """The registry cannot be written now: locked by another process, or it failed
    its integrity check (HTTP 503)."""


@dataclass(frozen=True)
class GroupIds:
    group: str
    echelon_id: int
    class_id: int


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    seq: int
    spec: dict[str, Any]
    groups: tuple[GroupIds, ...]


class Registry:
    """The controller's persistent state. Thread-safe; one writer transaction at a time."""

    def __init__(self, path: str | Path, class_slots: int = 1024, sync: str = "normal") -> None:
        if sync not in SYNC_MODES:
            raise RegistryError(
                "registry_sync", f"unknown mode {sync!r} (one of {list(SYNC_MODES)})"
            )
        self.path = str(path)
        self.class_slots = class_slots
        self._lock = threading.RLock()
        #: the last integrity check's problem (``None``: passed or not run yet)
        self.integrity_error: str | None = None
        self.integrity_checks = 0
        self._stop = threading.Event()
        self._checker: threading.Thread | None = None
        #: IDs in use per column, mirrored from the file (``None``: read it again; a
        #: registration must not scan every row to find the lowest free ID)
        self._used: dict[str, set[int]] | None = None
        self._hint: dict[str, int] = {}  # per column: every ID below it is used
        self._data_version = -1
        try:
            self._db = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_S
            )
        except sqlite3.Error as exc:
            raise RegistryError("registry", f"{self.path}: cannot open: {exc}") from None
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={sync.upper()}")
            self._db.execute("PRAGMA foreign_keys=ON")
            problem = _quick_check(self._db)
            if problem:
                raise RegistryError("registry", f"{self.path}: fails PRAGMA quick_check: {problem}")
            self._check_foreign()
            self._db.executescript(_SCHEMA)
            self._check_schema()
            self._ident = _file_id(self.path)
        except sqlite3.Error as exc:
            self._db.close()
            raise RegistryError("registry", f"{self.path}: cannot use: {exc}") from None
        except RegistryError:
            self._db.close()
            raise

    def _check_foreign(self) -> None:
        """Refuse a file that holds another program's tables (``--db`` pointing at the
        wrong SQLite file): creating the registry's tables in it would alter it."""
        rows = self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        names = {r[0] for r in rows}
        foreign = sorted(n for n in names - set(_COLUMNS) if not n.startswith("sqlite_"))
        if foreign:
            raise RegistryError(
                "registry",
                f"{self.path}: not an echelon registry (it holds other tables: "
                f"{', '.join(foreign[:5])}); refusing to add the registry's tables to it",
            )

    def file_problem(self) -> str | None:
        """Why the path no longer names the file this registry has open (deleted or
        replaced), or ``None``."""
        try:
            now = _file_id(self.path)
        except OSError as exc:
            return f"{self.path} disappeared while the daemon runs ({exc.strerror})"
        if now != self._ident:
            return f"{self.path} was replaced by another file while the daemon runs"
        return None

    def _moved(self) -> str | None:
        """:meth:`file_problem`, recorded as the integrity error and logged once."""
        problem = self.file_problem()
        if problem is not None:
            if problem != self.integrity_error:
                log.error("registry: %s; changes refused until a restart", problem)
            self.integrity_error = problem
        return problem

    def _check_file(self) -> None:
        problem = self._moved()
        if problem is not None:
            raise RegistryUnavailableError("registry", f"changes refused: {problem}")

    def _check_schema(self) -> None:
        for table, want in _COLUMNS.items():
            got = [r[1] for r in self._db.execute(f"PRAGMA table_info({table})")]
            if got != want:
                raise RegistryError(
                    "registry",
                    f"{self.path}: not an echelon registry (table {table} has columns "
                    f"{got}, expected {want})",
                )

    def close(self) -> None:
        self._stop.set()
        if self._checker is not None and self._checker is not threading.current_thread():
            self._checker.join(timeout=5.0)
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------ integrity

    def check_integrity(self) -> bool:
        """``PRAGMA quick_check`` through a fresh read-only connection (this one's page
        cache could hide damage done to the file); records and logs the result. A
        deleted or replaced file fails it too (:meth:`file_problem`)."""
        if self._moved() is not None:
            self.integrity_checks += 1
            return False
        try:
            ro = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
            try:
                problem = _quick_check(ro)
            finally:
                ro.close()
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                return self.integrity_error is None  # try again next time
            problem = str(exc)
        except sqlite3.Error as exc:
            problem = str(exc)
        self.integrity_checks += 1
        if problem and problem != self.integrity_error:
            log.error("registry %s fails its integrity check: %s", self.path, problem)
        self.integrity_error = problem
        return problem is None

    def start_checks(self, interval: float) -> None:
        """Run :meth:`check_integrity` every ``interval`` seconds until :meth:`close`."""

        def loop() -> None:
            while not self._stop.wait(interval):  # the period, not synchronisation
                self.check_integrity()

        self._checker = threading.Thread(target=loop, name="registry-check", daemon=True)
        self._checker.start()

    # ------------------------------------------------------------ transactions

    def begin(self) -> None:
        """Start a write transaction (``BEGIN IMMEDIATE``); pair with commit/rollback.

        Raises :class:`RegistryUnavailableError` when the file failed its last
        integrity check or another process holds the lock."""
        self._lock.acquire()
        try:
            if self.integrity_error is not None:
                raise RegistryUnavailableError(
                    "registry", f"integrity check failed, changes refused: {self.integrity_error}"
                )
            self._check_file()
            self._db.execute("BEGIN IMMEDIATE")
            # another connection's commit (a second process on the file) makes the
            # mirrored IDs stale
            version = self._db.execute("PRAGMA data_version").fetchone()[0]
            if version != self._data_version:
                self._used, self._data_version = None, version
        except sqlite3.OperationalError as exc:
            self._lock.release()
            raise RegistryUnavailableError("registry", f"cannot write: {exc}") from None
        except BaseException:
            self._lock.release()
            raise

    def commit(self) -> None:
        try:
            self._check_file()
            self._db.execute("COMMIT")
        except RegistryUnavailableError:
            self._rollback_quietly()
            raise
        except sqlite3.Error as exc:
            self._rollback_quietly()
            raise RegistryUnavailableError("registry", f"commit failed: {exc}") from None
        finally:
            self._lock.release()

    def _rollback_quietly(self) -> None:
        self._used = None
        with contextlib.suppress(sqlite3.Error):  # no transaction left to roll back
            self._db.execute("ROLLBACK")

    def rollback(self) -> None:
        """End the transaction without its changes. Quiet: after some failures (a full
        disk, an I/O error) SQLite has already rolled back, and a second error from
        ``ROLLBACK`` must not replace the one that made the caller roll back."""
        try:
            self._rollback_quietly()
        finally:
            self._lock.release()

    # ------------------------------------------------------------ writes (inside begin)

    @contextlib.contextmanager
    def _failing_as_unavailable(self, what: str) -> Iterator[None]:
        """A read or write that fails (the file was replaced or damaged under us, the
        disk is full) is a 503 naming the registry, not a 500."""
        try:
            yield
        except sqlite3.Error as exc:
            raise RegistryUnavailableError("registry", f"cannot {what}: {exc}") from None

    def add_job(self, job_id: str, spec: dict[str, Any], groups: list[str]) -> JobRecord:
        """Insert a job and allocate an echelon ID and class slot per group.

        Raises :class:`DuplicateJobError` or :class:`IdsExhaustedError`; the caller
        rolls the transaction back on any error.
        """
        with self._lock, self._failing_as_unavailable("write"):
            if self._db.execute("SELECT 1 FROM jobs WHERE job_id=?", (job_id,)).fetchone():
                raise DuplicateJobError("job", f"job {job_id!r} is already registered")
            seq = self._db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs").fetchone()[0]
            self._db.execute(
                "INSERT INTO jobs (job_id, seq, spec) VALUES (?, ?, ?)",
                (job_id, seq, json.dumps(spec, sort_keys=True)),
            )
            eids = self._free("echelon_id", 1, MAX_ECHELON_ID, len(groups))
            cids = self._free("class_id", 0, self.class_slots - 1, len(groups))
            out = []
            for g, eid, cid in zip(groups, eids, cids, strict=True):
                self._db.execute(
                    "INSERT INTO groups (job_id, grp, echelon_id, class_id) VALUES (?, ?, ?, ?)",
                    (job_id, g, eid, cid),
                )
                out.append(GroupIds(g, eid, cid))
            used = self._used_ids()
            used["echelon_id"].update(eids)
            used["class_id"].update(cids)
            return JobRecord(job_id, seq, spec, tuple(out))

    def _used_ids(self) -> dict[str, set[int]]:
        if self._used is None:
            rows = self._db.execute("SELECT echelon_id, class_id FROM groups").fetchall()
            self._used = {"echelon_id": {r[0] for r in rows}, "class_id": {r[1] for r in rows}}
            self._hint = {}
        return self._used

    def _free(self, column: str, lo: int, hi: int, count: int) -> list[int]:
        """The ``count`` lowest unused IDs in ``lo..hi``. The scan starts at a hint below
        which every ID is known to be used (kept with the used set, lowered when an ID
        is freed), so allocating after 1,000 jobs does not walk past 1,000 used IDs."""
        used = self._used_ids()[column]
        out: list[int] = []
        n = max(lo, self._hint.get(column, lo))
        while n <= hi and n in used:
            n += 1
        self._hint[column] = n
        while len(out) < count and n <= hi:
            if n not in used:
                out.append(n)
            n += 1
        if len(out) < count:
            what = "echelon IDs" if column == "echelon_id" else "class slots"
            raise IdsExhaustedError(
                column, f"no free {what} left ({hi - lo + 1} in total, {count} needed)"
            )
        return out

    def remove_job(self, job_id: str) -> None:
        with self._lock, self._failing_as_unavailable("write"):
            ids = self._db.execute(
                "SELECT echelon_id, class_id FROM groups WHERE job_id=?", (job_id,)
            ).fetchall()
            cur = self._db.execute("DELETE FROM jobs WHERE job_id=?", (job_id,))
            if cur.rowcount == 0:
                raise UnknownJobError("job", f"no job {job_id!r} is registered")
            used = self._used_ids()
            for eid, cid in ids:
                used["echelon_id"].discard(eid)
                used["class_id"].discard(cid)
                for column, freed in (("echelon_id", eid), ("class_id", cid)):
                    if column in self._hint:  # absent: the next scan starts at the bottom
                        self._hint[column] = min(self._hint[column], freed)

    def set_setting(self, key: str, value: str) -> None:
        with self._lock, self._failing_as_unavailable("write"):
            self._db.execute(
                "INSERT INTO settings (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (key, value),
            )

    # ------------------------------------------------------------ reads

    def get_setting(self, key: str, default: str) -> str:
        with self._lock, self._failing_as_unavailable("read"):
            row = self._db.execute("SELECT value FROM settings WHERE key=?", (key,)).fetchone()
        return str(row[0]) if row else default

    def jobs(self, specs: bool = True) -> list[JobRecord]:
        """Every registered job in registration order (``spec`` left empty when
        ``specs`` is false: the controller re-plans on every change and keeps the
        parsed descriptions itself, so decoding 1,000 JSON specs each time is waste)."""
        return self._records("", (), specs)

    def job(self, job_id: str) -> JobRecord:
        recs = self._records("WHERE job_id=?", (job_id,), True)
        if not recs:
            raise UnknownJobError("job", f"no job {job_id!r} is registered")
        return recs[0]

    def _records(self, where: str, args: tuple[Any, ...], specs: bool) -> list[JobRecord]:
        """The jobs ``where`` selects (a clause on ``job_id``), in registration order."""
        with self._lock, self._failing_as_unavailable("read"):
            cols = "job_id, seq, spec" if specs else "job_id, seq, '{}'"
            query = f"SELECT {cols} FROM jobs {where} ORDER BY seq"
            rows = self._db.execute(query, args).fetchall()
            grows = self._db.execute(
                f"SELECT job_id, grp, echelon_id, class_id FROM groups {where} ORDER BY echelon_id",
                args,
            ).fetchall()
        by_job: dict[str, list[GroupIds]] = {}
        for job_id, grp, eid, cid in grows:
            by_job.setdefault(job_id, []).append(GroupIds(grp, eid, cid))
        return [
            JobRecord(job_id, seq, json.loads(spec) if specs else {}, tuple(by_job.get(job_id, ())))
            for job_id, seq, spec in rows
        ]


def _file_id(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _quick_check(db: sqlite3.Connection) -> str | None:
    """``None`` if ``PRAGMA quick_check`` says ok, else its first few lines."""
    rows = [str(r[0]) for r in db.execute("PRAGMA quick_check(5)").fetchall()]
    return None if rows == ["ok"] else "; ".join(rows)[:500]

"""Durable registrations: jobs, their echelon IDs and class slots, and settings.

One SQLite file in WAL mode with ``synchronous=FULL``: a commit is on disk
(fsync'd WAL) before :meth:`Registry.commit` returns, so a registration the API
acknowledged survives ``kill -9`` of the controller. The controller holds its
own lock around a whole registration; the registry's transaction (``begin`` ...
``commit``/``rollback``) lets it write the switches *inside* the transaction and
roll the registration back if the switches refuse it, so nothing is half-applied.

IDs are allocated lowest-free-first, so they are reused after a removal and a
restart recomputes exactly the same entries from the file.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from echelon.constants import MAX_ECHELON_ID
from echelon.errors import EchelonError

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


class RegistryError(EchelonError):
    """Base of registry errors; ``field`` names what was wrong, like ``SpecError``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class DuplicateJobError(RegistryError):
    """A job with this ID is already registered."""


class UnknownJobError(RegistryError):
    """No job with this ID is registered."""


class IdsExhaustedError(RegistryError):
    """No free echelon ID or class slot is left."""


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

    def __init__(self, path: str | Path, class_slots: int = 1024) -> None:
        self.path = str(path)
        self.class_slots = class_slots
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------ transactions

    def begin(self) -> None:
        """Start a write transaction (``BEGIN IMMEDIATE``); pair with commit/rollback."""
        self._lock.acquire()
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise

    def commit(self) -> None:
        try:
            self._db.execute("COMMIT")
        finally:
            self._lock.release()

    def rollback(self) -> None:
        try:
            self._db.execute("ROLLBACK")
        finally:
            self._lock.release()

    # ------------------------------------------------------------ writes (inside begin)

    def add_job(self, job_id: str, spec: dict[str, Any], groups: list[str]) -> JobRecord:
        """Insert a job and allocate an echelon ID and class slot per group.

        Raises :class:`DuplicateJobError` or :class:`IdsExhaustedError`; the caller
        rolls the transaction back on any error.
        """
        with self._lock:
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
            return JobRecord(job_id, seq, spec, tuple(out))

    def _free(self, column: str, lo: int, hi: int, count: int) -> list[int]:
        used = {r[0] for r in self._db.execute(f"SELECT {column} FROM groups")}
        out: list[int] = []
        n = lo
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
        with self._lock:
            cur = self._db.execute("DELETE FROM jobs WHERE job_id=?", (job_id,))
            if cur.rowcount == 0:
                raise UnknownJobError("job", f"no job {job_id!r} is registered")

    def set_setting(self, key: str, value: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO settings (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (key, value),
            )

    # ------------------------------------------------------------ reads

    def get_setting(self, key: str, default: str) -> str:
        with self._lock:
            row = self._db.execute("SELECT value FROM settings WHERE key=?", (key,)).fetchone()
        return str(row[0]) if row else default

    def jobs(self, specs: bool = True) -> list[JobRecord]:
        """Every registered job in registration order (``spec`` left empty when
        ``specs`` is false: the controller re-plans on every change and keeps the
        parsed descriptions itself, so decoding 1,000 JSON specs each time is waste)."""
        with self._lock:
            cols = "job_id, seq, spec" if specs else "job_id, seq, '{}'"
            rows = self._db.execute(f"SELECT {cols} FROM jobs ORDER BY seq").fetchall()
            grows = self._db.execute(
                "SELECT job_id, grp, echelon_id, class_id FROM groups ORDER BY echelon_id"
            ).fetchall()
        by_job: dict[str, list[GroupIds]] = {}
        for job_id, grp, eid, cid in grows:
            by_job.setdefault(job_id, []).append(GroupIds(grp, eid, cid))
        return [
            JobRecord(job_id, seq, json.loads(spec) if specs else {}, tuple(by_job.get(job_id, ())))
            for job_id, seq, spec in rows
        ]

    def job(self, job_id: str) -> JobRecord:
        with self._lock:
            row = self._db.execute(
                "SELECT seq, spec FROM jobs WHERE job_id=?", (job_id,)
            ).fetchone()
            grows = self._db.execute(
                "SELECT grp, echelon_id, class_id FROM groups WHERE job_id=? ORDER BY echelon_id",
                (job_id,),
            ).fetchall()
        if row is None:
            raise UnknownJobError("job", f"no job {job_id!r} is registered")
        return JobRecord(job_id, row[0], json.loads(row[1]), tuple(GroupIds(*g) for g in grows))

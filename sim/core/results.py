"""What a simulation run produces, and how it is summarised and written out.

Records are plain dataclasses so results can cross process boundaries (sweeps)
and be written as CSV (one file per record kind) or one JSON document.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True)
class FlowRecord:
    job: str
    iteration: int
    echelon: str
    group: str
    index: int
    src: str
    dst: str
    size: int
    release: float
    finish: float
    ideal: float
    """``t_ref + A(j)``: when the consumer would ideally want the flow."""


@dataclass(frozen=True, slots=True)
class EchelonRecord:
    name: str
    job: str
    iteration: int
    group: str
    n_flows: int
    bytes: int
    t_ref: float
    start: float
    finish: float
    completion: float
    """``max_j (C_j - A(j)) - t_ref`` (:func:`echelon.model.completion_time`)."""
    tardiness: float
    max_lateness: float


@dataclass(frozen=True, slots=True)
class TaskRecord:
    job: str
    iteration: int
    host: str
    task: str
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class IterationRecord:
    job: str
    iteration: int
    start: float
    end: float

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class JobRecord:
    job: str
    arrival: float
    finish: float
    iterations: int

    @property
    def jct(self) -> float:
        return self.finish - self.arrival


@dataclass
class SimResult:
    """Everything one run measured. Flow and task records are optional (memory)."""

    policy: str
    levels: str
    jobs: list[JobRecord] = field(default_factory=list)
    iterations: list[IterationRecord] = field(default_factory=list)
    echelons: list[EchelonRecord] = field(default_factory=list)
    flows: list[FlowRecord] = field(default_factory=list)
    tasks: list[TaskRecord] = field(default_factory=list)
    n_flows: int = 0
    n_events: int = 0
    n_reranks: int = 0
    n_level_updates: int = 0
    """Re-plans x groups whose levels changed (K-level runs): the controller's table writes."""
    wall_s: float = 0.0
    end_time: float = 0.0
    ideal_iteration: dict[str, float] = field(default_factory=dict)
    """Contention-free iteration time per job (when the job spec knows it)."""

    def slowdowns(self) -> np.ndarray[Any, Any]:
        """Iteration time / contention-free iteration time, per iteration."""
        return np.array(
            [
                r.duration / self.ideal_iteration[r.job]
                for r in self.iterations
                if self.ideal_iteration.get(r.job, 0.0) > 0
            ]
        )

    def job_slowdowns(self) -> list[float]:
        """Mean slowdown of each job's iterations (who bears the delay)."""
        acc: dict[str, list[float]] = {}
        for r in self.iterations:
            ideal = self.ideal_iteration.get(r.job, 0.0)
            if ideal > 0:
                acc.setdefault(r.job, []).append(r.duration / ideal)
        return [sum(v) / len(v) for v in acc.values()]

    def summary(self) -> dict[str, Any]:
        """Headline numbers: iteration time, EchelonFlow completion, tardiness, JCT."""
        it = np.array([r.duration for r in self.iterations])
        first = np.array([r.duration for r in self.iterations if r.iteration == 0])
        later = np.array([r.duration for r in self.iterations if r.iteration > 0])
        ecct = np.array([r.completion for r in self.echelons])
        jct = np.array([r.jct for r in self.jobs])
        per_job = self.job_slowdowns()
        return {
            "policy": self.policy,
            "levels": self.levels,
            "jobs_done": len(self.jobs),
            "iterations_done": len(self.iterations),
            "flows": self.n_flows,
            "iter_mean": _stat(it, "mean"),
            "iter_p99": _stat(it, "p99"),
            # first iterations (cold start: in a closed batch every job starts at once)
            # vs later ones, so a report can say where a tail comes from
            "iter_first_mean": _stat(first, "mean"),
            "iter_later_mean": _stat(later, "mean"),
            "slowdown_mean": _stat(self.slowdowns(), "mean"),
            "slowdown_p99": _stat(self.slowdowns(), "p99"),
            "job_slowdown_max": max(per_job, default=math.nan),
            "job_slowdown_min": min(per_job, default=math.nan),
            "ecct_mean": _stat(ecct, "mean"),
            "ecct_p99": _stat(ecct, "p99"),
            "tardiness_total": float(sum(r.tardiness for r in self.echelons)),
            "jct_mean": _stat(jct, "mean"),
            "jct_p99": _stat(jct, "p99"),
            "makespan": self.end_time,
            "events": self.n_events,
            "reranks": self.n_reranks,
            "level_updates": self.n_level_updates,
            "reranks_per_s": self.n_reranks / self.end_time if self.end_time > 0 else 0.0,
            "level_updates_per_s": (
                self.n_level_updates / self.end_time if self.end_time > 0 else 0.0
            ),
            "wall_s": self.wall_s,
        }

    def write_csv(self, directory: str | Path) -> list[Path]:
        """One CSV per non-empty record kind, plus ``summary.csv``."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = [write_csv(out / "summary.csv", [self.summary()])]
        for name in ("jobs", "iterations", "echelons", "flows", "tasks"):
            rows: Sequence[Any] = getattr(self, name)
            if rows:
                written.append(write_csv(out / f"{name}.csv", [_row(r) for r in rows]))
        return written

    def to_json(self) -> dict[str, Any]:
        return {
            "summary": self.summary(),
            **{
                name: [_row(r) for r in getattr(self, name)]
                for name in ("jobs", "iterations", "echelons", "flows", "tasks")
            },
        }

    def write_json(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.to_json(), indent=1, default=_nan_none))
        return p


def _row(rec: Any) -> dict[str, Any]:
    row = asdict(rec)
    for extra in ("duration", "jct"):
        if hasattr(rec, extra) and extra not in {f.name for f in fields(rec)}:
            row[extra] = getattr(rec, extra)
    return row


def _stat(a: np.ndarray[Any, Any], kind: str) -> float:
    if a.size == 0:
        return math.nan
    if kind == "mean":
        return float(a.mean())
    return float(np.percentile(a, 99))


def _nan_none(x: Any) -> Any:
    return None if isinstance(x, float) and math.isnan(x) else str(x)


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]], header: Sequence[str] = ()) -> Path:
    """Rows as CSV, the first row's keys as the header (``header`` when there is no row):
    the run's record files, ``sim sweep``'s rows and a coflow trace's per-coflow rows."""
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else list(header))
        w.writeheader()
        w.writerows(rows)
    return path

"""Helpers shared by the core tests (imported, not a conftest, so suites never clash)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from echelon.jobs import JobSpec, load_job
from echelon.model import EchelonFlow

EXAMPLES = Path(__file__).resolve().parents[2] / "echelon" / "examples"


def job(paradigm: str, hosts: list[str], **fields: Any) -> JobSpec:
    return load_job({"job": "j", "paradigm": paradigm, "hosts": hosts, **fields})


def by_group(efs: list[EchelonFlow]) -> dict[str, EchelonFlow]:
    return {ef.group: ef for ef in efs}


def offsets(ef: EchelonFlow) -> list[float]:
    return [f.offset for f in ef.flows]


def example_files() -> list[Path]:
    return sorted(EXAMPLES.glob("*.yaml"))

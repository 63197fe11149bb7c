"""Job descriptions: what a user writes about a training job, and its validation.

A description is a flat mapping (YAML or JSON)::

    job: gpipe-demo          # name, unique per deployment; no '/'
    paradigm: gpipe          # one of echelon.paradigms.PARADIGMS
    hosts: [h1, h2, h3]      # the workers it uses (meaning depends on the paradigm)
    weight: 1.0              # optional: importance in inter-group ordering
    micro_batches: 4         # ... paradigm-specific fields
    stages:
      - {fwd_s: 0.010, bwd_s: 0.020, activation_bytes: 4000000}

Everything a user knows -- compute times in seconds, tensor sizes in bytes, host
names -- and nothing derived: the arrangement comes from the paradigm's model.
Every error is a :class:`SpecError` naming the field, e.g. ``stages[2].fwd_s``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from echelon.errors import SpecError
from echelon.model import EchelonFlow, IterationPlan
from echelon.paradigms import get_paradigm
from echelon.paradigms.plan import PlanBuilder
from echelon.specfields import check_keys, mapping, path, plain, text

COMMON_FIELDS = frozenset({"job", "paradigm", "hosts", "weight", "description"})


@dataclass(frozen=True)
class JobSpec:
    """A validated job description. ``params`` is the paradigm's frozen dataclass."""

    job_id: str
    paradigm: str
    hosts: tuple[str, ...]
    params: Any
    weight: float = 1.0
    description: str = ""

    def _builder(self, iteration: int, t0: float) -> PlanBuilder:
        if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 0:
            raise SpecError("iteration", f"must be a non-negative integer, got {iteration!r}")
        b = PlanBuilder(self.job_id, iteration, float(t0), self.weight)
        get_paradigm(self.paradigm).build(b, self.hosts, self.params)
        return b

    def plan(self, iteration: int = 0, t0: float = 0.0) -> IterationPlan:
        """The EchelonFlows of ``iteration`` (starting at ``t0``) and its compute tasks."""
        return self._builder(iteration, t0).build()

    def echelonflows(self, iteration: int = 0, t0: float = 0.0) -> list[EchelonFlow]:
        return list(self.plan(iteration, t0).echelons)

    @cached_property
    def ideal_iteration_s(self) -> float:
        """Contention-free iteration time: when iteration i+1 ideally starts after i.

        Cached: the spec is immutable, and a simulator asks once per iteration."""
        b = self._builder(0, 0.0)
        b.build()
        return b.makespan

    def to_dict(self) -> dict[str, Any]:
        """The description again, in the form :func:`load_job` reads back."""
        out: dict[str, Any] = {
            "job": self.job_id,
            "paradigm": self.paradigm,
            "hosts": list(self.hosts),
        }
        if self.weight != 1.0:
            out["weight"] = self.weight
        if self.description:
            out["description"] = self.description
        fields = get_paradigm(self.paradigm).fields
        out.update((k, v) for k, v in plain(self.params).items() if k in fields)
        return out


def load_job(data: Mapping[str, Any], known_hosts: Collection[str] | None = None) -> JobSpec:
    """Validate a description; ``known_hosts`` (e.g. a topology's hosts) restricts ``hosts``."""
    data = mapping(data, "")
    for key in ("job", "paradigm", "hosts"):
        if key not in data:
            raise SpecError(key, "is required")
    job = text(data["job"], "job")
    if "/" in job or job.strip() != job:
        raise SpecError("job", f"must not contain '/' or surrounding spaces, got {job!r}")
    paradigm = get_paradigm(text(data["paradigm"], "paradigm"))
    check_keys(data, COMMON_FIELDS | paradigm.fields, "")
    hosts = _hosts(data["hosts"], known_hosts)
    weight = data.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
        raise SpecError("weight", f"must be a positive number, got {weight!r}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise SpecError("description", "must be a string")
    params = paradigm.parse(data, hosts)
    spec = JobSpec(job, paradigm.name, hosts, params, float(weight), description)
    spec.plan()  # surfaces model errors (e.g. an empty iteration) at load time
    return spec


def load_job_file(file: str | Path, known_hosts: Collection[str] | None = None) -> JobSpec:
    """Read a YAML or JSON description; unreadable files are SpecErrors too."""
    where = str(file)
    try:
        raw = Path(file).read_text()
    except OSError as exc:
        raise SpecError(where, f"cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw) if where.endswith(".json") else yaml.safe_load(raw)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise SpecError(where, f"not valid YAML/JSON: {exc}") from None
    return load_job(data, known_hosts)


def _hosts(value: Any, known: Collection[str] | None) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not value:
        raise SpecError("hosts", "must be a non-empty list of host names")
    out: list[str] = []
    for i, h in enumerate(value):
        name = text(h, path("hosts", i))
        if name in out:
            raise SpecError(path("hosts", i), f"duplicate host {name!r}")
        if known is not None and name not in known:
            raise SpecError(path("hosts", i), f"unknown host {name!r} (known: {sorted(known)})")
        out.append(name)
    return tuple(out)

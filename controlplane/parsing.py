"""Registrations parsed against the topology: the controller's view of a job.

A registration is either a *paradigm job description* or an *explicit
EchelonFlow spec*, both parsed by the core (``echelon.jobs.load_description``,
typed models in ``echelon.jobs``)::

    {"job": "j1", "echelonflows": [
        {"group": "grads", "weight": 1.0,
         "flows": [{"src": "h1", "dst": "h4", "size": 100000, "offset": 0.0}, ...]}]}

Parsing is pure and runs before the controller lock is taken; what it returns
(:class:`ParsedJob`) is what :mod:`controlplane.planning` plans.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from echelon import jobs as core_jobs
from echelon.model import EchelonFlow
from echelon.topology import Topology


@dataclass(frozen=True)
class ParsedJob:
    """A validated registration: its job ID, the EchelonFlows of iteration 0 and
    the groups in first-appearance order (each gets one echelon ID)."""

    job_id: str
    echelons: tuple[EchelonFlow, ...]
    groups: tuple[str, ...]
    #: unit plausibility warnings (``field: message``), returned to the client
    warnings: tuple[str, ...] = ()
    #: the *opening* groups: released at the start of every iteration (a flow with no
    #: producer task), so in flight as soon as a host of the job enters an iteration
    #: (:mod:`controlplane.inflight`); an explicit spec has no tasks: its groups with
    #: ``t_ref`` 0
    opening: frozenset[str] = frozenset()

    def of_group(self, group: str) -> tuple[tuple[EchelonFlow, ...], tuple[str, ...]]:
        """The group's EchelonFlows and source hosts (cached: re-planned on every change)."""
        cache: dict[str, tuple[tuple[EchelonFlow, ...], tuple[str, ...]]]
        cache = self.__dict__.setdefault("_by_group", {})
        if group not in cache:
            mine = tuple(ef for ef in self.echelons if ef.group == group)
            cache[group] = (mine, tuple(sorted({f.src for ef in mine for f in ef.flows})))
        return cache[group]

    def shifted(self, group: str, start: float) -> tuple[EchelonFlow, ...]:
        """The group's EchelonFlows with ``t_ref`` moved by ``start`` (cached per
        group for the latest start: re-plans repeat it until the next iteration)."""
        cache: dict[str, tuple[float, tuple[EchelonFlow, ...]]]
        cache = self.__dict__.setdefault("_shifted", {})
        hit = cache.get(group)
        if hit is None or hit[0] != start:
            mine, _ = self.of_group(group)
            hit = (start, tuple(replace(ef, t_ref=ef.t_ref + start) for ef in mine))
            cache[group] = hit
        return hit[1]


def parse_job(desc: Any, topo: Topology) -> ParsedJob:
    """Validate a registration through the core's one parser
    (:func:`echelon.jobs.load_description`, which checks every host against the
    topology's); raise ``SpecError``, and its ``UnknownHostError`` for a host the
    topology does not have (HTTP 422)."""
    parsed = core_jobs.load_description(desc, topo.hosts)
    groups = tuple(dict.fromkeys(ef.group for ef in parsed.echelons))
    return ParsedJob(
        parsed.job_id,
        parsed.echelons,
        groups,
        tuple(str(w) for w in parsed.warnings),
        parsed.opening,
    )

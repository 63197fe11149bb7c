"""Job descriptions for the core's paradigm builders, multi-job mixes, trace files.

A *template* (paradigm, model, size knobs) becomes a job description dict that
:func:`echelon.jobs.load_job` reads (the core's ``echelon.jobgen``, from the model
descriptions in ``echelon.models``); the paradigms themselves (GPipe, 1F1B,
data parallel with PS / all-reduce, tensor, FSDP, MoE, hybrid) live in the core.
A *mix* draws templates, places each job on random hosts and spaces arrivals as
a Poisson process whose rate gives a target offered network load.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echelon.errors import SpecError
from echelon.jobgen import describe_model
from echelon.models import MODEL_NAMES, load_model
from sim.core.engine import JobRun


@dataclass(frozen=True)
class Template:
    """What to build: paradigm, model, host count and knobs (see :func:`describe`)."""

    paradigm: str
    model: str
    hosts: int
    micro_batches: int = 8
    batch: int = 0
    dp: int = 1
    tp: int = 1
    unit: int = 1
    """Transformer layers per modelled layer for the per-layer paradigms (FSDP wrap
    unit; TP/MoE/DP blocks): fewer, larger flows with the same bytes and compute."""


def describe(name: str, t: Template, hosts: Sequence[str]) -> dict[str, Any]:
    """A job description (dict for ``echelon.jobs.load_job``) for template ``t`` on ``hosts``
    (the core's :func:`echelon.jobgen.describe_model`, which ``echelon job`` uses too)."""
    if t.model not in MODEL_NAMES:
        raise SpecError("model", f"unknown model {t.model!r} (known: {MODEL_NAMES})")
    if len(hosts) != t.hosts:
        raise SpecError("hosts", f"template needs {t.hosts} hosts, got {len(hosts)}")
    return describe_model(
        name,
        t.paradigm,
        load_model(t.model),
        hosts,
        micro_batches=t.micro_batches,
        batch=t.batch,
        dp=t.dp,
        tp=t.tp,
        unit=t.unit,
    )


#: Named mixes: (template, probability). Host counts fit a 16-host cluster.
MIXES: dict[str, tuple[tuple[Template, float], ...]] = {
    "pipeline": (
        (Template("gpipe", "gpt2-xl", 4, micro_batches=8), 0.5),
        (Template("1f1b", "gpt3-2.7b", 4, micro_batches=8, batch=2), 0.5),
    ),
    "hybrid": (
        (Template("hybrid", "gpt2-xl", 8, micro_batches=4, dp=2, tp=1), 0.5),
        (Template("hybrid", "gpt3-2.7b", 8, micro_batches=4, batch=2, dp=2, tp=2), 0.5),
    ),
    "dp": (
        (Template("dp_allreduce", "resnet50", 4), 0.4),
        (Template("dp_ps", "resnet50", 5), 0.3),
        (Template("fsdp", "gpt2-xl", 4, unit=4), 0.3),
    ),
    "mixed": (
        (Template("gpipe", "gpt2-xl", 4, micro_batches=8), 0.2),
        (Template("hybrid", "gpt2-xl", 8, micro_batches=4, dp=2, tp=1), 0.2),
        (Template("dp_allreduce", "resnet50", 4), 0.2),
        (Template("tensor", "gpt2-xl", 4, unit=4), 0.15),
        (Template("moe", "gpt2-xl", 4, unit=4), 0.15),
        (Template("fsdp", "gpt2-xl", 4, unit=4), 0.1),
    ),
}


@dataclass(frozen=True)
class TraceJob:
    """One line of a trace: a job description, when it arrives, how many iterations."""

    description: Mapping[str, Any]
    arrival: float = 0.0
    iterations: int = 1

    def to_run(self, known_hosts: Sequence[str] | None = None) -> JobRun:
        from echelon.jobs import load_job

        return JobRun(load_job(self.description, known_hosts), self.arrival, self.iterations)


def chakra_job(
    path: str,
    hosts: Sequence[str],
    spmd_hosts: int = 4,
    iterations: int = 3,
    group_by: str = "consumer",
) -> TraceJob:
    """The job of a Chakra execution trace (:mod:`echelon.chakra.convert`) on the first
    hosts: one per rank of a rank directory, ``spmd_hosts`` for a one-rank (SPMD) trace."""
    from echelon.chakra.convert import job_from_trace
    from echelon.chakra.trace import read_trace

    trace = read_trace(path)
    n = len(trace.ranks) if len(trace.ranks) > 1 else spmd_hosts
    if n > len(hosts):
        raise SpecError("chakra", f"the trace needs {n} hosts, the network has {len(hosts)}")
    return TraceJob(job_from_trace(trace, list(hosts)[:n], group_by=group_by), 0.0, iterations)


def job_demand(description: Mapping[str, Any]) -> tuple[int, float, float]:
    """(flows per iteration, bytes per iteration, ideal iteration seconds) of a
    description: what a mix's arrival rate, the scale runs' sizes and the report's
    workload table read from a job."""
    from echelon.jobs import load_job

    spec = load_job(description)
    plan = spec.plan(0, 0.0)
    flows = sum(len(ef.flows) for ef in plan.echelons)
    return flows, float(sum(ef.total_bytes for ef in plan.echelons)), spec.ideal_iteration_s


def generate_mix(
    mix: str | Sequence[tuple[Template, float]],
    hosts: Sequence[str],
    host_bytes_per_s: float,
    n_jobs: int = 8,
    load: float | None = 0.5,
    iterations: int = 3,
    seed: int = 0,
) -> list[TraceJob]:
    """Draw ``n_jobs`` jobs from a mix and place them on random hosts.

    ``load`` is the offered network load: Poisson arrivals with rate
    ``load * len(hosts) * host_bytes_per_s / E[bytes per job]`` (a job's bytes =
    iterations x bytes per iteration). ``load=None`` starts every job at once
    (a closed batch: every job contends from the start).
    """
    templates = MIXES.get(mix) if isinstance(mix, str) else tuple(mix)
    if templates is None:
        raise SpecError("mix", f"unknown mix {mix!r} (known: {sorted(MIXES)})")
    if n_jobs < 1 or iterations < 1:
        raise SpecError("n_jobs", "n_jobs and iterations must be at least 1")
    if load is not None and load <= 0:
        raise SpecError("load", f"must be positive, got {load}")
    rng = random.Random(seed)
    weights = [w for _, w in templates]
    demand: dict[Template, float] = {}
    jobs: list[TraceJob] = []
    t = 0.0
    for k in range(n_jobs):
        tmpl = rng.choices([tp for tp, _ in templates], weights)[0]
        if tmpl.hosts > len(hosts):
            raise SpecError(
                "mix", f"{tmpl.paradigm} needs {tmpl.hosts} hosts, network has {len(hosts)}"
            )
        placed = rng.sample(list(hosts), tmpl.hosts)
        desc = describe(f"j{k}-{tmpl.paradigm}", tmpl, placed)
        if tmpl not in demand:
            demand[tmpl] = job_demand(desc)[1]
        jobs.append(TraceJob(desc, t, iterations))
        if load is not None:
            mean_bytes = sum(w * _lazy(demand, tp, hosts) for tp, w in templates) / sum(weights)
            rate = load * len(hosts) * host_bytes_per_s / (iterations * mean_bytes)
            t += rng.expovariate(rate)
    return jobs


def _lazy(cache: dict[Template, float], t: Template, hosts: Sequence[str]) -> float:
    if t not in cache:
        cache[t] = job_demand(describe("probe", t, list(hosts)[: t.hosts]))[1]
    return cache[t]

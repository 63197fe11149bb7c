"""The EchelonFlow paper's case studies, re-run in the simulator as timelines.

Both use the core's paradigm builders through ordinary job descriptions on a
big switch whose host links carry 1 MB/s, so every number is easy to read
(1 MB takes 1 s on a link):

1. **One pipeline job, network-bound** (intra-group order). GPipe, 2 stages on
   h0 -> h1, 4 micro-batches of 1 s forward compute, 1.5 MB activations. The
   activations form one EchelonFlow whose arrangement is spaced by stage 1's
   forward time. A Coflow scheduler sees one coflow and lets its flows share the
   link, so the first activation arrives late and stage 1 idles; EDF inside the
   EchelonFlow sends them in formation.
2. **A pipeline job next to a data-parallel job** (inter-group order). The same
   pipeline, plus a 2-host ring all-reduce job (h2, h1) whose gradient buckets
   are Coflows arriving on h1's downlink while the activations are in flight.
   Smallest-bottleneck-first (Varys) counts the whole pipeline group's bytes and
   serves the all-reduce first; the echelon policy sees that the pipeline's first
   flow is due now while the all-reduce has slack until its optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from echelon.jobs import load_job
from echelon.network import BigSwitch
from sim.core.engine import JobRun, SimConfig, Simulator
from sim.core.results import SimResult

MB = 1_000_000
#: The big switch of the case studies and of the interleaving scenarios
#: (:mod:`sim.eval.interleave`): its hosts and the bytes/s of every host link.
HOSTS = ["h0", "h1", "h2", "h3"]
CAP = 1.0 * MB

PIPELINE: dict[str, Any] = {
    "job": "pipe",
    "paradigm": "gpipe",
    "hosts": ["h0", "h1"],
    "micro_batches": 4,
    "stages": [
        {"fwd_s": 1.0, "bwd_s": 1.0, "activation_bytes": int(1.5 * MB)},
        {"fwd_s": 1.0, "bwd_s": 1.0},
    ],
}

ALLREDUCE: dict[str, Any] = {
    "job": "dp",
    "paradigm": "dp_allreduce",
    "hosts": ["h2", "h1"],
    "bucket_bytes": 0,
    "layers": [
        {"fwd_s": 0.2, "bwd_s": 0.4, "grad_bytes": 2 * MB},
        {"fwd_s": 0.2, "bwd_s": 0.4, "grad_bytes": 2 * MB},
    ],
    "optimizer_s": 0.1,
}


@dataclass(frozen=True)
class Case:
    key: str
    title: str
    jobs: tuple[dict[str, Any], ...]
    policies: tuple[str, ...]


CASES = (
    Case(
        "case1",
        "One pipeline job on a slow link: Coflow vs EchelonFlow",
        (PIPELINE,),
        ("coflow", "fair", "echelon"),
    ),
    Case(
        "case2",
        "Pipeline job next to an all-reduce job: SEBF vs EchelonFlow",
        (PIPELINE, ALLREDUCE),
        ("varys", "fair", "echelon"),
    ),
)


def run_case(case: Case, policy: str) -> SimResult:
    net = BigSwitch.uniform(HOSTS, CAP)
    runs = [JobRun(load_job(j), 0.0, 1) for j in case.jobs]
    cfg = SimConfig(policy=policy, record_tasks=True)
    return Simulator(net, runs, cfg).run()


def run_cases() -> dict[str, dict[str, SimResult]]:
    """Every case under each of its policies."""
    return {c.key: {p: run_case(c, p) for p in c.policies} for c in CASES}

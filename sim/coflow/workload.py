"""A coflow trace as a workload of the fluid engine: every coflow a one-group job.

Each coflow becomes one EchelonFlow (all of its flows released at its arrival,
every flow crossing its mapper port's uplink and its reducer port's downlink of a
:class:`PortFabric`), run by :class:`sim.core.engine.Simulator` like any job: the
model (fluid flows, strict priority across a policy's ranks, max-min fair inside a
rank, the policy asked again when a coflow arrives or completes) is the engine's.
What is specific to the trace is only its shape -- ~700k flows, ~50k in flight --
which the engine handles through its array-built policy table and rank-sorted
active set (:mod:`sim.core.ranking`, :mod:`sim.core.state`).

Arrangements (``model``): ``coflow`` -- ``A == 0``, ``t_ref`` = arrival (what
Varys and Sincronia assume); ``reducers-in-order`` -- the reducers of a coflow
consume one after another, in trace order, each for as long as its input takes
through one port: the flows into reducer ``k`` have ``A = sum_{i<k} S_i / B`` and
``t_ref = arrival + S_0 / B``.

coflowsim's 8-ms stepping, whose semantics differ by design, is the separate
compatibility mode :mod:`sim.coflow.compat`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from echelon.errors import SpecError
from echelon.model import EchelonFlow, Flow, IterationPlan
from echelon.schedule import Policy
from sim.coflow.trace import FlowArrays
from sim.core.config import JobRun, SimConfig
from sim.core.engine import Simulator

MODELS = ("coflow", "reducers-in-order")

Floats = npt.NDArray[np.float64]


class PortFabric:
    """A non-blocking switch of ``ports`` ports (``r0`` ... ``r<ports-1>``).

    Unlike :class:`echelon.network.BigSwitch`, a flow from a port to itself still
    crosses that port's up- and downlink: ports are racks, and the trace's
    rack-to-rack flows include a rack's own (coflowsim counts them the same way).
    """

    def __init__(self, ports: int, bytes_per_s: float) -> None:
        if not bytes_per_s > 0:
            raise SpecError("port-gbit", f"must be positive, got {bytes_per_s}")
        self.ports = ports
        links = {f"up:r{p}": bytes_per_s for p in range(ports)}
        links.update({f"down:r{p}": bytes_per_s for p in range(ports)})
        self._links = MappingProxyType(links)

    @property
    def links(self) -> Mapping[str, float]:
        return self._links

    def path(self, src: str, dst: str) -> tuple[str, ...]:
        return (f"up:{src}", f"down:{dst}")


@dataclass
class CoflowResult:
    """Per-coflow arrival and finish (seconds) and run statistics."""

    policy: str
    model: str
    names: list[str]
    arrival: Floats
    finish: Floats
    n_flows: int
    n_events: int = 0
    n_reranks: int = 0
    wall_s: float = 0.0
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def cct(self) -> Floats:
        return self.finish - self.arrival

    def summary(self) -> dict[str, Any]:
        cct = self.cct * 1000.0
        return {
            "policy": self.policy,
            "model": self.model,
            "coflows": len(self.names),
            "flows": self.n_flows,
            "avg_cct_ms": round(float(cct.mean()), 3) if len(cct) else 0.0,
            "p50_cct_ms": round(float(np.percentile(cct, 50)), 3) if len(cct) else 0.0,
            "p95_cct_ms": round(float(np.percentile(cct, 95)), 3) if len(cct) else 0.0,
            "makespan_s": round(float(self.finish.max()), 3) if len(cct) else 0.0,
            "events": self.n_events,
            "policy_calls": self.n_reranks,
            "wall_s": round(self.wall_s, 3),
            **self.options,
        }

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"coflow": n, "arrival_s": float(a), "finish_s": float(f), "cct_ms": float(f - a) * 1e3}
            for n, a, f in zip(self.names, self.arrival, self.finish, strict=True)
        ]


def arrangement(fa: FlowArrays, model: str, bytes_per_s: float) -> tuple[Floats, Floats]:
    """``(t_ref per coflow, offset per flow)`` of an arrangement model."""
    if model not in MODELS:
        raise SpecError("arrangement", f"unknown model {model!r} (known: {list(MODELS)})")
    offset = np.zeros(fa.n_flows, dtype=np.float64)
    t_ref = fa.arrival.copy()
    if model == "coflow":
        return t_ref, offset
    for c in range(len(fa.names)):
        lo, hi = int(fa.first[c]), int(fa.first[c] + fa.count[c])
        red = fa.reducer[lo:hi]
        per_red = np.bincount(red, weights=fa.size[lo:hi]) / bytes_per_s
        before = np.concatenate(([0.0], np.cumsum(per_red)[:-1]))
        offset[lo:hi] = before[red]
        t_ref[c] += per_red[0]
    return t_ref, offset


def coflow_echelons(fa: FlowArrays, model: str, bytes_per_s: float) -> list[EchelonFlow]:
    """Every coflow as an EchelonFlow (sizes rounded up to whole bytes), in trace order."""
    t_ref, offset = arrangement(fa, model, bytes_per_s)
    # one string per port, shared by all ~700k flows (not two new strings per flow)
    port = [f"r{p}" for p in range(fa.ports)]
    out = []
    for c, name in enumerate(fa.names):
        lo, hi = int(fa.first[c]), int(fa.first[c] + fa.count[c])
        flows = tuple(
            Flow(j, port[s], port[d], max(1, math.ceil(z)), o)
            for j, (s, d, z, o) in enumerate(
                zip(
                    fa.src[lo:hi].tolist(),
                    fa.dst[lo:hi].tolist(),
                    fa.size[lo:hi].tolist(),
                    offset[lo:hi].tolist(),
                    strict=True,
                )
            )
        )
        out.append(EchelonFlow(name, name, name, flows, float(t_ref[c])))
    return out


@dataclass(frozen=True)
class GroupJob:
    """One EchelonFlow as a job: one iteration, one group, no compute (a coflow of a
    trace; a group of :mod:`echelon.oracle`'s one-link instances)."""

    ef: EchelonFlow

    @property
    def job_id(self) -> str:
        return self.ef.job

    def plan(self, iteration: int = 0, t0: float = 0.0) -> IterationPlan:
        return IterationPlan(self.ef.job, iteration, (self.ef,), (), {})


def coflow_jobs(fa: FlowArrays, model: str, bytes_per_s: float) -> list[JobRun]:
    """The trace as the engine's jobs, each arriving at its coflow's arrival."""
    echelons = coflow_echelons(fa, model, bytes_per_s)
    return [JobRun(GroupJob(ef), float(a)) for ef, a in zip(echelons, fa.arrival, strict=True)]


def simulate_coflows(
    fa: FlowArrays,
    policy: str | Policy,
    port_bytes_per_s: float,
    model: str = "coflow",
    levels: int | None = None,
    rerank: str = "group",
    progress: Callable[[int, int, float], None] | None = None,
) -> CoflowResult:
    """Run the trace on the fluid engine; ``progress(coflows finished, coflows,
    simulated time)`` as the engine calls it (a CLI's progress bar)."""
    if rerank not in ("group", "flow"):
        raise SpecError("rerank", f"must be group or flow, got {rerank!r}")
    wall = time.perf_counter()
    names = list(fa.names)
    if len(set(names)) != len(names):
        dup = next(n for i, n in enumerate(names) if n in names[:i])
        raise SpecError(f"coflow {dup}", "two coflows share this id")
    cfg = SimConfig(
        policy=policy,
        levels=levels,
        rerank="flow" if rerank == "flow" else "group",
        record_flows=False,
    )
    jobs = coflow_jobs(fa, model, port_bytes_per_s)
    res = Simulator(PortFabric(fa.ports, port_bytes_per_s), jobs, cfg, progress).run()
    finish_of = {r.name: r.finish for r in res.echelons}
    return CoflowResult(
        policy=res.policy,
        model=model,
        names=names,
        arrival=fa.arrival.copy(),
        finish=np.array([finish_of[n] for n in names], dtype=np.float64),
        n_flows=fa.n_flows,
        n_events=res.n_events,
        n_reranks=res.n_reranks,
        wall_s=time.perf_counter() - wall,
    )

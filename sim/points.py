"""One point of a sweep and how it becomes a row: the types both sweep backends share.

A sweep is a list of :class:`Point` (plain, picklable values); :func:`run_point`
turns one into a summary row. The local backend (:mod:`sim.sweep`, processes) and
the Ray backend (:mod:`sim.ray.sweep`, one task per point) both import this module
and nothing of each other, and both hand their finished points to :func:`collect`,
which puts the rows in point order. Each row depends only on its point (every random draw
is seeded from ``Point.seed``), so the backends agree on every field but the
measured ``wall_s``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from echelon.errors import EchelonError, SpecError
from sim.core.config import levels_label
from sim.core.engine import SimConfig, Simulator
from sim.topology import NETWORK_DEFAULTS, file_network, gbit, hosts_of, make_network

if TYPE_CHECKING:
    from echelon.schedule import Network
    from echelon.topology import Topology
    from sim.coflow.trace import CoflowTrace
    from sim.coflow.workload import CoflowResult
    from sim.workloads import TraceJob


class SweepError(EchelonError):
    """A sweep could not produce a row for every point."""


#: Row fields that measure the machine, not the simulation: they differ between any
#: two runs of the same point, so comparisons of backends leave them out.
TIMING_FIELDS = ("wall_s",)


@dataclass(frozen=True)
class Point:
    """One simulation of a sweep. ``network`` is a JSON string (hashable, picklable)
    of a :func:`sim.topology.make_network` description; ``trace`` (a file) replaces
    the generated mix when given. ``coflow_trace`` (a coflow-benchmark file) runs the
    coflow simulator instead, on ``port_gbit`` x 2^30 bit/s ports, with the
    ``arrangement`` model (``coflowsim``: coflowsim-compatible semantics), as
    ``sim run --coflow-trace`` does; the network and job fields then do not apply."""

    mix: str
    policy: str
    levels: int | None = None
    load: float | None = None
    seed: int = 0
    n_jobs: int = 8
    iterations: int = 3
    network: str = '{"kind": "leafspine"}'
    trace: str | None = None
    rerank: str = "group"
    replan_interval: float = 0.0
    coflow_trace: str | None = None
    port_gbit: float = 1.0
    arrangement: str = "coflow"
    coflowsim: bool = False

    def label(self) -> dict[str, Any]:
        """The point's fields for its row: only those that apply to what it simulates
        (a coflow trace has no network, jobs, load or seed; a mix no coflow fields)."""
        d = asdict(self)
        d["levels"] = levels_label(self.levels)
        d["load"] = "batch" if self.load is None else self.load
        unused = _MIX_FIELDS if self.coflow_trace else _COFLOW_FIELDS
        return {k: v for k, v in d.items() if k not in unused}


#: Point fields of a coflow-trace point, and those only a mix or job trace uses.
_COFLOW_FIELDS = ("coflow_trace", "port_gbit", "arrangement", "coflowsim")
_MIX_FIELDS = ("load", "seed", "n_jobs", "iterations", "network", "trace", "replan_interval")


@dataclass(frozen=True)
class Inputs:
    """What a point reads from files, read once: the network description, the
    topology file it names (``{"kind": "file"}``) and the trace's jobs.

    On a Ray cluster the driver reads these and puts each distinct one in the
    object store once, so no worker needs the files and no task pickles them."""

    net_spec: Mapping[str, Any]
    topology: Topology | None = None
    jobs: tuple[TraceJob, ...] | None = None
    coflows: CoflowTrace | None = None

    def network(self) -> Network:
        if self.topology is not None:
            return file_network(self.topology)  # the file already read
        return make_network(self.net_spec)


#: What identifies a point's :class:`Inputs`: its network, trace and coflow trace.
InputKey = tuple[str, str | None, str | None]


def input_key(point: Point) -> InputKey:
    """Points with the same key share one :class:`Inputs`."""
    return (point.network, point.trace, point.coflow_trace)


def load_inputs(point: Point) -> Inputs:
    """Read the files a point names (trace, coflow trace, topology file)."""
    net_spec: dict[str, Any] = json.loads(point.network)
    if point.coflow_trace:
        if point.trace:
            raise SpecError("trace", "give either a trace or a coflow trace")
        from sim.coflow.trace import load_coflow_trace

        return Inputs(net_spec, coflows=load_coflow_trace(point.coflow_trace))
    jobs = None
    if point.trace:
        from sim.traces import load_trace

        trace_net, trace_jobs = load_trace(point.trace)
        net_spec = trace_net or net_spec
        jobs = tuple(trace_jobs)
    topology = None
    if net_spec.get("kind") == "file":
        topology = getattr(make_network(net_spec), "topology", None)
    return Inputs(net_spec, topology, jobs)


def point_jobs(point: Point, inputs: Inputs) -> tuple[Network, list[TraceJob]]:
    """The network and the jobs a point simulates: its trace's, or its mix drawn from
    its seed (the same jobs whatever the policy)."""
    from sim.workloads import generate_mix

    net = inputs.network()
    if inputs.jobs is not None:
        return net, list(inputs.jobs)
    bw = gbit(float(inputs.net_spec.get("gbit", NETWORK_DEFAULTS["gbit"])))
    jobs = generate_mix(
        point.mix, hosts_of(net), bw, point.n_jobs, point.load, point.iterations, point.seed
    )
    return net, jobs


def run_point(point: Point, inputs: Inputs | None = None) -> dict[str, Any]:
    """Simulate one point; returns its parameters and the run's summary.

    ``inputs`` is :func:`load_inputs` of the point, read beforehand (shared by many
    points); without it the point reads its files itself."""
    if inputs is None:
        inputs = load_inputs(point)
    if inputs.coflows is not None:
        coflows = simulate_coflow_trace(
            inputs.coflows,
            point.policy,
            point.port_gbit,
            point.arrangement,
            point.levels,
            point.rerank,
            point.coflowsim,
        )
        return {**point.label(), **coflows.summary()}
    net, jobs = point_jobs(point, inputs)
    hosts = hosts_of(net)
    runs = [j.to_run(hosts) for j in jobs]
    rerank: Literal["group", "flow"] = "flow" if point.rerank == "flow" else "group"
    cfg = SimConfig(
        policy=point.policy,
        levels=point.levels,
        rerank=rerank,
        replan_interval=point.replan_interval,
        record_flows=False,
    )
    res = Simulator(net, runs, cfg).run()
    return {**point.label(), **simulated(inputs, jobs), **res.summary()}


def simulate_coflow_trace(
    trace: CoflowTrace,
    policy: str,
    port_gbit: float,
    arrangement: str = "coflow",
    levels: int | None = None,
    rerank: str = "group",
    coflowsim: bool = False,
    progress: Callable[[int, int, float], None] | None = None,
) -> CoflowResult:
    """Simulate a coflow-benchmark trace: what ``sim run --coflow-trace`` runs, and
    each ``sim sweep --coflow-trace`` point. ``port_gbit`` is in units of 2^30 bit/s
    (coflowsim's "1 Gbps"); ``progress`` as :func:`sim.coflow.workload.simulate_coflows`'s."""
    from sim.coflow.trace import flow_arrays
    from sim.coflow.workload import MODELS, simulate_coflows

    if arrangement not in MODELS:
        raise SpecError("arrangement", f"unknown {arrangement!r} (known: {list(MODELS)})")
    if not port_gbit > 0:
        raise SpecError("port-gbit", f"must be positive, got {port_gbit}")
    port = port_gbit * 2**30 / 8
    if coflowsim:
        from sim.coflow.compat import simulate_compat

        return simulate_compat(trace, policy, port)
    return simulate_coflows(
        flow_arrays(trace),
        policy,
        port,
        model=arrangement,
        levels=levels,
        rerank=rerank,
        progress=progress,
    )


def simulated(inputs: Inputs, jobs: Sequence[TraceJob]) -> dict[str, Any]:
    """A trace point's ``network``/``n_jobs``/``iterations``/``load`` as simulated.

    Why: a trace brings its own network and jobs, and :class:`Point` keeps the CLI's
    defaults for those fields (a 1 Gbit/s big-switch trace of 2 jobs was reported as
    "leafspine 100 Gbit/s, 6 jobs"). A generated mix is described by its point
    already, so its row is left as it was (the evaluation's rows stay identical).
    """
    if inputs.jobs is None:
        return {}
    iters = sorted({j.iterations for j in jobs})
    return {
        "network": json.dumps(dict(inputs.net_spec), sort_keys=True),
        "n_jobs": len(jobs),
        "iterations": iters[0] if len(iters) == 1 else f"{iters[0]}-{iters[-1]}",
        "load": "trace",
    }


class PointFn(Protocol):
    """What a sweep runs per point: :func:`run_point` or a function like it."""

    def __call__(self, point: Point, inputs: Inputs | None = None, /) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Done:
    """One finished point, for progress reports. ``where`` says what ran it (a Ray
    node ID, or ``local``); ``finished`` counts points done so far."""

    finished: int
    total: int
    index: int
    point: Point
    row: Mapping[str, Any]
    where: str


Progress = Callable[[Done], None]


def collect(
    points: Sequence[Point],
    finished: Iterable[tuple[int, dict[str, Any], str]],
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """The rows of ``points`` in point order, from ``finished``: ``(index, row, where)``
    in the order the points finish (what every backend yields), ``progress`` called
    once per finished point; a point without a row (lost) is an error."""
    rows: list[dict[str, Any] | None] = [None] * len(points)
    for n, (i, row, where) in enumerate(finished, 1):
        rows[i] = row
        if progress:
            progress(Done(n, len(points), i, points[i], row, where))
    missing = [points[i].label() for i, r in enumerate(rows) if r is None]
    if missing:
        raise SweepError(f"{len(missing)} point(s) without a result, first {missing[0]}")
    return [r for r in rows if r is not None]


def comparable(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Rows without :data:`TIMING_FIELDS`, as canonical JSON (exact float reprs, NaN
    kept): equal lists mean the same results, bit for bit, in the same order."""
    return [
        json.dumps({k: v for k, v in r.items() if k not in TIMING_FIELDS}, sort_keys=True)
        for r in rows
    ]

"""Parameter sweeps: the same code runs in local processes or on a Ray cluster.

A sweep is a list of :class:`Point` (plain, picklable values); :func:`run_point`
turns one into a summary row. Locally the rows come from a
``ProcessPoolExecutor``; with ``ray_address`` each point is a Ray task
(:mod:`sim.sweep_ray`; ray is an optional extra, ``pip install -r
requirements-ray.txt``, imported only on that path). Both backends return the
rows in the order of the points, and each row depends only on its point (every
random draw is seeded from ``Point.seed``), so the backends agree on every field
but the measured ``wall_s``.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from echelon.errors import EchelonError, SpecError
from sim.engine import SimConfig, Simulator
from sim.topology import UNLIMITED_BYTES_PER_S, hosts_of, make_network

if TYPE_CHECKING:
    from echelon.schedule import Network
    from echelon.topology import Topology
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
    the generated mix when given."""

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

    def label(self) -> dict[str, Any]:
        d = asdict(self)
        d["levels"] = "ideal" if self.levels is None else f"K={self.levels}"
        d["load"] = "batch" if self.load is None else self.load
        return d


@dataclass(frozen=True)
class Inputs:
    """What a point reads from files, read once: the network description, the
    topology file it names (``{"kind": "file"}``) and the trace's jobs.

    On a Ray cluster the driver reads these and puts each distinct one in the
    object store once, so no worker needs the files and no task pickles them."""

    net_spec: Mapping[str, Any]
    topology: Topology | None = None
    jobs: tuple[TraceJob, ...] | None = None

    def network(self) -> Network:
        if self.topology is not None:
            from echelon.topology import TopologyNetwork

            # as make_network's "file" kind, from the topology already read
            return TopologyNetwork(self.topology, UNLIMITED_BYTES_PER_S)
        return make_network(self.net_spec)


def input_key(point: Point) -> tuple[str, str | None]:
    """Points with the same key share one :class:`Inputs`."""
    return (point.network, point.trace)


def load_inputs(point: Point) -> Inputs:
    """Read the files a point names (trace, topology file)."""
    net_spec: dict[str, Any] = json.loads(point.network)
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
    bw = float(inputs.net_spec.get("gbit", 100)) * 1e9 / 8
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


def print_progress(done: Done) -> None:
    """One line per finished point on stderr (stdout stays for results)."""
    p = done.point
    lvl = "ideal" if p.levels is None else f"K={p.levels}"
    load = "batch" if p.load is None else p.load
    wall = done.row.get("wall_s")
    secs = f"{float(wall):6.2f} s" if isinstance(wall, int | float) else ""
    width = len(str(done.total))
    print(
        f"[{done.finished:{width}d}/{done.total}] point {done.index}: "
        f"{p.mix} {p.policy} {lvl} load={load} "
        f"seed={p.seed} {secs} on {done.where}",
        file=sys.stderr,
        flush=True,
    )


def grid(**axes: Sequence[Any]) -> list[Point]:
    """Cartesian product of the given axes (names of :class:`Point` fields)."""
    names = list(axes)
    for n in names:
        if n not in Point.__dataclass_fields__:
            raise SpecError(f"sweep.{n}", "not a sweep axis")
    return [
        Point(**dict(zip(names, combo, strict=True))) for combo in itertools.product(*axes.values())
    ]


def run_sweep(
    points: Sequence[Point],
    workers: int | None = None,
    ray_address: str | None = None,
    fn: PointFn = run_point,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Run every point; rows come back in the order of ``points``, one per point.

    ``progress`` is called once per finished point, in the order they finish."""
    if ray_address:
        from sim.sweep_ray import run_on_ray

        return run_on_ray(points, ray_address, fn, progress)
    workers = workers or min(len(points), os.cpu_count() or 1)
    rows: list[dict[str, Any] | None] = [None] * len(points)
    if workers <= 1 or len(points) <= 1:
        for i, p in enumerate(points):
            rows[i] = fn(p)
            if progress:
                progress(Done(i + 1, len(points), i, p, rows[i] or {}, "local"))
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(fn, p): i for i, p in enumerate(points)}
            for n, fut in enumerate(as_completed(futures), 1):
                i = futures[fut]
                rows[i] = fut.result()
                if progress:
                    progress(Done(n, len(points), i, points[i], rows[i] or {}, "local"))
    return complete(rows, points)


def complete(
    rows: Sequence[dict[str, Any] | None], points: Sequence[Point]
) -> list[dict[str, Any]]:
    """The rows, after checking that every point has one (none lost)."""
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


def write_rows(path: str, rows: Iterable[Mapping[str, Any]]) -> None:
    """Rows as CSV (``.csv``) or JSON (anything else)."""
    import csv
    from pathlib import Path

    rows = list(rows)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix == ".csv":
        with p.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else [])
            w.writeheader()
            w.writerows(rows)
    else:
        p.write_text(json.dumps(rows, indent=1))

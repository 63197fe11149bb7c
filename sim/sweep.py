"""Parameter sweeps: the same code runs in local processes or on a Ray cluster.

A sweep is a list of :class:`Point` (plain, picklable values); :func:`run_point`
turns one into a summary row. Locally the rows come from a
``ProcessPoolExecutor``; with ``ray_address`` each point is a Ray task
(``pip install ray``; ray is imported only on that path and is not a
dependency of the project).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, Literal

from echelon.errors import SpecError
from sim.engine import SimConfig, Simulator
from sim.topology import hosts_of, make_network


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


def run_point(point: Point) -> dict[str, Any]:
    """Simulate one point; returns its parameters and the run's summary."""
    from sim.workloads import generate_mix

    net_spec = json.loads(point.network)
    if point.trace:
        from sim.traces import load_trace

        trace_net, jobs = load_trace(point.trace)
        net_spec = trace_net or net_spec
        net = make_network(net_spec)
    else:
        net = make_network(net_spec)
        bw = float(net_spec.get("gbit", 100)) * 1e9 / 8
        jobs = generate_mix(
            point.mix, hosts_of(net), bw, point.n_jobs, point.load, point.iterations, point.seed
        )
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
    return {**point.label(), **res.summary()}


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
    fn: Callable[[Point], dict[str, Any]] = run_point,
) -> list[dict[str, Any]]:
    """Run every point; rows come back in the order of ``points``."""
    if ray_address:
        return _run_ray(points, ray_address, fn)
    workers = workers or min(len(points), os.cpu_count() or 1)
    if workers <= 1 or len(points) <= 1:
        return [fn(p) for p in points]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, points, chunksize=1))


def _run_ray(
    points: Sequence[Point], address: str, fn: Callable[[Point], dict[str, Any]]
) -> list[dict[str, Any]]:
    try:
        import ray
    except ImportError:
        raise SpecError("ray_address", "ray is not installed: pip install ray") from None
    ray.init(address=address, ignore_reinit_error=True)
    remote = ray.remote(fn)
    rows: list[dict[str, Any]] = ray.get([remote.remote(p) for p in points])
    return rows


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

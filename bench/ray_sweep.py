"""``python -m bench.ray_sweep``: the same sweep on the process pool and on Ray.

Starts a local two-node Ray cluster (:mod:`bench.ray_local`, one CPU per node, so both
backends run two simulations at a time) unless ``--ray-address`` names one, then
alternates the backends ``--repeats`` times and prints a markdown table of medians:

* *empty tasks*: ``--empty`` points whose function returns at once -- the cost of
  handing one point to a worker and its row back (pool: pickling through pipes;
  Ray: task submission, scheduling, object store), per task = wall / tasks x slots;
* *sweep*: a real grid (``--points`` of the CLI's kind); overhead per task =
  (wall x slots - simulated seconds) / tasks, throughput = tasks / wall.

Rows of the two backends are compared (:func:`sim.points.comparable`) on every run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from bench.harness import timed
from sim.eval.report import table
from sim.points import Inputs, Point, comparable
from sim.sweep import grid, run_sweep

SLOTS = 2


def empty_point(point: Point, inputs: Inputs | None = None, /) -> dict[str, Any]:
    """A point that costs nothing to compute: what is left is the backend's overhead."""
    return {"policy": point.policy, "seed": point.seed, "wall_s": 0.0}


def sweep_points() -> list[Point]:
    """48 closed batches of 0.1-2 s each (bigswitch, 10 Gbit/s, 8 jobs x 3 iterations)."""
    return grid(
        mix=["hybrid", "dp"],
        policy=["echelon", "fair", "varys", "fifo"],
        levels=[None, 8],
        seed=[0, 1, 2],
        n_jobs=[8],
        iterations=[3],
        network=[json.dumps({"kind": "bigswitch", "hosts": 16, "gbit": 10})],
    )


def measure(address: str, repeats: int, n_empty: int) -> list[list[str]]:
    ray: Any = importlib.import_module("ray")
    _, connect_s, _ = timed(partial(ray.init, address=address, logging_level="WARNING"))
    empty = [Point("none", "empty", seed=i) for i in range(n_empty)]
    points = sweep_points()
    res: dict[str, list[float]] = {}
    sim_s: dict[str, list[float]] = {}
    reference: list[str] | None = None
    try:
        for _ in range(repeats):
            for backend, addr in (("pool", None), ("ray", address)):
                _, wall, _ = timed(partial(run_sweep, empty, SLOTS, addr, empty_point))
                res.setdefault(f"empty {backend}", []).append(wall)
                rows, wall, _ = timed(partial(run_sweep, points, SLOTS, addr))
                res.setdefault(f"sweep {backend}", []).append(wall)
                sim_s.setdefault(backend, []).append(sum(float(r["wall_s"]) for r in rows))
                if reference is None:
                    reference = comparable(rows)
                elif comparable(rows) != reference:
                    raise SystemExit(f"error: {backend} rows differ from the first run's")
    finally:
        ray.shutdown()
    out = []
    for backend in ("pool", "ray"):
        e = statistics.median(res[f"empty {backend}"])
        w = statistics.median(res[f"sweep {backend}"])
        s = statistics.median(sim_s[backend])
        out.append(
            [
                "process pool, 2 processes" if backend == "pool" else "Ray, 2 nodes x 1 CPU",
                f"{e / n_empty * SLOTS * 1e3:.1f}",
                f"{n_empty / e:,.0f}",
                f"{w:.1f}",
                f"{len(points) / w:.2f}",
                f"{s:.1f}",
                f"{(w * SLOTS - s) / len(points) * 1e3:.0f}",
            ]
        )
    print(f"(joining the cluster took {connect_s:.2f} s, not counted above)", file=sys.stderr)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.ray_sweep", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--ray-address", help="an existing cluster (default: start a local one)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--empty", type=int, default=200, help="empty tasks per run")
    args = ap.parse_args(argv)
    cluster = None
    address = args.ray_address
    if address is None:
        from bench.ray_local import RAY_ENV, LocalCluster

        os.environ.update(RAY_ENV)  # before ray is imported: keep 127.0.0.1
        cluster = LocalCluster()
        t = time.perf_counter()
        cluster.start_head(cpus=1)
        cluster.add_node(cpus=1)
        print(f"local 2-node cluster up in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        address = cluster.address
    try:
        rows = measure(address, args.repeats, args.empty)
    finally:
        if cluster is not None:
            cluster.stop()
            cluster.remove_files()
    head = [
        "backend",
        "empty task: ms per task",
        "empty tasks/s",
        f"sweep of {len(sweep_points())}: wall (s)",
        "points/s",
        "simulated (s)",
        "overhead per point (ms)",
    ]
    print(table(head, rows))
    print(f"\nmedians of {args.repeats} alternating runs; load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

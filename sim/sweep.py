"""Parameter sweeps: a grid of points, run in local processes or on a Ray cluster.

:func:`grid` builds the points (:class:`sim.points.Point`); :func:`run_sweep` runs
them in a ``ProcessPoolExecutor`` or, with ``ray_address``, as Ray tasks
(:mod:`sim.ray.sweep`; ray is an optional extra, ``pip install -r
requirements-ray.txt``, imported only on that path). Both backends return the rows
in the order of the points.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from echelon.errors import SpecError
from sim.core.config import levels_label
from sim.points import Done, Point, PointFn, Progress, collect, run_point


def print_progress(done: Done) -> None:
    """One line per finished point on stderr (stdout stays for results)."""
    p = done.point
    lvl = levels_label(p.levels)
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
        from sim.ray.sweep import run_on_ray

        return run_on_ray(points, ray_address, fn, progress)
    workers = workers or min(len(points), os.cpu_count() or 1)
    if workers <= 1 or len(points) <= 1:
        return collect(points, ((i, fn(p), "local") for i, p in enumerate(points)), progress)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(fn, p): i for i, p in enumerate(points)}
        done = ((futures[f], f.result(), "local") for f in as_completed(futures))
        return collect(points, done, progress)


def write_rows(path: str, rows: Iterable[Mapping[str, Any]]) -> None:
    """Rows as CSV (``.csv``) or JSON (anything else)."""
    from pathlib import Path

    from sim.core.results import write_csv

    rows = list(rows)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix == ".csv":
        write_csv(p, rows)
    else:
        p.write_text(json.dumps(rows, indent=1))

"""Sweeps on a Ray cluster: one Ray task per point, the rows back in point order.

Why the rows equal the process pool's: a task runs the same :class:`~sim.points.PointFn`
on the same :class:`~sim.points.Point` and the same :class:`~sim.points.Inputs` (every
random draw is seeded from the point), and the driver puts each task's row at its
point's index, whatever order the tasks finish in.

Failures: a task whose worker process or node dies is run again by Ray (up to
:data:`MAX_RETRIES` times, on any node that is left); a point is a pure function of
its inputs, so a retry cannot change its row, and each point has exactly one task
(one ObjectRef), so no point is counted twice. An exception raised by the
simulation itself is not retried: it stops the sweep with that error.

Large inputs (a trace's jobs, a topology file) are read once by the driver and put
in the object store once per distinct (network, trace); tasks receive the
reference, which Ray resolves on the worker (copied once per node, not pickled
into every task). No worker needs the driver's files.

Ray is optional (``pip install -r requirements-ray.txt``); it is imported here only.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from echelon.errors import EchelonError, SpecError
from sim.points import (
    InputKey,
    Inputs,
    Point,
    PointFn,
    Progress,
    SweepError,
    collect,
    input_key,
    load_inputs,
)

#: Ray's ``max_retries`` per task: how many times a point whose worker or node died
#: is started again before the sweep gives up.
MAX_RETRIES = 5


@functools.cache
def code_fingerprint() -> str:
    """SHA-256 of the ``echelon`` and ``sim`` sources this process imports.

    A worker may import another copy of the project than the driver (another
    version installed on a node; Ray also adds the driver's working directory to
    the workers' ``sys.path``, which wins over an editable install, so a driver
    started inside another checkout makes the workers import that one). Its rows
    would then silently
    differ, so every task checks that it runs the driver's code."""
    digest = hashlib.sha256()
    for name in ("echelon", "sim"):
        root = Path(importlib.import_module(name).__file__ or "").parent
        for f in sorted(root.rglob("*.py")):
            digest.update(str(f.relative_to(root.parent)).encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()


def _run_task(fn: PointFn, point: Point, inputs: Inputs, code: str) -> tuple[dict[str, Any], str]:
    """The Ray task: the row and the ID of the node that computed it."""
    ray: Any = importlib.import_module("ray")
    node = str(ray.get_runtime_context().get_node_id())
    if code_fingerprint() != code:
        import sim

        raise SweepError(
            f"node {node[:8]} runs other code than the driver (sim from "
            f"{Path(sim.__file__ or '').parent}): install the same version on every node "
            "and start the driver outside other checkouts of the project"
        )
    return fn(point, inputs), node


def _import_ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise SpecError(
            "ray_address",
            "ray is not installed: pip install -r requirements-ray.txt (pip install ray==2.60.0)",
        ) from None


def _connect(ray: Any, address: str) -> bool:
    """Join the cluster unless this process already has; True if we joined."""
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=True)
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as exc:
        hint = ""
        loopback_kept = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") == "0"
        if address.startswith(("127.", "localhost")) and not loopback_kept:
            hint = (
                " (nodes started on 127.0.0.1 need RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 in "
                "this environment, see docs/simulator.md)"
            )
        raise SpecError("ray_address", f"cannot join Ray at {address!r}: {exc}{hint}") from None
    return True


def run_on_ray(
    points: Sequence[Point], address: str, fn: PointFn, progress: Progress | None
) -> list[dict[str, Any]]:
    """Run every point as a Ray task on the cluster at ``address`` (``auto`` or
    ``HOST:PORT``); rows in the order of ``points``."""
    ray = _import_ray()
    # read every file before joining: a bad trace fails here, fast and locally
    inputs: dict[InputKey, Inputs] = {}
    for p in points:
        key = input_key(p)
        if key not in inputs:
            inputs[key] = load_inputs(p)
    joined = _connect(ray, address)
    try:
        return _run(ray, points, inputs, fn, progress)
    finally:
        if joined:
            ray.shutdown()


def _run(
    ray: Any,
    points: Sequence[Point],
    inputs: dict[InputKey, Inputs],
    fn: PointFn,
    progress: Progress | None,
) -> list[dict[str, Any]]:
    shared = {key: ray.put(value) for key, value in inputs.items()}
    print(
        f"ray: {len(points)} tasks, {len(shared)} shared input(s) in the object store",
        file=sys.stderr,
        flush=True,
    )
    task = ray.remote(_run_task)
    code = code_fingerprint()
    # the name shows in `ray list tasks` and as the worker's process title while it runs
    refs = [
        task.options(
            name=f"sweep-point-{i}", num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False
        ).remote(fn, p, shared[input_key(p)], code)
        for i, p in enumerate(points)
    ]
    index = {ref: i for i, ref in enumerate(refs)}
    pending = list(refs)

    def finished() -> Iterator[tuple[int, dict[str, Any], str]]:
        nonlocal pending
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                row, node = _get(ray, ref, points[index[ref]])
                yield index[ref], row, f"node {node[:8]}"

    try:
        return collect(points, finished(), progress)
    finally:
        for ref in pending:  # only left on an error: stop the rest of the sweep
            ray.cancel(ref)


def _get(ray: Any, ref: Any, point: Point) -> tuple[dict[str, Any], str]:
    try:
        row, node = ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, EchelonError):
            raise cause from None  # the simulation's own error, as a local run raises it
        raise SweepError(f"point {point.label()} failed: {cause or exc}") from None
    except ray.exceptions.RayError as exc:
        raise SweepError(
            f"point {point.label()} lost on the Ray cluster after {MAX_RETRIES} retries: {exc}"
        ) from None
    return dict(row), str(node)

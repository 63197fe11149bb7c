"""Cross-check the emulation against the simulator's fluid model, flow by flow.

    python -m topo.crosscheck run/demo-results.json [--policy echelon] [--tolerance 0.02]

Runs :func:`sim.predict.predict_finish_times` on the demo jobs and topology of
a ``make run`` result and prints predicted vs measured finish times. Exit 1
when a flow differs by more than ``--tolerance`` seconds.

Which comparisons are meaningful (docs/demo.md has the numbers):

* ``echelon`` (strict priority): the fluid model and the emulated port agree to
  a few ms; the tolerance of 20 ms is ~24 packet times at 10 Mbit/s and covers
  HTB's per-class bursts, 1 ms pacing granularity and the soft switch's own
  latency. This is the checked case.
* ``fifo``: the simulator shares a level max-min fairly; a real FIFO queue
  serves in arrival order, so a flow that arrives behind a backlog waits for all
  of it. Deviations of hundreds of ms are expected — the model, not the
  emulation, is the wrong one there.
* Only the first iteration is comparable when a job runs several: the simulator
  starts iteration ``i+1`` when iteration ``i`` actually ends, the agents at its
  ideal end (see :mod:`hostagent.plan`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from echelon.errors import EchelonError
from echelon.model import IterationPlan
from topo import demo
from topo.topology import Topology, load

#: Ethernet + IPv4 + UDP + echelon header per packet, as tc counts it.
HEADER_BYTES = 14 + 20 + 8 + 16
DEFAULT_TOLERANCE_S = 0.02


class DemoJob:
    """A demo job as the simulator's ``Plannable`` (``job_id``, ``plan(i, t0)``)."""

    def __init__(self, job_id: str, build: Callable[[int], IterationPlan]) -> None:
        self.job_id = job_id
        self.build = build

    def plan(self, iteration: int = 0, t0: float = 0.0) -> IterationPlan:
        # Only iteration 0 (t0 = 0) is compared, where plan times are absolute.
        return self.build(iteration)


def paced_topology(path: str, rate_mbit: float) -> Topology:
    """The topology as the agents see it: a host's link is no faster than its pacing.

    The agents pace each host at ``rate_mbit`` (to spare the soft switch), and a
    host's concurrent flows share that rate; the model must know, or it lets a
    host's flows run in parallel at the full access-link rate.
    """
    topo = load(path)
    links = tuple(
        replace(lk, bw_mbit=min(lk.bw_mbit or rate_mbit, rate_mbit))
        if lk.a in topo.hosts or lk.b in topo.hosts
        else lk
        for lk in topo.links
    )
    return replace(topo, links=links)


def compare(results: dict[str, Any], policy: str) -> list[dict[str, Any]]:
    """Rows ``{echelon, index, ideal, predicted, measured, diff}`` for iteration 0."""
    from sim.predict import predict_finish_times

    if "topo_path" not in results or "policies" not in results:
        raise EchelonError("results: not a demo-results.json of python -m topo.run")
    if policy not in results["policies"]:
        raise EchelonError(f"policy: {policy!r} is not in the results")
    payload = int(results.get("packet_bytes", 1000)) - 16
    pred = predict_finish_times(
        [DemoJob("pipe", demo.pipe_plan), DemoJob("dp", demo.dp_plan)],
        paced_topology(results["topo_path"], float(results.get("rate_mbit", 40.0))),
        policy=policy,
        levels_mode="k8",
        header_bytes=HEADER_BYTES,
        payload_bytes=payload,
        iterations=1,
    )
    rows = []
    for job in results["policies"][policy]["jobs"].values():
        for e in job["echelons"]:
            for f in e["flows"]:
                key = (e["name"], f["index"])
                if key not in pred or f["actual"] is None:
                    continue
                rows.append({"echelon": e["name"], "index": f["index"], "ideal": f["ideal"],
                             "predicted": pred[key], "measured": f["actual"],
                             "diff": f["actual"] - pred[key]})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m topo.crosscheck", description=__doc__.split("\n")[0]
    )
    ap.add_argument("results", nargs="?", default="run/demo-results.json")
    ap.add_argument("--policy", default="echelon")
    ap.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE_S)
    args = ap.parse_args(argv)
    try:
        results = json.loads(Path(args.results).read_text())
        rows = compare(results, args.policy)
    except (OSError, ValueError) as exc:
        print(f"error: results: {exc}", file=sys.stderr)
        return 2
    except EchelonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{'flow':<16} {'ideal':>7} {'sim':>7} {'emul':>7} {'diff':>7}")
    for r in rows:
        print(f"{r['echelon'] + '#' + str(r['index']):<16} {r['ideal']:7.3f} "
              f"{r['predicted']:7.3f} {r['measured']:7.3f} {r['diff']:+7.3f}")  # fmt: skip
    worst = max((abs(r["diff"]) for r in rows), default=0.0)
    print(f"largest |diff| {worst * 1000:.1f} ms (tolerance {args.tolerance * 1000:.0f} ms)")
    return 0 if rows and worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())

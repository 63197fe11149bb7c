"""``python -m bench.steady_profile``: wall time of a fixed set of steady-state runs.

Why it exists: the steady-state headline (:mod:`sim.eval.steady`, ``python -m
sim.eval --steady-seeds 10``) is about a thousand such runs, so their speed decides
whether the headline fits the machine. Each run of :data:`RUNS` is repeated
``--repeat`` times in this one process (interleaved, so load on the shared machine
hits all alike) and the median CPU and wall time of each are printed as a Markdown
table (CPU time: the wall time of a run moves with the other work on the machine).
``--rows FILE`` writes the runs' rows (``wall_s`` left out) as JSON, so that two
versions of the code can be checked for identical results with ``--check FILE``;
``--profile N`` prints the top ``N`` functions of a cProfile of one round.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from bench.harness import timed
from sim.eval import steady
from sim.points import TIMING_FIELDS, Point

#: (mix, Gbit/s, seed, policy): the echelon policy's re-plans on each mix, the slowest
#: group baseline and two per-flow ones.
RUNS: tuple[tuple[str, float, int, str], ...] = (
    ("hybrid", 25.0, 1, "echelon"),
    ("dp", 10.0, 0, "echelon"),
    ("mixed", 100.0, 0, "echelon"),
    ("hybrid", 25.0, 1, "sincronia"),
    ("dp", 10.0, 0, "fair"),
    ("dp", 10.0, 0, "srpt"),
)


def point(mix: str, gbit: float, seed: int, policy: str) -> Point:
    """The steady-state grid's point (:func:`sim.eval.steady.points`) of one run."""
    (pt,) = steady.points([seed], [policy], [mix], [gbit])
    return pt


def label(run: tuple[str, float, int, str]) -> str:
    mix, gbit, seed, policy = run
    return f"{policy} {mix} {gbit:g} Gbit/s seed {seed}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.steady_profile", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--repeat", type=int, default=3, help="rounds over the runs (default 3)")
    ap.add_argument("--rows", type=Path, help="write the runs' rows (no wall_s) as JSON")
    ap.add_argument("--check", type=Path, help="compare the rows with this JSON file")
    ap.add_argument("--profile", type=int, default=0, help="cProfile one round, top N")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    walls: dict[str, list[float]] = {label(r): [] for r in RUNS}
    cpus: dict[str, list[float]] = {label(r): [] for r in RUNS}
    rows: dict[str, Any] = {}
    prof = cProfile.Profile() if args.profile else None
    for _ in range(args.repeat):
        # each round meets each draw afresh (a sweep's worker meets a draw under about
        # half of the policies, this round under one to three)
        steady._PLANS.clear()
        for r in RUNS:
            if prof is not None:
                prof.enable()
            row, wall, cpu = timed(partial(steady.run_steady, point(*r)))
            if prof is not None:
                prof.disable()
            walls[label(r)].append(wall)
            cpus[label(r)].append(cpu)
            rows[label(r)] = {k: v for k, v in row.items() if k not in TIMING_FIELDS}
        if prof is not None:
            pstats.Stats(prof).sort_stats("cumulative").print_stats(args.profile)
            prof = None
    print("| run | median CPU (s) | median wall (s) | all CPU (s) |\n|---|---:|---:|---|")
    for name, w in walls.items():
        c = cpus[name]
        each = ", ".join(f"{x:.2f}" for x in c)
        print(f"| {name} | {statistics.median(c):.2f} | {statistics.median(w):.2f} | {each} |")
    cpu = sum(statistics.median(c) for c in cpus.values())
    wall = sum(statistics.median(w) for w in walls.values())
    print(f"| sum of medians | {cpu:.2f} | {wall:.2f} | |")
    if args.rows:
        args.rows.write_text(json.dumps(rows, indent=1, sort_keys=True))
    if args.check:
        want = json.loads(args.check.read_text())
        got = json.loads(json.dumps(rows, sort_keys=True))
        bad = [k for k in want if want[k] != got.get(k)]
        print("rows identical" if not bad else f"rows DIFFER: {bad}")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Compare policies over several ``make run`` results: per run and policy, the mean
iteration time of each job, their mean over the jobs and the slowest job.

    python -m topo.summary run/on1/demo-results.json run/on2/demo-results.json ...
        [--policies echelon-online,echelon] [--baseline echelon]

Why a separate command: the issue's criterion ("online ahead of static, reproduced
over >= 3 runs") is about several runs, and the demo writes one result per run.
"Ahead" is judged on the mean over the jobs of their mean iteration time (what the
online policy aims at: the mean, at the price of the largest job) and reported
next to the slowest job's, so neither is hidden. Exit 1 when a result lacks a
policy or a job did not complete (its iteration times would be wrong).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

from echelon.errors import EchelonError
from echelon.specs import read_file
from topo.report import iteration_times


def run_table(results: dict[str, Any], policies: list[str]) -> dict[str, dict[str, float]]:
    """``policy -> {job: mean iteration time, "mean": over jobs, "max": slowest job}``."""
    for pol in policies:
        if pol not in results.get("policies", {}):
            raise EchelonError(f"policies: {pol!r} is not in the results")
    _, times = iteration_times(results)
    out: dict[str, dict[str, float]] = {}
    for pol in policies:
        incomplete = sorted(set(results["policies"][pol]["jobs"]) - set(times[pol]))
        if incomplete:
            raise EchelonError(f"jobs.{incomplete[0]}: incomplete under {pol}")
        row = dict(sorted(times[pol].items()))
        row["mean"], row["max"] = statistics.fmean(row.values()), max(row.values())
        out[pol] = row
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m topo.summary", description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--policies", default="echelon-online,echelon,coflow,fifo")
    ap.add_argument("--baseline", default="echelon", help="compared with the first policy")
    args = ap.parse_args(argv)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if args.baseline not in policies:
        policies.append(args.baseline)
    tables = []
    try:
        for path in args.results:
            tables.append(run_table(read_file(path), policies))
    except (OSError, ValueError) as exc:
        print(f"error: results: {exc}", file=sys.stderr)
        return 2
    except EchelonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    cols = [c for c in tables[0][policies[0]] if c not in ("mean", "max")] + ["mean", "max"]
    print("run  policy            " + " ".join(f"{c:>7}" for c in cols))
    for i, t in enumerate(tables, 1):
        for pol in policies:
            print(
                f"{i:<4} {pol:<17} " + " ".join(f"{t[pol].get(c, float('nan')):7.3f}" for c in cols)
            )
    first, base = policies[0], args.baseline
    if first != base:
        for metric in ("mean", "max"):
            ahead = sum(t[first][metric] < t[base][metric] for t in tables)
            print(f"{first} vs {base}, {metric} over jobs: lower in {ahead} of {len(tables)} runs "
                  f"(medians {statistics.median(t[first][metric] for t in tables):.3f} vs "
                  f"{statistics.median(t[base][metric] for t in tables):.3f} s)")  # fmt: skip
        for job in cols[:-2]:
            ahead = sum(t[first][job] < t[base][job] for t in tables)
            print(f"  {job}: {first} lower in {ahead} of {len(tables)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())

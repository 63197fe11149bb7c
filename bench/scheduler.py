"""Benchmark: time to compute priorities for N concurrent EchelonFlows.

    python -m bench.scheduler [--sizes 10,100,1000,10000] [--repeat 5] [--hosts 64]
                            [--policies echelon,fair,...] [--seed 1]

For each N it generates N random EchelonFlows on a big switch (1-15 flows each,
sizes 10 kB-10 MB, staggered offsets, reference times spread over one second),
then reports the median wall time of ``policy.schedule`` and of
``schedule + flow_levels`` (ranks all the way to switch levels), the growth
from the previous N and the ratio to ``fair`` at the same N (``fair`` only walks
the flows once, so the ratio is the policy's own cost and is steadier than wall
time on a shared machine). Generation is not timed. Results and the exact
command go to docs/bench-scheduler.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from functools import partial

import numpy as np

from bench.harness import timed
from echelon.model import EchelonFlow, Flow
from echelon.network import BigSwitch
from echelon.policies import POLICIES, get_policy
from echelon.quantize import flow_levels


def workload(n: int, hosts: int, seed: int) -> tuple[list[EchelonFlow], BigSwitch]:
    rng = np.random.default_rng(seed)
    names = [f"h{i + 1}" for i in range(hosts)]
    out = []
    for e in range(n):
        k = int(rng.integers(1, 16))
        src = rng.integers(0, hosts, size=k)
        dst = (src + rng.integers(1, hosts, size=k)) % hosts
        sizes = np.exp(rng.uniform(np.log(1e4), np.log(1e7), size=k)).astype(np.int64)
        offsets = np.concatenate(([0.0], np.cumsum(rng.uniform(0, 0.01, size=k - 1))))
        flows = tuple(
            Flow(j, names[src[j]], names[dst[j]], int(sizes[j]), round(float(offsets[j]), 9))
            for j in range(k)
        )
        out.append(EchelonFlow(f"job{e}/0/g", f"job{e}", "g", flows, float(rng.uniform(0, 1))))
    return out, BigSwitch.uniform(names, 1.25e9)


def measure(
    policy: str, echelons: list[EchelonFlow], net: BigSwitch, repeat: int
) -> tuple[float, float]:
    pol = get_policy(policy)
    sched_t, total_t = [], []
    for _ in range(repeat):
        sched, s, _ = timed(partial(pol.schedule, echelons, net, now=0.5))
        _, levels, _ = timed(partial(flow_levels, sched, echelons))
        sched_t.append(s)
        total_t.append(s + levels)
    return statistics.median(sched_t), statistics.median(total_t)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.scheduler", description=__doc__.splitlines()[0]
    )
    p.add_argument("--sizes", default="10,100,1000,10000")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--hosts", type=int, default=64)
    p.add_argument("--policies", default=",".join(POLICIES))
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    try:
        sizes = [int(x) for x in args.sizes.split(",")]
        policies = args.policies.split(",")
        for pol in policies:
            get_policy(pol)
        if args.repeat < 1 or args.hosts < 2 or min(sizes) < 1:
            raise ValueError("need --repeat >= 1, --hosts >= 2, sizes >= 1")
    except Exception as exc:  # bad command line, not a bug
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"# {args.hosts} hosts, median of {args.repeat} runs, seconds")
    print(
        "| policy | N echelons | flows | schedule s | schedule+levels s "
        "| growth vs previous N | x fair |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    loads = {n: workload(n, args.hosts, args.seed) for n in sizes}
    base = {n: measure("fair", *loads[n], args.repeat)[1] for n in sizes}
    for pol in policies:
        prev = None
        for n in sizes:
            efs, net = loads[n]
            s, total = measure(pol, efs, net, args.repeat)
            growth = f"x{total / prev:.1f}" if prev else "-"
            prev = total
            flows = sum(len(e.flows) for e in efs)
            ratio = total / base[n]
            print(
                f"| {pol} | {n} | {flows} | {s:.4f} | {total:.4f} | {growth} | {ratio:.1f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m bench.coflow``: the coflow trace -- speed, and agreement with coflowsim.

Examples::

    python -m bench.coflow speed --trace FB2010-1Hr-150-0.txt
    python -m bench.coflow agree --trace FB2010-1Hr-150-0.txt
    python -m bench.coflow speed --trace FB2010-1Hr-150-0.txt --copies 15 --policy varys
    python -m bench.coflow probe --trace FB2010-1Hr-150-0.txt --policy fifo,varys

``speed`` runs each policy ``--repeat`` times (one process, one core) and prints
the median CPU time (user+sys of this process), events, load average and peak memory; ``--copies N``
tiles the trace N times one after another (copy k shifted by k hours), the
synthetic many-million-flow run. ``agree`` runs fair, varys and fifo with this
simulator's model and with the coflowsim-compatible options and compares both
with coflowsim's published averages (``REFERENCE``, from the traces README) and
with each other per coflow (Spearman rank correlation). The tables in
docs/measurements/simulator.md come from these commands.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
from collections.abc import Sequence
from dataclasses import replace
from functools import partial

import numpy as np
import numpy.typing as npt

from bench.harness import run_cli, timed
from echelon.errors import SpecError
from sim.coflow.compat import CompatOptions, simulate_compat
from sim.coflow.trace import Coflow, CoflowTrace, flow_arrays, load_coflow_trace
from sim.coflow.workload import simulate_coflows

#: coflowsim's average CCT (ms) on FB2010-1Hr-150-0 (traces README, default constants).
REFERENCE = {"fair": 70593.0, "varys": 28529.0, "fifo": 82649.0}
PORT = 2**30 / 8  # coflowsim's rack port, bytes/s


def spearman(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    """Spearman rank correlation (average ranks for ties)."""

    def ranks(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        order = np.argsort(x, kind="stable")
        r = np.empty(len(x))
        r[order] = np.arange(len(x), dtype=np.float64)
        _, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
        sums = np.bincount(inv, weights=r)
        return np.asarray(sums[inv] / counts[inv], dtype=np.float64)

    ra, rb = ranks(a), ranks(b)
    ra -= ra.mean()
    rb -= rb.mean()
    den = float(np.sqrt((ra * ra).sum() * (rb * rb).sum()))
    return float((ra * rb).sum() / den) if den > 0 else 1.0


def tile(trace: CoflowTrace, copies: int, shift_ms: float = 3_600_000.0) -> CoflowTrace:
    """The trace ``copies`` times in a row, copy ``k`` arriving ``k * shift_ms`` later."""
    out = [
        replace(c, id=f"{c.id}.{k}", arrival_ms=c.arrival_ms + k * shift_ms)
        for k in range(copies)
        for c in trace.coflows
    ]
    return CoflowTrace(trace.ports, tuple(out))


def _warm_up() -> None:
    """Load (or compile, on a machine's first run) the numba kernels outside the timing."""
    tiny = CoflowTrace(
        2, (Coflow("w", 0.0, (0,), ((1, 1.0),)), Coflow("v", 0.0, (0,), ((1, 2.0),)))
    )
    simulate_coflows(flow_arrays(tiny), "varys", PORT)


def cmd_speed(trace: CoflowTrace, policies: list[str], repeat: int = 1) -> str:
    """Each policy ``repeat`` times in this process: the median CPU time, the range,
    and the 1-minute load average before the first and after the last run (the
    machine is shared: CPU time, not wall time, is the measure)."""
    fa = flow_arrays(trace)
    _warm_up()
    rows = [
        "| policy | coflows | flows | events | policy calls | avg CCT (ms) "
        "| CPU median (s) | CPU min-max (s) | runs | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in policies:
        cpus = []
        load0 = os.getloadavg()[0]
        for _ in range(repeat):
            res, _wall, cpu = timed(partial(simulate_coflows, fa, p, PORT))
            cpus.append(cpu)
        s = res.summary()
        rows.append(
            f"| {p} | {s['coflows']:,} | {s['flows']:,} | {s['events']:,} | "
            f"{s['policy_calls']:,} | {s['avg_cct_ms']:,.0f} | {statistics.median(cpus):.1f} | "
            f"{min(cpus):.1f}-{max(cpus):.1f} | {repeat} | {load0:.1f}-{os.getloadavg()[0]:.1f} |"
        )
        print(rows[-1], file=sys.stderr, flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows.append(f"\npeak resident memory of the process: {peak:,.0f} MiB")
    return "\n".join(rows)


def cmd_agree(trace: CoflowTrace) -> str:
    fa = flow_arrays(trace)
    _warm_up()
    rows = [
        "| policy | coflowsim avg CCT (ms) | this simulator (ms) | ratio | "
        "coflowsim-compatible (ms) | ratio | Spearman (this vs compatible) "
        "| CPU (s) this / compat |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p, ref in REFERENCE.items():
        ours, _, cpu_o = timed(partial(simulate_coflows, fa, p, PORT))
        comp, _, cpu_c = timed(partial(simulate_compat, trace, p, PORT))
        idx = {n: i for i, n in enumerate(comp.names)}
        both = np.array([idx[n] for n in ours.names])
        rho = spearman(ours.cct, comp.cct[both])
        a, c = ours.cct.mean() * 1e3, comp.cct.mean() * 1e3
        rows.append(
            f"| {p} | {ref:,.0f} | {a:,.0f} | {a / ref:.3f} | {c:,.0f} | {c / ref:.3f} | "
            f"{rho:.3f} | {cpu_o:.1f} / {cpu_c:.1f} |"
        )
        print(rows[-1], file=sys.stderr, flush=True)
    return "\n".join(rows)


def cmd_ablate(trace: CoflowTrace, policy: str) -> str:
    """coflowsim-compatible options switched off one at a time (cumulatively)."""
    steps = [
        ("all coflowsim choices", CompatOptions()),
        ("+ exact arrivals (8-ms epochs)", CompatOptions(epoch_ms=8)),
        ("+ 1,000-ms second", CompatOptions(epoch_ms=8, second_ms=1000)),
        ("+ trace sizes (no MB rounding)", CompatOptions(epoch_ms=8, second_ms=1000, sizes=False)),
        (
            "+ 1-ms steps",
            CompatOptions(step_ms=1, epoch_ms=8, second_ms=1000, sizes=False),
        ),
    ]
    rows = ["| variant | avg CCT (ms) | CPU (s) |", "|---|---|---|"]
    for label, opt in steps:
        res, _, cpu = timed(partial(simulate_compat, trace, policy, PORT, opt))
        rows.append(f"| {policy}: {label} | {res.cct.mean() * 1e3:,.0f} | {cpu:.1f} |")
        print(rows[-1], file=sys.stderr, flush=True)
    ours, _, cpu = timed(lambda: simulate_coflows(flow_arrays(trace), policy, PORT))
    rows.append(f"| {policy}: this simulator | {ours.cct.mean() * 1e3:,.0f} | {cpu:.1f} |")
    return "\n".join(rows)


def cmd_probe(trace: CoflowTrace, policies: list[str]) -> str:
    """The compatible simulator with one FIFO/SEBF rule changed at a time: how much
    each moves the averages (the search for FIFO's and SEBF's gaps to coflowsim).
    The rows of the event-driven loop (receiver bytes = the sum of the flows, with
    its rate-rule probes) went with that loop on 2026-12-02; their last results are
    in docs/measurements/simulator.md."""
    probes = [
        ("as coflowsim's source (reducer counters, 8-ms steps)", CompatOptions()),
        (
            "without the negative-counter quotient in the bottleneck",
            CompatOptions(negative_counters=False),
        ),
        ("leftover flows keep moving after an admission", CompatOptions(relayout=False)),
    ]
    head = " | ".join(f"{p} avg CCT (ms) | vs coflowsim" for p in policies)
    rows = [f"| variant | {head} |", "|---|" + "---|---|" * len(policies)]
    for label, opt in probes:
        cells = []
        for p in policies:
            res = simulate_compat(trace, p, PORT, opt)
            avg = res.cct.mean() * 1e3
            ref = REFERENCE.get(p)
            cells.append(f"{avg:,.1f} | {avg / ref - 1:+.2%}" if ref else f"{avg:,.0f} | --")
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
        print(rows[-1], file=sys.stderr, flush=True)
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.coflow", description=__doc__)
    ap.add_argument("cmd", choices=("speed", "agree", "ablate", "probe"))
    ap.add_argument("--trace", required=True, help="coflow-benchmark trace file")
    ap.add_argument("--policy", default="fair,varys,sincronia,fifo,echelon")
    ap.add_argument("--copies", type=int, default=1, help="speed: tile the trace N times")
    ap.add_argument("--repeat", type=int, default=1, help="speed: runs per policy (median)")
    args = ap.parse_args(argv)
    return run_cli(lambda: print(command(args)))


def command(args: argparse.Namespace) -> str:
    """The table of ``args.cmd``."""
    trace = load_coflow_trace(args.trace)
    if args.copies < 1:
        raise SpecError("copies", f"must be >= 1, got {args.copies}")
    if args.cmd == "speed":
        if args.repeat < 1:
            raise SpecError("repeat", f"must be >= 1, got {args.repeat}")
        return cmd_speed(tile(trace, args.copies), args.policy.split(","), args.repeat)
    if args.cmd == "agree":
        return cmd_agree(trace)
    if args.cmd == "probe":
        return cmd_probe(trace, args.policy.split(","))
    return cmd_ablate(trace, args.policy.split(",")[0])


if __name__ == "__main__":
    sys.exit(main())

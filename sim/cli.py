"""``echelon-sim`` / ``python -m sim``: run a trace or a mix, generate traces, sweep grids.

Examples::

    python -m sim run --mix hybrid --jobs 6 --policy echelon --levels 8 --out run/sim
    python -m sim gen --mix pipeline --jobs 4 --load 0.5 --out trace.json
    python -m sim run --trace trace.json --policy varys --json result.json
    python -m sim run --mix hybrid --jobs 4 --json        # the summary dict on stdout
    python -m sim sweep --mix pipeline,hybrid --policy echelon,fair,varys \\
        --levels ideal,8 --seed 0,1 --out sweep.csv [--workers 2] [--ray-address auto]
    python -m sim sweep --coflow-trace FB2010-1Hr-150-0.txt --policy varys,fifo --out cf.csv

``run`` prints a summary table (what was simulated, then the results with
units); ``--json`` alone prints the summary as JSON instead, ``--json FILE``
writes every record to FILE. Long work shows progress on stderr (a bar on a
terminal, periodic lines otherwise; :mod:`sim.progressbar`); ``--quiet`` hides it.
Bad input prints ``error: <field>: <message>`` and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from echelon.errors import EchelonError, SpecError
from sim.core.config import parse_levels
from sim.points import Point
from sim.progressbar import Progress
from sim.summary import describe_network, summary_table
from sim.topology import NETWORK_DEFAULTS


def _load(text: str) -> float | None:
    if text in ("batch", "none"):
        return None
    try:
        return float(text)
    except ValueError:
        raise SpecError("load", f"a number or 'batch', got {text!r}") from None


def _network(args: argparse.Namespace) -> dict[str, Any]:
    if args.network:
        try:
            spec = json.loads(args.network)
        except ValueError as exc:
            raise SpecError("network", f"not JSON: {exc}") from None
        if not isinstance(spec, dict):
            raise SpecError("network", "must be a JSON object")
        return spec
    return {
        **NETWORK_DEFAULTS,
        "kind": args.net,
        "gbit": args.gbit,
        "oversubscription": args.oversub,
    }


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mix", default="pipeline", help="pipeline | hybrid | dp | mixed")
    p.add_argument("--jobs", type=int, default=6, help="jobs drawn from the mix")
    p.add_argument("--load", default="batch", help="offered load (Poisson arrivals) or 'batch'")
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--seed", default="0")
    p.add_argument("--net", default="leafspine", choices=("bigswitch", "leafspine", "fattree"))
    p.add_argument("--gbit", type=float, default=100.0, help="host link speed")
    p.add_argument("--oversub", type=float, default=2.0, help="leaf-spine oversubscription")
    p.add_argument("--network", help="network as JSON (overrides --net/--gbit/--oversub)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def _add_coflow(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--coflow-trace", help="coflow-benchmark trace (e.g. FB2010-1Hr-150-0.txt) instead of --mix"
    )
    p.add_argument(
        "--port-gbit",
        type=float,
        default=1.0,
        help="coflow trace: port speed in units of 2^30 bit/s (coflowsim's '1 Gbps')",
    )
    p.add_argument(
        "--arrangement",
        default="coflow",
        help="coflow trace: coflow (A = 0) | reducers-in-order",
    )
    p.add_argument(
        "--coflowsim",
        action="store_true",
        help="coflow trace: coflowsim-compatible semantics (sim/coflow/compat.py)",
    )


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="echelon-sim", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="simulate one trace or mix with one policy")
    _add_common(run)
    run.add_argument("--trace", help="trace file (.json/.yaml/.csv) instead of --mix")
    run.add_argument(
        "--chakra",
        help="a Chakra execution trace (.et file or rank directory; docs/chakra.md): its job "
        "runs next to the mix's (--jobs 0: alone) on the first hosts of the network",
    )
    run.add_argument(
        "--chakra-hosts", type=int, default=4, help="hosts of an SPMD (one-rank) Chakra trace"
    )
    _add_coflow(run)
    run.add_argument("--policy", default="echelon")
    run.add_argument("--levels", default="ideal", help="'ideal' or K switch queues (e.g. 8)")
    run.add_argument("--rerank", default="group", choices=("group", "flow"))
    run.add_argument("--out", help="directory for CSV results")
    run.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="FILE",
        help="every record as JSON to FILE; without FILE: the summary as JSON on stdout",
    )
    gen = sub.add_parser("gen", help="write a trace generated from a mix")
    _add_common(gen)
    gen.add_argument("--out", required=True, help="trace file (.json or .yaml)")
    sw = sub.add_parser("sweep", help="run a parameter grid in parallel")
    _add_common(sw)
    sw.add_argument("--trace", help="trace file instead of --mix")
    _add_coflow(sw)
    sw.add_argument("--policy", default="echelon,fair,fifo,srpt,edf,varys,sincronia")
    sw.add_argument("--levels", default="ideal,8")
    sw.add_argument("--workers", type=int, default=0, help="local processes (0 = CPU count)")
    sw.add_argument(
        "--ray-address",
        help="run each point as a task on a Ray cluster: auto or HOST:PORT "
        "(pip install -r requirements-ray.txt)",
    )
    sw.add_argument("--out", required=True, help="results (.csv or .json)")
    return ap


def _cmd_coflow(args: argparse.Namespace) -> None:
    from sim.coflow.trace import load_coflow_trace
    from sim.points import simulate_coflow_trace

    if args.trace:
        raise SpecError("trace", "give either --trace or --coflow-trace")
    trace = load_coflow_trace(args.coflow_trace)
    bar = Progress("simulating", len(trace.coflows), "coflows", quiet=args.quiet)
    try:
        res = simulate_coflow_trace(
            trace,
            args.policy,
            args.port_gbit,
            args.arrangement,
            parse_levels(args.levels),
            args.rerank,
            args.coflowsim,
            progress=lambda done, _n, now: bar.update(done, f"simulated {now:.1f} s"),
        )
    finally:
        bar.close()
    context = [
        ("simulated", f"coflow trace {args.coflow_trace}, ports {args.port_gbit:g} x 2^30 bit/s")
    ]
    _print_summary(res.summary(), context, args.json == "-")
    rows = res.rows()
    if args.out:
        from sim.core.results import write_csv

        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_csv(out / "coflows.csv", rows, ["coflow"])
    if args.json and args.json != "-":
        Path(args.json).write_text(json.dumps({"summary": res.summary(), "coflows": rows}))


def _cmd_run(args: argparse.Namespace) -> None:
    if args.coflow_trace:
        _cmd_coflow(args)
        return
    from sim.core.engine import SimConfig, Simulator
    from sim.points import load_inputs, point_jobs
    from sim.topology import hosts_of
    from sim.workloads import chakra_job

    point = _point(args, args.trace)
    inputs = load_inputs(point)
    net = inputs.network()
    jobs = []
    if args.trace or args.jobs or not args.chakra:
        jobs = point_jobs(point, inputs)[1]
    if args.chakra:
        jobs.append(chakra_job(args.chakra, hosts_of(net), args.chakra_hosts, args.iterations))
    runs = [j.to_run(hosts_of(net)) for j in jobs]
    cfg = SimConfig(
        policy=args.policy,
        levels=parse_levels(args.levels),
        rerank=args.rerank,
        record_tasks=bool(args.out or (args.json and args.json != "-")),
    )
    bar = Progress("simulating", sum(r.iterations for r in runs), "iterations", quiet=args.quiet)

    def progress(done: int, total: int, now: float) -> None:
        bar.update(done, f"simulated {now:.3f} s")

    try:
        res = Simulator(net, runs, cfg, progress=progress).run()
    finally:
        bar.close()
    if args.chakra:
        what = f"the Chakra trace {args.chakra} + {len(jobs) - 1} jobs of mix {args.mix}"
    elif args.trace:
        what = f"{len(jobs)} jobs from {args.trace}"
    else:
        load = "closed batch" if _load(args.load) is None else f"offered load {args.load}"
        what = f"{len(jobs)} jobs of mix {args.mix}, seed {args.seed}, {load}"
    context = [("simulated", describe_network(inputs.net_spec)), ("jobs", what)]
    _print_summary(res.summary(), context, args.json == "-")
    if args.out:
        res.write_csv(args.out)
    if args.json and args.json != "-":
        res.write_json(args.json)


def _print_summary(summary: dict[str, Any], context: list[tuple[str, str]], as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary, indent=1))
    else:
        print(summary_table(summary, context))


def _cmd_gen(args: argparse.Namespace) -> None:
    from sim.points import load_inputs, point_jobs
    from sim.traces import write_trace

    point = _point(args)
    inputs = load_inputs(point)
    print(write_trace(args.out, point_jobs(point, inputs)[1], inputs.net_spec))


def _point(args: argparse.Namespace, trace: str | None = None) -> Point:
    """``run``'s and ``gen``'s mix (or ``trace``) on the options' network as a sweep point,
    so that they read the network and draw the jobs as every ``sweep`` point does
    (:func:`sim.points.point_jobs`); the policy is not part of it."""
    return Point(args.mix, "", None, _load(args.load), int(args.seed), args.jobs,
                 args.iterations, json.dumps(_network(args)), trace)  # fmt: skip


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _cmd_sweep(args: argparse.Namespace) -> None:
    from echelon.policies import get_policy
    from sim.progressbar import sweep_progress
    from sim.sweep import grid, run_sweep, write_rows

    policies = _split(args.policy)
    for p in policies:
        get_policy(p)  # fail fast on a typo
    levels = [parse_levels(x) for x in _split(args.levels)]
    if args.coflow_trace:
        if args.trace:
            raise SpecError("trace", "give either --trace or --coflow-trace")
        from sim.coflow.trace import load_coflow_trace

        load_coflow_trace(args.coflow_trace)  # fail fast on a bad file, before any worker
        points = grid(
            mix=["coflow-trace"],
            policy=policies,
            levels=levels,
            coflow_trace=[args.coflow_trace],
            port_gbit=[args.port_gbit],
            arrangement=[args.arrangement],
            coflowsim=[args.coflowsim],
        )
    else:
        points = grid(
            mix=_split(args.mix) if not args.trace else ["trace"],
            policy=policies,
            levels=levels,
            load=[_load(x) for x in _split(args.load)],
            seed=[int(x) for x in _split(args.seed)],
            n_jobs=[args.jobs],
            iterations=[args.iterations],
            network=[json.dumps(_network(args))],
            trace=[args.trace],
        )
    progress = sweep_progress(len(points), args.quiet)
    rows = run_sweep(points, args.workers or None, args.ray_address, progress=progress)
    write_rows(args.out, rows)
    for r in rows:
        if args.coflow_trace:
            print(
                f"{r['policy']:10s} {r['levels']:6s} coflows={r['coflows']} "
                f"avg_cct={r['avg_cct_ms']:.3f}ms p95_cct={r['p95_cct_ms']:.3f}ms "
                f"makespan={r['makespan_s']:.3f}s wall={r['wall_s']:.2f}s"
            )
            continue
        print(
            f"{r['mix']:9s} {r['policy']:10s} {r['levels']:6s} load={r['load']!s:6s} "
            f"seed={r['seed']} iter_mean={r['iter_mean']:.4f} iter_p99={r['iter_p99']:.4f} "
            f"jct_mean={r['jct_mean']:.3f} wall={r['wall_s']:.2f}s"
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        {"run": _cmd_run, "gen": _cmd_gen, "sweep": _cmd_sweep}[args.cmd](args)
    except (EchelonError, ValueError, OSError) as exc:  # a SpecError reads "<field>: <message>"
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

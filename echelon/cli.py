"""``echelon`` command line: inspect job descriptions and what the switch would do.

    echelon show JOB.yaml [--policy echelon] [--iteration 0] [--t0 0] [--gbps 10] [--json]
    echelon timeline JOB.yaml [--scale SECONDS_PER_CHAR]   # ideal timeline, ASCII
    echelon example PARADIGM        # print a shipped example description
    echelon list                    # paradigms and policies

Bad input prints ``error: <field>: <message>`` and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from echelon.errors import EchelonError, SpecError
from echelon.jobs import load_job_file
from echelon.network import BigSwitch
from echelon.paradigms import PARADIGMS
from echelon.policies import POLICIES, get_policy
from echelon.quantize import flow_levels, quantize
from echelon.timeline import nice_scale
from echelon.timeline import render as render_timeline

EXAMPLES = Path(__file__).parent / "examples"


def example_text(paradigm: str) -> str:
    """The shipped example description of ``paradigm`` (YAML text)."""
    if paradigm not in PARADIGMS:
        raise SpecError("paradigm", f"unknown paradigm {paradigm!r} (known: {sorted(PARADIGMS)})")
    return (EXAMPLES / f"{paradigm}.yaml").read_text()


def show(args: argparse.Namespace) -> dict[str, Any]:
    """Everything about one iteration of a job: flows, arrangement, ranks and levels."""
    spec = load_job_file(args.job)
    if not args.gbps > 0:
        raise SpecError("--gbps", f"must be positive, got {args.gbps}")
    plan = spec.plan(args.iteration, args.t0)
    net = BigSwitch.uniform(spec.hosts, args.gbps * 1e9 / 8)
    sched = get_policy(args.policy).schedule(plan.echelons, net, now=args.t0)
    levels = flow_levels(sched, plan.echelons)
    bands = quantize(sched, plan.echelons)
    echelons = []
    for ef in plan.echelons:
        q = bands[ef.name]
        echelons.append(
            {
                "name": ef.name,
                "group": ef.group,
                "t_ref": ef.t_ref,
                "coflow": ef.is_coflow,
                "band": q.priority,
                "ranges": [[r.lo_us, r.hi_us, r.priority] for r in q.ranges],
                "flows": [
                    {
                        "index": f.index,
                        "src": f.src,
                        "dst": f.dst,
                        "bytes": f.size,
                        "offset_s": f.offset,
                        "ideal_finish_s": ef.ideal_finish(f.index),
                        "rank": sched.flow_rank[ef.key(f)],
                        "level": levels[ef.key(f)],
                    }
                    for f in ef.flows
                ],
            }
        )
    return {
        "job": spec.job_id,
        "paradigm": spec.paradigm,
        "iteration": args.iteration,
        "ideal_iteration_s": spec.ideal_iteration_s,
        "policy": args.policy,
        "echelon_order": list(sched.echelon_order),
        "echelons": echelons,
    }


def render(report: dict[str, Any]) -> str:
    lines = [
        f"job {report['job']} ({report['paradigm']}), iteration {report['iteration']}, "
        f"ideal iteration {report['ideal_iteration_s'] * 1e3:.3f} ms, policy {report['policy']}"
    ]
    for ef in report["echelons"]:
        kind = "coflow" if ef["coflow"] else "echelon"
        lines.append(
            f"\n{ef['name']}  [{kind}, t_ref {ef['t_ref'] * 1e3:.3f} ms, band top {ef['band']}]"
        )
        lines.append(
            f"  {'j':>3} {'src':>6} {'dst':>6} {'bytes':>10} {'A(j) ms':>9} "
            f"{'ideal ms':>9} {'rank':>5} {'level':>5}"
        )
        for f in ef["flows"]:
            lines.append(
                f"  {f['index']:>3} {f['src']:>6} {f['dst']:>6} {f['bytes']:>10} "
                f"{f['offset_s'] * 1e3:>9.3f} {f['ideal_finish_s'] * 1e3:>9.3f} "
                f"{f['rank']:>5} {f['level']:>5}"
            )
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="echelon", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("show", help="print a job's EchelonFlows, offsets and levels")
    s.add_argument("job", help="job description (YAML or JSON)")
    s.add_argument("--policy", default="echelon", choices=POLICIES)
    s.add_argument("--iteration", type=int, default=0)
    s.add_argument("--t0", type=float, default=0.0, help="iteration start, seconds")
    s.add_argument("--gbps", type=float, default=10.0, help="host link speed (big switch)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    t = sub.add_parser("timeline", help="draw the ideal timeline and the arrangement")
    t.add_argument("job", help="job description (YAML or JSON)")
    t.add_argument("--scale", type=float, default=0.0, help="seconds per character (auto)")
    e = sub.add_parser("example", help="print an example job description")
    e.add_argument("paradigm", help=f"one of {sorted(PARADIGMS)}")
    sub.add_parser("list", help="list paradigms and policies")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "show":
            report = show(args)
            print(json.dumps(report, indent=2) if args.json else render(report))
        elif args.command == "timeline":
            spec = load_job_file(args.job)
            scale = args.scale or nice_scale(spec.ideal_iteration_s)
            if not scale > 0:
                raise SpecError("--scale", f"must be positive, got {args.scale}")
            print(render_timeline(spec.plan(), scale))
        elif args.command == "example":
            print(example_text(args.paradigm), end="")
        else:
            for name, par in sorted(PARADIGMS.items()):
                print(f"paradigm {name:15} {par.summary}")
            for pol in POLICIES:
                print(f"policy   {pol}")
    except EchelonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `echelon show ... | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

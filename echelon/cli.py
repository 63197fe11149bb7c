"""``echelon`` command line: inspect job descriptions and what the switch would do.

    echelon show JOB.yaml [--topo topo/star.yaml | --gbps 10] [--policy echelon]
                 [--iteration 0] [--t0 0] [--json]   # paradigm description or explicit spec
    echelon timeline JOB.yaml [--scale SECONDS_PER_CHAR]   # ideal timeline, ASCII
    echelon example PARADIGM        # print a shipped example description
    echelon job --model gpt2-xl|gpt3-2.7b|resnet50|CONFIG.json --tp N --pp N --dp N
                --hosts h1,h2,... [--paradigm P] [--micro-batches M] [--batch B]
                [--name JOB] [-o FILE]      # write a job description from a model
    echelon job --chakra TRACE.et|RANK_DIR --hosts h1,h2,... [--group-by consumer|op]
                [--name JOB] [-o FILE]
                                    # ... or from a Chakra execution trace (docs/chakra.md)
    echelon list                    # paradigms and policies

Bad input prints ``error: <field>: <message>`` and exits with status 2; valid but
implausible values (``fwd_s: 6``: seconds or ms?) print ``warning: <field>: ...``.
With ``--topo`` the job is scheduled on that topology's links, as the controller
does, so the levels shown are the ones ``echelonctl register`` installs for a
job registered alone. Beside other registered jobs they differ (the controller
orders every job together and cuts all their ranks into the switch's levels):
``echelonctl register --dry-run JOB.yaml`` asks the running controller's planner
what registering it would install, and changes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import yaml

from echelon.chakra.convert import job_from_path
from echelon.errors import EchelonError, SpecError
from echelon.jobgen import PARADIGMS as GEN_PARADIGMS
from echelon.jobgen import job_for_parallelism
from echelon.jobs import load_description, load_job, load_job_file
from echelon.models import MODEL_NAMES, load_model
from echelon.network import BigSwitch
from echelon.paradigms import PARADIGMS, get_paradigm
from echelon.policies import POLICIES, get_policy, not_installable, plugin_names
from echelon.quantize import flow_levels, quantize
from echelon.schedule import Network
from echelon.specs import SpecWarning, read_file
from echelon.timeline import nice_scale
from echelon.timeline import render as render_timeline
from echelon.topology import TopologyNetwork, topology_warnings
from echelon.topology import load as load_topology

EXAMPLES = Path(__file__).parent / "examples"


def example_text(paradigm: str) -> str:
    """The shipped example description of ``paradigm`` (YAML text); an unknown one is
    :func:`~echelon.paradigms.get_paradigm`'s error."""
    return (EXAMPLES / f"{get_paradigm(paradigm).name}.yaml").read_text()


def show(args: argparse.Namespace) -> dict[str, Any]:
    """Everything about one iteration of a job: flows, arrangement, ranks and levels."""
    known: Collection[str] | None = None
    net: Network
    warnings: list[SpecWarning] = []
    if args.topo:
        topo = load_topology(args.topo)
        warnings += topology_warnings(read_file(args.topo))
        known = topo.hosts
        net = TopologyNetwork(topo)
    desc = load_description(read_file(args.job), known, args.iteration, args.t0)
    warnings += desc.warnings
    if not args.topo:
        if not args.gbps > 0:
            raise SpecError("--gbps", f"must be positive, got {args.gbps}")
        hosts = sorted({h for ef in desc.echelons for f in ef.flows for h in (f.src, f.dst)})
        warnings.append(
            SpecWarning(
                "hosts",
                f"{', '.join(hosts)} not checked against a topology; give "
                "--topo topo/star.yaml to check them as registration does",
            )
        )
        net = BigSwitch.uniform(desc.spec.hosts if desc.spec else hosts, args.gbps * 1e9 / 8)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    efs = list(desc.echelons)
    sched = get_policy(args.policy).schedule(efs, net, now=args.t0)
    levels = flow_levels(sched, efs)
    bands = quantize(sched, efs)
    echelons = []
    for ef in efs:
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
        "job": desc.job_id,
        "file": args.job,
        "paradigm": desc.spec.paradigm if desc.spec else "explicit",
        "network": f"topology {args.topo}" if args.topo else f"big switch, {args.gbps:g} Gbit/s",
        "warnings": [str(w) for w in warnings],
        "iteration": args.iteration,
        "ideal_iteration_s": desc.ideal_iteration_s,
        "policy": args.policy,
        "echelon_order": list(sched.echelon_order),
        "echelons": echelons,
    }


def job_text(args: argparse.Namespace) -> str:
    """``echelon job``: the description of a model on hosts, as YAML, checked by the same
    parser ``echelon show`` and ``echelonctl register`` use."""
    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    if not hosts:
        raise SpecError("--hosts", "give the hosts, comma-separated (e.g. h1,h2,h3,h4)")
    if bool(args.model) == bool(args.chakra):
        raise SpecError("--model", "give either --model or --chakra")
    if args.chakra:
        data = job_from_path(args.chakra, hosts, args.name or "", args.group_by)
        header = f"# echelon job --chakra {args.chakra} (docs/chakra.md)\n"
    else:
        data = job_for_parallelism(
            load_model(args.model),
            hosts,
            tp=args.tp,
            pp=args.pp,
            dp=args.dp,
            paradigm=args.paradigm,
            micro_batches=args.micro_batches,
            batch=args.batch,
            name=args.name,
        )
        header = (
            f"# echelon job --model {args.model} --tp {args.tp} --pp {args.pp} --dp {args.dp}"
            f" (compute times: echelon/models.py's GPU, sizes in bytes)\n"
        )
    load_job(data)  # a generator or converter bug must not reach a file
    return header + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)


def render(report: dict[str, Any]) -> str:
    lines = [
        f"job {report['job']} ({report['paradigm']}), iteration {report['iteration']}, "
        f"ideal iteration {report['ideal_iteration_s'] * 1e3:.3f} ms, policy {report['policy']}, "
        f"{report['network']}",
        "levels: this job alone; beside other registered jobs they differ "
        f"(echelonctl register --dry-run {report['file']}: what registering it installs)",
    ]
    for ef in report["echelons"]:
        kind = "coflow" if ef["coflow"] else "echelon"
        lines.append(
            f"\n{ef['name']}  [{kind}, t_ref {ef['t_ref'] * 1e3:.3f} ms, band top {ef['band']}]"
        )
        ranges = " ".join(f"[{lo},{hi}]->{p}" for lo, hi, p in ef["ranges"])
        lines.append(f"  deadline ranges (µs): {ranges or '-'}")
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


#: ``echelon job --paradigm`` names that differ from the job format's ``paradigm:``.
_JOB_NAMES = {"pipedream_1f1b": "1f1b"}


def list_text() -> str:
    """``echelon list``: paradigms (with the ``echelon job --paradigm`` name where it
    differs) and policies (whether the switch can run them, and why not)."""
    lines = []
    for name, par in sorted(PARADIGMS.items()):
        alias = _JOB_NAMES.get(name)
        also = f" (echelon job --paradigm {alias})" if alias else ""
        lines.append(f"paradigm {name:15} {par.summary}{also}")
    for pol in [*POLICIES, *plugin_names()]:
        why = not_installable(get_policy(pol))
        where = f"simulator only: {why}" if why else "simulator and switch"
        lines.append(f"policy   {pol:15} {where}")
    lines.append(f"policy   {'NAME-online':15} make run: NAME re-planned online by the controller "
                 "(echelon-online is the default's first)")  # fmt: skip
    lines.append(f"policy   {'module:Class':15} your own (docs/policies.md)")
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="echelon", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("show", help="print a job's EchelonFlows, offsets and levels")
    s.add_argument("job", help="job description or explicit EchelonFlow spec (YAML or JSON)")
    s.add_argument(
        "--topo", help="topology file: schedule on its links, as the controller does (topo/*.yaml)"
    )
    s.add_argument(
        "--policy",
        default="echelon",
        help="a built-in (echelon list), an entry point or package.module:Class",
    )
    s.add_argument("--iteration", type=int, default=0)
    s.add_argument("--t0", type=float, default=0.0, help="iteration start, seconds")
    s.add_argument(
        "--gbps", type=float, default=10.0, help="host link speed of a big switch (no --topo)"
    )
    s.add_argument("--json", action="store_true", help="machine-readable output")
    t = sub.add_parser("timeline", help="draw the ideal timeline and the arrangement")
    t.add_argument("job", help="job description (YAML or JSON)")
    t.add_argument("--scale", type=float, default=0.0, help="seconds per character (auto)")
    e = sub.add_parser("example", help="print an example job description")
    e.add_argument("paradigm", help=f"one of {sorted(PARADIGMS)}")
    sub.add_parser("list", help="list paradigms and policies")
    j = sub.add_parser(
        "job", help="write a job description from a model and its parallelism, or a trace"
    )
    j.add_argument(
        "--model",
        help=f"{' | '.join(MODEL_NAMES)} | a Hugging Face config.json (read as JSON, no torch)",
    )
    j.add_argument(
        "--chakra",
        help="a Chakra execution trace: one rank's .et file (SPMD on every host) or a "
        "directory of <name>.<rank>.et files, one host per rank",
    )
    j.add_argument(
        "--group-by",
        choices=("consumer", "op"),
        default="consumer",
        help="--chakra: one EchelonFlow per consuming computation (default) or per operation",
    )
    j.add_argument("--hosts", required=True, help="comma-separated hosts, one worker each")
    j.add_argument("--tp", type=int, default=1, help="tensor-parallel degree")
    j.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree (stages)")
    j.add_argument("--dp", type=int, default=1, help="data-parallel degree")
    j.add_argument(
        "--paradigm",
        choices=GEN_PARADIGMS,
        help="default: from the degrees (pp: 1f1b, tp: tensor, dp: dp_allreduce, several: hybrid)",
    )
    j.add_argument("--micro-batches", type=int, default=8, help="pipeline micro-batches")
    j.add_argument(
        "--batch", type=int, default=0, help="batch per worker (0: 4 sequences / 256 images)"
    )
    j.add_argument("--name", help="job ID (default MODEL-PARADIGM)")
    j.add_argument("-o", "--output", help="write here instead of stdout")
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
        elif args.command == "job":
            text = job_text(args)
            if args.output:
                try:
                    Path(args.output).write_text(text)
                except OSError as exc:
                    raise SpecError("-o", f"cannot write {args.output}: {exc.strerror}") from None
                print(f"wrote {args.output}", file=sys.stderr)
            else:
                print(text, end="")
        elif args.command == "example":
            print(example_text(args.paradigm), end="")
        else:
            print(list_text(), end="")
    except EchelonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `echelon show ... | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A real training job among modelled ones: the Chakra DDP trace's job in a shared network.

The job of the shipped PyTorch DDP trace (``echelon job --chakra``, SPMD on four
hosts: 1,209 kernels in 13 steps, five bucket all-reduces of 8-31 MB that form one
EchelonFlow consumed by DDP's copy-back, docs/chakra.md) runs next to two modelled
jobs that share its host links: a GPipe pipeline and an FSDP job (GPT-2 XL, from
:mod:`sim.workloads`' templates). Every policy plays the same closed batch, at two
host-link speeds and with the trace's operations grouped both ways
(``--group-by consumer``: one EchelonFlow for the five buckets; ``op``: one Coflow per
collective); each table gives each job's mean and p99 iteration time, the lines under
it what EchelonFlow changes for the real job.

``python -m sim.eval.chakra [--doc FILE]`` prints (or writes) just this section in a
few seconds; ``python -m sim.eval`` puts it into docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from echelon.errors import EchelonError
from echelon.jobs import JobSpec, load_job
from echelon.network import BigSwitch
from echelon.policies import POLICIES
from sim.core.engine import JobRun, SimConfig, Simulator
from sim.eval.report import pct, table
from sim.workloads import Template, chakra_job, describe


def shared_trace(name: str) -> Path:
    """``name`` under the shared traces (``shared/traces/``): in ``$ECHELON_TRACES``, else
    beside this checkout (or its worktrees' folder), else beside the checkout it was
    cloned from (a CI clone in /tmp of a checkout that has them beside it). The first
    candidate when none has it (callers check ``exists()``)."""
    root = Path(__file__).resolve().parents[2]
    env = os.environ.get("ECHELON_TRACES")
    bases = [Path(env)] if env else [p / "shared/traces" for p in root.parents[:2]]
    if not env:
        origin = subprocess.run(
            ["git", "-C", str(root), "config", "--get", "remote.origin.url"],
            capture_output=True, text=True, check=False,
        ).stdout.strip()  # fmt: skip
        if origin and Path(origin).is_dir():
            bases += [p / "shared/traces" for p in Path(origin).resolve().parents[:2]]
    return next((b / name for b in bases if (b / name).exists()), bases[0] / name)


TRACE = shared_trace("chakra/pytorch-ddp-rank0.et")
#: The real job on h0-h3; the pipeline shares h2, h3; FSDP shares h1, h3.
PLACEMENT = {
    "ddp": ["h0", "h1", "h2", "h3"],
    "pipeline": ["h2", "h3", "h4", "h5"],
    "fsdp": ["h1", "h3", "h5", "h6"],
}
GBITS = (10.0, 25.0)
GROUPINGS = ("consumer", "op")
ITERATIONS = 5

Results = dict[str, dict[str, dict[str, float]]]  # policy -> job -> mean/p99/ideal (s)


def _specs(trace: Path, group_by: str) -> list[JobSpec]:
    real = chakra_job(str(trace), PLACEMENT["ddp"], 4, ITERATIONS, group_by=group_by)
    pipe = describe(
        "pipeline", Template("gpipe", "gpt2-xl", 4, micro_batches=8), PLACEMENT["pipeline"]
    )
    fsdp = describe("fsdp", Template("fsdp", "gpt2-xl", 4, unit=4), PLACEMENT["fsdp"])
    descs = (("ddp", real.description), ("pipeline", pipe), ("fsdp", fsdp))
    return [load_job({**d, "job": name}) for name, d in descs]


def run(
    trace: Path = TRACE,
    policies: Sequence[str] = POLICIES,
    gbit: float = GBITS[0],
    group_by: str = "consumer",
) -> Results:
    """Per policy and job: iteration mean and p99 (s), and the ideal iteration."""
    specs = _specs(trace, group_by)
    runs = [JobRun(spec, 0.0, ITERATIONS) for spec in specs]
    net = BigSwitch.uniform([f"h{i}" for i in range(8)], gbit * 1e9 / 8)
    out: Results = {}
    for pol in policies:
        res = Simulator(net, runs, SimConfig(policy=pol, levels=8)).run()
        per: dict[str, dict[str, float]] = {}
        for spec in specs:
            d = np.array([i.duration for i in res.iterations if i.job == spec.job_id])
            per[spec.job_id] = {
                "mean": float(d.mean()),
                "p99": float(np.percentile(d, 99)),
                "ideal": spec.ideal_iteration_s,
            }
        out[pol] = per
    return out


def run_all(trace: Path = TRACE) -> dict[tuple[float, str], Results]:
    """Every (host-link speed, grouping) of the section."""
    return {(g, by): run(trace, POLICIES, g, by) for g in GBITS for by in GROUPINGS}


INTRO = (
    "The job of a real PyTorch DDP training step (the Chakra trace `pytorch-ddp-rank0.et`, "
    "`echelon job --chakra`, docs/chakra.md) on hosts h0-h3, next to a GPipe pipeline "
    "(GPT-2 XL, 8 micro-batches, h2-h5) and an FSDP job (GPT-2 XL, h1, h3, h5, h6) that "
    "share its host links; a big switch, 8 queues, a closed batch of "
    f"{ITERATIONS} iterations per job, every policy. The trace's operations are grouped "
    "by the computation that consumes them (`--group-by consumer`, the default: the five "
    "bucket all-reduces are one EchelonFlow, `T_ref` at the end of backward, staggered by "
    "DDP's copy-back) or one group per operation (`--group-by op`: a Coflow per bucket, as "
    "`dp_allreduce` models DDP). Iteration time in ms, mean / p99 (the 99th percentile "
    "of 5 iterations, interpolated: close to the max).\n"
)


def section(results: dict[tuple[float, str], Results]) -> str:
    """The markdown section body (the report assembly adds the numbered heading)."""
    out = [INTRO]
    for (gbit, by), res in results.items():
        out.append(f"### {gbit:g} Gbit/s host links, `--group-by {by}`\n")
        out.append(_table(res))
    return "\n".join(out)


def _table(results: Results) -> str:
    jobs = list(next(iter(results.values())))
    ideal = next(iter(results.values()))
    body = [
        [f"`{pol}`", *(f"{per[j]['mean'] * 1e3:.1f} / {per[j]['p99'] * 1e3:.1f}" for j in jobs)]
        for pol, per in results.items()
    ]
    lines = [
        "Ideal iterations: "
        + ", ".join(f"{j} {ideal[j]['ideal'] * 1e3:.1f} ms" for j in jobs)
        + ".\n",
        table(["policy", *jobs], body),
    ]
    base = {p: r for p, r in results.items() if p != "echelon"}
    if "echelon" in results and base:
        e = results["echelon"]
        bm = min(base, key=lambda p: base[p]["ddp"]["mean"])
        bp = min(base, key=lambda p: base[p]["ddp"]["p99"])
        lines.append("\nThe real job under `echelon` against (negative: faster):\n")
        for label, pol in (("per-flow fair sharing (TCP-like)", "fair"),
                           ("the same groups as Coflows (`coflow`, `A = 0`)", "coflow"),
                           (f"the best baseline by mean (`{bm}`)", bm)):  # fmt: skip
            if pol in results:
                lines.append(
                    f"* {label}: mean {pct(e['ddp']['mean'], results[pol]['ddp']['mean'])}, "
                    f"p99 {pct(e['ddp']['p99'], results[pol]['ddp']['p99'])}"
                )
        lines.append(
            f"* the best baseline by p99 (`{bp}`): p99 "
            f"{pct(e['ddp']['p99'], base[bp]['ddp']['p99'])}; the modelled jobs' means "
            "against their best baseline: "
            + ", ".join(
                f"{j} {pct(e[j]['mean'], min(r[j]['mean'] for r in base.values()))}"
                for j in jobs
                if j != "ddp"
            )
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m sim.eval.chakra", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--trace", default=str(TRACE), help="the Chakra trace (one rank, SPMD)")
    ap.add_argument("--doc", help="write the section here (default: print it)")
    args = ap.parse_args(argv)
    try:
        text = "## A real training job: the Chakra DDP trace among modelled jobs\n\n" + section(
            run_all(Path(args.trace))
        )
    except (EchelonError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.doc:
        Path(args.doc).write_text(text)
        print(f"wrote {args.doc}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

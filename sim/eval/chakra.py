"""A real training job among modelled ones: the Chakra DDP trace's job in a shared network.

The job of the shipped PyTorch DDP trace (``echelon job --chakra``, SPMD on four
hosts: 1,209 kernels in 13 steps, five bucket all-reduces of 8-31 MB that form one
EchelonFlow consumed by DDP's copy-back, docs/chakra.md) runs next to two modelled
jobs that share its host links: a GPipe pipeline and an FSDP job (GPT-2 XL, from
:mod:`sim.workloads`' templates). Every policy plays the same closed batch; the
table gives each job's mean and p99 iteration time, and the last lines what
EchelonFlow changes for the real job against the best baseline.

``python -m sim.eval.chakra [--doc FILE]`` prints (or writes) just this section in a
few seconds; ``python -m sim.eval`` puts it into docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from echelon.errors import EchelonError
from echelon.jobs import JobSpec, load_job
from echelon.policies import POLICIES
from sim.core.engine import JobRun, SimConfig, Simulator
from sim.topology import big_switch
from sim.workloads import Template, chakra_job, describe


def _shared(name: str) -> Path:
    """``name`` among the shared Chakra traces: ``$CHAKRA_TRACES``, else the ``shared/``
    folder next to the checkout (or next to the worktrees' folder)."""
    root = Path(__file__).resolve().parents[2]
    env = os.environ.get("CHAKRA_TRACES")
    dirs = [Path(env)] if env else [p / "shared/traces/chakra" for p in root.parents[:2]]
    return next((d / name for d in dirs if (d / name).exists()), dirs[0] / name)


TRACE = _shared("pytorch-ddp-rank0.et")
#: The real job on h0-h3; the pipeline shares h2, h3; FSDP shares h1, h3.
PLACEMENT = {
    "ddp": ["h0", "h1", "h2", "h3"],
    "pipeline": ["h2", "h3", "h4", "h5"],
    "fsdp": ["h1", "h3", "h5", "h6"],
}
GBIT = 10.0
ITERATIONS = 5


def _specs(trace: Path) -> list[JobSpec]:
    real = chakra_job(str(trace), PLACEMENT["ddp"], 4, ITERATIONS).description
    pipe = describe(
        "pipeline", Template("gpipe", "gpt2-xl", 4, micro_batches=8), PLACEMENT["pipeline"]
    )
    fsdp = describe("fsdp", Template("fsdp", "gpt2-xl", 4, unit=4), PLACEMENT["fsdp"])
    return [load_job({**d, "job": name})
            for name, d in (("ddp", real), ("pipeline", pipe), ("fsdp", fsdp))]  # fmt: skip


def run(trace: Path = TRACE, policies: Sequence[str] = POLICIES) -> dict[str, dict[str, Any]]:
    """Per policy and job: iteration mean and p99 (s), and the ideal iteration."""
    specs = _specs(trace)
    runs = [JobRun(spec, 0.0, ITERATIONS) for spec in specs]
    net = big_switch([f"h{i}" for i in range(8)], GBIT * 1e9 / 8)
    out: dict[str, dict[str, Any]] = {}
    for pol in policies:
        res = Simulator(net, runs, SimConfig(policy=pol, levels=8)).run()
        per: dict[str, Any] = {}
        for spec in specs:
            d = np.array([i.duration for i in res.iterations if i.job == spec.job_id])
            per[spec.job_id] = {
                "mean": float(d.mean()),
                "p99": float(np.percentile(d, 99)),
                "ideal": spec.ideal_iteration_s,
            }
        out[pol] = per
    return out


def section(results: dict[str, dict[str, Any]]) -> str:
    """The markdown section (no heading number: the report assembly adds it)."""
    jobs = list(next(iter(results.values())))
    ideal = next(iter(results.values()))
    lines = [
        "The job of a real PyTorch DDP training step (the Chakra trace "
        "`pytorch-ddp-rank0.et`, `echelon job --chakra`, docs/chakra.md) on hosts h0-h3, "
        "next to a GPipe pipeline (GPT-2 XL, 8 micro-batches, h2-h5) and an FSDP job "
        "(GPT-2 XL, h1, h3, h5, h6) that share its host links; a big switch of "
        f"{GBIT:g} Gbit/s host links, 8 queues, a closed batch of {ITERATIONS} iterations "
        "per job. Ideal (contention-free) iterations: "
        + ", ".join(f"{j} {ideal[j]['ideal'] * 1e3:.1f} ms" for j in jobs)
        + ". Iteration time in ms, mean / p99:\n",
        "| policy | " + " | ".join(jobs) + " |",
        "|---|" + "---|" * len(jobs),
    ]
    for pol, per in results.items():
        cells = [f"{per[j]['mean'] * 1e3:.1f} / {per[j]['p99'] * 1e3:.1f}" for j in jobs]
        lines.append(f"| `{pol}` | " + " | ".join(cells) + " |")
    base = {p: r for p, r in results.items() if p != "echelon"}
    if "echelon" in results and base:
        e = results["echelon"]
        bm = min(base, key=lambda p: base[p]["ddp"]["mean"])
        bp = min(base, key=lambda p: base[p]["ddp"]["p99"])
        lines.append(
            "\nWhat EchelonFlow changes for the real job (`echelon`'s iteration time against "
            "another policy's, negative is faster):\n"
        )
        for label, pol in (("per-flow fair sharing (TCP-like)", "fair"),
                           ("the same groups as Coflows (`A = 0`)", "coflow"),
                           (f"the best baseline by mean (`{bm}`)", bm)):  # fmt: skip
            if pol in results:
                lines.append(
                    f"* vs {label}: mean {_pct(e['ddp']['mean'], results[pol]['ddp']['mean'])}, "
                    f"p99 {_pct(e['ddp']['p99'], results[pol]['ddp']['p99'])}"
                )
        lines.append(
            f"* best baseline by p99 (`{bp}`): {_pct(e['ddp']['p99'], base[bp]['ddp']['p99'])}; "
            "the modelled jobs' means against their best baseline: "
            + ", ".join(
                f"{j} {_pct(e[j]['mean'], min(r[j]['mean'] for r in base.values()))}"
                for j in jobs
                if j != "ddp"
            )
        )
    return "\n".join(lines) + "\n"


def _pct(a: float, b: float) -> str:
    return f"{(a - b) / b * 100:+.1f}%" if b else "n/a"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m sim.eval.chakra", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--trace", default=str(TRACE), help="the Chakra trace (one rank, SPMD)")
    ap.add_argument("--doc", help="write the section here (default: print it)")
    args = ap.parse_args(argv)
    try:
        text = "## A real training job: the Chakra DDP trace among modelled jobs\n\n" + section(
            run(Path(args.trace))
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

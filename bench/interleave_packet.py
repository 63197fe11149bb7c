"""``python -m bench.interleave_packet``: an interleaving scenario in the packet model.

    python -m bench.interleave_packet compatible-3 [--topo topo/interleave-uplink.yaml]
        [--scale 0.25] [--iterations 14] [--mode static|online] [--replan-delay 0.003]

Why it exists: the emulation (``topo.run --scenario``) and the simulator
(:mod:`sim.eval.interleave`) disagree on compatible-3 (the emulation's `echelon` runs
every job 1.14x slower, in a 2-cycle; the simulator 1.00x). The packet model
(:mod:`sim.packet`: the agents' pacers, port queues that keep each packet's class,
the closed loop) sits between the two and can play the controller either way:
``static`` -- the levels the controller installs at registration (its ``echelon``
plan over every job's iteration 0, quantised: :func:`topo.crosscheck.registration_levels`),
never re-planned, which is what ``topo.run`` plays for a policy without the ``-online``
suffix; ``online`` -- re-planned at group events
after ``--replan-delay``, as the simulator and ``echelon-online`` do. It prints each
job's iteration times alone and together, the levels of the static plan, and the
steady slowdown by the simulator's rules (:func:`sim.eval.steady.measure_iterations`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from echelon.jobs import JobSpec, load_job
from echelon.topology import TopologyNetwork, load
from sim.core.results import IterationRecord
from sim.eval import interleave, steady
from sim.packet import PacketModel
from sim.topology import file_network
from topo.agents import INTERLEAVE_PACKET_BYTES
from topo.crosscheck import packet_config, registration_levels
from topo.demo import scale_description


def play(
    specs: Sequence[JobSpec], net: TopologyNetwork, args: argparse.Namespace, iterations: int
) -> list[IterationRecord]:
    """One packet-model run; its iterations as records (seconds from the shared start)."""
    online = args.mode == "online"
    cfg = packet_config(
        load(args.topo),
        args.rate_mbit,
        INTERLEAVE_PACKET_BYTES,
        iterations,
        online=online,
        replan_interval=args.replan_interval if online else 0.0,
        replan_delay=args.replan_delay if online else 0.0,
        initial_levels={} if online else registration_levels(specs, net),
    )
    pm = PacketModel(list(specs), net, cfg)
    pm.run()
    return [
        IterationRecord(job, it, pm.iteration_start.get((job, it), 0.0), end)
        for (job, it), end in sorted(pm.iteration_end.items())
    ]


def series(records: Sequence[IterationRecord], job: str) -> str:
    ends = sorted(r.end for r in records if r.job == job)
    return " ".join(f"{b - a:.3f}" for a, b in zip([0.0, *ends], ends, strict=False))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.interleave_packet")
    ap.add_argument("scenario", choices=[s.key for s in interleave.SCENARIOS])
    ap.add_argument("--topo", default="topo/interleave-uplink.yaml")
    ap.add_argument("--scale", type=float, default=0.25)
    ap.add_argument("--iterations", type=int, default=14)
    ap.add_argument("--mode", choices=["static", "online"], default="static")
    ap.add_argument("--rate-mbit", type=float, default=40.0)
    ap.add_argument("--replan-interval", type=float, default=0.01)
    ap.add_argument("--replan-delay", type=float, default=0.003)
    args = ap.parse_args(argv)
    scenario = interleave.by_key(args.scenario)
    specs = [load_job(scale_description(d, args.scale)) for d in interleave.descriptions(scenario)]
    net = file_network(args.topo)
    if args.mode == "static":
        print("static plan (job, group, flow): level")
        for slot, level in sorted(registration_levels(specs, net).items()):
            print(f"  {slot}: {level}")
    alone: dict[str, float] = {}
    for spec in specs:
        recs = play([spec], net, args, steady.ALONE_ITERATIONS)
        alone[spec.job_id] = steady.alone_mean([r.duration for r in recs])
        print(f"{spec.job_id} alone: {series(recs, spec.job_id)} (c = {alone[spec.job_id]:.3f} s)")
    recs = play(specs, net, args, args.iterations)
    # every job still iterating at the stop, as the steady rules assume
    horizon = min(max(r.end for r in recs if r.job == s.job_id) for s in specs)
    row = steady.measure_iterations(recs, alone, horizon)
    for job, v in row["jobs"].items():
        print(f"{job} together ({args.mode}): {series(recs, job)}")
        print(f"    steady {v['steady_s']:.3f} s, slowdown {v['slowdown']:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

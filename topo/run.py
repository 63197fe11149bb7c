"""``make run``: the demo end to end — topology, controller, two contending jobs, three policies.

    python -m topo.run [--topo topo/star.yaml] [--target auto|soft|bmv2] [--headless]
                       [--policies echelon,coflow,fifo[,echelon-online]] [--iterations 3]
                       [--out-dir run]
                       [--jobs topo/jobs/pipe.yaml,topo/jobs/dp.yaml] [--scale 0.1]
                       [--release closed|open]

Starts the topology (BMv2 if installed, else the soft switch), the controller
daemon on it, registers the demo jobs -- paradigm job descriptions, scaled by
``--scale`` (:mod:`topo.demo`) -- through the controller's job registration,
reads back each group's echelon ID, plays the jobs' plans on the hosts once per
policy (switching the controller's policy between runs; closed loop by default:
the agents run the compute tasks, see :mod:`hostagent.closedloop`) and writes
``run/demo-results.json``, ``run/demo-finish-times.png`` and a comparison table.
``echelon-online`` runs the echelon policy with the agents reporting progress to
the controller's ``--progress-socket``, which re-plans the groups in flight
(docs/controller.md, "Online re-planning"); the other policies send no reports.
Every process, namespace and interface it made is removed on exit, Ctrl-C or
failure. With a terminal on stdin and no ``--headless`` it first drops into the
Mininet CLI.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from echelon.errors import EchelonError
from echelon.jobs import JobSpec
from echelon.topology import load
from hostagent.scenario import RELEASE_MODES
from topo import demo
from topo.agents import PACKET_BYTES, play_scenario
from topo.controller import ControllerProcess
from topo.net import EchelonNet
from topo.report import plot_finish_times, table

log = logging.getLogger("topo.run")
#: The controller's policies (controlplane.planning.POLICIES), checked before starting anything.
POLICIES = ("echelon", "coflow", "fifo", "echelon-online")
#: ``echelon-online``: the echelon policy, re-planned online from the agents' progress
#: reports (docs/controller.md, "Online re-planning"); ``echelon`` is then the static one.
ONLINE = "echelon-online"


class Terminated(BaseException):
    """SIGTERM/SIGHUP. Not a KeyboardInterrupt: the Mininet CLI swallows those and goes
    on, and the run must stop and clean up even while the CLI is open."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m topo.run", description=__doc__.split("\n")[0])
    p.add_argument("--topo", default="topo/star.yaml")
    p.add_argument("--target", default="auto", choices=("auto", "soft", "bmv2"))
    p.add_argument("--headless", action="store_true", help="never enter the Mininet CLI")
    p.add_argument("--policies", default="echelon,coflow,fifo")
    p.add_argument(
        "--idle-level",
        choices=("keep", "lowest"),
        default="keep",
        help="echelon-online: what a group not in flight gets (controller --idle-level)",
    )
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--out-dir", default="run")
    p.add_argument("--prefix", default="ec", help="prefix of root-namespace interface names")
    p.add_argument("--api-port", type=int, default=8086)
    p.add_argument("--rate-mbit", type=float, default=40.0, help="host sender pacing rate")
    p.add_argument("--jobs", default=",".join(demo.JOB_FILES), help="job description files")
    p.add_argument("--scale", type=float, default=demo.DEFAULT_SCALE,
                   help="multiplies every size and compute duration of the jobs")  # fmt: skip
    p.add_argument("--release", default="closed", choices=RELEASE_MODES,
                   help="closed: a flow leaves when its producer task ends, tasks wait for "
                        "their input flows; open: at the producer's ideal end")  # fmt: skip
    return p.parse_args(argv)


def read_echelon_ids(ctl: ControllerProcess, specs: list[JobSpec]) -> dict[tuple[str, str], int]:
    """``(job, group) -> echelon ID`` as the controller stored it (``GET /jobs/{job}``).

    Why read back rather than trust the registration reply: the IDs on the wire
    must be the ones the switch entries key on, and every group the agents will
    send must be known to the controller.
    """
    ids: dict[tuple[str, str], int] = {}
    for spec in specs:
        shown = ctl.get(f"/jobs/{spec.job_id}")
        for g in shown["groups"]:
            ids[(spec.job_id, str(g["group"]))] = int(g["echelon_id"])
        missing = {ef.group for ef in spec.plan().echelons} - {
            g for j, g in ids if j == spec.job_id
        }
        if missing:
            raise EchelonError(f"controller: job {spec.job_id!r} lacks groups {sorted(missing)}")
    return ids


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.iterations < 1:
        raise EchelonError(f"iterations: must be at least 1, got {args.iterations}")
    topo = load(args.topo)
    files = [f.strip() for f in args.jobs.split(",") if f.strip()]
    jobs = demo.load_demo_jobs(files, args.scale, set(topo.hosts))
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown or not policies:
        raise EchelonError(f"policies: {unknown or 'none'} not among {list(POLICIES)}")
    out = Path(args.out_dir)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    net = EchelonNet(topo, kind=args.target, prefix=args.prefix, log_dir=out / "logs")
    why = "simple_switch_grpc" if net.kind == "bmv2" else "embedded soft switch"
    if net.kind == "soft" and args.target == "auto":
        why += "; BMv2 is not installed"
    print(f"*** target: {net.kind} ({why})")
    ctl_topo = demo.controller_topology(args.topo, args.rate_mbit, out)
    ctl = ControllerProcess(str(ctl_topo), out, args.api_port, args.idle_level)
    results: dict[str, Any] = {
        "command": " ".join(["python -m topo.run", *sys.argv[1:]]),
        "topology": topo.name,
        "topo_path": str(Path(args.topo).resolve()),
        "controller_topo_path": str(ctl_topo.resolve()),
        "target": net.kind,
        "iterations": args.iterations,
        "release": args.release,
        "scale": args.scale,
        "job_files": files,
        "jobs": [j.description for j in jobs],
        "packet_bytes": PACKET_BYTES,
        "rate_mbit": args.rate_mbit,
        "idle_level": args.idle_level,
        "policies": {},
    }
    try:
        net.start()
        print(f"*** network up: {len(topo.hosts)} hosts, {len(topo.switches)} switches, "
              f"bottleneck shaper: {net.shaper_mode}")  # fmt: skip
        ctl.start()
        for job in jobs:
            ctl.register(job.description)  # what `echelonctl register FILE` posts
        specs = [j.spec for j in jobs]
        ids = read_echelon_ids(ctl, specs)
        print(f"*** registered jobs {[s.job_id for s in specs]} (scale {args.scale}), "
              f"echelon IDs {ids}")  # fmt: skip
        for policy in policies:
            ctl.set_policy("echelon" if policy == ONLINE else policy)  # drops online plans
            reports = f"unix:{ctl.progress_socket}" if policy == ONLINE else None
            t0 = time.monotonic()
            report = play_scenario(net, specs, args.iterations, ids, out / policy,
                                   rate_mbit=args.rate_mbit, release=args.release,
                                   controller=reports)  # fmt: skip
            report["wall_s"] = time.monotonic() - t0
            if policy == ONLINE:  # re-plans, updates, reaction times during this run
                report["online"] = ctl.get("/progress").get("online")
            results["policies"][policy] = report
            print(f"*** {policy}: done in {report['wall_s']:.1f} s")
        results["stats"] = ctl.get("/stats")
        (out / "demo-results.json").write_text(json.dumps(results, indent=1))
        print(table(results))
        print("mean ECT per EchelonFlow group (s):")
        print(demo.group_table(results))
        plot_finish_times(results, out / "demo-finish-times.png")
        print(f"*** wrote {out / 'demo-results.json'} and {out / 'demo-finish-times.png'}")
        if sys.stdin.isatty() and not args.headless and net.mn is not None:
            from mininet.cli import CLI
            from mininet.log import setLogLevel

            setLogLevel("output")  # the CLI prints command output at this level
            CLI(net.mn)
        return results
    finally:
        # A second Ctrl-C or signal must not cut the clean-up short.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        ctl.stop()
        net.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise Terminated(signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)  # terminal closed
    try:
        run(args)
        return 0
    except EchelonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Terminated):
        print("interrupted; everything started was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""``make run``: the demo end to end — topology, controller, the jobs, every policy in turn.

    python -m topo.run [--topo topo/star.yaml] [--target auto|soft|bmv2] [--headless]
                       [--policies echelon-online,echelon,coflow,fifo] [--iterations 3]
                       [--out-dir run]
                       [--jobs topo/jobs/pipe.yaml,topo/jobs/dp.yaml,topo/jobs/big.yaml]
                       [--scale 0.1] [--budget 20]
                       [--release closed|open] [--pcap [DIR]] [--port-view SECONDS]
                       [--packet-trace]
                       [--cli auto|before|during|after|never]

Starts the topology (BMv2 if installed, else the soft switch), the controller
daemon on it, registers the demo jobs -- paradigm job descriptions, scaled by
``--scale`` (:mod:`topo.demo`) -- through the controller's job registration,
reads back each group's echelon ID, plays the jobs' plans on the hosts once per
policy (switching the controller's policy between runs; closed loop by default:
the agents run the compute tasks, see :mod:`hostagent.closedloop`) and writes
``demo-results.json``, ``demo-finish-times.png``, ``demo-queue-depths.png`` (each
priority queue's depth over time at the bottleneck, per policy: :mod:`topo.queuedepth`),
the logs and a comparison table into
a fresh ``<out-dir>/<timestamp>/`` (``<out-dir>/latest`` points at it). Jobs whose run
would take longer than ``--budget`` seconds per policy at their bottleneck are scaled
down further, and the run says by how much; the agents' timeouts come from the same
estimate. A policy some of whose jobs did not finish is named, with the agents that
stopped and what they waited for, and the exit status is 1.
``echelon-online`` runs the echelon policy with the agents reporting progress to
the controller's ``--progress-socket``, which re-plans the groups in flight
(docs/controller.md, "Online re-planning"); the other policies send no reports.
Every process, namespace and interface it made is removed on exit, Ctrl-C or
failure.

``--pcap [DIR]`` (``make run PCAP=1``): every switch writes BMv2's per-port
captures into ``DIR/<switch>/IFACE_{in,out}.pcap`` (default ``<out-dir>/pcap``);
the run then prints per-port packets in/out every ``--port-view`` seconds and,
per policy, a table of packets per port and per egress priority
(:mod:`topo.portview`; also in ``demo-results.json``). ``--cli`` opens the
Mininet CLI ``before`` the traffic (``make run CLI=1``: ping the hosts, look
around; exiting starts the traffic), ``during`` it (traffic runs in the
background; the CLI's ``ports`` command shows the counts) or ``after`` it; the
default ``auto`` is ``after`` when stdin is a terminal, and ``--headless``
never opens it.

``--packet-trace`` (``make run TRACE=1``): every switch writes its per-packet trace
log into ``<out-dir>/<timestamp>/logs/<switch>-trace.txt`` -- BMv2's ``--log-level
trace`` (each packet's parser, tables, actions; ``--log-flush``), the soft switch's
level ``trace`` (each packet's bytes and forwarding decision). It slows the switch:
for reading what happened to a few packets, not for comparing policies.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack, nullcontext
from pathlib import Path
from types import FrameType
from typing import Any

from controlplane.planning import POLICIES as PLANNED
from controlplane.planning import check_policy
from echelon.errors import EchelonError
from echelon.jobs import JobSpec
from echelon.topology import TopologyNetwork, load
from hostagent.scenario import MAX_PACKET_BYTES, MIN_PACKET_BYTES, RELEASE_MODES
from sim.eval import interleave as sim_interleave
from sim.eval import steady
from targets.switch import resolve_kind
from topo import crosscheck, demo, portview
from topo import interleave as topo_interleave
from topo.agents import BMV2_PACKET_BYTES, INTERLEAVE_PACKET_BYTES, PACKET_BYTES, play_scenario
from topo.controller_process import ControllerProcess
from topo.interactive import CLI_MODES, Ticker, open_cli, resolve_cli, run_with_cli
from topo.interleave import ONLINE_SUFFIX, base_policy, policy_dir
from topo.net import EchelonNet
from topo.portview import PortView
from topo.queuedepth import QueueSampler, plot_queue_depths
from topo.report import plot_finish_times, table, verdict

log = logging.getLogger("topo.run")
#: What a run plays without ``--policies``, in this order. Any policy the controller
#: installs is accepted (controlplane.planning.check_policy, checked before starting
#: anything): a built-in, an entry point or ``package.module:Class`` (docs/policies.md).
POLICIES = ("echelon-online", "echelon", "coflow", "fifo")


def check_policies(policies: list[str]) -> None:
    """Fail before starting anything on a policy the controller would refuse."""
    if not policies:
        raise EchelonError("policies: none given")
    for p in policies:
        check_policy(topo_interleave.controller_policy(base_policy(p)))


class Terminated(BaseException):
    """SIGTERM/SIGHUP. Not a KeyboardInterrupt: the Mininet CLI swallows those and goes
    on, and the run must stop and clean up even while the CLI is open."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m topo.run", description=__doc__.split("\n")[0])
    p.add_argument("--topo", default=None,
                   help="topology file (default topo/star.yaml; with --scenario "
                        f"{topo_interleave.TOPO})")  # fmt: skip
    p.add_argument("--scenario", default=None, choices=[s.key for s in sim_interleave.SCENARIOS],
                   help="play an interleaving scenario in steady state instead of the demo "
                        "(each job alone, then every policy; topo/interleave.py)")  # fmt: skip
    p.add_argument("--horizon", type=float, default=steady.HORIZON,
                   help="--scenario: steady runs last this many times the largest "
                        "contention-free iteration (sim.eval.steady's horizon)")  # fmt: skip
    p.add_argument("--target", default="auto", choices=("auto", "soft", "bmv2"))
    p.add_argument("--headless", action="store_true", help="never enter the Mininet CLI")
    p.add_argument("--cli", choices=CLI_MODES, default="auto",
                   help="when to open the Mininet CLI: before, during or after the traffic "
                        "(auto: after, if stdin is a terminal)")  # fmt: skip
    p.add_argument("--pcap", nargs="?", const="", default=None, metavar="DIR",
                   help="per-port pcaps of every switch in DIR/<switch>/ "
                        "(default <out-dir>/pcap)")  # fmt: skip
    p.add_argument(
        "--packet-trace",
        action="store_true",
        help="each switch's per-packet trace log in <run>/logs/<switch>-trace.txt "
        "(BMv2: --log-level trace; slows the switch)",
    )
    p.add_argument(
        "--port-view",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="with --pcap: print per-port packet counts this often (0: off)",
    )
    p.add_argument("--policies", default=None,
                   help="comma-separated: built-in names (echelon, echelon-v1, sebf-edf, "
                        "varys, sincronia, coflow, fifo, edf, srpt), package.module:Class, "
                        "or NAME-online (NAME re-planned from the agents' progress). "
                        f"Default {','.join(POLICIES)}; "
                        "--scenario: fair and every built-in, NAME-online")  # fmt: skip
    p.add_argument(
        "--idle-level",
        choices=("keep", "lowest"),
        default="keep",
        help="echelon-online: what a group not in flight gets (controller --idle-level)",
    )
    p.add_argument(
        "--no-entered-reports",
        dest="entered_reports",
        action="store_false",
        help="echelon-online: agents do not report entering iteration 0 before the start "
        "(the controller then plans the opening groups only on their first release)",
    )
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--out-dir", default="run")
    p.add_argument("--prefix", default="ec", help="prefix of root-namespace interface names")
    p.add_argument("--api-port", type=int, default=8086)
    p.add_argument("--rate-mbit", type=float, default=40.0, help="host sender pacing rate")
    p.add_argument("--packet-bytes", type=int, default=None, metavar="BYTES",
                   help=f"UDP payload of the hosts' packets, {MIN_PACKET_BYTES}.."
                        f"{MAX_PACKET_BYTES} (the links take jumbo frames); default "
                        f"{PACKET_BYTES} on the soft switch, {BMV2_PACKET_BYTES} on BMv2 "
                        "(it forwards fewer packets per second), "
                        f"{INTERLEAVE_PACKET_BYTES} with --scenario")  # fmt: skip
    p.add_argument("--jobs", default=",".join(demo.JOB_FILES), help="job description files")
    p.add_argument("--scale", type=float, default=None,
                   help="multiplies every size and compute duration of the jobs (the whole "
                        f"timeline shrinks by it; topo/demo.py); default {demo.DEFAULT_SCALE}, "
                        f"with --scenario {topo_interleave.DEFAULT_SCALE}")  # fmt: skip
    p.add_argument("--budget", type=float, default=demo.DEFAULT_BUDGET_S, metavar="SECONDS",
                   help="scale the jobs down further when one policy's run would take longer "
                        "than this at its bottleneck (0: never)")  # fmt: skip
    p.add_argument("--release", default="closed", choices=RELEASE_MODES,
                   help="closed: a flow leaves when its producer task ends, tasks wait for "
                        "their input flows; open: at the producer's ideal end")  # fmt: skip
    p.add_argument("--retries", type=int, default=2,
                   help="play a policy again (at most this many times) when packets were "
                        "lost between the hosts and the switch")  # fmt: skip
    args = p.parse_args(argv)
    scenario = args.scenario is not None
    if args.topo is None:
        args.topo = topo_interleave.TOPO if scenario else "topo/star.yaml"
    if args.scale is None:
        args.scale = topo_interleave.DEFAULT_SCALE if scenario else demo.DEFAULT_SCALE
    if args.policies is None:
        args.policies = ",".join(
            topo_interleave.default_policies(PLANNED) if scenario else POLICIES
        )
    if scenario:
        args.budget = 0.0  # the steady runs' length is --horizon's
        args.release = "closed"  # steady state is measured on iterations: closed loop
    return args


def play_with_retries(
    play: Callable[[], dict[str, Any]], policy: str, retries: int, hint: str = ""
) -> dict[str, Any]:
    """``play()`` once, and again while it lost packets and ``retries`` allow.

    Why: the agents send UDP without retransmission, so a packet lost between a host
    and the switch (BMv2 drops some at its input when it does not get the CPU in time;
    docs/demo.md) leaves a flow, and closed loop everything after it, unfinished. Such
    a run measures the loss, not the policy. The report keeps every attempt's loss
    (``lost_packets_per_attempt``); the last attempt's data is the policy's. ``hint``
    follows the line of a last attempt that still lost packets: what the user can change
    (:func:`loss_hint`)."""
    losses: list[int] = []
    while True:
        report = play()
        incomplete = not all(a["complete"] for a in report.get("agents", {}).values())
        losses.append(int(report.get("lost_packets", 0)))
        if not incomplete or losses[-1] == 0 or len(losses) > retries:
            break
        print(f"*** {policy}: {losses[-1]} packets lost between the hosts and the switch "
              "(the switch did not get the CPU in time: a busy machine, not the policy; "
              f"docs/demo.md), so flows were unfinished; playing it again (attempt "
              f"{len(losses) + 1} of {retries + 1}; the verdict notes it)", flush=True)  # fmt: skip
    report["attempts"] = len(losses)
    report["lost_packets_per_attempt"] = losses
    if losses[-1]:
        print(f"*** {policy}: {losses[-1]} packets lost in the last attempt; its flows are "
              f"reported incomplete{'; ' + hint if hint else ''}", flush=True)  # fmt: skip
    return report


def loss_hint(kind: str, rate_mbit: float, packet_bytes: int = PACKET_BYTES) -> str:
    """What to change when every attempt lost packets: the packets per second the switch
    must take in, set by the hosts' pacing and the packets' size (three senders at 40
    Mbit/s offer ~14,400 1-kB packets per second at the start, docs/demo.md; on a throttled
    VM BMv2 dropped 1-kB packets at 40 and at 20 Mbit/s and none of 4 kB at 40:
    docs/measurements/demo.md), and the soft switch queues where BMv2 drops."""
    half = f"{rate_mbit / 2:g}"
    hints = [f'pace the hosts lower (RUN_ARGS="--rate-mbit {half}": half the packets per second)']
    if packet_bytes < BMV2_PACKET_BYTES:
        hints.append(
            f'send larger packets (RUN_ARGS="--packet-bytes {BMV2_PACKET_BYTES}": '
            f"{packet_bytes / BMV2_PACKET_BYTES:.2g} of the packets per second)"
        )
    if kind != "soft":
        hints.append("TARGET=soft (it queues what BMv2 drops)")
    return ", or ".join(hints)


def incomplete_policies(results: dict[str, Any]) -> list[str]:
    """The policies some of whose jobs did not finish (their numbers are not results)."""
    return [p for p, r in results["policies"].items()
            if not all(j.get("complete") for j in r.get("jobs", {}).values())]  # fmt: skip


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


def run_dir(parent: Path) -> Path:
    """A fresh ``parent/<UTC timestamp>/`` for this run, with ``parent/latest`` pointing
    at it. Why: a run overwrote the last one's results, plot and logs (the switch log
    even grew across runs, mixing targets)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = parent / stamp
    n = 1
    while out.exists():
        n += 1
        out = parent / f"{stamp}-{n}"
    (out / "logs").mkdir(parents=True)
    latest = parent / "latest"
    tmp = parent / f".latest-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(out.name)
    tmp.replace(latest)  # atomic: latest always points at a whole run folder
    return out


def fit_jobs(
    args: argparse.Namespace, files: list[str], hosts: set[str], network: TopologyNetwork
) -> tuple[list[demo.DemoJob], demo.Estimate]:
    """The jobs at ``--scale``, scaled further down when one policy's run would take
    longer than ``--budget`` on the emulated links (saying by how much)."""
    jobs = demo.load_demo_jobs(files, args.scale, hosts)
    est = demo.estimate([j.spec for j in jobs], network, args.iterations, args.packet_bytes)
    scale = demo.fit_to_budget(est, args.scale, args.budget)
    if scale < args.scale:
        print(f"*** scaled the jobs down {args.scale / scale:.1f}x more (--scale {args.scale:g} "
              f"-> {scale:.3g}): at --scale {args.scale:g}, {args.iterations} iterations would "
              f"take at least {est.run_s:.0f} s per policy at their bottleneck ({est.link}, "
              f"{est.link_mbit:g} Mbit/s), over --budget {args.budget:g} s; sizes and compute "
              "times shrink together, so the policies' comparison holds "
              "(--budget 0 keeps --scale)", flush=True)  # fmt: skip
        args.scale = scale
        jobs = demo.load_demo_jobs(files, scale, hosts)
        est = demo.estimate([j.spec for j in jobs], network, args.iterations, args.packet_bytes)
    return jobs, est


def packet_bytes(requested: int | None, kind: str, interleave: bool = False) -> int:
    """The hosts' UDP payload: ``--packet-bytes``, else the target's default, or the
    interleaving scenario's (:data:`topo.agents.INTERLEAVE_PACKET_BYTES`)."""
    if requested is None:
        if interleave:
            return INTERLEAVE_PACKET_BYTES
        return BMV2_PACKET_BYTES if kind == "bmv2" else PACKET_BYTES
    if not MIN_PACKET_BYTES <= requested <= MAX_PACKET_BYTES:
        raise EchelonError(
            f"packet_bytes: must be {MIN_PACKET_BYTES}..{MAX_PACKET_BYTES} (one frame on the "
            f"emulated links), got {requested}"
        )
    return requested


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.iterations < 1:
        raise EchelonError(f"iterations: must be at least 1, got {args.iterations}")
    topo = load(args.topo)
    scenario = sim_interleave.by_key(args.scenario) if args.scenario else None
    kind = resolve_kind(args.target)
    args.packet_bytes = packet_bytes(args.packet_bytes, kind, scenario is not None)
    files = [f.strip() for f in args.jobs.split(",") if f.strip()] if scenario is None else []
    if files:
        demo.load_demo_jobs(files, args.scale, set(topo.hosts))  # bad files fail first
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    check_policies(policies)
    out = run_dir(Path(args.out_dir))
    if scenario is not None:
        files = topo_interleave.write_job_files(scenario, out / "jobs")
    ctl_topo = demo.controller_topology(args.topo, args.rate_mbit, out)
    network = TopologyNetwork(load(ctl_topo))
    jobs, est = fit_jobs(args, files, set(topo.hosts), network)
    pcap = None if args.pcap is None else Path(args.pcap or out / "pcap")
    cli = resolve_cli(args.cli, args.headless, sys.stdin.isatty())
    net = EchelonNet(topo, kind=kind, prefix=args.prefix, log_dir=out / "logs",
                     pcap_dir=pcap, packet_trace=args.packet_trace)  # fmt: skip
    why = "simple_switch_grpc" if net.kind == "bmv2" else "embedded soft switch"
    if net.kind == "soft" and args.target == "auto":
        why += "; BMv2 is not installed"
    print(f"*** target: {net.kind} ({why}); packets of {args.packet_bytes} bytes of UDP "
          "payload (--packet-bytes)")  # fmt: skip
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
        "out_dir": str(out),
        "estimate": {**est.as_json(), "run_s": est.run_s},
        "job_files": files,
        "jobs": [j.description for j in jobs],
        "packet_bytes": args.packet_bytes,
        "rate_mbit": args.rate_mbit,
        "idle_level": args.idle_level,
        # the agents report entering iteration 0 before the start (echelon-online):
        # the controller plans the opening groups before their first packet
        "entered_reports": args.entered_reports,
        "pcap_dir": str(pcap) if pcap else None,
        "packet_trace": args.packet_trace,
        "policies": {},
    }
    try:
        net.start()
        print(f"*** network up: {len(topo.hosts)} hosts, {len(topo.switches)} switches, "
              f"bottleneck shaper: {net.shaper_mode}")  # fmt: skip
        view = None
        if pcap is not None:
            view = PortView(pcap, {s.name: dict(s.port_map) for s in net.switches()})
            print(f"*** per-port pcaps in {pcap}/<switch>/ (IFACE_in.pcap, IFACE_out.pcap)")
        if args.packet_trace:
            print(f"*** per-packet trace logs in {out / 'logs'}/<switch>-trace.txt")
        ctl.start()
        for job in jobs:
            ctl.register(job.description)  # what `echelonctl register FILE` posts
        specs = [j.spec for j in jobs]
        ids = read_echelon_ids(ctl, specs)
        print(f"*** registered jobs {[s.job_id for s in specs]} (scale {args.scale}), "
              f"echelon IDs {ids}")  # fmt: skip
        if cli == "before":
            open_cli(net.mn, view, "before")

        def play(run_specs: Sequence[JobSpec], iterations: int, where: Path, policy: str) -> Any:
            """One policy's run of ``run_specs`` on the hosts (played again on lost packets:
            :func:`play_with_retries`); its agents report progress when it is online."""
            run_est = demo.estimate(run_specs, network, iterations, args.packet_bytes)
            reports = f"unix:{ctl.progress_socket}" if policy.endswith(ONLINE_SUFFIX) else None

            def once() -> dict[str, Any]:
                ctl.set_policy(topo_interleave.controller_policy(base_policy(policy)))  # fresh
                return play_scenario(net, run_specs, iterations, ids, where, run_est,
                                     rate_mbit=args.rate_mbit,
                                     packet_bytes=args.packet_bytes, release=args.release,
                                     controller=reports, entered=args.entered_reports)  # fmt: skip

            return play_with_retries(
                once,
                policy,
                args.retries,
                loss_hint(net.kind, args.rate_mbit, args.packet_bytes),
            )

        if scenario is not None:
            results["interleave"] = topo_interleave.play_steady(
                play, specs, scenario, policies, args.horizon, out
            )
            results["incomplete"] = topo_interleave.write(results, out)
            return results

        def traffic() -> None:
            for policy in policies:
                t0 = time.monotonic()
                before = view.poll() if view else {}
                ticking = view is not None and cli != "during"
                thrift = {sw.name: sw.thrift_port for sw in net.switches()}
                samplers = [QueueSampler(sp, thrift[sp.switch]) for sp in net.shaped]
                with (
                    Ticker(view, args.port_view if ticking else 0) if view else nullcontext(),
                    ExitStack() as sampling,
                ):
                    for sampler in samplers:
                        sampling.enter_context(sampler)
                    report = play(specs, args.iterations, out / policy_dir(policy), policy)
                report["wall_s"] = time.monotonic() - t0
                report["queue_depths"] = [sampler.as_json() for sampler in samplers]
                report["controller_policy"] = ctl.get("/policy")["policy"]  # what it played
                # online: the re-plans, updates and reaction times during this run
                if policy.endswith(ONLINE_SUFFIX):
                    report["online"] = ctl.get("/progress").get("online")
                results["policies"][policy] = report
                print(f"*** {policy}: done in {report['wall_s']:.1f} s", flush=True)
                for line in report.get("stalls", []):
                    print(f"*** {policy}: {line}", flush=True)
                if view is not None:
                    ports = portview.delta(view.poll(), before)
                    report["ports"] = portview.as_json(ports)
                    print(f"*** {policy}: packets per switch port (out pN: sent at priority N)")
                    print(portview.table(ports), flush=True)

        if cli == "during":
            run_with_cli(net.mn, view, traffic)
        else:
            traffic()
        results["stats"] = ctl.get("/stats")
        results["incomplete"] = incomplete_policies(results)
        (out / "demo-results.json").write_text(json.dumps(results, indent=1))
        print(table(results))
        print(verdict(results))
        print("mean ECT per EchelonFlow group (s):")
        print(demo.group_table(results))
        for line in crosscheck.summary(results, out / "demo-results.json"):
            print(line)
        plot_finish_times(results, out / "demo-finish-times.png")
        plot_queue_depths(results, out / "demo-queue-depths.png")
        print(f"*** wrote {out / 'demo-results.json'}, {out / 'demo-finish-times.png'} and "
              f"{out / 'demo-queue-depths.png'} "
              f"({Path(args.out_dir) / 'latest'} points at {out.name})")  # fmt: skip
        if results["incomplete"]:
            print(f"*** incomplete results for {', '.join(results['incomplete'])}: see the "
                  "agents' lines above; exiting with status 1", flush=True)  # fmt: skip
        if cli == "after" and net.mn is not None:
            open_cli(net.mn, view, "after")
        return results
    finally:
        # A second Ctrl-C or signal must not cut the clean-up short.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        ctl.close()
        net.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise Terminated(signum)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)  # terminal closed
    try:
        results = run(args)
        return 1 if results.get("incomplete") else 0
    except EchelonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Terminated):
        print("interrupted; everything started was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

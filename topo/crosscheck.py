"""Cross-check the emulation against the simulator's fluid model, flow by flow.

    python -m topo.crosscheck run/demo-results.json [--policy echelon] [--tolerance 0.02]
                              [--model fluid|packet]

Runs :func:`sim.predict.predict_finish_times` on the demo jobs and topology of
a ``make run`` result (the scaled job descriptions stored in the results;
closed loop -- the demo's default -- as they are, since the simulator runs the
compute tasks as the agents do; open loop as the agents then play them:
:class:`OpenLoopJob`) and prints predicted vs measured finish times and, per
EchelonFlow, completion times. Exit 1 when a checked EchelonFlow's completion
differs by more than ``--tolerance`` seconds (checked: those sharing no sending
host with another group, see :func:`completion_rows`).

``--model packet`` predicts with :mod:`sim.packet` instead: port queues that keep
each packet's class, which the online mode needs (its re-plans reach only packets
not yet queued; docs/demo.md, "Cross-check against the simulator").

Which comparisons are meaningful (docs/demo.md has the numbers):

* ``echelon`` (strict priority): the fluid model and the emulated port agree to
  a few ms; the tolerance of 20 ms is ~24 packet times at 10 Mbit/s and covers
  HTB's per-class bursts, 1 ms pacing granularity and the soft switch's own
  latency. This is the checked case.
* ``fifo``: the simulator shares a level max-min fairly; a real FIFO queue
  serves in arrival order, so a flow that arrives behind a backlog waits for all
  of it. Deviations of hundreds of ms are expected — the model, not the
  emulation, is the wrong one there.
* Only the first iteration is compared (``iterations=1``): open loop, the
  agents start iteration ``i+1`` at its ideal start, the simulator when ``i``
  actually ends; closed loop, the agents use a per-host barrier, the simulator a
  global one (:mod:`hostagent.closedloop`), and later iterations inherit every
  earlier difference.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from echelon.constants import ECHELON_HEADER_LEN
from echelon.errors import EchelonError
from echelon.jobs import JobSpec
from echelon.model import ComputeTask, FlowKey, IterationPlan
from echelon.topology import Topology, TopologyNetwork, load
from hostagent.plan import release_times
from sim.packet import PacketConfig, simulate_packets
from sim.topology import UNLIMITED_BYTES_PER_S
from topo.demo import specs_from_results

DEFAULT_TOLERANCE_S = 0.02
#: ``fluid``: the simulator's engine; ``packet``: queues that keep a packet's class
MODELS = ("fluid", "packet")


class OpenLoopJob:
    """A job as the agents play it, as the simulator's ``Plannable`` (``job_id``, ``plan``).

    Open loop (``--release open``) the agents release every flow at its producer's *ideal* end
    (:mod:`hostagent.plan`), whatever the network did to upstream flows; the
    simulator would start a producer only after its input flows really arrived.
    So the simulator gets the job's own EchelonFlows (same sizes, ``t_ref``,
    offsets, groups) with the compute tasks replaced by one chain per host of
    "hold" tasks ending exactly at those release times: both then offer the
    network the same bytes at the same instants, and only the network differs.
    """

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.job_id = spec.job_id

    def plan(self, iteration: int = 0, t0: float = 0.0) -> IterationPlan:
        plan = self.spec.plan(iteration, t0)
        release = release_times(plan)
        src = {(ef.name, f.index): f.src for ef in plan.echelons for f in ef.flows}
        by_host: dict[str, dict[float, list[FlowKey]]] = {}
        for key in plan.producer:  # flows without a producer start with the iteration
            by_host.setdefault(src[key], {}).setdefault(release[key], []).append(key)
        tasks: list[ComputeTask] = []
        producer: dict[FlowKey, str] = {}
        for host, at in by_host.items():
            prev = 0.0
            for k, t in enumerate(sorted(at)):
                tid = f"{plan.job}/{iteration}/hold{k}@{host}"
                tasks.append(ComputeTask(tid, host, t - prev))
                producer.update((key, tid) for key in at[t])
                prev = t
        return IterationPlan(plan.job, plan.iteration, plan.echelons, tuple(tasks), producer)


def paced_topology(path: str, rate_mbit: float) -> Topology:
    """The topology as the agents see it: a host's link is no faster than its pacing.

    The agents pace each host at ``rate_mbit`` (to spare the soft switch), and a
    host's concurrent flows share that rate; the model must know, or it lets a
    host's flows run in parallel at the full access-link rate.
    """
    topo = load(path)
    links = tuple(
        replace(lk, bw_mbit=min(lk.bw_mbit or rate_mbit, rate_mbit))
        if lk.a in topo.hosts or lk.b in topo.hosts
        else lk
        for lk in topo.links
    )
    return replace(topo, links=links)


def static_levels(
    results: dict[str, Any], specs: list[JobSpec], anticipated: bool = False
) -> dict[tuple[str, str, int], int]:
    """Per (job, group, flow index) the level the switch holds when an online run
    starts: the controller's static ``echelon`` plan -- the core policy over every
    job's iteration 0 on the topology the controller planned with, quantised, each
    flow at the level of the deadline range holding its offset -- and, with
    ``anticipated`` (the agents reported entering iteration 0 before the start,
    ``results["entered_reports"]``), every job's *opening* groups re-planned at
    t = 0 as the online controller does on those reports (:mod:`controlplane.progress`)."""
    from echelon.jobs import opening_groups
    from echelon.policies import get_policy
    from echelon.quantize import level_of, quantize

    path = results.get("controller_topo_path")
    topo = (
        load(path)
        if path and Path(path).exists()
        else paced_topology(results["topo_path"], float(results.get("rate_mbit", 40.0)))
    )
    net = TopologyNetwork(topo)
    plans = [spec.plan(0, 0.0) for spec in specs]
    efs = [ef for plan in plans for ef in plan.echelons]
    levels = dict(quantize(get_policy("echelon").schedule(efs, net), efs))
    if anticipated:
        opening = [ef for p in plans for ef in p.echelons if ef.group in opening_groups(p)]
        if opening:
            at_start = get_policy("echelon").schedule(opening, net, None, 0.0)
            levels.update(quantize(at_start, opening))
    return {
        (ef.job, ef.group, f.index): level_of(levels[ef.name], f.offset_us)
        for ef in efs
        for f in ef.flows
    }


def compare(results: dict[str, Any], policy: str, model: str = "fluid") -> list[dict[str, Any]]:
    """Rows ``{echelon, index, ideal, predicted, measured, diff}`` for iteration 0.

    ``model``: ``fluid`` (the simulator's engine, :func:`sim.predict.predict_finish_times`)
    or ``packet`` (:mod:`sim.packet`: port queues that keep each packet's class;
    ``echelon`` and ``echelon-online`` only, closed loop)."""
    from sim.predict import DEFAULT_HEADER_BYTES, predict_finish_times

    if "topo_path" not in results or "policies" not in results:
        raise EchelonError("results: not a demo-results.json of python -m topo.run")
    if policy not in results["policies"]:
        raise EchelonError(f"policy: {policy!r} is not in the results")
    if model not in MODELS:
        raise EchelonError(f"model: {model!r} is not one of {list(MODELS)}")
    payload = int(results.get("packet_bytes", 1000)) - ECHELON_HEADER_LEN
    specs = specs_from_results(results)
    closed = results.get("release", "open") == "closed"  # files before closed loop: open
    online = policy.endswith("-online")
    stats = results["policies"][policy].get("online") or {}
    interval = float(stats.get("interval_s", 0.01))
    delay = float((stats.get("reaction_ms") or {}).get("p50") or 0.0) / 1e3
    paced = paced_topology(results["topo_path"], float(results.get("rate_mbit", 40.0)))
    # what the switch holds when the run starts (online: with the opening groups
    # planned on the agents' "entering iteration 0" reports, when they sent them)
    installed = (
        static_levels(results, specs, online and bool(results.get("entered_reports")))
        if online or model == "packet"
        else None
    )
    if model == "packet":
        if policy.removesuffix("-online") != "echelon" or not closed:
            raise EchelonError(
                "model: the packet model covers echelon and echelon-online, closed loop"
            )
        pred = simulate_packets(
            list(specs),
            TopologyNetwork(paced, UNLIMITED_BYTES_PER_S),
            PacketConfig(
                "echelon",
                online=online,
                replan_interval=interval,
                replan_delay=delay,
                initial_levels=installed or {},
                header_bytes=DEFAULT_HEADER_BYTES,
                payload_bytes=payload,
            ),
        )
    else:
        pred = predict_finish_times(
            list(specs) if closed else [OpenLoopJob(spec) for spec in specs],
            paced,
            # the simulator re-plans at group events: ``echelon-online`` *is* its echelon
            policy=policy.removesuffix("-online"),
            levels_mode="k8",
            header_bytes=DEFAULT_HEADER_BYTES,
            payload_bytes=payload,
            iterations=1,
            # online: what the controller does -- it re-plans at most every interval and
            # knows only releases and finishes, so its policy counts in-flight flows whole
            replan_interval=interval if online else 0.0,
            policy_sizes="registered" if online else "remaining",
            # ... acts on an event after its reaction time (the run's median), and a
            # group released before that competes at the levels it had (at first:
            # ``installed``, ``--idle-level keep``)
            replan_delay=delay if online else 0.0,
            keep_levels=online and results.get("idle_level", "keep") == "keep",
            initial_levels=installed,
            # the host agent paces its released flows round-robin (hostagent.sender)
            sender_round_robin=True,
        )
    rows = []
    for job in results["policies"][policy]["jobs"].values():
        for e in job["echelons"]:
            for f in e["flows"]:
                key = (e["name"], f["index"])
                if key not in pred or f["actual"] is None:
                    continue
                rows.append({"echelon": e["name"], "index": f["index"], "src": f["src"],
                             "ideal": f["ideal"], "predicted": pred[key],
                             "measured": f["actual"], "diff": f["actual"] - pred[key]})  # fmt: skip
    return rows


def completion_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per EchelonFlow: completion time ``max_j(C_j - (t_ref + A(j)))`` predicted vs measured.

    This is what the check asserts. Why not every flow: flows on the *same*
    priority level (a Coflow's, or those released together) share it
    max-min fairly in the fluid model and end together, while a real queue
    serves them in arrival order; the level's last byte leaves at the same
    instant either way (both are work-conserving), so the EchelonFlow's
    completion agrees even where single flows of one level do not.

    ``checked`` is False for an EchelonFlow with a flow leaving a host that
    also sends another EchelonFlow's flows (``shared_host`` names it). Why:
    only the switch has priority queues; a host's NIC (the agent, then the
    host link's plain shaper) shares its rate round-robin across all its flows,
    whereas the fluid model gives every link, host links included, strict
    priorities. When two groups leave one host the two networks order them
    differently -- a model difference, not an emulation error -- so such a
    group's completion is printed but not held to the tolerance.
    """
    by_ef: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_ef.setdefault(r["echelon"], []).append(r)
    senders: dict[str, set[str]] = {}
    for name, rs in by_ef.items():
        for r in rs:
            senders.setdefault(r["src"], set()).add(name)
    out = []
    for name, rs in by_ef.items():
        sim = max(r["predicted"] - r["ideal"] for r in rs)
        emul = max(r["measured"] - r["ideal"] for r in rs)
        shared = sorted({r["src"] for r in rs if len(senders[r["src"]]) > 1})
        out.append({"echelon": name, "flows": len(rs), "predicted": sim, "measured": emul,
                    "diff": emul - sim, "checked": not shared,
                    "shared_host": shared})  # fmt: skip
    return out


def summary(results: dict[str, Any]) -> list[str]:
    """One line per static/online ``echelon`` run of a closed-loop result: the packet
    model's prediction of iteration 0 against the emulation (what ``make run`` prints)."""
    if results.get("release", "open") != "closed":
        return []
    out = []
    for policy in ("echelon-online", "echelon"):
        if policy not in results.get("policies", {}):
            continue
        ects = completion_rows(compare(results, policy, "packet"))
        checked = [e for e in ects if e["checked"]]
        worst = max((abs(e["diff"]) for e in checked), default=0.0)
        out.append(
            f"{policy}: simulator (packet model) vs emulation, iteration 0: largest checked "
            f"ECT difference {worst * 1000:.1f} ms over {len(checked)} of {len(ects)} "
            f"EchelonFlows (tolerance {DEFAULT_TOLERANCE_S * 1000:.0f} ms; "
            f"python -m topo.crosscheck RESULTS --policy {policy} --model packet)"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m topo.crosscheck", description=__doc__.split("\n")[0]
    )
    ap.add_argument("results", nargs="?", default="run/demo-results.json")
    ap.add_argument("--policy", default="echelon")
    ap.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE_S)
    ap.add_argument("--model", choices=MODELS, default="fluid",
                    help="fluid: the simulator's engine; packet: port queues that keep "
                         "each packet's class (echelon, echelon-online)")  # fmt: skip
    args = ap.parse_args(argv)
    try:
        results = json.loads(Path(args.results).read_text())
        rows = compare(results, args.policy, args.model)
    except (OSError, ValueError) as exc:
        print(f"error: results: {exc}", file=sys.stderr)
        return 2
    except EchelonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    w = max([len(r["echelon"]) + 4 for r in rows] + [16])
    print(f"{'flow':<{w}} {'ideal':>7} {'sim':>7} {'emul':>7} {'diff':>7}")
    for r in rows:
        print(f"{r['echelon'] + '#' + str(r['index']):<{w}} {r['ideal']:7.3f} "
              f"{r['predicted']:7.3f} {r['measured']:7.3f} {r['diff']:+7.3f}")  # fmt: skip
    flow_worst = max((abs(r["diff"]) for r in rows), default=0.0)
    print(f"largest per-flow |diff| {flow_worst * 1000:.1f} ms (not checked, see docs/demo.md)")
    ects = completion_rows(rows)
    print(f"\n{'EchelonFlow':<{w}} {'ECT sim':>8} {'ECT emul':>8} {'diff':>7}  checked")
    for e in ects:
        note = (
            "yes" if e["checked"] else f"no (host {','.join(e['shared_host'])} sends other groups)"
        )
        print(f"{e['echelon']:<{w}} {e['predicted']:8.3f} {e['measured']:8.3f} "
              f"{e['diff']:+7.3f}  {note}")  # fmt: skip
    checked = [e for e in ects if e["checked"]]
    worst = max((abs(e["diff"]) for e in checked), default=0.0)
    print(f"largest checked ECT |diff| {worst * 1000:.1f} ms over {len(checked)} of "
          f"{len(ects)} EchelonFlows (tolerance {args.tolerance * 1000:.0f} ms)")  # fmt: skip
    return 0 if checked and worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())

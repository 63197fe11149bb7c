"""Cross-check the emulation against the simulator, flow by flow and EchelonFlow by EchelonFlow.

    python -m topo.crosscheck run/demo-results.json [--policy echelon] [--tolerance 0.02]
                              [--model fluid|packet] [--rate-scale 1.0]

Predicts the finish times of a ``make run`` result's flows (the scaled job
descriptions stored in the results) and prints them against the measured ones,
and, per EchelonFlow instance, completion times. Exit 1 when a checked
EchelonFlow's completion differs by more than ``--tolerance`` seconds.

Two models (docs/demo.md, "Cross-check with the simulator", has the numbers):

* ``--model packet`` (:mod:`sim.packet`; ``echelon`` and ``echelon-online``,
  closed loop): the agents' round-robin pacers feeding each host's FIFO link,
  switch ports with strict priority between levels and FIFO inside one, a
  packet classified when it enters the switch, the online controller's re-plans
  (at group events, coalesced over its interval, its median reaction time late,
  planned on the controller's own topology), and the agents' compute with their
  per-host barrier between iterations. It covers **every iteration the run
  played and every EchelonFlow**: this is the check ``make run`` prints and the
  end-to-end tests assert, tolerance 20 ms (~12 packet times of 2 kB, the soft
  switch's default, at 10 Mbit/s: 1-ms pacing granularity, the switch's own latency).
  It ends with a race check (:func:`race_flows`): the flows whose predicted
  finish moves more than 1.5 % slower links explain, i.e. where a race decides
  the plan's outcome (docs/demo.md); online also with the timing spread
  (:func:`timing_spread`): the model's mean iteration with the controller's reaction
  a few ms earlier or later.
* ``--model fluid`` (:func:`sim.predict.predict_finish_times`, the engine the
  cluster evaluation uses), iteration 0 only (its barrier between iterations is
  global, the agents' per host). It shares a level max-min fairly and re-ranks
  bytes already queued, neither of which a FIFO queue does, so it is checked only
  on groups that share no sending host with another group, and for ``fifo`` its
  deviations of hundreds of ms are the model's, not the emulation's.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from echelon.constants import ECHELON_HEADER_LEN
from echelon.errors import EchelonError
from echelon.jobs import JobSpec
from echelon.model import ComputeTask, FlowKey, IterationPlan
from echelon.specs import read_file
from echelon.topology import Topology, TopologyNetwork, load, parse
from hostagent.plan import release_times
from sim.packet import PacketConfig, PacketModel, Slot
from sim.topology import file_network
from topo.demo import host_pacing, paced_description, specs_from_results
from topo.report import iteration_records

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


def scaled_links(topo: Topology, scale: float) -> Topology:
    """``topo`` with every shaped link (one with ``bw_mbit``) ``scale`` times as fast.

    Why: a plan under strict priority can hinge on a race of a few milliseconds (a
    low-level flow's last packets against a higher level's next burst), and the
    emulation's shapers drain a little below their nominal rate. Predicting at, say,
    0.98 shows whether the outcome moves with such an error (docs/demo.md)."""
    if scale <= 0:
        raise EchelonError(f"rate_scale: must be positive, got {scale}")
    links = tuple(
        lk.model_copy(
            update={
                "bw_mbit": lk.bw_mbit * scale,
                "host_bw_mbit": lk.host_bw_mbit * scale if lk.host_bw_mbit else None,
            }
        )
        if lk.bw_mbit is not None
        else lk
        for lk in topo.links
    )
    return replace(topo, links=links)


def controller_topo(results: dict[str, Any]) -> Topology:
    """The topology the run's controller planned with, which is also the one the agents
    see (the demo's with host links no faster than their pacing,
    :func:`topo.demo.paced_description`): its own file (``controller_topo_path``), or,
    for results written before that was stored, the same rebuilt from ``topo_path``."""
    path = results.get("controller_topo_path")
    if path and Path(path).exists():
        return load(path)
    topo_path = results["topo_path"]
    paced = paced_description(topo_path, float(results.get("rate_mbit", 40.0)))
    return parse(paced, default_name=Path(topo_path).stem)


def registration_levels(
    specs: Sequence[JobSpec], net: TopologyNetwork, anticipated: bool = False
) -> dict[tuple[str, str, int], int]:
    """Per (job, group, flow index) the level of the controller's static ``echelon``
    plan: the core policy over every job's iteration 0 on ``net``, quantised, each flow
    at the level of the deadline range holding its offset
    (:func:`echelon.quantize.flow_levels`) -- and, with ``anticipated``
    (the agents reported entering iteration 0 before the start,
    ``results["entered_reports"]``), every job's *opening* groups re-planned at t = 0 as
    the online controller does on those reports (:mod:`controlplane.inflight`)."""
    from echelon.jobs import opening_groups
    from echelon.policies import get_policy
    from echelon.quantize import flow_levels

    plans = [spec.plan(0, 0.0) for spec in specs]
    efs = [ef for plan in plans for ef in plan.echelons]
    policy = get_policy("echelon")
    levels = flow_levels(policy.schedule(efs, net), efs)
    if anticipated:
        opening = [ef for p in plans for ef in p.echelons if ef.group in opening_groups(p)]
        if opening:
            levels.update(flow_levels(policy.schedule(opening, net, None, 0.0), opening))
    slot = {ef.name: (ef.job, ef.group) for ef in efs}
    return {(*slot[name], index): level for (name, index), level in levels.items()}


def packet_config(
    topo: Topology,
    rate_mbit: float,
    packet_bytes: int,
    iterations: int,
    *,
    online: bool,
    replan_interval: float,
    replan_delay: float,
    initial_levels: Mapping[Slot, int],
    entered: bool = False,
) -> PacketConfig:
    """The packet model's set-up for a run as ``topo.run`` plays it: the ``echelon``
    policy, ``packet_bytes`` on the wire per packet (the echelon header inside them, the
    model's default Ethernet/IP/UDP header on top), and each host paced as the agents pace
    it -- ``rate_mbit``, or its own link's rate in ``topo`` if lower (:func:`host_pacing`);
    ``entered``: the agents reported entering iteration 0 before the start. Shared by
    :func:`predict` and the interleaving bench so both play the same agents."""
    pacing = host_pacing(topo, rate_mbit)
    return PacketConfig(
        "echelon",
        online=online,
        replan_interval=replan_interval,
        replan_delay=replan_delay,
        initial_levels=initial_levels,
        entered=entered,
        payload_bytes=packet_bytes - ECHELON_HEADER_LEN,
        iterations=iterations,
        pacing={h: mbit * 1e6 / 8 for h, mbit in pacing.items()},
    )


@dataclass(frozen=True)
class Prediction:
    """A model's prediction of a run: per-flow finish times and, packet model, per
    (job, iteration) when the iteration began and ended (seconds after the start)."""

    finish: dict[FlowKey, float]
    began: dict[tuple[str, int], float] = field(default_factory=dict)
    ended: dict[tuple[str, int], float] = field(default_factory=dict)
    #: echelon instance name -> (job, iteration)
    instance: dict[str, tuple[str, int]] = field(default_factory=dict)


def predict(
    results: dict[str, Any],
    policy: str,
    model: str = "fluid",
    rate_scale: float = 1.0,
    reaction_shift: float = 0.0,
) -> Prediction:
    """Run ``model`` on the jobs, topology and controller settings of a result.

    ``rate_scale``: the emulated links' rates in the model, as a multiple of the
    topology file's (:func:`scaled_links`); the controller's plan is not changed.
    ``reaction_shift``: seconds added to the controller's median reaction time (online;
    at least 0 in all), for :func:`timing_spread`.

    ``model``: ``fluid`` (the simulator's engine, :func:`sim.predict.predict_finish_times`;
    iteration 0) or ``packet`` (:mod:`sim.packet`: the agents' pacers and host queues,
    port queues that keep each packet's class, the run's every iteration closed loop
    with the agents' per-host barrier; ``echelon`` and ``echelon-online`` only)."""
    from sim.predict import predict_finish_times

    if "topo_path" not in results or "policies" not in results:
        raise EchelonError("results: not a demo-results.json of python -m topo.run")
    if policy not in results["policies"]:
        raise EchelonError(f"policy: {policy!r} is not in the results")
    if model not in MODELS:
        raise EchelonError(f"model: {model!r} is not one of {list(MODELS)}")
    packet_bytes = int(results.get("packet_bytes", 1000))
    payload = packet_bytes - ECHELON_HEADER_LEN
    specs = specs_from_results(results)
    closed = results.get("release", "open") == "closed"  # files before closed loop: open
    online = policy.endswith("-online")
    stats = results["policies"][policy].get("online") or {}
    interval = float(stats.get("interval_s", 0.01))
    delay = float((stats.get("reaction_ms") or {}).get("p50") or 0.0) / 1e3
    delay = max(0.0, delay + reaction_shift)
    # what the switch holds when the run starts (online: with the opening groups
    # planned on the agents' "entering iteration 0" reports, when they sent them)
    anticipated = online and bool(results.get("entered_reports"))
    net = TopologyNetwork(controller_topo(results))
    installed = (
        registration_levels(specs, net, anticipated) if online or model == "packet" else None
    )
    if model == "packet":
        if policy.removesuffix("-online") != "echelon" or not closed:
            raise EchelonError(
                "model: the packet model covers echelon and echelon-online, closed loop"
            )
        topo = load(results["topo_path"])
        pm = PacketModel(
            list(specs),
            file_network(scaled_links(topo, rate_scale)),
            packet_config(
                topo,
                float(results.get("rate_mbit", 40.0)),
                packet_bytes,
                int(results.get("iterations", 1)),
                online=online,
                replan_interval=interval,
                replan_delay=delay,
                initial_levels=installed or {},
                entered=anticipated,
            ),
            net,
        )
        finish = pm.run()
        instance = {g.ef.name: (g.ef.job, g.iteration) for g in pm.groups}
        return Prediction(finish, pm.iteration_start, pm.iteration_end, instance)
    finish = predict_finish_times(
        list(specs) if closed else [OpenLoopJob(spec) for spec in specs],
        scaled_links(controller_topo(results), rate_scale),
        # the simulator re-plans at group events: ``echelon-online`` *is* its echelon
        policy=policy.removesuffix("-online"),
        levels_mode="k8",
        payload_bytes=payload,
        iterations=1,
        # online: what the controller does -- it re-plans at most every interval, on
        # bytes left as the hosts report them (at most a progress period old)
        replan_interval=interval if online else 0.0,
        # ... acts on an event after its reaction time (the run's median), and a
        # group released before that competes at the levels it had (at first:
        # ``installed``, ``--idle-level keep``)
        replan_delay=delay if online else 0.0,
        keep_levels=online and results.get("idle_level", "keep") == "keep",
        initial_levels=installed,
        # the host agent paces its released flows round-robin (hostagent.sender)
        sender_round_robin=True,
    )
    return Prediction(finish)


#: Race check: the shaped links at this multiple of their rate, and the slack allowed on
#: top of the delay the slower rate itself explains (pacing granularity).
RACE_SCALE = 0.985
RACE_SLACK_S = 0.005


def race_flows(
    results: dict[str, Any],
    policy: str,
    base: Prediction | None = None,
) -> list[tuple[FlowKey, float, float]]:
    """Flows whose packet-model finish moves more than slower links explain.

    With every shaped link :data:`RACE_SCALE` times as fast and the same order of service,
    a flow that finished at ``T`` finishes at most ``T * (1/RACE_SCALE - 1)`` later (compute
    does not slow down). A flow that moves more changed places with another: the plan
    hinges on a race a percent of link rate decides, and a model within tolerance of
    one run says little about the next (docs/demo.md). Returns ``(flow, finish,
    finish at scale)`` for each such flow (``base``: :func:`predict`'s at rate 1, if
    already computed)."""
    before = (base or predict(results, policy, "packet")).finish
    after = predict(results, policy, "packet", RACE_SCALE).finish
    return [
        (k, t, after[k])
        for k, t in before.items()
        if k in after and abs(after[k] - t) > t * (1 / RACE_SCALE - 1) + RACE_SLACK_S
    ]


#: Timing check (online): the controller's median reaction time moved by each of these
#: (seconds). A few ms move the online plan's outcome between branches (one run's mean
#: iteration +3.2 / +17.5 / +2.9 % at +3 / +5 / +8 ms: docs/measurements/demo.md), more
#: than the tolerance: the spread says how much of a miss that explains.
TIMING_SHIFTS_S = (-0.003, 0.003, 0.006)


def model_mean_iteration(pred: Prediction) -> float:
    """The packet model's mean iteration time over every (job, iteration) it ended."""
    times = [pred.ended[k] - pred.began[k] for k in pred.ended if k in pred.began]
    return sum(times) / len(times) if times else math.nan


def timing_spread(
    results: dict[str, Any], policy: str, base: Prediction | None = None
) -> tuple[float, float] | None:
    """Online: the packet model's mean iteration time with the controller's reaction
    moved by each of :data:`TIMING_SHIFTS_S`, as (lowest, highest) ratio to the unmoved
    model's (``base``: :func:`predict`'s, if already computed); 1.0 is always inside.
    ``None`` for a static plan, which no re-plan can move."""
    if not policy.endswith("-online"):
        return None
    mean = model_mean_iteration(base or predict(results, policy, "packet"))
    ratios = [1.0]
    for shift in TIMING_SHIFTS_S:
        moved = predict(results, policy, "packet", reaction_shift=shift)
        ratios.append(model_mean_iteration(moved) / mean)
    return min(ratios), max(ratios)


def timing_text(spread: tuple[float, float]) -> str:
    """:func:`timing_spread`'s (lowest, highest) ratio, as the cross-check prints it."""
    shifts = "/".join(f"{s * 1000:+.0f}" for s in TIMING_SHIFTS_S)
    return (
        f"with the controller's reaction {shifts} ms the model's mean iteration moves "
        f"{(spread[0] - 1) * 100:+.1f} … {(spread[1] - 1) * 100:+.1f} %"
    )


def compare(
    results: dict[str, Any], policy: str, model: str = "fluid", pred: Prediction | None = None
) -> list[dict[str, Any]]:
    """Rows ``{echelon, index, ideal, ideal_predicted, predicted, measured, diff}``.

    ``ideal`` is the flow's ideal finish in the emulation (its iteration's measured
    start + ``t_ref`` + ``A(j)``), ``ideal_predicted`` the same from the model's own
    start of that iteration (where the model reports it; else equal): an EchelonFlow's
    completion is measured against its own ``t_ref``, so a difference in an earlier
    iteration does not carry into every later group's. ``pred``: :func:`predict`'s,
    if already computed."""
    pred = pred if pred is not None else predict(results, policy, model)
    emul = iteration_records(results["policies"][policy])
    emul_start = {(r.job, r.iteration): r.start for r in emul}
    rows = []
    for job in results["policies"][policy]["jobs"].values():
        for e in job["echelons"]:
            shift = 0.0
            inst = pred.instance.get(e["name"])
            if inst is not None and inst in pred.began and inst in emul_start:
                shift = pred.began[inst] - emul_start[inst]
            for f in e["flows"]:
                key = (e["name"], f["index"])
                if key not in pred.finish or f["actual"] is None:
                    continue
                p = pred.finish[key]
                rows.append({"echelon": e["name"], "index": f["index"], "src": f["src"],
                             "ideal": f["ideal"], "ideal_predicted": f["ideal"] + shift,
                             "predicted": p, "measured": f["actual"],
                             "diff": f["actual"] - p})  # fmt: skip
    return rows


def iteration_rows(results: dict[str, Any], policy: str, pred: Prediction) -> list[dict[str, Any]]:
    """Per (job, iteration) both ran: iteration time predicted vs measured (packet model)."""
    out = []
    emul = iteration_records(results["policies"][policy])
    for r in sorted(emul, key=lambda r: (r.job, r.iteration)):
        key = (r.job, r.iteration)
        if key not in pred.began or key not in pred.ended:
            continue
        sim = pred.ended[key] - pred.began[key]
        out.append({"job": r.job, "iteration": r.iteration, "predicted": sim,
                    "measured": r.duration, "diff": r.duration - sim})  # fmt: skip
    return out


def mean_iteration_ratio(its: list[dict[str, Any]]) -> float:
    """Measured over predicted mean iteration time of :func:`iteration_rows` (``nan``
    without rows).

    Why beside the per-iteration differences: where a race at a port decides which of
    two groups goes first, the emulation and the model may serve them the other way
    round, and single groups and iterations then differ by far more than the tolerance
    while the mean stays close (docs/measurements/demo.md, online runs of 2026-12-01)."""
    if not its:
        return math.nan
    return float(sum(r["measured"] for r in its) / sum(r["predicted"] for r in its))


def completion_rows(rows: list[dict[str, Any]], model: str = "fluid") -> list[dict[str, Any]]:
    """Per EchelonFlow: completion time ``max_j(C_j - (t_ref + A(j)))`` predicted vs measured.

    This is what the check asserts. Why not every flow: flows on the *same*
    priority level (a Coflow's, or those released together) share it
    max-min fairly in the fluid model and end together, while a real queue
    serves them in arrival order; the level's last byte leaves at the same
    instant either way (both are work-conserving), so the EchelonFlow's
    completion agrees even where single flows of one level do not.

    ``checked``: with the ``packet`` model, every EchelonFlow. With the ``fluid``
    model, not one with a flow leaving a host that also sends another
    EchelonFlow's flows (``shared_host`` names it, whatever the model). Why: only
    the switch has priority queues; a host's NIC (the agent's round-robin pacer,
    then the host link's plain FIFO shaper) serves its flows in the order it
    queued them, whereas the fluid model gives every link, host links included,
    strict priorities. The packet model has the pacer and the FIFO
    (``PacketConfig.pacing``).
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
        sim = max(r["predicted"] - r.get("ideal_predicted", r["ideal"]) for r in rs)
        emul = max(r["measured"] - r["ideal"] for r in rs)
        shared = sorted({r["src"] for r in rs if len(senders[r["src"]]) > 1})
        out.append({"echelon": name, "flows": len(rs), "predicted": sim, "measured": emul,
                    "diff": emul - sim, "checked": model == "packet" or not shared,
                    "shared_host": shared})  # fmt: skip
    return out


def tolerance_flag(worst: float, worst_it: float, checked: bool, races: int = 0) -> str:
    """How a cross-check line opens: whether the largest differences are inside
    :data:`DEFAULT_TOLERANCE_S` (a 277.6 ms miss printed next to "tolerance 20 ms" read
    like a pass), or that nothing could be checked (a run with no complete results).
    A miss where the model's own race check flags ``races`` flows says so up front: the
    plan's outcome hinges on a race, and the run took the other branch (``make run``'s
    online plan over three iterations, docs/demo.md "Limits"), which is not the same
    news as a model that misses a plan without one."""
    if not checked or not math.isfinite(worst) or not math.isfinite(worst_it):
        return "NOT CHECKED (the run has no complete results)"
    if max(worst, worst_it) <= DEFAULT_TOLERANCE_S:
        return "within the tolerance"
    if races:
        return f"OUTSIDE the tolerance, on a race ({races} flows)"
    return "OUTSIDE the tolerance"


def summary(
    results: dict[str, Any], path: str | Path = "run/latest/demo-results.json"
) -> list[str]:
    """One line per static/online ``echelon`` run of a closed-loop result: the packet
    model's prediction of every iteration against the emulation (what ``make run``
    prints), flagged ``OUTSIDE the tolerance`` when a difference exceeds it; ``path``
    is the results file the line's re-run command names."""
    if results.get("release", "open") != "closed":
        return []
    out = []
    for policy in ("echelon-online", "echelon"):
        if policy not in results.get("policies", {}):
            continue
        pred = predict(results, policy, "packet")
        ects = completion_rows(compare(results, policy, "packet", pred), "packet")
        worst = max((abs(e["diff"]) for e in ects), default=0.0)
        its = iteration_rows(results, policy, pred)
        worst_it = max((abs(r["diff"]) for r in its), default=0.0)
        races = len(race_flows(results, policy, base=pred))
        spread = timing_spread(results, policy, base=pred)
        timing = "" if spread is None else f"; {timing_text(spread)}"
        flag = tolerance_flag(worst, worst_it if its else 0.0, bool(ects), races)
        out.append(
            f"{policy}: {flag}: simulator (packet model) vs emulation: largest ECT difference "
            f"{worst * 1000:.1f} ms over all {len(ects)} EchelonFlow instances, largest "
            f"iteration-time difference {worst_it * 1000:.1f} ms over {len(its)} iterations "
            f"(tolerance {DEFAULT_TOLERANCE_S * 1000:.0f} ms), mean iteration time "
            f"{(mean_iteration_ratio(its) - 1) * 100:+.1f} % against the model; flows whose "
            f"outcome hinges on a race: {races}{timing} "
            f"(python -m topo.crosscheck {path} --policy {policy} --model packet)"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m topo.crosscheck", description=__doc__.split("\n")[0]
    )
    ap.add_argument("results", nargs="?", default="run/latest/demo-results.json")
    ap.add_argument("--policy", default="echelon")
    ap.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE_S)
    ap.add_argument("--model", choices=MODELS, default="fluid",
                    help="fluid: the simulator's engine; packet: port queues that keep "
                         "each packet's class (echelon, echelon-online)")  # fmt: skip
    ap.add_argument("--rate-scale", type=float, default=1.0,
                    help="model the shaped links at this multiple of their rate (e.g. "
                         "0.98: does the outcome hinge on a race?)")  # fmt: skip
    args = ap.parse_args(argv)
    try:
        results = read_file(args.results)
        pred = predict(results, args.policy, args.model, args.rate_scale)
        rows = compare(results, args.policy, args.model, pred)
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
    ects = completion_rows(rows, args.model)
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
    its = iteration_rows(results, args.policy, pred)
    if its:
        print(f"\n{'job':<8} {'iter':>4} {'sim (s)':>8} {'emul (s)':>8} {'diff':>7}")
        for r in its:
            print(f"{r['job']:<8} {r['iteration']:>4} {r['predicted']:8.3f} "
                  f"{r['measured']:8.3f} {r['diff']:+7.3f}")  # fmt: skip
    worst_it = max((abs(r["diff"]) for r in its), default=0.0)
    if its:
        print(f"largest iteration-time |diff| {worst_it * 1000:.1f} ms over {len(its)} "
              f"iterations (tolerance {args.tolerance * 1000:.0f} ms); mean iteration time "
              f"{(mean_iteration_ratio(its) - 1) * 100:+.1f} % against the model")  # fmt: skip
    if args.model == "packet":
        races = race_flows(results, args.policy, base=pred)
        print(f"race check (links at {RACE_SCALE:g}x their rate): {len(races)} flows move "
              "more than the slower rate explains" + (": " if races else ""))  # fmt: skip
        for (name, index), t, t2 in sorted(races, key=lambda r: -abs(r[2] - r[1]))[:5]:
            print(f"  {name}#{index} {t:.3f} -> {t2:.3f} s")
        # the spread's own predictions run at the topology's rates
        spread = timing_spread(results, args.policy, pred if args.rate_scale == 1.0 else None)
        if spread is not None:
            print(f"timing spread: {timing_text(spread)}")
    return 0 if checked and worst <= args.tolerance and worst_it <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())

"""Play a scenario on the emulated hosts: one ``echelon-agent`` per host, stopped by PID."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from echelon.errors import EchelonError
from echelon.jobs import JobSpec
from hostagent.closedloop import ClosedLoop
from hostagent.plan import build_scenario
from hostagent.report import formation_report, load_records
from hostagent.scenario import Scenario
from targets.process import stop_process, wait_until
from topo.demo import Estimate, host_pacing
from topo.net import EchelonNet

ROOT = Path(__file__).resolve().parents[1]
#: From "every agent is ready" to the shared start instant (all agents poll the go file).
GO_MARGIN_S = 0.3
#: UDP payload per packet (echelon header + data): ~1 kB frames, as the demo brief asks.
PACKET_BYTES = 1000
READY_TIMEOUT_S = 30.0
#: An agent still missing packets ends when nothing moved on its host for longer than
#: the whole run could keep it waiting (:func:`idle_timeout`), and never sooner than
#: IDLE_MIN_S: a packet lost between a host and the switch never arrives, and closed
#: loop everything behind it waits (docs/demo.md, "Limits").
IDLE_MIN_S = 2.0
#: The run's deadline is this many times its bound (``Estimate.worst_s``), and at least
#: RUN_MIN_S: past it the agents stop whatever they wait on.
RUN_MARGIN = 3.0
RUN_MIN_S = 60.0


def idle_timeout(est: Estimate) -> float:
    """How long an agent waits with nothing sent or received before it gives up.

    Why from the plan: a host whose flows queue behind the bottleneck sees nothing for
    as long as the other jobs' bytes take to cross it, which for a large job is far
    longer than any constant (h2 waiting behind a 10 Mbit/s link for a GPT-2 XL
    pipeline: tens of seconds). The whole run's bound (every iteration's bottleneck
    bytes after every compute step) is the longest such wait; twice it, never less
    than :data:`IDLE_MIN_S`."""
    return max(IDLE_MIN_S, 2.0 * est.worst_s)


def run_timeout(est: Estimate) -> float:
    """The deadline of one policy's run, from its start (see :data:`RUN_MARGIN`)."""
    return max(RUN_MIN_S, RUN_MARGIN * est.worst_s)


def lost_packets(records: Sequence[Mapping[str, Any]]) -> int:
    """Packets the agents sent that no agent received (duplicates are not counted twice
    by the receivers): lost on the way, or still queued when the run ended."""
    sent = sum(int(f.get("packets") or 0) for r in records for f in r.get("sent", {}).values())
    got = sum(int(f.get("packets") or 0) for r in records for f in r.get("received", {}).values())
    return max(0, sent - got)


def play_scenario(
    net: EchelonNet,
    jobs: Sequence[JobSpec],
    iterations: int,
    ids: Mapping[tuple[str, str], int],
    out_dir: Path,
    est: Estimate,
    rate_mbit: float = 40.0,
    release: str = "closed",
    controller: str | None = None,
    entered: bool = True,
) -> dict[str, Any]:
    """Write the scenario (``iterations`` of every job's plan, flows released closed or
    open loop: :mod:`hostagent.plan`), run an agent in every host, return the
    formation report (with iteration times in closed loop). ``est`` (the jobs at their
    bottleneck, :func:`topo.demo.estimate`) sets the agents' idle timeout and the
    run's deadline. ``entered``: with a ``controller``, agents report entering
    iteration 0 before they say ready."""
    timeout_s = run_timeout(est)
    out_dir.mkdir(parents=True, exist_ok=True)
    hosts = {h.name: h.ip for h in net.topo.hosts.values()}
    sc = build_scenario(jobs, iterations, ids, hosts, start_at=time.time() + READY_TIMEOUT_S,
                        rate_mbit=host_pacing(net.topo, rate_mbit), default_rate_mbit=rate_mbit,
                        timeout_s=timeout_s,
                        packet_bytes=PACKET_BYTES, release=release,
                        idle_timeout_s=idle_timeout(est))  # fmt: skip
    path = out_dir / "scenario.json"
    sc.save(path)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    records = {h: out_dir / f"{h}.json" for h in hosts}
    go = out_dir / "go"
    for f in (go, *records.values(), *(p.with_suffix(".ready") for p in records.values())):
        f.unlink(missing_ok=True)
    try:
        for h, rec in records.items():
            log = (out_dir / f"{h}.log").open("wb")
            procs[h] = net[h].popen(
                [sys.executable, "-m", "hostagent", "play", "--scenario", str(path.resolve()),
                 "--host", h, "--out", str(rec.resolve()), "--go", str(go.resolve()),
                 *(["--controller", controller] if controller else []),
                 *([] if entered else ["--no-entered"])],
                stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT),
            )  # fmt: skip
            log.close()
        ready = [r.with_suffix(".ready") for r in records.values()]
        wait_until(lambda: all(r.exists() for r in ready), READY_TIMEOUT_S, "agents ready")
        sc = sc.model_copy(update={"start_at": time.time() + GO_MARGIN_S})
        sc.save(path)  # the report and anyone reading the file see the real instant
        tmp = go.with_suffix(".tmp")
        tmp.write_text(repr(sc.start_at))
        tmp.rename(go)  # atomic: an agent never reads half a number

        def finished() -> bool:
            return all(p.poll() is not None for p in procs.values())

        wait_until(finished, sc.start_at + timeout_s + 10 - time.time(), "agents to finish", 0.1)
    finally:
        for p in procs.values():
            stop_process(p, 5)
    for h, rec in records.items():
        if not rec.exists():
            raise EchelonError(f"agent on {h} wrote no record; see {out_dir / (h + '.log')}")
    data = load_records(records.values())
    ideal = {spec.job_id: spec.ideal_iteration_s for spec in jobs}
    report = formation_report(sc, data, ideal)
    report["agents"] = {d["host"]: {"complete": d["complete"], "unknown": d["unknown_packets"],
                                     "stalled": d.get("stalled", False)}
                        for d in data}  # fmt: skip
    report["lost_packets"] = lost_packets(data)
    report["stalls"] = stalls(data, idle_timeout(est), timeout_s)
    report["agent_delays"] = first_flow_delays(sc, data, ideal)
    report["estimate"] = {"link": est.link, "link_mbit": est.link_mbit, "busy_s": est.busy_s,
                          "ideal_s": est.ideal_s, "idle_timeout_s": idle_timeout(est),
                          "timeout_s": timeout_s}  # fmt: skip
    return report


#: How many flows a stall message names (the rest are counted).
STALL_FLOWS_SHOWN = 3


def stalls(records: Sequence[Mapping[str, Any]], idle_s: float, timeout_s: float) -> list[str]:
    """One line per agent that ended unfinished: which host, why it stopped, and which
    flows it still waited for (packets in / expected) or had not sent in full.

    Why: "its flows are reported incomplete" alone sent a user looking at the switch,
    which had lost nothing; the agent had given up waiting behind the bottleneck."""
    out = []
    for r in records:
        if r.get("complete"):
            continue
        why = (
            f"nothing sent or received for {idle_s:.1f} s (idle timeout)"
            if r.get("stalled")
            else f"the run's deadline ({timeout_s:.0f} s) passed"
        )
        waiting = [f"{uid} ({f['packets']}/{f['expected']} packets)"
                   for uid, f in r.get("received", {}).items()
                   if int(f.get("packets") or 0) < int(f.get("expected") or 0)]  # fmt: skip
        unsent = [uid for uid, f in r.get("sent", {}).items()
                  if int(f.get("packets") or 0) < int(f.get("expected") or 0)]  # fmt: skip
        parts = []
        if waiting:
            parts.append("waiting for " + _some(waiting))
        if unsent:
            parts.append("had not sent all of " + _some(unsent))
        if not parts:
            parts.append("its compute tasks had not all run")
        out.append(f"agent {r.get('host')}: stopped after {why}; " + "; ".join(parts))
    return out


def _some(items: Sequence[str]) -> str:
    shown = ", ".join(items[:STALL_FLOWS_SHOWN])
    more = len(items) - STALL_FLOWS_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def first_flow_delays(
    sc: Scenario, records: Sequence[Mapping[str, Any]], ideal: Mapping[str, float]
) -> dict[str, dict[str, Any]]:
    """Per agent, how late it released its first flow against the plan: for each job it
    sends in, its earliest-planned flow of the first iteration that waits on no other
    flow (the agent's own closed loop, :class:`hostagent.closedloop.ClosedLoop`, releases
    it with nothing ever arriving: no producer, or one whose inputs are all local), its
    planned release and the record's actual one (seconds from the shared start); the
    job where the delay is the largest part of the job's ideal iteration is kept.

    Why only those flows: their release depends on nothing but the agent itself (it
    read the start signal late, or did not get the CPU), so a delay there is the
    machine's, never the policy's; any later flow also waits on the network.
    :func:`topo.report.late_agents` judges them against :data:`topo.report.LATE_FRACTION`."""
    out: dict[str, dict[str, Any]] = {}
    for rec in records:
        host = str(rec.get("host"))
        free = set(ClosedLoop(sc, host).due(math.inf))  # released if nothing ever arrives
        first: dict[str, tuple[float, str]] = {}
        for e, f in sc.flows_from(host):
            uid = e.uid(f)
            if e.iteration != 0 or uid not in free:
                continue
            if e.job not in first or f.release < first[e.job][0]:
                first[e.job] = (f.release, uid)
        rows = []
        for job, (planned, uid) in sorted(first.items()):
            released = dict(rec.get("sent", {})).get(uid, {}).get("released")
            if released is None or not ideal.get(job):
                continue  # never released: a stall, reported as one
            late = released - planned
            rows.append({"job": job, "flow": uid, "planned_s": planned, "released_s": released,
                         "late_s": late, "ideal_iteration_s": ideal[job]})  # fmt: skip
        if rows:
            out[host] = max(rows, key=lambda r: r["late_s"] / r["ideal_iteration_s"])
    return out

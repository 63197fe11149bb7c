"""Play a scenario on the emulated hosts: one ``echelon-agent`` per host, stopped by PID."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from echelon.errors import EchelonError
from echelon.jobs import JobSpec
from echelon.specs import read_file
from echelon.waiting import wait_until
from hostagent.plan import build_scenario
from hostagent.report import formation_report
from targets.process import SOURCE_TREE, stop_process
from topo.demo import Estimate, host_pacing
from topo.net import EchelonNet

#: From "every agent is ready" to the shared start instant (all agents poll the go file).
GO_MARGIN_S = 0.3
#: UDP payload per packet (echelon header + data) on the soft switch: ~2 kB frames. Three
#: hosts at 40 Mbit/s of 1-kB frames offer ~14,400 packets/s as a run starts, more than
#: the soft switch's one packet thread keeps up with on a slow 2-core VM: it read h1's
#: first frames 20-50 ms after the kernel delivered them, and every later flow carried
#: that. At 2 kB (half the packets, 1.6 ms each at 10 Mbit/s) the start is on time and
#: the static plan closer to the packet model (docs/measurements/demo.md).
PACKET_BYTES = 2000
#: ... on BMv2, a quarter of 1 kB's packets per second for the same bits: one BMv2 core
#: forwards at most ~9,000 packets/s on a slow 2-core VM (loss-free 4,000-6,000)
#: (docs/measurements/demo.md).
BMV2_PACKET_BYTES = 4000
#: ... and in an interleaving scenario (``topo.run --scenario``): its 9 Mbit/s links offer few
#: packets per second and are sized for 1-kB packets' headers (``topo/interleave.yaml``).
INTERLEAVE_PACKET_BYTES = 1000
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


def play_scenario(
    net: EchelonNet,
    jobs: Sequence[JobSpec],
    iterations: int,
    ids: Mapping[tuple[str, str], int],
    out_dir: Path,
    est: Estimate,
    rate_mbit: float = 40.0,
    packet_bytes: int = PACKET_BYTES,
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
                        packet_bytes=packet_bytes, release=release,
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
                stdout=log, stderr=subprocess.STDOUT, cwd=str(SOURCE_TREE),
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
    data = [read_file(p) for p in records.values()]
    ideal = {spec.job_id: spec.ideal_iteration_s for spec in jobs}
    report = formation_report(sc, data, ideal)
    report["estimate"] = {**est.as_json(), "idle_timeout_s": idle_timeout(est),
                          "timeout_s": timeout_s}  # fmt: skip
    return report

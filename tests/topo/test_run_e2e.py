"""``python -m topo.run --headless`` on the soft switch, end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from echelon.waiting import wait_until
from targets.process import free_port, stop_process
from topo.crosscheck import (
    compare,
    completion_rows,
    iteration_rows,
    predict,
    race_flows,
)
from topo.demo import JOB_FILES, specs_from_results
from topo.net import root_links
from topo.run import POLICIES

from .helpers import ROOT, alive, needs_root, topo_on_free_ports

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.skipif(needs_root, reason="root")]
PREFIX = f"t6e{os.getpid() % 1000}"  # unique per test process
KILL_PREFIX = f"t6k{os.getpid() % 1000}"
# Timing bounds are shares of the run's own times, not milliseconds measured on one day:
# the emulated network is shaped to fixed rates, so its times do not stretch with CPU
# load, but the hosts', switch's and controller's latency does, by a few ms to a few tens
# of ms on a loaded 2-core machine (docs/measurements/demo.md). Each share below is about
# twice the largest seen there and still well under what the failure it guards gives.
#: The PS pull under per-flow levels vs one Coflow level: echelon's first layer to h4
#: arrives by this share of the time coflow's first layer does. Structural: per-flow
#: levels send the early layers first (measured 0.53-0.67: 0.135-0.171 against 0.253 s),
#: one level finishes all layers together (the failure: about 1.0). The ECT gain that
#: follows is only the offsets of the last layers (20-30 ms of ~0.25 s: measured
#: 0.93-0.94, once 0.985 on a loaded machine), so the ECT is only required to drop.
PULL_FIRST_LAYER_SHARE = 0.85
#: Model vs emulation, a group's completion or a job's iteration time: the largest
#: difference at most this share of the run's mean iteration time (two-job demo: about
#: 0.4 s, so ~50 ms). Measured: fluid model 3.4 % at most, packet model 1.1 % on a quiet
#: VM; on a throttled one, with 1-kB packets, the soft switch fell behind on its input as
#: the first flow started, which every later flow carried (27-43 ms, 6-10 %, in 2 of 4
#: fresh-clone CI runs of 2026-12-02; the 2-kB default halves the packets:
#: docs/measurements/demo.md); a model that ignores the hosts' NICs is 17-19 % off,
#: which this still catches.
TWO_JOB_SHARE = 0.12
#: The three-job scenario against the packet model: largest difference of a group or an
#: iteration at most this share of the run's mean iteration time (~0.46-0.49 s), per
#: plan. Measured with 2-kB packets (2026-12-03, docs/measurements/demo.md): quiet, static
#: 3.4-13.6 ms and online 3.6-6.9 ms; with a busy loop on one core, static 3.2-26 ms, online
#: 5.4-39 ms in 12 of 14 runs, 68 and 288 ms in two (the switch, the controller's writes and
#: four agents on one core fall behind as the run starts). The failures they guard: the
#: order flipping at h4 (a race) moves groups by 120-260 ms, 23-50 %; a controller that
#: stopped re-planning runs the static plan, up to 414-419 ms off the online model.
THREE_JOB_SHARE = {"echelon": 0.12, "echelon-online": 0.2}
#: The two-job scenario: the pipeline and the parameter server alone.
TWO_JOB_FILES = JOB_FILES[:2]


def mean_iteration_s(results: dict[str, Any], policy: str) -> float:
    """The run's mean iteration time under ``policy``, over its jobs."""
    jobs = results["policies"][policy]["jobs"]
    times = [j["iteration_time_mean"] for j in jobs.values()]
    return float(sum(times) / len(times))


def play_demo(
    tmp_path: Path,
    prefix: str,
    *args: str,
    env: dict[str, str] | None = None,
    topo_file: str = "topo/star.yaml",
) -> tuple[str, dict[str, Any]]:
    """``topo.run --headless`` on the soft switch with ``args``; its log and results.
    The run must exit 0 and leave no interface behind."""
    topo = topo_on_free_ports(topo_file, tmp_path / "topo.yaml")
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "topo.run", "--headless", "--target", "soft",
            "--topo", str(topo), "--out-dir", str(out), "--prefix", prefix,
            "--api-port", str(free_port()), *args]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        text, _ = proc.communicate(timeout=240)
    finally:
        stop_process(proc, 60)  # SIGTERM first: the run removes its namespaces and processes
    log = text.decode(errors="replace")
    assert proc.returncode == 0, log
    assert not {n for n in root_links() if n.startswith(prefix)}, "interfaces left behind"
    return log, json.loads((out / "latest" / "demo-results.json").read_text())


def test_demo_runs_echelon_beats_fifo_for_the_pipeline_and_coflow_for_the_pull(
    tmp_path: Path,
) -> None:
    log, results = play_demo(tmp_path, PREFIX, "--iterations", "1",
                             "--jobs", ",".join(TWO_JOB_FILES),
                             "--policies", "echelon,coflow,fifo")  # fmt: skip
    assert "target: soft" in log
    assert (tmp_path / "run" / "latest" / "demo-finish-times.png").stat().st_size > 1000
    assert set(results["policies"]) == {"echelon", "coflow", "fifo"}
    for policy, rep in results["policies"].items():
        assert set(rep["jobs"]) == {"pipe", "dp"}, policy
        assert rep["release"] == "closed"  # the default: agents run the compute tasks
        for job, j in rep["jobs"].items():
            assert j["complete"], (policy, job, j["missing"])
            flows = [f for e in j["echelons"] for f in e["flows"]]
            assert flows and all(f["actual"] is not None for f in flows)
            # Measured iteration time: from the first task/release to the last task end;
            # transfers take time, so never below the contention-free ideal.
            (it,) = j["iterations"]
            assert it["start"] == 0.0 and it["end"] >= max(f["actual"] for f in flows), it
            assert j["iteration_time_mean"] == pytest.approx(it["time"])
            assert j["iteration_time_mean"] > j["iteration_time_ideal"] > 0, (policy, job)
    # The jobs really are the job files' paradigm plans, with the controller's IDs.
    specs = specs_from_results(results)
    assert [s.job_id for s in specs] == ["pipe", "dp"]
    assert {s.paradigm for s in specs} == {"gpipe", "dp_ps"}
    planned = {ef.name: ef for s in specs for ef in s.plan(0, 0.0).echelons}
    played = {e["name"]: e for e in results["policies"]["echelon"]["jobs"]["pipe"]["echelons"]}
    assert set(played) == {n for n in planned if n.startswith("pipe/")}
    for name, e in played.items():
        assert [f["ideal"] for f in e["flows"]] == [
            pytest.approx(planned[name].ideal_finish(f.index)) for f in planned[name].flows
        ]
    ect = {p: r["jobs"]["pipe"]["ect_mean"] for p, r in results["policies"].items()}
    assert ect["echelon"] < ect["fifo"], ect
    # The PS pull to h4 (all layers released together, needed layer by layer): per-flow
    # levels deliver the early layers first, one Coflow level finishes them together.
    pull = {p: next(e for e in r["jobs"]["dp"]["echelons"] if e["group"] == "pull")
            for p, r in results["policies"].items()}  # fmt: skip
    first = {p: min(f["actual"] for f in e["flows"] if f["dst"] == "h4")  # h3's link is fast
             for p, e in pull.items()}  # fmt: skip
    assert first["echelon"] < PULL_FIRST_LAYER_SHARE * first["coflow"], first
    pull_ect = {p: e["completion_time"] for p, e in pull.items()}
    assert pull_ect["echelon"] < pull_ect["coflow"], pull_ect
    bound = TWO_JOB_SHARE * mean_iteration_s(results, "echelon")
    # Cross-check with the simulator's fluid model (strict priority: few ms apart).
    rows = compare(results, "echelon")
    assert len(rows) == sum(len(ef.flows) for ef in planned.values())
    ects = completion_rows(rows)
    assert len(ects) == len(planned)
    # Held to the tolerance: every group no other group shares a sending host with --
    # at least both groups crossing the switch's strict-priority bottleneck into h4
    # (host NICs have no priorities, the fluid model does: see topo.crosscheck).
    checked = {e["echelon"] for e in ects if e["checked"]}
    assert {"pipe/0/fwd/s0-s1", "dp/0/pull"} <= checked, ects
    worst = max(abs(e["diff"]) for e in ects if e["checked"])
    assert worst <= bound, (bound, ects)
    # ... and with the packet-level model (host pacers and FIFOs, queues keep each
    # packet's class), which checks every group
    packet = completion_rows(compare(results, "echelon", "packet"), "packet")
    assert len(packet) == len(planned) and all(e["checked"] for e in packet), packet
    assert max(abs(e["diff"]) for e in packet) <= bound, (bound, packet)
    # Nothing left behind: interfaces with our prefix, the switch, controller, agents.
    assert not {n for n in root_links() if n.startswith(PREFIX)}
    assert not procs_mentioning(f"@{PREFIX}s1-") and not procs_mentioning(str(tmp_path))


def test_on_the_leaf_spine_fabric_every_hop_classifies_every_registered_packet(
    tmp_path: Path,
) -> None:
    """The controller puts a group's entries only on the switches its flows cross
    (docs/controller.md): on ``topo/leafspine.yaml`` ``pipe``'s and ``dp``'s packets
    cross leaf1, spine1 and leaf2, ``big``'s stay on leaf2. Every hop must still find
    them: no switch counts a registered packet as an unknown echelon ID or a spoofed
    source (a switch the placement missed would), and every job completes."""
    _, results = play_demo(tmp_path, PREFIX, "--iterations", "1", "--policies", "echelon",
                           topo_file="topo/leafspine.yaml")  # fmt: skip
    for job, j in results["policies"]["echelon"]["jobs"].items():
        assert j["complete"], (job, j["missing"])
    switches = results["stats"]["switches"]
    assert set(switches) == {"leaf1", "spine1", "leaf2"}
    for name, sw in switches.items():
        misses = {k: sw["unprioritized"][k]["packets"] for k in ("unknown_id", "spoofed_source")}
        assert misses == {"unknown_id": 0, "spoofed_source": 0}, name
    assert all(g["packets"] > 0 for g in results["stats"]["groups"])


def test_jumbo_packets_cross_every_link(tmp_path: Path) -> None:
    """``--packet-bytes 4000`` (BMv2's default): frames larger than Ethernet's 1,500 bytes
    reach every host at the first attempt (the links' MTU is 9,000; without it the agents'
    sends fail). How close the model comes at 4 kB is measured, not asserted here: 10-17 ms
    for the three-job demo's static plan (4 runs), and this test's two-job run was 102 ms
    off once on a throttled machine, before the sender's round-robin fix
    (docs/measurements/demo.md)."""
    log, results = play_demo(tmp_path, PREFIX, "--iterations", "1", "--packet-bytes", "4000",
                             "--jobs", ",".join(TWO_JOB_FILES),
                             "--policies", "echelon")  # fmt: skip
    assert "packets of 4000 bytes" in log
    assert results["packet_bytes"] == 4000
    rep = results["policies"]["echelon"]
    assert rep["attempts"] == 1, log  # nothing lost
    for job, j in rep["jobs"].items():
        assert j["complete"], (job, j["missing"])
        flows = [f for e in j["echelons"] for f in e["flows"]]
        assert flows and all(f["actual"] is not None for f in flows), job


def test_online_three_jobs_agrees_with_the_packet_model(tmp_path: Path) -> None:
    """The online scenario (``make run``, docs/demo.md): three jobs whose best order at h4 changes
    as groups come and go. The controller re-plans on the agents' reports (and plans
    the groups each job opens with on their "entering iteration 0" reports, before any
    packet); the packet-level model of that controller, the agents' pacers and their
    per-host barrier predicts every group and iteration of the static plan and of the
    online one (the fluid model cannot: queued packets keep their class)."""
    jobs = ",".join(f"topo/jobs/{j}.yaml" for j in ("pipe", "dp", "big"))
    _, results = play_demo(tmp_path, PREFIX, "--iterations", "2", "--jobs", jobs,
                           "--policies", "echelon-online,echelon")  # fmt: skip
    assert results["entered_reports"] is True
    online = results["policies"]["echelon-online"]
    assert online["online"]["replans"] > 0 and online["online"]["failures"] == 0
    # Both plans: every group instance of both iterations and both iterations' times
    # against the packet model, and no race -- with the shaped links 1.5 % slower no flow
    # moves more than that slowdown explains (`echelon-swapany`'s plan moves 22 flows, up
    # to 179 ms; docs/measurements/demo.md). Online too since the controller plans what an
    # iteration opens with before its first byte and dates releases by the hosts' clocks:
    # before, its outcome hung on its own latency (docs/demo.md, "Limits").
    for policy, share in THREE_JOB_SHARE.items():
        bound = share * mean_iteration_s(results, policy)
        pred = predict(results, policy, "packet")
        ects = completion_rows(compare(results, policy, "packet", pred), "packet")
        assert len(ects) == 2 * 6 and all(e["checked"] for e in ects), (policy, ects)
        assert max(abs(e["diff"]) for e in ects) <= bound, (policy, bound, ects)
        its = iteration_rows(results, policy, pred)
        assert len(its) == 2 * 3, (policy, its)
        assert max(abs(r["diff"]) for r in its) <= bound, (policy, bound, its)
        assert race_flows(results, policy, base=pred) == [], policy
    assert not {n for n in root_links() if n.startswith(PREFIX)}


def procs_mentioning(text: str) -> list[int]:
    """PIDs of live processes whose command line contains ``text`` (inspection only)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd and alive(int(d.name)):
                found.append(int(d.name))
    return found


def test_sigterm_mid_run_cleans_up(tmp_path: Path) -> None:
    topo = topo_on_free_ports("topo/star.yaml", tmp_path / "star.yaml")
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "topo.run", "--headless", "--target", "soft",
            "--topo", str(topo), "--out-dir", str(out), "--prefix", KILL_PREFIX,
            "--api-port", str(free_port())]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        # Interrupt while agents play the first policy (echelon-online, the default's first):
        # the most processes are alive then.
        first = out / "latest" / POLICIES[0] / "go"
        wait_until(lambda: first.exists() or proc.poll() is not None,
                   90, "the first policy to start")  # fmt: skip
        assert proc.poll() is None
        assert procs_mentioning(str(tmp_path))  # controller and agents are running
        assert procs_mentioning(f"@{KILL_PREFIX}s1-")  # the soft switch
        proc.terminate()
        assert proc.wait(60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not {n for n in root_links() if n.startswith(KILL_PREFIX)}
    wait_until(lambda: not procs_mentioning(str(tmp_path)), 15, "run's processes to exit")
    assert not procs_mentioning(f"@{KILL_PREFIX}s1-")


GPT_PREFIX = f"t6g{os.getpid() % 1000}"


def test_own_gpt2_xl_job_is_scaled_to_the_budget_and_completes(tmp_path: Path) -> None:
    """``echelon job --model gpt2-xl --pp 4`` played as a user would: without a budget its
    agents gave up behind the 10 Mbit/s link (2 s idle timeout) and every number was
    n/a. Now the run scales it down, says so, and every job finishes."""
    job = tmp_path / "job.yaml"
    made = subprocess.run([sys.executable, "-m", "echelon", "job", "--model", "gpt2-xl",
                           "--pp", "4", "--hosts", "h1,h2,h3,h4", "-o", str(job)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert made.returncode == 0, made.stderr
    log, results = play_demo(tmp_path, GPT_PREFIX, "--iterations", "1", "--budget", "6",
                             "--jobs", str(job), "--policies", "echelon,fifo")  # fmt: skip
    assert "*** scaled the jobs down" in log and "over --budget 6 s" in log, log
    assert results["scale"] < 0.1 and results["incomplete"] == []
    for policy, rep in results["policies"].items():
        (j,) = rep["jobs"].values()
        assert j["complete"], (policy, j["missing"], rep.get("stalls"))
        assert rep["stalls"] == []


PLUGIN_PREFIX = f"t6p{os.getpid() % 1000}"


def test_policy_from_outside_the_repository_plays_static_and_online(tmp_path: Path) -> None:
    """``make run POLICIES=smallest_first:SmallestFirst,...`` with the module's folder on
    PYTHONPATH: the controller installs it, and its online variant is re-planned."""
    from tests.policy_plugin import REFERENCE, install_outside

    env = install_outside(tmp_path / "outside")
    policies = [REFERENCE, f"{REFERENCE}-online"]
    log, results = play_demo(tmp_path, PLUGIN_PREFIX, "--iterations", "1",
                             "--jobs", ",".join(TWO_JOB_FILES),
                             "--policies", ",".join(policies), env=env)  # fmt: skip
    assert list(results["policies"]) == policies
    for pol, rep in results["policies"].items():
        assert all(j["complete"] for j in rep["jobs"].values()), (pol, rep.get("stalls"))
    online = results["policies"][policies[1]]["online"]
    assert online and online["replans"] > 0, online
    assert {r["controller_policy"] for r in results["policies"].values()} == {REFERENCE}
    assert "verdict: mean iteration time (s)" in log

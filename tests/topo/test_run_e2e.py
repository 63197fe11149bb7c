"""``python -m topo.run --headless`` on the soft switch, end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from targets.process import free_port, stop_process, wait_until
from topo.crosscheck import (
    DEFAULT_TOLERANCE_S,
    compare,
    completion_rows,
    iteration_rows,
    mean_iteration_ratio,
    predict,
    race_flows,
)
from topo.demo import specs_from_results
from topo.net import root_links

from .helpers import ROOT, alive, needs_root, topo_on_free_ports

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.skipif(needs_root, reason="root")]
PREFIX = f"t6e{os.getpid() % 1000}"  # unique per test process
KILL_PREFIX = f"t6k{os.getpid() % 1000}"
#: Online: the emulated mean iteration time within this share of the packet model's.
ONLINE_MEAN_BOUND = 0.08


def test_demo_runs_echelon_beats_fifo_for_the_pipeline_and_coflow_for_the_pull(
    tmp_path: Path,
) -> None:
    topo = topo_on_free_ports("topo/star.yaml", tmp_path / "star.yaml")
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "topo.run", "--headless", "--target", "soft",
            "--topo", str(topo), "--out-dir", str(out), "--prefix", PREFIX,
            "--api-port", str(free_port()), "--iterations", "1"]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        text, _ = proc.communicate(timeout=150)
    finally:
        stop_process(proc, 60)  # SIGTERM first: the run removes its namespaces and processes
    log = text.decode(errors="replace")
    assert proc.returncode == 0, log
    assert "target: soft" in log
    results = json.loads((out / "demo-results.json").read_text())
    assert (out / "demo-finish-times.png").stat().st_size > 1000
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
    # Closed loop, one iteration: 0.235-0.238 vs 0.253 s over 3 runs (docs/demo.md); 5 ms
    # margin. (With three iterations 0.177-0.180 vs 0.224-0.225 s.)
    pull = {p: next(e["completion_time"] for e in r["jobs"]["dp"]["echelons"]
                    if e["group"] == "pull") for p, r in results["policies"].items()}  # fmt: skip
    assert pull["echelon"] + 0.005 < pull["coflow"], pull
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
    assert worst <= DEFAULT_TOLERANCE_S, ects
    # ... and with the packet-level model (host pacers and FIFOs, queues keep each
    # packet's class), which checks every group
    packet = completion_rows(compare(results, "echelon", "packet"), "packet")
    assert len(packet) == len(planned) and all(e["checked"] for e in packet), packet
    assert max(abs(e["diff"]) for e in packet) <= DEFAULT_TOLERANCE_S, packet
    # Nothing left behind: interfaces with our prefix, the switch, controller, agents.
    assert not {n for n in root_links() if n.startswith(PREFIX)}
    assert not procs_mentioning(f"@{PREFIX}s1-") and not procs_mentioning(str(tmp_path))


def test_online_three_jobs_agrees_with_the_packet_model(tmp_path: Path) -> None:
    """The online scenario (docs/demo.md): three jobs whose best order at h4 changes
    as groups come and go. The controller re-plans on the agents' reports (and plans
    the opening pulls on their "entering iteration 0" reports, before any packet);
    the packet-level model of that controller, the agents' pacers and their per-host
    barrier predicts the static plan's every group and iteration, and the online run's
    mean iteration time (the fluid model cannot: queued packets keep their class)."""
    topo = topo_on_free_ports("topo/star.yaml", tmp_path / "star.yaml")
    out = tmp_path / "run"
    jobs = ",".join(f"topo/jobs/{j}.yaml" for j in ("pipe", "dp", "big"))
    argv = [sys.executable, "-m", "topo.run", "--headless", "--target", "soft",
            "--topo", str(topo), "--out-dir", str(out), "--prefix", PREFIX,
            "--api-port", str(free_port()), "--iterations", "2", "--jobs", jobs,
            "--policies", "echelon-online,echelon"]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        text, _ = proc.communicate(timeout=150)
    finally:
        stop_process(proc, 60)
    log = text.decode(errors="replace")
    assert proc.returncode == 0, log
    results = json.loads((out / "demo-results.json").read_text())
    assert results["entered_reports"] is True
    online = results["policies"]["echelon-online"]
    assert online["online"]["replans"] > 0 and online["online"]["failures"] == 0
    # The static plan: every group instance of both iterations, and both iterations'
    # times, against the packet model, to twice the stated tolerance. Measured on
    # 2026-12-01 (docs/demo.md, "Re-measured 2026-12-01"): the largest difference per
    # run was 7.0-29.2 ms in 29 recorded runs on the CI machine and 50 ms once with other
    # work on its two cores; 8.4 ms at most on the machine of 2026-11-30.
    pred = predict(results, "echelon", "packet")
    ects = completion_rows(compare(results, "echelon", "packet", pred), "packet")
    assert len(ects) == 2 * 6 and all(e["checked"] for e in ects), ects
    assert max(abs(e["diff"]) for e in ects) <= 2 * DEFAULT_TOLERANCE_S, ects
    its = iteration_rows(results, "echelon", pred)
    assert len(its) == 2 * 3, its
    assert max(abs(r["diff"]) for r in its) <= 2 * DEFAULT_TOLERANCE_S, its
    # the static plan's outcome does not hinge on a race: with the shaped links 1.5 %
    # slower no flow moves more than that slowdown explains (with the interchange on
    # every pair, `echelon-swapany`, this scenario's plan moves 22 flows, up to 179 ms;
    # docs/demo.md)
    assert race_flows(results, "echelon", base=pred) == []
    # Online, the order at h4 hinges on a race in some runs: on the CI machine in 3 of
    # 10 runs the emulation served big's pull before pipe's backward pass where the
    # model did the opposite, moving those groups by 120-170 ms (docs/demo.md). What
    # holds in every run is the mean: the emulated mean iteration time was 0.8-6.2 %
    # above the model's (27 recorded runs that day). The bound can fail: the static
    # plan's emulated mean was 11.8-13.2 % above the online model's (10 of those
    # runs), so a controller that stopped re-planning would.
    pred = predict(results, "echelon-online", "packet")
    its = iteration_rows(results, "echelon-online", pred)
    assert len(its) == 2 * 3, its
    ratio = mean_iteration_ratio(its)
    assert abs(ratio - 1.0) <= ONLINE_MEAN_BOUND, (ratio, its)
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
        # Interrupt while agents play the first policy: the most processes are alive then.
        wait_until(lambda: (out / "echelon" / "go").exists() or proc.poll() is not None,
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

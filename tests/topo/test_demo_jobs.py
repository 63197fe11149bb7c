"""The demo's job files, the scale factor, and the open-loop job given to the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from echelon.errors import EchelonError, SpecError
from echelon.jobs import load_job_file
from echelon.topology import load
from hostagent.plan import release_times
from topo import demo
from topo.crosscheck import OpenLoopJob, completion_rows, controller_topo, scaled_links

HOSTS = set(load("topo/star.yaml").hosts)


def test_job_files_are_paradigm_jobs_whose_traffic_crosses_the_h4_bottleneck() -> None:
    jobs = demo.load_demo_jobs(demo.JOB_FILES, 1.0, HOSTS)
    assert {j.spec.paradigm for j in jobs} == {"gpipe", "dp_ps"}
    for j in jobs:
        assert j.spec == load_job_file(demo.ROOT / j.path)  # scale 1 = the file itself
        into_h4 = [f for ef in j.spec.plan().echelons for f in ef.flows if f.dst == "h4"]
        assert into_h4, j.path


def test_scale_multiplies_sizes_and_durations_and_shrinks_the_timeline() -> None:
    full = {j.spec.job_id: j.spec for j in demo.load_demo_jobs(demo.JOB_FILES, 1.0, HOSTS)}
    k = 0.1
    for j in demo.load_demo_jobs(demo.JOB_FILES, k, HOSTS):
        ref = full[j.spec.job_id]
        assert j.spec.ideal_iteration_s == pytest.approx(k * ref.ideal_iteration_s)
        for a, b in zip(j.spec.plan().echelons, ref.plan().echelons, strict=True):
            assert a.t_ref == pytest.approx(k * b.t_ref)
            for fa, fb in zip(a.flows, b.flows, strict=True):
                assert fa.size == round(k * fb.size)
                assert fa.offset == pytest.approx(k * fb.offset)
    assert demo.scale_description({"x_bytes": 3, "y_s": 2.0, "n": 4, "b_s": True}, 0.1) == {
        "x_bytes": 1, "y_s": 0.2, "n": 4, "b_s": True
    }  # fmt: skip


def test_bad_job_files_and_scale_are_spec_errors_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as e:
        demo.load_demo_jobs(demo.JOB_FILES, 0.0, HOSTS)
    assert e.value.field == "scale"
    bad = tmp_path / "bad.yaml"
    bad.write_text("job: x\nparadigm: gpipe\nhosts: [h1, h9]\nstages: []\n")
    with pytest.raises(SpecError) as e:
        demo.load_demo_jobs([str(bad)], 0.1, HOSTS)
    assert e.value.field.startswith(str(bad)) and "hosts[1]" in e.value.field
    with pytest.raises(SpecError) as e:
        demo.load_demo_jobs([str(tmp_path / "none.yaml")], 0.1, HOSTS)
    assert "cannot read" in e.value.message
    with pytest.raises(SpecError) as e:
        demo.load_demo_jobs([demo.JOB_FILES[0]] * 2, 0.1, HOSTS)
    assert "duplicate" in e.value.message


def test_open_loop_job_releases_every_flow_at_the_agents_release_time() -> None:
    for j in demo.load_demo_jobs(demo.JOB_FILES, 0.1, HOSTS):
        orig = j.spec.plan(0, 0.0)
        ol = OpenLoopJob(j.spec).plan(0, 0.0)
        assert ol.echelons == orig.echelons
        assert set(ol.producer) == set(orig.producer)
        ends: dict[str, float] = {}
        free: dict[str, float] = {}
        for t in ol.tasks:  # a host's hold tasks run back to back
            assert not t.after_tasks and not t.after_flows and t.duration >= 0
            ends[t.id] = free[t.host] = free.get(t.host, 0.0) + t.duration
        want = release_times(orig)
        for key, tid in ol.producer.items():
            assert ends[tid] == pytest.approx(want[key])


def test_completion_rows_take_each_echelonflows_latest_flow() -> None:
    rows = [
        {"echelon": "a", "index": 0, "src": "h1", "ideal": 1.0, "predicted": 1.5, "measured": 1.2},
        {"echelon": "a", "index": 1, "src": "h1", "ideal": 2.0, "predicted": 2.1, "measured": 2.6},
    ]
    (row,) = completion_rows(rows)
    assert row["predicted"] == pytest.approx(0.5) and row["measured"] == pytest.approx(0.6)
    assert row["diff"] == pytest.approx(0.1) and row["flows"] == 2
    assert row["checked"] and row["shared_host"] == []


def test_groups_sharing_a_sending_host_are_not_held_to_the_tolerance() -> None:
    def r(ef: str, src: str) -> dict[str, object]:
        return {"echelon": ef, "index": 0, "src": src, "ideal": 0.0, "predicted": 0.1,
                "measured": 0.1}  # fmt: skip

    rows = [r("a", "h1"), r("b", "h4"), r("c", "h3"), r("c", "h4")]
    ects = completion_rows(rows)
    assert {e["echelon"]: e["shared_host"] for e in ects} == {"a": [], "b": ["h4"], "c": ["h4"]}
    assert [e["checked"] for e in ects] == [True, False, False]
    # the packet model has the hosts' pacers and FIFO links: every group is checked
    assert [e["checked"] for e in completion_rows(rows, "packet")] == [True, True, True]


def test_completion_is_measured_from_each_models_own_iteration_start() -> None:
    """The model started this iteration 30 ms before the emulation did: its flows'
    ideal finishes are 30 ms earlier too, so a formation that is equally late in both
    compares equal, whatever happened in earlier iterations."""
    rows = [{"echelon": "a", "index": 0, "src": "h1", "ideal": 1.0, "ideal_predicted": 0.97,
             "predicted": 1.07, "measured": 1.1}]  # fmt: skip
    (row,) = completion_rows(rows, "packet")
    assert row["predicted"] == pytest.approx(0.1) and row["measured"] == pytest.approx(0.1)
    assert row["diff"] == pytest.approx(0.0)


def test_the_ps_pull_to_h4_is_released_together_and_consumed_staggered() -> None:
    """Why the demo places the PS on h2: its layer-wise pull to worker h4 crosses the
    switch's bottleneck into h4, next to the pipeline's activations."""
    (dp,) = [
        j.spec for j in demo.load_demo_jobs(demo.JOB_FILES, 0.1, HOSTS) if j.spec.job_id == "dp"
    ]
    plan = dp.plan(0, 0.0)
    (pull,) = [ef for ef in plan.echelons if ef.group == "pull"]
    to_h4 = [f for f in pull.flows if f.dst == "h4"]
    assert len(to_h4) >= 4 and all(f.src != "h4" for f in to_h4)
    assert {release_times(plan)[(pull.name, f.index)] for f in to_h4} == {0.0}
    assert len({f.offset for f in to_h4}) == len(to_h4)  # staggered consumption


def test_group_table_averages_each_groups_completion_over_iterations() -> None:
    def ef(group: str, ect: float | None) -> dict[str, object]:
        return {"group": group, "completion_time": ect}

    results = {"policies": {
        "echelon": {"jobs": {"p": {"echelons": [ef("g", 0.1), ef("g", 0.3), ef("h", None)]}}},
        "fifo": {"jobs": {"p": {"echelons": [ef("g", 0.5), ef("g", 0.7), ef("h", 0.2)]}}},
    }}  # fmt: skip
    lines = demo.group_table(results).splitlines()
    assert lines[0].split() == ["job", "group", "echelon", "fifo"]
    assert lines[1].split() == ["p", "g", "0.200", "0.600"]
    assert lines[2].split() == ["p", "h", "n/a", "0.200"]


@pytest.mark.parametrize(
    ("extra", "field"),
    [(["--jobs", "topo/jobs/none.yaml"], "topo/jobs/none.yaml"), (["--scale", "0"], "scale"),
     (["--iterations", "0"], "iterations")],
)  # fmt: skip
@pytest.mark.slow
def test_run_rejects_bad_jobs_before_starting_anything(extra: list[str], field: str) -> None:
    import subprocess
    import sys

    argv = [sys.executable, "-m", "topo.run", "--headless", "--prefix", "t6x", *extra]
    proc = subprocess.run(argv, cwd=demo.ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"error: {field}") and "Traceback" not in proc.stderr
    assert "target:" not in proc.stdout  # failed before the network was built


def test_scaled_links_slow_only_shaped_links() -> None:
    topo = load("topo/star.yaml")
    slow = scaled_links(topo, 0.5)
    for before, after in zip(topo.links, slow.links, strict=True):
        if before.bw_mbit is None:
            assert after.bw_mbit is None
        else:
            assert after.bw_mbit == pytest.approx(before.bw_mbit * 0.5)
    assert any(lk.bw_mbit is not None for lk in topo.links)
    with pytest.raises(EchelonError, match="rate_scale"):
        scaled_links(topo, 0.0)


def test_scaled_links_scale_a_host_uplink_too() -> None:
    topo = load("topo/interleave-uplink.yaml")
    h0 = next(lk for lk in scaled_links(topo, 0.5).links if "h0" in (lk.a, lk.b))
    assert (h0.bw_mbit, h0.host_bw_mbit) == pytest.approx((4.5, 13.5))


def test_controller_topo_of_older_results_is_the_stored_file_rebuilt(tmp_path: Path) -> None:
    stored = demo.controller_topology("topo/interleave-uplink.yaml", 12.0, tmp_path)
    new = {"controller_topo_path": str(stored), "topo_path": "topo/interleave-uplink.yaml"}
    old = {"topo_path": "topo/interleave-uplink.yaml", "rate_mbit": 12.0}
    assert controller_topo(old).links == controller_topo(new).links
    h0 = next(lk for lk in controller_topo(old).links if "h0" in (lk.a, lk.b))
    assert (h0.bw_mbit, h0.host_bw_mbit) == (9.0, 12.0)

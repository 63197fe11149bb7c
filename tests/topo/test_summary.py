"""``topo.summary`` (several demo runs compared) and the controller's paced topology."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from echelon.topology import load
from topo import demo, summary


def result(times: dict[str, dict[str, float]]) -> dict[str, Any]:
    return {
        "policies": {
            pol: {
                "jobs": {j: {"complete": True, "iteration_time_mean": t} for j, t in jobs.items()}
            }
            for pol, jobs in times.items()
        }
    }


def test_run_table_gives_each_job_their_mean_and_the_slowest() -> None:
    t = summary.run_table(
        result({"on": {"a": 0.2, "b": 0.6}, "st": {"a": 0.4, "b": 0.5}}), ["on", "st"]
    )
    assert t["on"] == {"a": 0.2, "b": 0.6, "mean": pytest.approx(0.4), "max": 0.6}
    assert t["st"]["mean"] == pytest.approx(0.45) and t["st"]["max"] == 0.5


def test_summary_counts_runs_where_the_first_policy_is_ahead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = []
    for i, on_b in enumerate((0.6, 0.8, 0.3)):
        p = tmp_path / f"r{i}.json"
        p.write_text(json.dumps(result({"on": {"a": 0.2, "b": on_b}, "st": {"a": 0.4, "b": 0.5}})))
        paths.append(str(p))
    assert summary.main([*paths, "--policies", "on", "--baseline", "st"]) == 0
    out = capsys.readouterr().out
    assert "on vs st, mean over jobs: lower in 2 of 3 runs" in out  # 0.40, 0.50, 0.25 vs 0.45
    assert "on vs st, max over jobs: lower in 1 of 3 runs" in out
    assert "b: on lower in 1 of 3 runs" in out


def test_summary_refuses_incomplete_runs(tmp_path: Path) -> None:
    r = result({"on": {"a": 0.2}, "st": {"a": 0.3}})
    r["policies"]["on"]["jobs"]["a"]["complete"] = False
    (tmp_path / "r.json").write_text(json.dumps(r))
    assert summary.main([str(tmp_path / "r.json"), "--policies", "on", "--baseline", "st"]) == 1


def test_controller_topology_caps_host_links_at_the_pacing_rate(tmp_path: Path) -> None:
    path = demo.controller_topology("topo/leafspine.yaml", 40.0, tmp_path)
    orig, paced = load("topo/leafspine.yaml"), load(path)
    assert paced.hosts == orig.hosts and paced.switches == orig.switches
    for a, b in zip(orig.links, paced.links, strict=True):
        to_host = a.a in orig.hosts or a.b in orig.hosts
        want = min(a.bw_mbit or 40.0, 40.0) if to_host else a.bw_mbit
        assert b.bw_mbit == want, (a, b)
    assert any(a.bw_mbit != b.bw_mbit for a, b in zip(orig.links, paced.links, strict=True))


def test_controller_topology_caps_a_host_uplink_at_the_pacing_rate(tmp_path: Path) -> None:
    paced = load(demo.controller_topology("topo/interleave-uplink.yaml", 12.0, tmp_path))
    h0 = next(lk for lk in paced.links if "h0" in (lk.a, lk.b))
    assert (h0.bw_mbit, h0.host_bw_mbit) == (9.0, 12.0)
    assert all(lk.host_bw_mbit is None for lk in paced.links if lk is not h0)

"""A job's expected time at its bottleneck: the budget's scale-down, the agents'
timeouts, the run folder, and a stall that names its cause (no root needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from echelon.topology import TopologyNetwork, load
from hostagent.report import stalls
from hostagent.scenario import Scenario
from topo import demo
from topo.agents import PACKET_BYTES, RUN_MIN_S, idle_timeout, run_timeout
from topo.run import incomplete_policies, parse_args, run_dir

from .helpers import ROOT

GPT = {
    "job": "gpt",
    "hosts": ["h1", "h2", "h3", "h4"],
    "paradigm": "pipedream_1f1b",
    "micro_batches": 8,
    "stages": [{"fwd_s": 0.06684, "bwd_s": 0.1336812, "activation_bytes": 13107200}] * 3
    + [{"fwd_s": 0.06684, "bwd_s": 0.1336812}],
}


def _network(tmp_path: Path) -> TopologyNetwork:
    paced = demo.controller_topology(ROOT / "topo/star.yaml", 40.0, tmp_path)
    return TopologyNetwork(load(paced))


def test_gpt2_xl_pipeline_is_bound_by_h4s_link_and_scaled_to_the_budget(tmp_path: Path) -> None:
    import yaml

    f = tmp_path / "gpt.yaml"
    f.write_text(yaml.safe_dump(GPT))
    (job,) = demo.load_demo_jobs([str(f)], 0.1, {"h1", "h2", "h3", "h4"})
    est = demo.estimate([job.spec], _network(tmp_path), 3, PACKET_BYTES)
    # 8 micro-batches of 1.31 MB activations into h4 and gradients out: the 10 Mbit/s
    # link into h4 carries 8 * 1.31 MB = 10.5 MB per iteration, ~8.4 s before headers
    assert est.link == "s1>h4" and est.link_mbit == 10.0
    assert 8.4 < est.busy_s < 8.4 * demo.wire_factor(PACKET_BYTES) + 0.01
    assert est.run_s == pytest.approx(3 * est.busy_s)
    # the old constant (2 s) was shorter than one iteration's wait at the bottleneck
    assert idle_timeout(est) > est.run_s > 2.0
    assert run_timeout(est) >= max(RUN_MIN_S, idle_timeout(est))
    scale = demo.fit_to_budget(est, 0.1, 20.0)
    assert scale == pytest.approx(0.1 * 20.0 / est.run_s)
    (small,) = demo.load_demo_jobs([str(f)], scale, {"h1", "h2", "h3", "h4"})
    again = demo.estimate([small.spec], _network(tmp_path), 3, PACKET_BYTES)
    assert again.run_s == pytest.approx(20.0, rel=0.02)  # the time scales with the jobs
    assert demo.fit_to_budget(est, 0.1, 0.0) == 0.1  # --budget 0: never


def test_the_stock_demo_fits_the_default_budget(tmp_path: Path) -> None:
    jobs = demo.load_demo_jobs(list(demo.JOB_FILES), 0.1, {"h1", "h2", "h3", "h4"})
    est = demo.estimate([j.spec for j in jobs], _network(tmp_path), 3, PACKET_BYTES)
    assert est.run_s < demo.DEFAULT_BUDGET_S
    assert demo.fit_to_budget(est, 0.1, demo.DEFAULT_BUDGET_S) == 0.1


def test_a_stall_names_the_agent_the_reason_and_the_flows() -> None:
    records = [
        {"host": "h1", "complete": True, "received": {}, "sent": {}},
        {
            "host": "h2",
            "complete": False,
            "stalled": True,
            "received": {
                "gpt/0/fwd/s0-s1/m3": {"packets": 10, "expected": 1311},
                "gpt/0/fwd/s0-s1/m2": {"packets": 1311, "expected": 1311},
            },
            "sent": {"gpt/0/fwd/s1-s2/m0": {"packets": 0, "expected": 1311}},
        },
        {"host": "h3", "complete": False, "stalled": False, "received": {}, "sent": {}},
    ]
    sc = Scenario(start_at=0.0, hosts={"h1": "10.0.0.1"}, echelons=(), timeout_s=60.0,
                  idle_timeout_s=4.0)  # fmt: skip
    lines = stalls(sc, records)
    assert len(lines) == 2
    assert lines[0].startswith("agent h2: stopped after nothing sent or received for 4.0 s")
    assert "waiting for gpt/0/fwd/s0-s1/m3 (10/1311 packets)" in lines[0]
    assert "m2" not in lines[0]
    assert "had not sent all of gpt/0/fwd/s1-s2/m0" in lines[0]
    assert "deadline (60 s)" in lines[1] and "compute tasks" in lines[1]


def test_each_run_gets_its_own_folder_and_latest_follows(tmp_path: Path) -> None:
    a = run_dir(tmp_path)
    b = run_dir(tmp_path)
    assert a != b and a.parent == b.parent == tmp_path
    assert (a / "logs").is_dir() and (b / "logs").is_dir()
    assert (tmp_path / "latest").resolve() == b.resolve()


def test_incomplete_policies_are_named() -> None:
    results = {
        "policies": {
            "echelon": {"jobs": {"a": {"complete": True}}},
            "fifo": {"jobs": {"a": {"complete": True}, "b": {"complete": False}}},
        }
    }
    assert incomplete_policies(results) == ["fifo"]


def test_scale_and_budget_are_documented() -> None:
    args = parse_args([])
    assert args.budget == demo.DEFAULT_BUDGET_S and args.scale == demo.DEFAULT_SCALE
    readme = (ROOT / "README.md").read_text()
    assert "--scale" in readme and "--budget" in readme


def test_make_run_exits_non_zero_when_results_are_incomplete(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import signal

    import topo.run as run_mod

    monkeypatch.setattr(signal, "signal", lambda *a: None)  # main() would install handlers
    monkeypatch.setattr(run_mod, "run", lambda args: {"incomplete": ["fifo"]})
    assert run_mod.main(["--headless"]) == 1
    monkeypatch.setattr(run_mod, "run", lambda args: {"incomplete": []})
    assert run_mod.main(["--headless"]) == 0

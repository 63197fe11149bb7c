"""``topo.run --scenario``'s pieces without a network: the job files come from the
simulator's scenarios, the emulated iterations go through sim.eval.steady's rules,
and ``fair`` is installable as one switch level."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from controlplane.planning import check_policy
from echelon.errors import SpecError
from echelon.jobs import load_job
from echelon.policies import get_policy, not_installable
from echelon.policies.baselines import FairPolicy
from sim.eval import interleave as sim_interleave
from sim.eval import steady
from sim.eval.experiments import POLICIES as SIM_POLICIES
from topo import interleave
from topo.report import iteration_records
from topo.run import parse_args


def test_job_files_are_the_simulators_descriptions(tmp_path: Path) -> None:
    scenario = sim_interleave.by_key("compatible-3")
    paths = interleave.write_job_files(scenario, tmp_path)
    loaded = [yaml.safe_load(Path(p).read_text()) for p in paths]
    assert loaded == sim_interleave.descriptions(scenario)
    assert [d["hosts"] for d in loaded] == [["h1", "h0"], ["h2", "h0"], ["h3", "h0"]]
    topo_hosts = yaml.safe_load(Path(interleave.TOPO).read_text())["hosts"]
    for d in loaded:
        load_job(d, set(topo_hosts))  # every job fits the emulated topology


def test_an_unknown_scenario_names_the_known_ones() -> None:
    with pytest.raises(SpecError, match="compatible-2"):
        sim_interleave.by_key("compatible-9")


def test_emulated_iterations_measure_like_simulated_ones() -> None:
    # j0 iterates every 1.0 s, j1 every 1.5 s; rows as hostagent.report writes them
    def rows(period: float, n: int) -> list[dict[str, object]]:
        return [{"iteration": i, "start": period * i, "end": period * (i + 1)} for i in range(n)]

    unfinished = {"iteration": 8, "start": 12.0, "end": None}
    report = {"jobs": {"j0": {"iterations": rows(1.0, 12)},
                       "j1": {"iterations": [*rows(1.5, 8), unfinished]}}}  # fmt: skip
    records = iteration_records(report)
    assert len(records) == 20  # the unfinished iteration is left out
    row = steady.measure_iterations(records, {"j0": 1.0, "j1": 1.0}, 10.0)
    assert row["jobs"]["j0"]["steady_s"] == pytest.approx(1.0)
    assert row["jobs"]["j1"]["steady_s"] == pytest.approx(1.5)
    assert row["worst_slowdown"] == pytest.approx(1.5)


def test_every_job_still_iterates_at_the_horizon() -> None:
    horizon, n = interleave.steady_iterations({"a": 0.5, "b": 2.0}, 10.0)
    assert horizon == 20.0
    assert n * 0.5 > horizon  # the fastest job, alone-fast, has not run out


def test_fair_is_installed_as_one_level() -> None:
    assert interleave.controller_policy("fair") == interleave.FAIR_PLUGIN
    assert interleave.controller_policy("echelon") == "echelon"
    with pytest.raises(SpecError):
        check_policy("fair")  # the core's fair stays refused
    check_policy(interleave.FAIR_PLUGIN)
    policy = get_policy(interleave.FAIR_PLUGIN)
    assert not_installable(policy) is None
    assert isinstance(policy, FairPolicy)  # fair's ranks: every flow rank 0


def test_scenario_mode_defaults() -> None:
    args = parse_args(["--scenario", "compatible-2"])
    assert args.topo == interleave.TOPO and args.scale == interleave.DEFAULT_SCALE
    assert args.budget == 0.0 and args.horizon == steady.HORIZON
    # fair, then every planned policy re-planned online, as the simulator re-plans
    played = args.policies.split(",")
    assert played[0] == "fair" and "echelon-online" in played and "echelon" not in played
    assert all(p.endswith(interleave.ONLINE_SUFFIX) for p in played[1:])
    assert {interleave.base_policy(p) for p in played} <= set(SIM_POLICIES)
    demo = parse_args([])
    assert demo.topo == "topo/star.yaml" and demo.scenario is None
    assert "fair" not in demo.policies.split(",")

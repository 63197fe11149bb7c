"""The evaluation's text is computed from the numbers: check the computation."""

from __future__ import annotations

import math
import re

import pytest

from sim.eval import headline
from sim.eval.cases import CASES, run_case
from sim.eval.experiments import average
from sim.eval.headline import ORACLE_MAX_TARGET, oracle_verdict
from sim.eval.report import levels_table, pct, verdict


def row(policy: str, mean: float, p99: float) -> dict[str, object]:
    return {"policy": policy, "iter_mean": mean, "iter_p99": p99}


def test_verdict_names_who_is_ahead_and_behind() -> None:
    rows = [row("echelon", 10.0, 20.0), row("fair", 12.0, 18.0), row("fifo", 10.0, 25.0)]
    text = verdict(rows, ["fair", "fifo"], "mixX")
    mean_line, p99_line, best_line = text.splitlines()
    assert "ahead of 1/2" in mean_line and "tied" in mean_line and "fifo" in mean_line
    assert "**behind** fair (+11.1% slower)" in p99_line
    assert "best baseline on mean iteration time: fifo" in best_line
    assert pct(11.0, 10.0) == "+10.0%"


def test_average_over_seeds() -> None:
    rows = [
        {
            "mix": "m",
            "policy": "p",
            "levels": "ideal",
            "load": "batch",
            "seed": s,
            "iter_mean": v,
            "iter_p99": v,
            "slowdown_mean": v,
            "slowdown_p99": v,
            "ecct_mean": v,
            "job_slowdown_max": v,
            "job_slowdown_min": v,
            "tardiness_total": v,
            "jct_mean": v,
            "jct_p99": v,
            "flows": 10,
            "wall_s": 1.0,
        }
        for s, v in ((0, 1.0), (1, 3.0), (2, math.nan))
    ]
    (avg,) = average(rows, ("mix", "policy", "levels", "load"))
    assert avg["iter_mean"] == 2.0 and avg["seeds"] == 3


def test_levels_table_reports_the_k8_cost() -> None:
    rows = [
        {"mix": "m", "policy": "echelon", "levels": "ideal", "iter_mean": 2.0, "iter_p99": 4.0},
        {"mix": "m", "policy": "echelon", "levels": "K=8", "iter_mean": 2.2, "iter_p99": 4.0},
    ]
    out = levels_table(rows, ["m"], ["echelon"])
    assert "+10.0%" in out and "+0.0%" in out


def test_case_studies_reproduce_the_paper_story() -> None:
    """Case 1: a Coflow scheduler lets the pipeline's activations share the link, the
    echelon policy sends them in formation -- earlier first arrival, shorter iteration."""
    case = next(c for c in CASES if c.key == "case1")
    co, ours = run_case(case, "coflow"), run_case(case, "echelon")
    first = {r.policy: min(f.finish for f in r.flows if "/fwd/" in f.echelon) for r in (co, ours)}
    assert first["echelon"] < first["coflow"]
    assert ours.iterations[0].duration < co.iterations[0].duration
    ideal = ours.ideal_iteration["pipe"]
    assert ideal <= ours.iterations[0].duration


def test_analysis_explains_tail_and_compute_bound() -> None:
    from sim.eval.report import analysis

    def r(mix: str, pol: str, lv: str, mean: float, p99: float, hi: float) -> dict[str, object]:
        return {
            "mix": mix,
            "policy": pol,
            "levels": lv,
            "iter_mean": mean,
            "iter_p99": p99,
            "slowdown_mean": 1.001,
            "job_slowdown_max": hi,
            "job_slowdown_min": 1.0,
        }

    rows = [
        r("calm", "echelon", "ideal", 1.0, 1.0, 1.0),
        r("calm", "fair", "ideal", 1.001, 1.0, 1.0),
        r("busy", "echelon", "ideal", 2.0, 6.0, 4.0),
        r("busy", "fair", "ideal", 2.4, 5.0, 3.0),
        r("busy", "echelon", "K=8", 2.2, 5.5, 3.5),
    ]
    text = analysis(rows, ["calm", "busy"])
    assert "`calm`: every policy is within 0.10 %" in text
    assert "fair the lower p99 (5 s vs 6 s)" in text and "4x under echelon vs 3x" in text
    assert "changes by +10.0%" in text


def test_tail_gap_in_first_iterations_is_called_cold_start() -> None:
    from sim.eval.report import analysis

    def r(pol: str, mean: float, p99: float, first: float, later: float) -> dict[str, object]:
        return {
            "mix": "m", "policy": pol, "levels": "ideal", "iter_mean": mean, "iter_p99": p99,
            "slowdown_mean": 2.0, "job_slowdown_max": 3.0, "job_slowdown_min": 1.0,
            "iter_first_mean": first, "iter_later_mean": later,
        }  # fmt: skip

    cold = analysis([r("echelon", 10.0, 20.0, 15.0, 8.0), r("edf", 11.0, 13.0, 12.0, 10.5)], ["m"])
    assert "first iterations average 15 s under echelon vs 12 s under edf (+25.0%)" in cold
    assert "cold start" in cold and "echelon is ahead" in cold
    warm = analysis([r("echelon", 10.0, 20.0, 9.0, 11.0), r("edf", 11.0, 13.0, 12.0, 10.5)], ["m"])
    assert "cold start" not in warm and "later ones 11 s vs 10.5 s (+4.8%)" in warm


def test_the_one_link_verdict_says_by_how_much_and_where() -> None:
    assert "met (1.040)" in oracle_verdict([1.0, 1.04], [1.0, 1.0])
    missed = oracle_verdict([1.0, 1.2, 1.06, ORACLE_MAX_TARGET], [1.0, 1.3, 1.0, 1.0])
    assert "missed by 0.150" in missed and "2 of 4 instances" in missed
    assert "#1 (1.200), #2 (1.060)" in missed and "on 1 of them the myopic optimum" in missed
    assert oracle_verdict([], []) == ""


def test_the_held_out_one_link_line_names_each_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """The held-out line gives, per instance set not used in the design, echelon's mean /
    max ratio, how many instances are above the target, and the myopic optimum's."""
    monkeypatch.setattr(headline, "ORACLE_INSTANCES", 6)
    monkeypatch.setattr(headline, "ORACLE_HELDOUT_SEEDS", (1, 2))
    line = headline.heldout_line()
    found = re.findall(
        r"seed (\d): (\d\.\d{4}) / (\d\.\d{3}) \((\d+) above 1\.05, (\d+) of them above it "
        r"under the myopic optimum too; myopic optimum (\d\.\d{4}) / (\d\.\d{3})\)",
        line,
    )
    assert [f[0] for f in found] == ["1", "2"]
    for _, mean, top, above, blind, ref_mean, ref_top in found:
        assert 1.0 <= float(mean) <= float(top) and 1.0 <= float(ref_mean) <= float(ref_top)
        assert 0 <= int(blind) <= int(above) <= 6
    assert "6 instances each" in line

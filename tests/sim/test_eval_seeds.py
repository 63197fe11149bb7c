"""The report's seed-level comparison (sim.eval.seeds) on hand-made rows."""

from __future__ import annotations

import json

import pytest

from sim.eval import seeds
from sim.eval.report import echelon_vs_best


def _row(policy: str, seed: int, mean: float, p99: float, mix: str = "dp") -> dict[str, object]:
    return {"mix": mix, "policy": policy, "seed": seed, "iter_mean": mean, "iter_p99": p99}


def test_uniform_gain_has_a_point_interval() -> None:
    p = seeds.paired_ratio([0.9, 1.8, 2.7], [1.0, 2.0, 3.0])
    assert p.ratio == pytest.approx(-0.1)
    # every resample has the same ratio, so the interval is that point
    assert p.low == pytest.approx(-0.1) and p.high == pytest.approx(-0.1)
    assert (p.ahead, p.seeds) == (3, 3)


def test_one_bad_seed_widens_the_interval_and_is_counted() -> None:
    ours, theirs = [1.0, 1.0, 1.0, 2.0], [1.1, 1.1, 1.1, 1.0]
    p = seeds.paired_ratio(ours, theirs)
    assert p.ratio == pytest.approx(5.0 / 4.3 - 1.0)
    assert p.ahead == 3
    assert p.low < -0.05 < p.ratio < p.high
    # resampling is paired: the all-good-seeds draw gives 1.0/1.1 - 1, the all-bad one +100 %
    assert p.low >= 1.0 / 1.1 - 1.0 - 1e-12 and p.high <= 1.0 + 1e-12


def test_series_must_match() -> None:
    with pytest.raises(ValueError, match="equal"):
        seeds.paired_ratio([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="non-empty"):
        seeds.paired_ratio([], [])


def test_by_seed_keeps_common_seeds_and_best_excludes_echelon() -> None:
    rows = [
        _row("echelon", 1, 0.5, 1.0),
        _row("echelon", 2, 0.5, 1.0),
        _row("fifo", 1, 0.9, 0.8),
        _row("fifo", 2, 0.9, 0.8),
        _row("fifo", 3, 9.0, 9.0),  # echelon has no seed 3: left out
        _row("v1", 1, 0.6, 2.0),
        _row("v1", 2, 0.6, 2.0),
        _row("echelon", 1, 0.1, 0.1, mix="hybrid"),
    ]
    per = seeds.by_seed(rows, "dp")
    assert sorted(per) == ["echelon", "fifo", "v1"]
    assert all(sorted(v) == [1, 2] for v in per.values())
    _, bm, bp = echelon_vs_best(seeds.seed_means(per)) or pytest.fail("no comparison")
    assert (bm["policy"], bp["policy"]) == ("v1", "fifo")
    assert bm["iter_mean"] == pytest.approx(0.6) and bp["iter_p99"] == pytest.approx(0.8)


def test_largest_gaps_and_table() -> None:
    rows = []
    for s, (e, b) in enumerate([(1.0, 1.0), (1.3, 1.0), (0.9, 1.0), (1.1, 1.0)]):
        rows += [_row("echelon", s, e, 2.0), _row("v1", s, b, 4.0)]
    base, gaps = seeds.largest_gaps(rows, "dp", count=2)
    assert base == "v1"
    assert [g[0] for g in gaps] == [1, 3]
    assert gaps[0][1] == pytest.approx(0.3) and gaps[0][2] == pytest.approx(-0.5)
    text = seeds.seed_table(rows, ["dp", "hybrid"])
    line = next(x for x in text.splitlines() if x.startswith("| dp"))
    # mean +7.5 % over 4 seeds, lower in 1; p99 -50 % in all 4
    assert "| 4 |" in line and "+7.5%" in line and "| 1/4 |" in line
    assert "-50.0% [-50.0, -50.0]" in line and "| 4/4 |" in line
    assert "hybrid" not in text


def test_why_missed_names_the_seeds_of_the_loss() -> None:
    """The summary's account lists, per mix where echelon's mean loses on some seed,
    those seeds (of the three largest gaps) with the mean and p99 gaps against the
    best-mean baseline and the seed's job draw."""
    from sim.eval.headline import why_missed

    rows = []
    for s, (e, b) in enumerate([(1.0, 1.0), (1.3, 1.0), (0.9, 1.0)]):
        rows += [_row("echelon", s, e, 2.0), _row("v1", s, b, 4.0)]
    rows += [_row("echelon", s, 0.5, 1.0, "hybrid") for s in range(3)]
    rows += [_row("v1", s, 1.0, 1.0, "hybrid") for s in range(3)]
    gaps = {mix: seeds.largest_gaps(rows, mix) for mix in ("dp", "hybrid")}
    asked: list[tuple[str, int]] = []

    def draw(mix: str, seed: int) -> str:
        asked.append((mix, seed))
        return "2 fsdp"

    text = why_missed(gaps, draw)
    # only losing seeds, each with its draw
    assert "`dp` against v1, mean / p99: seed 1 +30.0% / -50.0% (2 fsdp). Where" in text
    assert asked == [("dp", 1)]
    assert "`hybrid` against" not in text  # echelon's mean is lower on every seed
    assert "nowhere" in why_missed({"hybrid": gaps["hybrid"]}, draw)


def test_job_draw_is_the_seeds_jobs() -> None:
    """The draw of a closed batch is read back from the network and job count of a row
    (the same jobs whatever the policy), counted by paradigm."""
    from sim.eval.experiments import NETWORK, job_draw

    row = {**_row("edf", 9, 1.0, 1.0), "n_jobs": 8, "network": json.dumps(NETWORK)}
    # docs/model.md reads `dp` seed 9: three FSDP jobs next to small data-parallel ones
    assert job_draw([row], "dp", 9) == "3 dp_allreduce, 3 fsdp, 2 dp_ps"
    with pytest.raises(ValueError, match="seed 8"):
        job_draw([row], "dp", 8)

"""The hindsight search (bench.hindsight): its policy on a hand case, its input errors,
and a short search that can only improve on its best start."""

from __future__ import annotations

import pytest

from bench.hindsight import Batch, TierPolicy, instance_of, main, search
from echelon.errors import SpecError
from echelon.model import EchelonFlow, Flow
from echelon.network import BigSwitch

NET = BigSwitch.uniform(["h1", "h2"], 1.0)


def _ef(name: str, offsets: list[float], t_ref: float) -> EchelonFlow:
    flows = tuple(Flow(i, "h1", "h2", 1, o) for i, o in enumerate(offsets))
    return EchelonFlow(name, name.split("/")[0], "g", flows, t_ref)


def test_tiers_first_then_latest_finish() -> None:
    """b's iteration 0 is tier 0: both its flows go before a's, although a's first flow
    is due earlier; inside a tier, by latest finish across groups."""
    a = _ef("a/0/x", [0.0, 5.0], t_ref=0.0)
    b = _ef("b/0/x", [0.0, 1.0], t_ref=3.0)
    c = _ef("c/0/x", [0.0], t_ref=2.0)
    r = TierPolicy({("b", 0): 0, ("a", 0): 1, ("c", 0): 1}).schedule([a, b, c], NET).flow_rank
    assert r[("b/0/x", 0)] < r[("b/0/x", 1)] < r[("a/0/x", 0)] < r[("c/0/x", 0)] < r[("a/0/x", 1)]


def test_names_must_carry_the_iteration() -> None:
    assert instance_of("job-1/12/pull/3") == ("job-1", 12)
    with pytest.raises(SpecError) as info:
        instance_of("job/pull")
    assert info.value.field == "name"


def test_search_keeps_its_best_start_or_improves_it() -> None:
    batch = Batch("dp", 0, n_jobs=3, iterations=1)
    res = search(batch, steps=2, workers=1, baselines=("fifo", "sebf-edf", "edf"))
    assert set(res.starts) == {"1 smallest first", "2 smallest first", "one tier"}
    assert set(res.tiers) == {(j, 0) for j in batch.jobs_by_size()}

    def objective(mean: float, p99: float) -> float:
        return mean / res.best_mean + 3.0 * max(0.0, p99 / res.best_p99 - 1.0)

    best_start = min(objective(*r) for r in res.starts.values())
    assert objective(res.mean, res.p99) <= best_start + 1e-12
    assert res.best_mean == min(batch.simulate(p)[0] for p in ("fifo", "sebf-edf", "edf"))
    assert res.echelon == batch.simulate("echelon")  # the same jobs every time


def test_cli_reports_a_bad_mix_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--mix", "nope", "--steps", "0", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "nope" in err

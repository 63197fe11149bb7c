"""What the Ray backend relies on, checked without Ray: shared inputs, progress,
row order, and the comparison the two-node test uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.points import (
    Done,
    Point,
    SweepError,
    collect,
    comparable,
    input_key,
    load_inputs,
    run_point,
)
from sim.sweep import run_sweep
from sim.traces import write_trace
from sim.workloads import generate_mix

NET = json.dumps({"kind": "bigswitch", "hosts": 8, "gbit": 10})


def test_point_runs_from_shared_inputs_without_its_files(tmp_path: Path) -> None:
    hosts = [f"h{i}" for i in range(8)]
    jobs = generate_mix("pipeline", hosts, 10e9 / 8, n_jobs=3, load=0.5, iterations=1, seed=2)
    trace = write_trace(tmp_path / "t.json", jobs, {"kind": "bigswitch", "hosts": 8, "gbit": 10})
    points = [Point("trace", pol, trace=str(trace)) for pol in ("echelon", "fair")]
    from_file = [run_point(p) for p in points]
    assert len({input_key(p) for p in points}) == 1  # one input for both points
    shared = load_inputs(points[0])
    trace.unlink()  # a worker on another machine has no such file
    from_shared = [run_point(p, shared) for p in points]
    assert comparable(from_shared) == comparable(from_file)
    assert [r["policy"] for r in from_shared] == ["echelon", "fair"]


def test_topology_file_is_read_once_into_the_inputs(tmp_path: Path) -> None:
    topo = Path(__file__).resolve().parents[2] / "topo" / "star.yaml"
    copy = tmp_path / "star.yaml"
    copy.write_text(topo.read_text())
    p = Point("pipeline", "fair", n_jobs=2, iterations=1,
              network=json.dumps({"kind": "file", "path": str(copy)}))  # fmt: skip
    expected = run_point(p)
    shared = load_inputs(p)
    assert shared.topology is not None
    copy.unlink()
    assert comparable([run_point(p, shared)]) == comparable([expected])


@pytest.mark.parametrize("workers", [1, 2])
def test_progress_once_per_point_rows_in_point_order(workers: int) -> None:
    points = [Point("pipeline", pol, seed=s, n_jobs=2, iterations=1, network=NET)
              for pol in ("echelon", "fair") for s in (0, 1)]  # fmt: skip
    seen: list[Done] = []
    rows = run_sweep(points, workers=workers, progress=seen.append)
    assert [(r["policy"], r["seed"]) for r in rows] == [(p.policy, p.seed) for p in points]
    assert sorted(d.index for d in seen) == [0, 1, 2, 3]
    assert [d.finished for d in seen] == [1, 2, 3, 4]
    assert all(d.total == 4 and d.row == rows[d.index] for d in seen)
    assert comparable(rows) == comparable(run_point(p) for p in points)


def test_comparable_ignores_wall_time_only() -> None:
    a = {"policy": "fair", "iter_mean": 0.1 + 0.2, "wall_s": 1.0, "x": float("nan")}
    assert comparable([a]) == comparable([{**a, "wall_s": 2.0}])
    assert comparable([a]) != comparable([{**a, "iter_mean": 0.3}])  # 0.30000000000000004


def test_a_lost_point_is_an_error() -> None:
    pts = [Point("pipeline", "fair"), Point("pipeline", "edf")]
    with pytest.raises(SweepError, match="1 point"):
        collect(pts, [(0, {"policy": "fair"}, "local")])


def test_spec_error_crosses_processes_as_itself() -> None:
    import pickle

    from echelon.errors import SpecError

    err = pickle.loads(pickle.dumps(SpecError("policy", "unknown policy 'nope'")))
    assert isinstance(err, SpecError)
    assert (err.field, err.message) == ("policy", "unknown policy 'nope'")


def test_a_bad_point_in_a_worker_raises_its_own_error() -> None:
    from echelon.errors import EchelonError

    pts = [Point("pipeline", "fair", n_jobs=2, iterations=1, network=NET),
           Point("pipeline", "nope", n_jobs=2, iterations=1, network=NET)]  # fmt: skip
    with pytest.raises(EchelonError) as err:
        run_sweep(pts, workers=2)
    assert "nope" in str(err.value)

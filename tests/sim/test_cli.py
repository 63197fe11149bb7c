"""The echelon-sim CLI, traces and sweeps (small, fast instances)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from sim.cli import main
from sim.points import Point, run_point
from sim.sweep import grid, run_sweep
from sim.traces import load_trace, write_trace
from sim.workloads import generate_mix

SMALL = ["--jobs", "2", "--iterations", "1", "--net", "bigswitch"]


def test_run_mix_prints_summary_and_writes_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "res"
    rc = main(
        [
            "run",
            "--mix",
            "pipeline",
            *SMALL,
            "--levels",
            "8",
            "--out",
            str(out),
            "--json",
            str(tmp_path / "r.json"),
        ]
    )
    assert rc == 0
    table = capsys.readouterr().out
    assert "priority levels" in table and "K=8" in table
    summary = json.loads((tmp_path / "r.json").read_text())["summary"]
    assert summary["levels"] == "K=8" and summary["jobs_done"] == 2
    with (out / "iterations.csv").open() as fh:
        assert len(list(csv.DictReader(fh))) == 2
    doc = json.loads((tmp_path / "r.json").read_text())
    assert len(doc["flows"]) == summary["flows"] > 0


def test_gen_then_run_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.yaml"
    assert main(["gen", "--mix", "dp", *SMALL, "--load", "0.5", "--out", str(trace)]) == 0
    net, jobs = load_trace(trace)
    assert net is not None and net["kind"] == "bigswitch" and len(jobs) == 2
    capsys.readouterr()
    assert main(["run", "--trace", str(trace), "--policy", "varys", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["policy"] == "varys"


def test_bad_trace_file_is_an_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JSON/YAML trace is read by the core's file reader: an unparsable file is an
    ``error: <file>: ...`` line and exit status 2, not a traceback."""
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["run", "--trace", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {bad}: not valid YAML/JSON")


def test_csv_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(
        "arrival,iterations,name,paradigm,model,hosts,micro_batches,batch,dp,tp\n"
        "0.0,1,a,gpipe,gpt2-xl,h0;h1;h2;h3,4,4,1,1\n"
        "0.5,2,b,dp_allreduce,resnet50,h2;h3;h4;h5,,,,\n"
    )
    net, jobs = load_trace(trace)
    assert net is None and [j.arrival for j in jobs] == [0.0, 0.5]
    assert jobs[1].iterations == 2
    assert main(["run", "--trace", str(trace), "--net", "bigswitch", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["iterations_done"] == 3


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["run", "--policy", "nope"], "policy"),
        (["run", "--levels", "x"], "levels"),
        (["run", "--mix", "nope"], "mix"),
        (["run", "--network", "{bad"], "network"),
        (["run", "--trace", "/nonexistent.json"], "/nonexistent.json"),
        (["sweep", "--policy", "fair,nope", "--out", "/tmp/x.csv"], "policy"),
    ],
)
def test_bad_input_exits_2(args: list[str], field: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field}:") and "Traceback" not in err


def test_sweep_local_processes_match_serial(tmp_path: Path) -> None:
    net = json.dumps({"kind": "bigswitch", "hosts": 8, "gbit": 10})
    points = grid(
        mix=["pipeline"], policy=["echelon", "fair"], n_jobs=[2], iterations=[1], network=[net]
    )
    assert len(points) == 2
    par = run_sweep(points, workers=2)
    ser = [run_point(p) for p in points]
    for a, b in zip(par, ser, strict=True):
        assert a["policy"] == b["policy"] and a["iter_mean"] == b["iter_mean"]


def test_sweep_cli_writes_rows(tmp_path: Path) -> None:
    out = tmp_path / "s.csv"
    rc = main(
        [
            "sweep",
            "--mix",
            "pipeline",
            *SMALL,
            "--policy",
            "echelon,edf",
            "--levels",
            "ideal,8",
            "--workers",
            "1",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["policy"], r["levels"]) for r in rows} == {
        ("echelon", "ideal"),
        ("echelon", "K=8"),
        ("edf", "ideal"),
        ("edf", "K=8"),
    }


def test_ray_path_reports_missing_ray() -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("ray is installed")
    from echelon.errors import SpecError

    with pytest.raises(SpecError) as err:
        run_sweep([Point("pipeline", "fair")], ray_address="auto")
    assert "pip install ray" in err.value.message


def test_trace_round_trip(tmp_path: Path) -> None:
    hosts = [f"h{i}" for i in range(8)]
    jobs = generate_mix("pipeline", hosts, 1e9, n_jobs=3, load=0.4, seed=1)
    p = write_trace(tmp_path / "t.json", jobs, {"kind": "bigswitch", "hosts": 8})
    net, back = load_trace(p)
    assert net == {"kind": "bigswitch", "hosts": 8}
    assert [(j.arrival, j.iterations, dict(j.description)) for j in back] == [
        (j.arrival, j.iterations, dict(j.description)) for j in jobs
    ]


def test_run_a_chakra_trace_alone_and_beside_a_mix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.core.test_chakra_convert import _ddp_like

    trace = str(_ddp_like(tmp_path))
    assert main(["run", "--chakra", trace, "--jobs", "0", "--iterations", "2", "--json", "-q"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert alone["jobs_done"] == 1 and alone["iterations_done"] == 2
    # 4 hosts, one job: the 71 µs ideal iteration plus the buckets' transfer time
    assert alone["iter_mean"] >= 71e-6
    assert main(["run", "--chakra", trace, *SMALL, "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs_done"] == 3
    assert main(["run", "--chakra", str(tmp_path / "none.et"), "--jobs", "0", "-q"]) == 2
    assert "none.et: cannot read" in capsys.readouterr().err

"""What the simulator's CLIs tell a person: progress on stderr (bar on a terminal,
periodic lines otherwise, nothing with --quiet), ``sim run``'s summary table, and
sweep rows that describe what was simulated."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from sim.cli import main
from sim.core.engine import SimConfig, Simulator
from sim.points import Point, run_point
from sim.progressbar import Progress, sweep_progress
from sim.summary import ROWS, describe_network, summary_rows, summary_table
from sim.sweep import print_progress
from sim.topology import hosts_of, make_network
from sim.traces import write_trace
from sim.workloads import generate_mix


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_progress_lines_without_a_terminal_are_periodic() -> None:
    out, clock = io.StringIO(), Clock()
    bar = Progress("grid", 100, "points", stream=out, interval=10.0, clock=clock)
    for i in range(1, 101):
        clock.t = i * 0.5  # a step every 0.5 s: 50 s in all
        bar.update(i)
    bar.close()
    lines = out.getvalue().splitlines()
    # the first step, then one line per 10 s, and always the last step
    counts = [ln.split(":")[1].split()[0] for ln in lines]
    assert counts == ["1/100", "21/100", "41/100", "61/100", "81/100", "100/100"]
    assert "\r" not in out.getvalue() and "[#" not in out.getvalue()
    assert lines[1].startswith("grid: 21/100 points (21%) 0:10, ~0:39 left")  # 10.5 s: 21%
    assert lines[-1].startswith("grid: 100/100 points (100%) 0:50")


def test_progress_on_a_terminal_is_one_redrawn_bar() -> None:
    out, clock = Tty(), Clock()
    bar = Progress("simulating", 4, "iterations", stream=out, clock=clock)
    for i in range(1, 5):
        clock.t = float(i)
        bar.update(i, f"simulated {i}.0 s")
    bar.close()
    text = out.getvalue()
    assert text.count("\r") == 4 and text.endswith("\n") and text.count("\n") == 1
    assert "[" + "#" * 12 + "." * 12 + "] 2/4 iterations (50%)" in text
    assert text.rstrip().endswith("4/4 iterations (100%) 0:04  simulated 4.0 s")


def test_quiet_prints_nothing() -> None:
    for stream in (io.StringIO(), Tty()):
        bar = Progress("x", 3, stream=stream, quiet=True)
        bar.update(1)
        bar.update(3)
        bar.close()
        assert stream.getvalue() == ""
    assert sweep_progress(5, quiet=True) is not print_progress


def test_sweep_progress_keeps_one_line_per_point_without_a_terminal() -> None:
    # pytest's stderr is not a terminal: the per-point lines (read by the Ray tests) stay
    assert sweep_progress(5) is print_progress


def test_simulator_progress_reaches_the_end_and_changes_nothing() -> None:
    net = make_network({"kind": "bigswitch", "hosts": 8, "gbit": 10})
    jobs = generate_mix("hybrid", hosts_of(net), 10e9 / 8, 3, None, 2, 1)
    calls: list[tuple[int, int, float]] = []
    plain = Simulator(net, [j.to_run() for j in jobs], SimConfig()).run()
    watched = Simulator(
        net, [j.to_run() for j in jobs], SimConfig(), progress=lambda *a: calls.append(a)
    ).run()
    assert calls[-1] == (6, 6, watched.end_time)
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)
    summary = {k: v for k, v in plain.summary().items() if k != "wall_s"}
    again = {k: v for k, v in watched.summary().items() if k != "wall_s"}
    assert json.dumps(summary) == json.dumps(again)


def test_run_prints_a_table_and_json_on_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.json"
    net_spec = {"kind": "bigswitch", "hosts": 8, "gbit": 1}
    net = make_network(net_spec)
    write_trace(trace, generate_mix("dp", hosts_of(net), 1e9 / 8, 2, None, 1, 0), net_spec)
    assert main(["run", "--trace", str(trace)]) == 0
    cap = capsys.readouterr()
    out = cap.out
    assert re.search(r"^simulated +bigswitch, 8 hosts, 1 Gbit/s host links$", out, re.M), out
    assert re.search(rf"^jobs +2 jobs from {re.escape(str(trace))}$", out, re.M)
    assert re.search(r"^iteration time mean / p99 +[\d.]+ s / [\d.]+ s$", out, re.M), out
    assert re.search(r"^slowdown mean / p99 +[\d.]+x / [\d.]+x$", out, re.M)
    assert "{" not in out  # not the dict
    assert "simulating: 2/2 iterations (100%)" in cap.err
    assert main(["run", "--trace", str(trace), "--json", "--quiet"]) == 0
    cap = capsys.readouterr()
    summary = json.loads(cap.out)
    assert summary["jobs_done"] == 2 and "iter_p99" in summary
    # every key of a run's summary has a label in the table (none shown by its raw name)
    assert set(summary) <= {k for _, keys, _ in ROWS for k in keys}
    assert len(summary_rows(summary)) < len(summary)  # related numbers share a row
    assert cap.err == ""
    # the table shows the same numbers, rounded
    table = summary_table(summary)
    assert f"{summary['iter_mean']:.4g} s" in table and f"{summary['events']:,}" in table


def test_sweep_csv_describes_the_trace_not_the_cli_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: a 1 Gbit/s big-switch trace of 2 jobs swept with the CLI's
    defaults (leafspine, 100 Gbit/s, 6 jobs, 3 iterations) was labelled with those."""
    trace = tmp_path / "t.json"
    net_spec = {"kind": "bigswitch", "hosts": 8, "gbit": 1}
    net = make_network(net_spec)
    write_trace(trace, generate_mix("dp", hosts_of(net), 1e9 / 8, 2, None, 1, 0), net_spec)
    out = tmp_path / "sweep.csv"
    args = ["sweep", "--trace", str(trace), "--policy", "fair", "--levels", "ideal"]
    assert main([*args, "--workers", "1", "--out", str(out), "-q"]) == 0
    assert capsys.readouterr().err == ""
    with out.open() as fh:
        (row,) = list(csv.DictReader(fh))
    assert json.loads(row["network"]) == net_spec
    assert (row["n_jobs"], row["iterations"], row["load"], row["mix"]) == (
        "2",
        "1",
        "trace",
        "trace",
    )
    assert describe_network(json.loads(row["network"])) == "bigswitch, 8 hosts, 1 Gbit/s host links"


def test_mix_rows_keep_their_point_fields() -> None:
    """A generated mix is what its point says: the row's fields are the point's (the
    evaluation's rows must not change)."""
    p = Point("dp", "fair", None, None, 0, 2, 1, json.dumps({"kind": "bigswitch", "hosts": 8}))
    row = run_point(p)
    assert (row["network"], row["n_jobs"], row["iterations"], row["load"]) == (
        p.network,
        2,
        1,
        "batch",
    )
    assert row["jobs_done"] == 2


def test_describe_network_uses_make_network_defaults() -> None:
    assert describe_network({"kind": "leafspine"}) == (
        "leafspine, 4 leaves x 4 hosts, 2 spines, 100 Gbit/s host links, 1:1 uplinks"
    )
    assert describe_network({"kind": "fattree", "k": 8, "gbit": 25, "oversubscription": 2}) == (
        "fattree, k=8, 25 Gbit/s host links, 2:1 uplinks"
    )


def test_coflow_trace_run_shows_progress_and_a_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sim.coflow.trace import flow_arrays, load_coflow_trace
    from sim.coflow.workload import simulate_coflows
    from tests.sim.test_coflow_trace import SMALL

    path = tmp_path / "t.txt"
    path.write_text(SMALL)
    assert main(["run", "--coflow-trace", str(path), "--policy", "varys"]) == 0
    cap = capsys.readouterr()
    assert "simulating: 3/3 coflows (100%)" in cap.err
    assert re.search(r"^coflow completion mean / p50 / p95 +[\d.]+ ms / ", cap.out, re.M)
    fa = flow_arrays(load_coflow_trace(path))
    calls: list[tuple[int, int, float]] = []
    watched = simulate_coflows(fa, "varys", 2**27, progress=lambda *a: calls.append(a))
    plain = simulate_coflows(fa, "varys", 2**27)
    assert calls[-1][:2] == (3, 3)
    assert calls[-1][2] == pytest.approx(float(watched.finish.max()))
    assert watched.finish.tolist() == plain.finish.tolist()

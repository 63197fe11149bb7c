"""The coflow-benchmark trace parser and the ``--coflow-trace`` command line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from echelon.errors import SpecError
from sim.cli import main
from sim.coflow.trace import MB, flow_arrays, parse_coflow_trace
from sim.eval.chakra import shared_trace

SMALL = """4 3
7 1500 2 0 1 2 2:3.0 3:1.5
1 0 1 3 1 0:2
9 1500 3 0 1 2 1 3:0.5
"""


def test_parses_ports_coflows_and_fields() -> None:
    tr = parse_coflow_trace(SMALL)
    assert tr.ports == 4
    assert [c.id for c in tr.coflows] == ["7", "1", "9"]
    c = tr.coflows[0]
    assert c.arrival_ms == 1500.0 and c.mappers == (0, 1) and c.reducers == ((2, 3.0), (3, 1.5))
    assert tr.n_flows == 2 * 2 + 1 + 3


def test_flows_split_each_reducer_evenly_in_arrival_order() -> None:
    fa = flow_arrays(parse_coflow_trace(SMALL))
    # arrival order, ties in file order: 1 (t=0), 7, 9 (both t=1.5 s)
    assert fa.names == ["1", "7", "9"]
    assert fa.arrival.tolist() == [0.0, 1.5, 1.5]
    assert fa.count.tolist() == [1, 4, 3] and fa.first.tolist() == [0, 1, 5]
    lo = 1  # coflow 7: reducer-major, mappers in trace order
    assert fa.src[lo : lo + 4].tolist() == [0, 1, 0, 1]
    assert fa.dst[lo : lo + 4].tolist() == [2, 2, 3, 3]
    assert fa.size[lo : lo + 4].tolist() == [1.5 * MB, 1.5 * MB, 0.75 * MB, 0.75 * MB]
    assert fa.reducer[lo : lo + 4].tolist() == [0, 0, 1, 1]
    assert fa.size.sum() == pytest.approx((4.5 + 2 + 0.5) * MB)


def test_coflowsim_sizes_round_up_to_mappers_mb_and_one_mb_per_flow() -> None:
    fa = flow_arrays(parse_coflow_trace(SMALL), coflowsim_sizes=True)
    # coflow 7: 3 MB -> 4 MB over 2 mappers; 1.5 MB -> 2 MB -> 2 MB: 1 MB per flow
    assert fa.size[1:5].tolist() == [2 * MB, 2 * MB, 1 * MB, 1 * MB]
    # coflow 9: 0.5 MB -> 1 MB -> 3 MB over 3 mappers
    assert fa.size[5:8].tolist() == [MB, MB, MB]


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("", "line 1", "<ports> <coflows>"),
        ("4\n", "line 1", "<ports> <coflows>"),
        ("x 1\n1 0 1 0 1 1:1\n", "line 1.ports", "integer"),
        ("4 2\n1 0 1 0 1 1:1\n", "line 1.coflows", "says 2 coflows but the file has 1"),
        ("4 1\n1 zero 1 0 1 1:1\n", "line 2.arrival", "milliseconds"),
        ("4 1\n1 -5 1 0 1 1:1\n", "line 2.arrival", ">= 0"),
        ("4 1\n1 0 2 0 x 1 1:1\n", "line 2.mappers[1]", "integer"),
        ("4 1\n1 0 1 4 1 1:1\n", "line 2.mappers[0]", "[0, 4)"),
        ("4 1\n1 0 3 0 1\n", "line 2.mappers", "says 3 mappers"),
        ("4 1\n1 0 1 0 2 1:1\n", "line 2.reducers", "says 2 reducers but 1 follow"),
        ("4 1\n1 0 1 0 1 1:1 2:1\n", "line 2.reducers", "says 1 reducers but 2 follow"),
        ("4 1\n1 0 1 0 1 1\n", "line 2.reducers[0]", "<port>:<MB>"),
        ("4 1\n1 0 1 0 1 9:1\n", "line 2.reducers[0].port", "[0, 4)"),
        ("4 1\n1 0 1 0 1 1:abc\n", "line 2.reducers[0].MB", "number"),
        ("4 1\n1 0 1 0 1 1:-2\n", "line 2.reducers[0].MB", "positive"),
        ("4 2\n1 0 1 0 1 1:1\n\n1 5 1 0 1 1:1\n", "line 4.id", "already on line 2"),
        ("4 1\n1 0\n", "line 2", "got 2 fields"),
    ],
)
def test_malformed_lines_name_line_and_field(text: str, field: str, words: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_coflow_trace(text)
    assert exc.value.field == field
    assert words in exc.value.message


def test_cli_runs_a_coflow_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.txt"
    path.write_text(SMALL)
    out = tmp_path / "res"
    args = ["run", "--coflow-trace", str(path), "--port-gbit", "1", "--policy", "varys"]
    rc = main([*args, "--out", str(out), "--json", str(tmp_path / "r.json")])
    assert rc == 0
    table = capsys.readouterr().out  # the human summary; the file has the dict
    assert re.search(r"^coflows +3$", table, re.M) and re.search(r"^flows +8$", table, re.M)
    summary = json.loads((tmp_path / "r.json").read_text())["summary"]
    assert summary["policy"] == "varys" and summary["coflows"] == 3 and summary["flows"] == 8
    rows = (out / "coflows.csv").read_text().splitlines()
    assert rows[0] == "coflow,arrival_s,finish_s,cct_ms" and len(rows) == 4
    # coflow 1 is alone on its ports: 2 MB through 2^27 B/s
    doc = json.loads((tmp_path / "r.json").read_text())
    first = next(r for r in doc["coflows"] if r["coflow"] == "1")
    assert first["cct_ms"] == pytest.approx(2 * MB / 2**27 * 1e3)


def test_cli_bad_trace_prints_error_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.txt"
    path.write_text("4 1\n1 0 1 0 1 1:lots\n")
    rc = main(["run", "--coflow-trace", str(path), "--policy", "fair"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("error: line 2.reducers[0].MB:") and "Traceback" not in err
    rc = main(["run", "--coflow-trace", str(tmp_path / "missing.txt")])
    assert rc == 2 and capsys.readouterr().err.startswith("error: coflow-trace:")
    path.write_text(SMALL)
    rc = main(["run", "--coflow-trace", str(path), "--arrangement", "zigzag"])
    assert rc == 2 and "arrangement" in capsys.readouterr().err


def test_reference_trace_parses_if_present() -> None:
    ref = shared_trace("FB2010-1Hr-150-0.txt")
    if not ref.exists():
        pytest.skip("the FB2010 trace is not beside this checkout ($ECHELON_TRACES)")
    fa = flow_arrays(parse_coflow_trace(ref.read_text()))
    assert (fa.ports, len(fa.names), fa.n_flows) == (150, 526, 706397)
    assert np.all(np.diff(fa.arrival) >= 0)


def test_sweep_runs_a_coflow_trace_as_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.txt"
    path.write_text(SMALL)
    single = {}
    for policy in ("varys", "fifo"):
        rc = main(["run", "--coflow-trace", str(path), "--policy", policy, "--json", "-", "-q"])
        assert rc == 0
        single[policy] = json.loads(capsys.readouterr().out)
    out = tmp_path / "sweep.json"
    args = ["sweep", "--coflow-trace", str(path), "--policy", "varys,fifo", "--levels", "ideal"]
    rc = main([*args, "--workers", "1", "-q", "--out", str(out)])
    assert rc == 0
    rows = json.loads(out.read_text())
    assert [r["policy"] for r in rows] == ["varys", "fifo"]
    for r in rows:
        assert r["coflow_trace"] == str(path) and r["mix"] == "coflow-trace"
        assert "network" not in r and "n_jobs" not in r  # a coflow trace has neither
        want = single[r["policy"]]
        for key in ("coflows", "flows", "avg_cct_ms", "p95_cct_ms", "makespan_s"):
            assert r[key] == want[key], key
    assert "avg_cct=" in capsys.readouterr().out
    # a bad file fails before any point runs, naming the field
    path.write_text("4 1\n1 0 1 0 1 1:lots\n")
    assert main([*args, "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith("error: line 2.reducers[0].MB:")

"""coflowsim-compatible semantics on cases small enough to step through by hand.

Port speed 2^27 B/s (coflowsim's 2^30 bit/s): in one 8-ms step of a 1,024-ms
second a port moves exactly 1 MB.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.coflow import spearman, tile
from echelon.errors import SpecError
from sim.cli import main
from sim.coflow.compat import CompatOptions, JavaRandom, simulate_compat
from sim.coflow.trace import MB, flow_arrays, parse_coflow_trace
from sim.coflow.workload import simulate_coflows

PORT = 2**27


def _ccts(lines: list[str], policy: str, **opt: object) -> dict[str, float]:
    tr = parse_coflow_trace(f"4 {len(lines)}\n" + "\n".join(lines) + "\n")
    res = simulate_compat(tr, policy, PORT, CompatOptions(**opt))  # type: ignore[arg-type]
    return {n: round(c * 1000, 6) for n, c in zip(res.names, res.cct.tolist(), strict=True)}


def test_one_mb_takes_one_step() -> None:
    assert _ccts(["a 0 1 0 1 1:1"], "fair") == {"a": 8.0}
    assert _ccts(["a 0 1 0 1 1:0.3"], "fair") == {"a": 8.0}  # rounded up to 1 MB


def test_fair_splits_a_port_evenly() -> None:
    # 2 MB into port 2 from two mappers: 1 MB each at 1/2 MB per step
    assert _ccts(["a 0 2 0 1 1 2:2"], "fair") == {"a": 16.0}


def test_fair_share_is_min_of_equal_splits_not_max_min() -> None:
    # x: 0->2, 1->2, 3->2 (1 MB each, 1/3 MB a step at port 2); z: 1->3 (1 MB). Port 1
    # carries x's second flow and z: coflowsim gives z min(1, 1/2) = 1/2 a step although
    # x's flow there only uses 1/3; max-min would give z 2/3.
    lines = ["x 0 3 0 1 3 1 2:3", "z 0 1 1 1 3:1"]
    assert _ccts(lines, "fair") == {"x": 24.0, "z": 16.0}
    tr = parse_coflow_trace("4 2\n" + "\n".join(lines) + "\n")
    ours = simulate_coflows(flow_arrays(tr), "fair", PORT)
    assert ours.cct.tolist() == pytest.approx([3 * MB / PORT, MB / (PORT * 2 / 3)])


def test_concurrent_flows_per_reducer_limit() -> None:
    # x: 0->2 and 1->2 (1 MB each); y: 1->3 (1 MB). Without a limit y shares port 1
    # with x's second flow; with one flow per reducer at a time, y first runs alone.
    lines = ["x 0 2 0 1 1 2:2", "y 0 1 1 1 3:1"]
    assert _ccts(lines, "fair") == {"x": 16.0, "y": 16.0}
    assert _ccts(lines, "fair", max_flows_per_reducer=1) == {"x": 16.0, "y": 8.0}


def test_admission_at_epochs_counts_from_admission() -> None:
    # arrives at 5 s: admitted at t=0 (the epoch it falls before); 12 s: at 10.24 s
    tr = parse_coflow_trace("4 2\na 5000 1 0 1 1:1\nb 12000 1 0 1 1:1\n")
    res = simulate_compat(tr, "fair", PORT)
    assert res.arrival.tolist() == [0.0, 10.24]
    assert (res.cct * 1000).round(6).tolist() == [8.0, 8.0]
    exact = simulate_compat(tr, "fair", PORT, CompatOptions(epoch_ms=8))
    assert exact.arrival.tolist() == [4.992, 11.992]


@pytest.mark.slow
def test_sebf_smallest_bottleneck_first_and_fifo_by_admission() -> None:
    lines = ["b 0 1 0 1 2:3", "a 0 1 1 1 2:1"]  # both into port 2
    # SEBF: a (1 MB) first, b waits for a's departure, then 3 steps
    assert _ccts(lines, "varys") == {"b": 32.0, "a": 8.0}
    # FIFO: b is first in the file (same arrival): b 3 steps, then a
    assert _ccts(lines, "fifo") == {"b": 24.0, "a": 32.0}


def test_java_random_matches_the_jdk() -> None:
    r = JavaRandom(42)
    v = r._next(32)
    assert (v - (1 << 32) if v >= 1 << 31 else v) == -1170105035
    assert JavaRandom(0).next_double() == pytest.approx(0.730967787376657, abs=1e-15)


def test_unsupported_policy_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tr = parse_coflow_trace("4 1\na 0 1 0 1 1:1\n")
    with pytest.raises(SpecError) as exc:
        simulate_compat(tr, "sincronia", PORT)
    assert exc.value.field == "policy"
    path = tmp_path / "t.txt"
    path.write_text("4 1\na 0 1 0 1 1:1\n")
    assert main(["run", "--coflow-trace", str(path), "--coflowsim", "--policy", "edf"]) == 2
    assert capsys.readouterr().err.startswith("error: policy:")
    args = ["run", "--coflow-trace", str(path), "--coflowsim", "--policy", "fair", "--json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["avg_cct_ms"] == 8.0


def test_spearman_and_tile() -> None:
    a = np.array([1.0, 2.0, 3.0, 4.0])
    assert spearman(a, a * 10) == pytest.approx(1.0)
    assert spearman(a, -a) == pytest.approx(-1.0)
    assert spearman(a, np.array([1.0, 1.0, 2.0, 2.0])) == pytest.approx(0.894427191)
    tr = tile(parse_coflow_trace("4 1\na 5 1 0 1 1:1\n"), 3, shift_ms=100.0)
    assert [(c.id, c.arrival_ms) for c in tr.coflows] == [
        ("a.0", 5.0),
        ("a.1", 105.0),
        ("a.2", 205.0),
    ]


@pytest.mark.slow
def test_skipped_coflow_gets_a_fair_share_not_its_old_rate() -> None:
    # b (2,000 MB, port 0 -> 1) runs alone at 1 MB/step; at the 10,240-ms epoch a
    # (1 MB, port 0 -> 2, smaller bottleneck) is admitted ahead of it and fills port
    # 0: b finds the port full. coflowsim's source gives b what is left (nothing) for
    # that step: 720 MB left -> 10,248 + 720 x 8 ms (keeping its rate, port 0
    # oversubscribed, it would end at 10,240 + 720 x 8 ms).
    lines = ["b 0 1 0 1 1:2000", "a 10241 1 0 1 2:1"]
    assert _ccts(lines, "varys") == {"b": 16008.0, "a": 8.0}

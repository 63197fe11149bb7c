"""The benchmarks' shared harness (:mod:`bench.harness`): exit statuses, the percentile,
and what ``timed`` measures."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench import harness
from echelon.errors import EchelonError


def test_run_cli_exit_status_and_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert harness.run_cli(lambda: None) == 0
    assert harness.run_cli(lambda: 1) == 1

    def bad() -> None:
        raise EchelonError("--levels: not a list")

    assert harness.run_cli(bad) == 2
    assert capsys.readouterr().err == "error: --levels: not a list\n"


def test_run_cli_bmv2_needs_the_compiled_program(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = []
    monkeypatch.setattr(harness, "DEFAULT_JSON", tmp_path / "missing.json")
    assert harness.run_cli(lambda: ran.append(1), "bmv2") == 2
    assert ran == [] and "bmv2 needs p4src/build/echelon.json" in capsys.readouterr().err
    assert harness.run_cli(lambda: ran.append(1), "soft") == 0 and ran == [1]


def test_pct_is_a_nearest_rank_sample() -> None:
    xs = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert [harness.pct(xs, q) for q in (0.0, 0.5, 0.99, 1.0)] == [1.0, 3.0, 5.0, 5.0]
    assert harness.pct([float(i) for i in range(101)], 0.9) == 90.0


def test_timed_returns_the_result_wall_and_cpu_time() -> None:
    def spin() -> str:
        end = time.process_time() + 0.05
        while time.process_time() < end:
            pass
        return "done"

    out, wall, cpu = harness.timed(spin)
    assert out == "done"
    assert cpu >= 0.05 and wall >= 0.05 * 0.5  # CPU time is the process's own
    out, wall, cpu = harness.timed(lambda: time.sleep(0.1))  # idle: wall, not CPU
    assert wall >= 0.1 and cpu < 0.05

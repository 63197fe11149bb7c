"""The ``echelon`` command line, including its error path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from echelon.cli import main
from echelon.jobs import load_job
from tests.core.helpers import EXAMPLES


def test_show_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(EXAMPLES / "gpipe.yaml")]) == 0
    out = capsys.readouterr().out
    assert "gpipe-demo/0/fwd/s0-s1" in out and "level" in out
    assert main(["show", str(EXAMPLES / "dp_ps.yaml"), "--json", "--policy", "varys"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["policy"] == "varys"
    assert {e["group"] for e in report["echelons"]} == {"pull", "push"}
    levels = [f["level"] for e in report["echelons"] for f in e["flows"]]
    assert levels and all(1 <= lv <= 7 for lv in levels)


def test_timeline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeline", str(EXAMPLES / "gpipe.yaml"), "--scale", "0.01"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert [r.split()[0] for r in rows[1:5]] == ["h1", "h2", "h3", "h4"]
    assert any(r.startswith("fwd/s0-s1") for r in rows)
    assert main(["timeline", str(EXAMPLES / "gpipe.yaml"), "--scale", "-1"]) == 2
    assert capsys.readouterr().err.startswith("error: --scale:")


def test_example_prints_loadable_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["example", "fsdp"]) == 0
    assert load_job(yaml.safe_load(capsys.readouterr().out)).paradigm == "fsdp"


def test_bad_input_exits_2_with_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    data = yaml.safe_load((EXAMPLES / "gpipe.yaml").read_text())
    data["stages"][1]["fwd_s"] = -3
    bad.write_text(yaml.safe_dump(data))
    assert main(["show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: stages[1].fwd_s:")
    assert main(["example", "nope"]) == 2
    assert capsys.readouterr().err.startswith("error: paradigm:")
    assert main(["show", str(EXAMPLES / "gpipe.yaml"), "--gbps", "0"]) == 2


def test_module_entry_point_no_traceback(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    proc = subprocess.run(
        [sys.executable, "-m", "echelon", "show", str(missing)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr

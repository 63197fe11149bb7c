"""``echelon list`` and ``echelon show`` say what a user needs next."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from echelon.cli import list_text, main

ROOT = Path(__file__).resolve().parents[2]


def test_list_names_the_job_paradigm_alias_and_where_each_policy_runs() -> None:
    lines = list_text().splitlines()
    pd = next(ln for ln in lines if "pipedream_1f1b" in ln)
    assert "echelon job --paradigm 1f1b" in pd
    pol = {ln.split()[1]: ln for ln in lines if ln.startswith("policy")}
    assert "simulator and switch" in pol["srpt"] and "simulator and switch" in pol["coflow"]
    assert "simulator only: per-flow max-min" in pol["fair"]
    assert "NAME-online" in pol and "module:Class" in pol


def test_show_without_topology_warns_that_hosts_are_unchecked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    desc = yaml.safe_load((ROOT / "topo/jobs/pipe.yaml").read_text())
    desc["hosts"] = ["h1", "h9"]
    f = tmp_path / "bad-host.yaml"
    f.write_text(yaml.safe_dump(desc))
    assert main(["show", str(f)]) == 0
    captured = capsys.readouterr()
    assert "warning: hosts: h1, h9 not checked against a topology" in captured.err
    assert "levels: this job alone" in captured.out
    # where to see the levels beside the jobs registered (not a second planner here)
    assert f"echelonctl register --dry-run {f}" in captured.out
    assert main(["show", str(f), "--topo", str(ROOT / "topo/star.yaml")]) == 2
    assert "h9" in capsys.readouterr().err

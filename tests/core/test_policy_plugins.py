"""A policy from outside the project is found by every tool that takes a policy name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from echelon.errors import SpecError
from echelon.network import BigSwitch
from echelon.policies import POLICIES, get_policy, known_policies, not_installable
from echelon.schedule import Policy
from tests.policy_plugin import REFERENCE, ROOT, install_entry_point, install_outside

PY = sys.executable


def _run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_unknown_policy_says_how_to_give_your_own() -> None:
    with pytest.raises(SpecError) as exc:
        get_policy("lifo")
    assert "package.module:Class" in exc.value.message
    assert "echelon" in exc.value.message


def test_bad_references_name_what_is_wrong(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SpecError, match="cannot import 'no_such_module'"):
        get_policy("no_such_module:X")
    install_outside(tmp_path / "plug")
    monkeypatch.syspath_prepend(str(tmp_path / "plug"))
    with pytest.raises(SpecError, match="has no 'Nope'"):
        get_policy("smallest_first:Nope")
    with pytest.raises(SpecError, match="no schedule"):
        get_policy("smallest_first:annotations")  # an attribute that is not a policy


def test_module_reference_schedules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_outside(tmp_path / "plug")
    monkeypatch.syspath_prepend(str(tmp_path / "plug"))
    policy = get_policy(REFERENCE)
    assert isinstance(policy, Policy) and policy.name == REFERENCE
    assert not_installable(policy) is None
    from echelon.model import EchelonFlow, Flow

    big = EchelonFlow("big", "j", "g0", (Flow(0, "h1", "h4", 9000, 0.0),))
    small = EchelonFlow("small", "j", "g1", (Flow(0, "h2", "h4", 100, 0.0),))
    sched = policy.schedule([big, small], BigSwitch({"h1": 1e6, "h2": 1e6, "h4": 1e6}))
    assert sched.echelon_order == ("small", "big")


def test_fair_is_refused_with_a_reason_and_the_rest_are_not() -> None:
    refused = {p: not_installable(get_policy(p)) for p in POLICIES}
    assert [p for p, why in refused.items() if why] == ["fair"]
    assert "strict-priority" in str(refused["fair"])


@pytest.mark.slow
def test_sim_run_takes_a_policy_from_outside(tmp_path: Path) -> None:
    env = install_outside(tmp_path / "plug")
    out = tmp_path / "r.json"
    args = ["run", "--mix", "pipeline", "--jobs", "2", "--iterations", "1", "--quiet"]
    r = _run(env, "-m", "sim", *args, "--policy", REFERENCE, "--json", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["summary"]["policy"] == REFERENCE and data["summary"]["jobs_done"] == 2
    r = _run(env, "-m", "sim", "sweep", "--mix", "pipeline", "--jobs", "2", "--iterations",
             "1", "--policy", f"{REFERENCE},fifo", "--out", str(tmp_path / "s.csv"),
             "--workers", "1")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert REFERENCE in (tmp_path / "s.csv").read_text()


def test_entry_point_name_is_found(tmp_path: Path) -> None:
    env = install_entry_point(tmp_path / "plug", "smallest")
    code = (
        "from echelon.policies import get_policy, known_policies;"
        "p = get_policy('smallest'); print(p.name, 'smallest' in known_policies())"
    )
    r = _run(env, "-c", code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["smallest", "True"]
    assert "smallest" not in known_policies()  # not installed in this process


@pytest.mark.slow
def test_sim_eval_compares_it_with_every_policy_in_its_own_report(tmp_path: Path) -> None:
    env = install_outside(tmp_path / "plug")
    doc, rows = tmp_path / "eval.md", tmp_path / "rows.json"
    r = _run(env, "-m", "sim.eval", "--tiny", "--policy", REFERENCE, "--mix", "hybrid",
             "--doc", str(doc), "--rows", str(rows), "--workers", "1", "-q")  # fmt: skip
    assert r.returncode == 0, r.stderr
    text = doc.read_text()
    table = [ln for ln in text.splitlines() if ln.startswith("| ") and "(s)" not in ln][1:]
    assert [ln.split(" | ")[0][2:] for ln in table] == [REFERENCE, *POLICIES]
    assert f"{REFERENCE} vs echelon: mean" in text
    assert {x["policy"] for x in json.loads(rows.read_text())} == {REFERENCE, *POLICIES}
    from sim.eval.candidate import default_doc

    assert default_doc(REFERENCE) == "run/eval-smallest_first_SmallestFirst.md"

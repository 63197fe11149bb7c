"""``POST /plan`` / ``echelonctl register --dry-run``: the levels a registration will
install beside the jobs already registered, from the controller's own planner, and
nothing changed by asking."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane import cli
from controlplane.api import make_app
from controlplane.controller import Controller
from controlplane.registry import DuplicateJobError
from tests.controlplane.helpers import ROOT
from tests.controlplane.inproc import running_controller, serving


def _job(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "topo" / "jobs" / f"{name}.yaml").read_text())
    return data


def _levels(view: dict[str, Any]) -> dict[str, tuple[int, int, int, list[Any]]]:
    """Per group: echelon ID, class slot, priority and deadline ranges."""
    return {
        g["group"]: (g["echelon_id"], g["class_id"], g["priority"], g["ranges"])
        for g in view["groups"]
    }


def _state(c: Controller) -> tuple[Any, ...]:
    return (
        [r.job_id for r in c.registry.jobs(specs=False)],
        c.planner.plans(),
        {n: sorted(map(repr, c.desired(n))) for n in c.agents},
    )


def test_dry_run_levels_are_what_registration_installs(tmp_path: Path) -> None:
    with running_controller(tmp_path) as c:
        alone = c.plan_registration(_job("pipe"))
        assert alone["moves"] == []
        dp = c.register(_job("dp"))
        before = _state(c)
        dry = c.plan_registration(_job("pipe"))
        assert _state(c) == before  # asking registered, planned and wrote nothing
        assert not any(dry["installed"].values())
        # the case a single-job preview got wrong: with dp registered, pipe's groups
        # get other levels than pipe alone would
        assert _levels(dry) != _levels(alone)
        reg = c.register(_job("pipe"))
        assert _levels(reg) == _levels(dry)
        assert dry["moves"]  # pipe beside dp changes some of dp's ranges
        moved = {
            (m["job"], m["group"]): (m["priority_after"], m["ranges_after"]) for m in dry["moves"]
        }
        after = c.show("dp")
        for old, new in zip(dp["groups"], after["groups"], strict=True):
            changed = (old["priority"], old["ranges"]) != (new["priority"], new["ranges"])
            assert changed == (("dp", new["group"]) in moved)
            if changed:
                assert moved[("dp", new["group"])] == (new["priority"], len(new["ranges"]))


def test_dry_run_of_a_registered_job_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    with running_controller(tmp_path) as c:
        c.register(_job("dp"))
        before = _state(c)
        with pytest.raises(DuplicateJobError):
            c.plan_registration(_job("dp"))
        assert _state(c) == before


def test_echelonctl_register_dry_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pipe = tmp_path / "pipe.yaml"
    pipe.write_text(yaml.safe_dump(_job("pipe")))
    with running_controller(tmp_path) as c, serving(make_app(c)) as url:
        c.register(_job("dp"))
        base = ["--api", url, "--timeout", "10"]
        assert cli.main([*base, "--json", "register", "--dry-run", str(pipe)]) == 0
        dry = json.loads(capsys.readouterr().out)
        assert cli.main([*base, "register", "--dry-run", str(pipe)]) == 0
        text = capsys.readouterr().out
        assert "dry run" in text and "nothing was registered" in text
        assert [j["job"] for j in c.jobs()] == ["dp"]
        for g in dry["groups"]:
            row = rf"^{re.escape(g['group'])} +{g['echelon_id']} +{g['class_id']} +{g['priority']} "
            assert re.search(row, text, re.M), row
        assert "registered groups it would change" in text
        reg = c.register(_job("pipe"))
        assert _levels(reg) == _levels(dry)

"""What the README and Makefile tell a new user matches what the code does."""

from __future__ import annotations

import re

import yaml

from topo.run import parse_args

from .helpers import ROOT


def test_p4runtime_shell_address_is_the_switch_the_readme_starts() -> None:
    grpc = yaml.safe_load((ROOT / "topo/star.yaml").read_text())["switches"]["s1"]["grpc"]
    makefile = (ROOT / "Makefile").read_text()
    (default,) = re.findall(r"^GRPC\s*\?=\s*(\S+)", makefile, re.M)
    assert default == grpc == "127.0.0.1:50001"
    readme = (ROOT / "README.md").read_text()
    assert f"GRPC={grpc}" in readme and "9559" not in readme and "9559" not in makefile


def test_readme_keeps_two_set_up_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    assert [ln.split()[:2] for ln in block.strip().splitlines()] == [
        ["make", "run"],
        ["make", "test"],
    ]


def test_links_to_the_policy_guide_resolve() -> None:
    guide = ROOT / "docs/policies.md"
    assert "docs/policies.md" in (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)", guide.read_text()):
        assert (guide.parent / target).exists(), target


def test_run_help_describes_what_it_runs() -> None:
    desc = (ROOT / "topo/run.py").read_text().split("\n")[0]
    assert "three contending jobs" not in desc and "every policy" in desc
    assert parse_args(["--policies", "smallest_first:SmallestFirst"]).policies

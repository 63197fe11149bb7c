"""The HTTP API and the CLI, in process, over a controller driving the in-process switch service."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from controlplane import cli, daemon
from controlplane.api import make_app
from controlplane.client import ApiClient
from controlplane.controller import Controller
from controlplane.openapi import DEFAULT as OPENAPI_FILE
from controlplane.openapi import render
from tests.controlplane.helpers import ROOT, spec
from tests.controlplane.inproc import running_controller

EXAMPLES = sorted((ROOT / "echelon" / "examples").glob("*.yaml"))


@pytest.fixture
def ctl(tmp_path: Path) -> Iterator[Controller]:
    with running_controller(tmp_path) as c:
        yield c


def test_openapi_file_is_current() -> None:
    assert OPENAPI_FILE.read_text() == render(), "run: python -m controlplane.openapi"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_core_example_registers(ctl: Controller, example: Path) -> None:
    client = TestClient(make_app(ctl))
    desc = yaml.safe_load(example.read_text())
    r = client.post("/jobs", json=desc)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["job"] == desc["job"] and body["echelonflows"]
    groups = {ef["group"] for ef in body["echelonflows"]}
    assert {g["group"] for g in body["groups"]} == groups
    assert all(1 <= g["priority"] <= 7 for g in body["groups"])
    for g in body["groups"]:  # ranges of a group never overlap and earlier is never lower
        rs = sorted((x["lo_us"], x["hi_us"], x["priority"]) for x in g["ranges"])
        assert all(a[1] < b[0] and a[2] >= b[2] for a, b in itertools.pairwise(rs))
    assert client.get(f"/jobs/{desc['job']}").json()["groups"] == body["groups"]


def test_status_stats_policy_and_errors(ctl: Controller) -> None:
    client = TestClient(make_app(ctl))
    assert client.post("/jobs", json=spec("a", groups=2)).status_code == 201
    st = client.get("/status").json()
    assert st["jobs"] == 1
    s1 = st["switches"]["s1"]
    assert s1["connected"] and s1["primary"] and s1["in_sync"]
    assert s1["entries"]["EchelonIngress.echelon_ids"] == 2
    stats = client.get("/stats").json()
    assert [(g["job"], g["packets"]) for g in stats["groups"]] == [("a", 0), ("a", 0)]
    assert set(stats["unprioritized"]) >= {
        "plain",
        "unknown_id",
        "spoofed_source",
        "malformed_echelon",
    }
    assert client.get("/policy").json()["policy"] == "echelon"
    assert client.put("/policy", json={"name": "fifo"}).json()["policy"] == "fifo"
    r = client.put("/policy", json={"name": "bogus"})
    assert r.status_code == 400 and r.json()["field"] == "policy"
    r = client.get("/jobs/nope")
    assert r.status_code == 404 and r.json()["field"] == "job"


def test_bearer_token(ctl: Controller) -> None:
    client = TestClient(make_app(ctl, token="s3cret"))
    assert client.get("/jobs").status_code == 401
    assert client.get("/jobs", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/jobs", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_daemon_refuses_public_bind_without_token(capsys: pytest.CaptureFixture[str]) -> None:
    rc = daemon.main(["--topo", str(ROOT / "topo" / "star.yaml"), "--host", "0.0.0.0"])
    assert rc == 2
    assert capsys.readouterr().err.startswith("error: --token")


def test_daemon_bad_topology_is_error_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("switches: {}\n")
    assert daemon.main(["--topo", str(bad), "--db", str(tmp_path / "r.db")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


@pytest.fixture
def cli_env(ctl: Controller, monkeypatch: pytest.MonkeyPatch) -> TestClient:
    """Route the CLI's API client into the in-process app (TestClient is an httpx.Client)."""
    client = TestClient(make_app(ctl))
    monkeypatch.setattr(  # a fresh TestClient per command: the CLI closes its client
        cli, "make_client", lambda args: ApiClient(args.api, http=TestClient(make_app(ctl)))
    )
    return client


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = cli.main(["--api", "http://ctl", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_round_trip(
    cli_env: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump(spec("cli1")))
    rc, out, _ = run_cli(capsys, "register", str(f))
    assert rc == 0 and "job cli1" in out and "GROUP" in out
    rc, out, _ = run_cli(
        capsys,
        "register",
        "--paradigm",
        "gpipe",
        "--job",
        "gp",
        "--hosts",
        "h1,h2",
        "--param",
        "micro_batches=2",
        "--param",
        "stages=[{fwd_s: 0.01, bwd_s: 0.02, activation_bytes: 1000},"
        " {fwd_s: 0.01, bwd_s: 0.02, activation_bytes: 1000}]",
    )
    assert rc == 0, out
    rc, out, _ = run_cli(capsys, "--json", "list")
    assert [j["job"] for j in json.loads(out)] == ["cli1", "gp"]
    rc, out, _ = run_cli(capsys, "show", "gp")
    assert rc == 0 and "gp/0/" in out
    for cmd in ("status", "stats", "policy"):
        rc, out, _ = run_cli(capsys, cmd)
        assert rc == 0 and out.strip(), cmd
    rc, out, _ = run_cli(capsys, "policy", "coflow")
    assert rc == 0 and out.startswith("coflow")
    rc, out, _ = run_cli(capsys, "remove", "cli1")
    assert rc == 0 and "removed cli1" in out


def test_cli_errors_exit_2(
    cli_env: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = run_cli(capsys, "register", str(tmp_path / "missing.yaml"))
    assert rc == 2 and err.startswith("error: ") and "missing.yaml" in err
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(spec("x", sources=("h1", "zz"))))
    rc, _, err = run_cli(capsys, "register", str(f))
    assert rc == 2 and "g0.flows[1].src" in err and "422" in err
    rc, _, err = run_cli(capsys, "show", "nope")
    assert rc == 2 and "404" in err
    rc, _, err = run_cli(capsys, "register", "--paradigm", "gpipe", "--param", "novalue")
    assert rc == 2 and "--param" in err


def test_cli_unreachable(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["--api", "http://127.0.0.1:1", "--timeout", "2", "list"])
    assert rc == 2
    assert "cannot reach the controller" in capsys.readouterr().err

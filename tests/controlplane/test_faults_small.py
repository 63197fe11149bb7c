"""Fault injection: the smaller findings (token, self-flows)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from controlplane import daemon
from controlplane.api import make_app
from controlplane.controller import Controller
from tests.controlplane.helpers import spec, write_topo
from tests.controlplane.inproc import running_controller


@pytest.fixture
def ctl(tmp_path: Path) -> Iterator[Controller]:
    with running_controller(tmp_path) as c:
        yield c


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_bearer_scheme_is_case_insensitive(ctl: Controller, scheme: str) -> None:
    client = TestClient(make_app(ctl, token="s3cret"))
    assert client.get("/status", headers={"Authorization": f"{scheme} s3cret"}).status_code == 200
    assert client.get("/status", headers={"Authorization": f"{scheme} wrong"}).status_code == 401
    assert client.get("/status", headers={"Authorization": "Basic s3cret"}).status_code == 401


def test_self_flow_refused(ctl: Controller) -> None:
    client = TestClient(make_app(ctl))
    r = client.post("/jobs", json=spec("selfie", sources=("h1", "h4")))  # h4 -> h4
    assert r.status_code == 400
    assert r.json()["field"] == "g0.flows[1].dst" and "self-flow" in r.json()["message"]
    assert ctl.jobs() == []


def test_token_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topo = write_topo(tmp_path / "t.yaml", ["127.0.0.1:1"])
    empty = tmp_path / "empty"
    empty.write_text("")
    rc = daemon.main(["--topo", str(topo), "--token-file", str(empty), "--host", "0.0.0.0"])
    assert rc == 2 and capsys.readouterr().err.startswith("error: --token-file")
    good = tmp_path / "tok"
    good.write_text("s3cret\n")
    # a token from the file satisfies the non-loopback rule; the bad port stops it there
    rc = daemon.main(
        ["--topo", str(topo), "--token-file", str(good), "--host", "0.0.0.0", "--port", "0"]
    )
    assert rc == 2 and capsys.readouterr().err.startswith("error: --port")

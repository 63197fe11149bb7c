"""Fault injection: the smaller findings (token, docs, self-flows, start-up options)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from controlplane import cli, daemon
from controlplane.api import make_app
from controlplane.controller import Controller
from controlplane.report_socket import ProgressSocket
from echelon.errors import EchelonError
from tests.controlplane.helpers import spec, write_topo
from tests.controlplane.inproc import running_controller

# Fault injection against in-process switches and a whole controller: not a unit test
# (make test-fast leaves it out; make test runs it).
pytestmark = pytest.mark.slow


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


@pytest.mark.parametrize("content", ["\nTOKEN\n", "a\nb\n", "   \n", "two words\n"])
def test_token_file_needs_exactly_one_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    """Before: a blank first line started the daemon with no authentication at all."""
    topo = write_topo(tmp_path / "t.yaml", ["127.0.0.1:1"])
    tok = tmp_path / "tok"
    tok.write_text(content)
    rc = daemon.main(["--topo", str(topo), "--token-file", str(tok), "--port", "0"])
    err = capsys.readouterr().err
    if content == "\nTOKEN\n":  # one token, blank lines around it: read, then the port
        assert rc == 2 and err.startswith("error: --port"), err
    else:
        assert rc == 2 and err.startswith("error: --token-file"), err


def test_empty_token_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ``--token ''`` accepted a bare ``Authorization: Bearer``."""
    topo = write_topo(tmp_path / "t.yaml", ["127.0.0.1:1"])
    assert daemon.main(["--topo", str(topo), "--token", ""]) == 2
    assert capsys.readouterr().err.startswith("error: --token: empty")
    with pytest.raises(EchelonError, match="token"):
        make_app(None, token="")


def test_docs_need_the_token(ctl: Controller) -> None:
    """Before: /docs, /redoc and /openapi.json answered without the token."""
    client = TestClient(make_app(ctl, token="s3cret"))
    ok = {"Authorization": "Bearer s3cret"}
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert client.get(path).status_code == 401, path
        assert client.get(path, headers={"Authorization": "Bearer"}).status_code == 401, path
        assert client.get(path, headers=ok).status_code == 200, path
    assert "/jobs" in client.get("/openapi.json", headers=ok).json()["paths"]
    assert TestClient(make_app(ctl)).get("/openapi.json").status_code == 200  # no token: open


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--log-level", "bogus"], "--log-level"),
        (["--election-id", "-5"], "--election-id"),
        (["--election-id", str(2**70)], "--election-id"),
        (["--device-config", "."], "--device-config"),
        (["--progress-socket", "/nonexistent/x"], "--progress-socket"),
        (["--topo", "BINARY"], "--topo"),
    ],
)
def test_bad_options_exit_2_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], option: str
) -> None:
    """Before: a traceback (or, for the election ID, an agent that died silently)."""
    topo = write_topo(tmp_path / "t.yaml", ["127.0.0.1:1"])
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\x00\xff\xfe\x01")
    args = [str(binary) if a == "BINARY" else a for a in args]
    argv = ["--db", str(tmp_path / "r.db"), "--port", "1"]
    rc = daemon.main(["--topo", str(topo), *argv, *args])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(f"error: {option}"), err
    assert "Traceback" not in err


def test_progress_socket_never_replaces_a_regular_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topo = write_topo(tmp_path / "t.yaml", ["127.0.0.1:1"])
    victim = tmp_path / "notes.txt"
    victim.write_text("keep me")
    rc = daemon.main(["--topo", str(topo), "--progress-socket", str(victim), "--port", "1"])
    assert rc == 2 and "not a socket" in capsys.readouterr().err
    assert victim.read_text() == "keep me"
    with pytest.raises(EchelonError, match="not a socket"):
        ProgressSocket(victim, lambda _: None)
    assert victim.read_text() == "keep me"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--api", "::::", "list"], "error: --api"),
        (["--timeout", "-1", "list"], "error: --timeout"),
        (["--timeout", "nan", "list"], "error: --timeout"),
        (["register", "BINARY"], "not a UTF-8 text file"),
    ],
)
def test_echelonctl_bad_input_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    binary = tmp_path / "job.json"
    binary.write_bytes(b"\x00\xff\xfe\x01")
    argv = [str(binary) if a == "BINARY" else a for a in argv]
    assert cli.main(["--api", "http://127.0.0.1:1", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err, err

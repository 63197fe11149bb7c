"""TLS (:mod:`p4client.tls`), with certificates made here by ``openssl``: P4Runtime (the
controller's switch connections, the soft switch's server and BMv2's) and the HTTP API.

A client that does not trust the switch's CA, or speaks plaintext, never arbitrates;
with client authentication a controller without a certificate is refused; the daemon
with ``--p4rt-ca/--p4rt-cert/--p4rt-key`` brings a TLS switch (soft, and BMv2 where it is
installed) in sync; with ``--tls-cert/--tls-key`` it serves https to ``echelonctl --ca``
and the progress library; a bad file is named by its option before anything starts.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from controlplane.cli import main as echelonctl
from controlplane.client import ApiClient, ControllerUnreachable
from controlplane.daemon import main as daemon_main
from echelon.waiting import wait_until
from hostagent.progress import ProgressReporter
from p4client.p4rt import P4RuntimeConnectionError, SwitchConnection
from p4client.tls import TlsError, TlsFiles, server_flags
from softswitch.main import parse_args as softswitch_args
from softswitch.p4rt_server import P4RuntimeService, make_server
from targets.process import free_port
from targets.switch import command_line, start_target
from tests.controlplane.helpers import spec, write_topo
from tests.controlplane.procs import Daemon, start_softswitch

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl")


@dataclass(frozen=True)
class Pki:
    ca: Path
    server: TlsFiles  # the switch's own files, and the CA that checks clients
    client: TlsFiles  # the controller's: the CA that checks the switch, its own cert
    stranger: Path  # a CA that signed nothing here


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


#: a P-256 key, no passphrase
KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")


def _issue(d: Path, name: str, ca: str, ext: str) -> None:
    _openssl("req", *KEY, "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", f"/CN={name}", cwd=d)  # fmt: skip
    (d / f"{name}.ext").write_text(ext)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-days", "1", "-out", f"{name}.pem",
             "-extfile", f"{name}.ext", cwd=d)  # fmt: skip


def _ca(d: Path, name: str) -> Path:
    _openssl("req", "-x509", *KEY, "-keyout", f"{name}.key", "-out", f"{name}.pem",
             "-days", "1", "-subj", f"/CN={name}", cwd=d)  # fmt: skip
    return d / f"{name}.pem"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca = _ca(d, "ca")
    _issue(d, "switch", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _issue(d, "controller", "ca", "extendedKeyUsage=clientAuth\n")
    return Pki(
        ca,
        TlsFiles(ca, d / "switch.pem", d / "switch.key"),
        TlsFiles(ca, d / "controller.pem", d / "controller.key"),
        _ca(d, "stranger"),
    )


def serve(pki: Pki, client_auth: bool = False) -> tuple[grpc.Server, str]:
    service = P4RuntimeService(0, lambda pl: None)
    server, port = make_server(service, "127.0.0.1:0", pki.server.server_credentials(client_auth))
    server.start()
    return server, f"127.0.0.1:{port}"


def arbitrates(addr: str, tls: TlsFiles | None) -> bool:
    conn = SwitchConnection(addr, election_id=(0, 1), tls=tls)
    try:
        return conn.connect(timeout=3.0)
    except P4RuntimeConnectionError:
        return False
    finally:
        conn.close()


def test_only_a_client_that_trusts_the_switchs_ca_arbitrates(pki: Pki) -> None:
    server, addr = serve(pki)
    try:
        assert arbitrates(addr, TlsFiles(pki.ca))
        assert not arbitrates(addr, None), "plaintext to a TLS server"
        assert not arbitrates(addr, TlsFiles(pki.stranger)), "a CA that did not sign it"
    finally:
        server.stop(grace=0).wait(5)


def test_with_client_auth_the_controller_needs_its_certificate(pki: Pki) -> None:
    server, addr = serve(pki, client_auth=True)
    try:
        assert not arbitrates(addr, TlsFiles(pki.ca)), "no client certificate"
        assert arbitrates(addr, pki.client)
    finally:
        server.stop(grace=0).wait(5)


def test_bad_files_are_named_by_their_option(pki: Pki, tmp_path: Path) -> None:
    with pytest.raises(TlsError) as e:
        TlsFiles(tmp_path / "absent.pem", option="--p4rt").channel_credentials()
    assert e.value.field == "--p4rt-ca" and "cannot read" in str(e.value)
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(TlsError, match="not a PEM file") as e:
        TlsFiles(
            pki.ca, tmp_path / "junk.pem", pki.server.key, option="--p4rt"
        ).channel_credentials()
    assert e.value.field == "--p4rt-cert"
    with pytest.raises(TlsError) as e:
        TlsFiles(pki.ca, cert=pki.client.cert, option="--p4rt")
    assert e.value.field == "--p4rt-key"


def test_the_soft_switch_takes_bmv2s_tls_options(pki: Pki) -> None:
    flags = server_flags(pki.server, require_client_auth=True)
    argv = command_line("soft", {}, "127.0.0.1:1", 2, tls=pki.server, client_auth=True)
    assert argv[-len(flags) :] == flags
    assert "--grpc-server-ssl" in flags and "--grpc-server-with-client-auth" in flags
    opts = softswitch_args(argv[argv.index("softswitch") + 1 :])
    assert opts.tls == TlsFiles(pki.ca, pki.server.cert, pki.server.key, option="grpc-server")
    assert opts.client_auth
    from softswitch.errors import UsageError

    with pytest.raises(UsageError) as e:
        softswitch_args(["--", "--grpc-server-cert", str(pki.server.cert)])
    assert e.value.field == "grpc-server-ssl"
    with pytest.raises(UsageError) as e:
        softswitch_args(["--", "--grpc-server-ssl", "--grpc-server-with-client-auth",
                         "--grpc-server-cert", str(pki.server.cert),
                         "--grpc-server-key", str(pki.server.key)])  # fmt: skip
    assert e.value.field == "grpc-server-cacert"


def test_the_daemon_names_an_unreadable_tls_file_and_starts_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topo = write_topo(tmp_path / "t.yaml", [f"127.0.0.1:{free_port()}"])
    db = tmp_path / "c.db"
    rc = daemon_main(["--topo", str(topo), "--db", str(db), "--p4rt-ca", str(tmp_path / "no.pem")])
    assert rc == 2
    assert "--p4rt-ca: cannot read" in capsys.readouterr().err
    assert not db.exists()
    rc = daemon_main(["--topo", str(topo), "--db", str(db), "--p4rt-cert", str(tmp_path / "c")])
    assert rc == 2 and "--p4rt-ca" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["soft", "bmv2"])
def test_the_daemon_syncs_a_switch_over_mutual_tls(pki: Pki, tmp_path: Path, kind: str) -> None:
    """The whole path: daemon flags -> every switch connection -> a switch process that
    requires client certificates (BMv2's own ``--grpc-server-ssl`` options)."""
    if kind == "bmv2" and shutil.which("simple_switch_grpc") is None:
        pytest.skip("BMv2 (simple_switch_grpc) is not installed")
    addr = f"127.0.0.1:{free_port()}"
    sw = start_target(kind, {}, addr, free_port(), log_path=tmp_path / "switch.log",  # type: ignore[arg-type]
                      tls=pki.server, client_auth=True)  # fmt: skip
    try:
        topo = write_topo(tmp_path / "t.yaml", [addr])
        client = pki.client
        assert client.cert is not None and client.key is not None
        d = Daemon(topo, tmp_path / "c.db", tmp_path / "daemon.log", "--p4rt-ca", str(pki.ca),
                   "--p4rt-cert", str(client.cert), "--p4rt-key", str(client.key))  # fmt: skip
        try:
            st = d.wait_ready(60.0)
            assert st["switches"]["s1"]["in_sync"], st
        finally:
            d.stop()
        assert not arbitrates(addr, None), "the switch serves TLS only"
    finally:
        sw.stop()


def test_the_api_over_https_for_echelonctl_and_the_progress_library(
    pki: Pki, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--tls-cert/--tls-key``: the API is https only; a client with the CA is served
    (the CLI, the typed client, a training process's reports), one without it is not."""
    cert, key = pki.server.cert, pki.server.key
    assert cert is not None and key is not None
    sw = start_softswitch(free_port(), tmp_path / "switch.log")
    try:
        topo = write_topo(tmp_path / "t.yaml", [sw.grpc_addr])
        d = Daemon(topo, tmp_path / "c.db", tmp_path / "daemon.log", "--tls-cert", str(cert),
                   "--tls-key", str(key), ca=pki.ca)  # fmt: skip
        try:
            d.wait_ready(60.0)
            assert d.url.startswith("https://")
            assert echelonctl(["--api", d.url, "--ca", str(pki.ca), "status"]) == 0
            switch_line = capsys.readouterr().out.splitlines()[-1]
            assert switch_line.startswith("s1") and switch_line.endswith("ok"), switch_line
            with ApiClient(d.url, timeout=5) as plain, pytest.raises(ControllerUnreachable):
                plain.status()  # the system's roots do not know this CA
            with (
                ApiClient(d.url.replace("https", "http"), timeout=5) as cleartext,
                pytest.raises(ControllerUnreachable),
            ):
                cleartext.status()
            d.api.register(spec("j"))
            rep = ProgressReporter(d.url, "j", "h1", ca=str(pki.ca))
            rep.released(0, "g0")
            assert rep.flush()
            rep.close()
            assert rep.sent == 1 and rep.errors == 0
            wait_until(lambda: d.api.progress().reports >= 1, 10.0, "the report counted")
        finally:
            d.stop()
    finally:
        sw.stop()


def test_the_daemon_wants_the_apis_certificate_and_key_together(
    pki: Pki, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topo = write_topo(tmp_path / "t.yaml", [f"127.0.0.1:{free_port()}"])
    args = ["--topo", str(topo), "--db", str(tmp_path / "c.db")]
    assert daemon_main([*args, "--tls-cert", str(pki.server.cert)]) == 2
    assert "--tls-key" in capsys.readouterr().err
    assert daemon_main([*args, "--tls-cert", str(pki.server.cert),
                        "--tls-key", str(tmp_path / "none.key")]) == 2  # fmt: skip
    assert "--tls-key: cannot read" in capsys.readouterr().err

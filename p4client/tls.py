"""TLS for P4Runtime: the PEM files of one end of a gRPC connection.

Both ends use it: the controller's :class:`p4client.p4rt.SwitchConnection` (a
client: ``ca`` verifies the switch, ``cert``/``key`` are its own for mutual TLS) and
the soft switch's server (``cert``/``key`` its own, ``ca`` verifies clients when it
requires their certificates). BMv2's ``simple_switch_grpc`` takes the same files as
``--grpc-server-ssl --grpc-server-cert F --grpc-server-key F [--grpc-server-cacert F
--grpc-server-with-client-auth]`` (:func:`server_flags`), and so does the soft switch.

Why files and not bytes: certificates are rotated on disk; each connection reads them
when it opens, so a reconnect after a rotation picks up the new ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

from echelon.errors import EchelonError


class TlsError(EchelonError):
    """A TLS file is missing, unreadable or not PEM; ``field`` names the option."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: ``ca`` the certificate(s) that verify the peer, ``cert`` and ``key``
    this end's own certificate chain and private key (both or neither)."""

    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    #: how the files are named to the user (``--p4rt`` -> ``--p4rt-ca`` ...)
    option: str = "tls"

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            missing = "key" if self.key is None else "cert"
            raise TlsError(f"{self.option}-{missing}", "give a certificate and its key together")

    def _read(self, name: str) -> bytes | None:
        path: Path | None = getattr(self, name)
        if path is None:
            return None
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TlsError(f"{self.option}-{name}", f"cannot read {path}: {exc.strerror}") from None
        if b"-----BEGIN " not in data:
            raise TlsError(f"{self.option}-{name}", f"{path} is not a PEM file")
        return data

    def check(self) -> None:
        """Read every file given: a missing, unreadable or non-PEM one raises now, named
        by its option (the command line is checked before anything starts)."""
        for name in ("ca", "cert", "key"):
            self._read(name)

    def require_server(self, require_client_auth: bool = False) -> None:
        """What a server needs besides readable files: its own certificate and key, and
        with ``require_client_auth`` the CA that checks clients."""
        if self.cert is None or self.key is None:
            raise TlsError(f"{self.option}-cert", "a TLS server needs a certificate and key")
        if require_client_auth and self.ca is None:
            raise TlsError(f"{self.option}-ca", "client authentication needs a CA")

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """A client's credentials: verify the server by ``ca`` (the system's roots if
        none), present ``cert`` when given (mutual TLS)."""
        return grpc.ssl_channel_credentials(
            root_certificates=self._read("ca"),
            private_key=self._read("key"),
            certificate_chain=self._read("cert"),
        )

    def server_credentials(self, require_client_auth: bool = False) -> grpc.ServerCredentials:
        """A server's credentials: ``cert``/``key`` required; with
        ``require_client_auth`` every client must present a certificate ``ca`` signed."""
        self.require_server(require_client_auth)
        cert, key = self._read("cert"), self._read("key")
        assert cert is not None and key is not None  # require_server
        return grpc.ssl_server_credentials(
            [(key, cert)],
            root_certificates=self._read("ca"),
            require_client_auth=require_client_auth,
        )


def server_flags(tls: TlsFiles, require_client_auth: bool = False) -> list[str]:
    """simple_switch_grpc's target options for ``tls`` (the soft switch takes the same)."""
    tls.require_server(require_client_auth)
    flags = ["--grpc-server-ssl", "--grpc-server-cert", str(tls.cert)]
    flags += ["--grpc-server-key", str(tls.key)]
    if tls.ca is not None:
        flags += ["--grpc-server-cacert", str(tls.ca)]
    if require_client_auth:
        flags.append("--grpc-server-with-client-auth")
    return flags

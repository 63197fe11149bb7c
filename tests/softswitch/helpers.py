"""Shared helpers of the soft-switch tests: P4Info names, the conformance client, netns."""

from __future__ import annotations

import contextlib
import ctypes
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
from finsy.proto import p4i as p4info_pb2
from finsy.proto import p4r
from finsy.proto import rpc_status as status_pb2

from p4client.p4info import P4Info
from p4client.p4rt import SwitchConnection

ROOT = Path(__file__).resolve().parents[2]
P4INFO_PATH = ROOT / "p4src" / "build" / "echelon.p4info.txtpb"
JSON_PATH = ROOT / "p4src" / "build" / "echelon.json"
PYTHON = sys.executable


def load_p4info() -> p4info_pb2.P4Info:
    return P4Info.load(P4INFO_PATH).proto


def load_config() -> bytes:
    """p4c's BMv2 JSON of echelon.p4: the p4_device_config both targets run."""
    return JSON_PATH.read_bytes()


class Names:
    """Look P4Info IDs up by name, as every consumer must."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self.tables = {t.preamble.name: t for t in p4info.tables}
        self.actions = {a.preamble.name: a for a in p4info.actions}
        self.counters = {c.preamble.name: c for c in p4info.counters}

    def table_id(self, name: str) -> int:
        return int(self.tables[name].preamble.id)

    def action_id(self, name: str) -> int:
        return int(self.actions[name].preamble.id)

    def counter_id(self, name: str) -> int:
        return int(self.counters[name].preamble.id)

    def field_id(self, table: str, field: str) -> int:
        return next(int(f.id) for f in self.tables[table].match_fields if f.name == field)

    def entry(
        self,
        table: str,
        match: dict[str, Any],
        action: str | None = None,
        params: dict[str, int] | None = None,
        priority: int = 0,
    ) -> p4r.TableEntry:
        """Build a TableEntry; match values: int (exact), (v, plen) lpm, ('range', lo, hi)."""
        te = p4r.TableEntry(table_id=self.table_id(table), priority=priority)
        tinfo = self.tables[table]
        for fname, value in match.items():
            f = next(f for f in tinfo.match_fields if f.name == fname)
            nbytes = (f.bitwidth + 7) // 8
            fm = te.match.add(field_id=f.id)
            if f.match_type == p4info_pb2.MatchField.EXACT:
                fm.exact.value = value.to_bytes(nbytes, "big")
            elif f.match_type == p4info_pb2.MatchField.LPM:
                fm.lpm.value = value[0].to_bytes(nbytes, "big")
                fm.lpm.prefix_len = value[1]
            elif f.match_type == p4info_pb2.MatchField.RANGE:
                fm.range.low = value[0].to_bytes(nbytes, "big")
                fm.range.high = value[1].to_bytes(nbytes, "big")
        if action is not None:
            a = self.actions[action]
            te.action.action.action_id = a.preamble.id
            for p in a.params:
                v = (params or {})[p.name]
                te.action.action.params.add(
                    param_id=p.id, value=v.to_bytes((p.bitwidth + 7) // 8, "big")
                )
        return te


class Client(SwitchConnection):
    """The project's P4Runtime client with the raw hooks a server-conformance test needs.

    Channel, StreamChannel, arbitration messages and request building are
    :class:`p4client.p4rt.SwitchConnection`'s; here every stream message (and the
    gRPC error that ends the stream) queues in ``inbox``, arbitration is sent when the
    test says so, and requests go to the stub directly so a test sees the server's
    raw gRPC status (``grpc.RpcError``) rather than the library's typed errors.
    """

    def __init__(
        self, addr: str, device_id: int = 0, election: int | None = 1, role: str = ""
    ) -> None:
        super().__init__(addr, device_id, _pair(election), role)
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.on_message(self.inbox.put)
        self.on_stream_break(lambda c: self.inbox.put(c.stream_exception or EOFError()))
        self.open(timeout=10)

    @property
    def election(self) -> int | None:
        e = self.election_id
        return None if e is None else (e[0] << 64) | e[1]

    def arbitrate(self, election: int | None = None, device_id: int | None = None) -> Any:
        """Send a MasterArbitrationUpdate; return the next stream message (or RpcError)."""
        if election is not None:
            self.election_id = _pair(election)
        self.send_arbitration(device_id)
        return self.next_message()

    def next_message(self, timeout: float = 5.0) -> Any:
        return self.inbox.get(timeout=timeout)

    def push_pipeline(
        self,
        p4info: p4info_pb2.P4Info,
        action: int = p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        cookie: int = 0,
        device_config: bytes | None = None,
    ) -> None:
        name = p4r.SetForwardingPipelineConfigRequest.Action.Name(action)
        config = load_config() if device_config is None else device_config
        req = self.pipeline_request(P4Info(p4info), config, cookie, name)
        if not cookie:
            req.config.ClearField("cookie")
        self.stub.SetForwardingPipelineConfig(req, timeout=10)

    def send_write(self, *updates: tuple[int, Any], device_id: int | None = None) -> None:
        req = self.write_request([_update(kind, entity) for kind, entity in updates])
        if device_id is not None:
            req.device_id = device_id
        self.stub.Write(req, timeout=10)

    def read(self, *entities: Any) -> list[p4r.Entity]:
        req = self.read_request(*(_entity(e) for e in entities))
        out: list[p4r.Entity] = []
        for resp in self.stub.Read(req, timeout=10):
            out.extend(resp.entities)
        return out


def _pair(election: int | None) -> tuple[int, int] | None:
    return None if election is None else (election >> 64, election & ((1 << 64) - 1))


def _entity(e: Any) -> p4r.Entity:
    if isinstance(e, p4r.TableEntry):
        return p4r.Entity(table_entry=e)
    if isinstance(e, p4r.CounterEntry):
        return p4r.Entity(counter_entry=e)
    assert isinstance(e, p4r.Entity)
    return e


def _update(kind: int, entity: Any) -> p4r.Update:
    return p4r.Update(type=kind, entity=_entity(entity))  # type: ignore[arg-type]


def write_errors(err: grpc.RpcError) -> list[tuple[int, str]]:
    """Per-update (canonical_code, message) from a failed Write's status details."""
    return trailer_errors(err.trailing_metadata() or ())


def trailer_errors(trailers: Any) -> list[tuple[int, str]]:
    """Per-update (canonical_code, message) in a failed Write's trailing metadata."""
    for key, value in trailers:
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            out = []
            for d in status.details:
                e = p4r.Error()
                d.Unpack(e)
                out.append((e.canonical_code, e.message))
            return out
    return []


INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE


# ------------------------------------------------------------------ network namespaces
_libc = ctypes.CDLL("libc.so.6", use_errno=True)
CLONE_NEWNET = 0x40000000


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


def in_netns(ns: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a thread that entered netns ``ns``; sockets it makes stay in ``ns``."""
    result: list[Any] = []
    errors: list[BaseException] = []

    def body() -> None:
        try:
            with open(f"/var/run/netns/{ns}") as f:
                if _libc.setns(f.fileno(), CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns failed")
            result.append(fn())
        except BaseException as exc:  # re-raised in the caller
            errors.append(exc)

    t = threading.Thread(target=body)  # the thread ends, so its namespace does not leak
    t.start()
    t.join()
    if errors:
        raise errors[0]
    return result[0]


def raw_socket(ifname: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((ifname, 0))
    s.settimeout(0.05)
    return s


@contextlib.contextmanager
def veth_hosts(prefix: str, count: int) -> Iterator[list[tuple[str, str]]]:
    """``count`` veth pairs: switch end ``<prefix>p<i>`` in this namespace, host end
    ``eth0`` inside netns ``<prefix>h<i>``. Yields (switch ifname, netns) pairs and
    removes everything afterwards."""
    made: list[tuple[str, str]] = []
    try:
        for i in range(1, count + 1):
            ns, sw = f"{prefix}h{i}", f"{prefix}p{i}"
            sh("ip", "netns", "add", ns)
            made.append((sw, ns))
            sh("ip", "link", "add", sw, "type", "veth", "peer", "name", f"{prefix}e{i}")
            sh("ip", "link", "set", f"{prefix}e{i}", "netns", ns)
            sh("ip", "-n", ns, "link", "set", f"{prefix}e{i}", "name", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "link", "set", sw, "up")
            sh("sysctl", "-q", "-w", f"net.ipv6.conf.{sw}.disable_ipv6=1")
        yield made
    finally:
        for sw, ns in made:
            subprocess.run(["ip", "link", "del", sw], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

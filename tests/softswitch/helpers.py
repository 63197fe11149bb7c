"""Shared helpers of the soft-switch tests: P4Info, a minimal P4Runtime client, netns, processes."""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import text_format
from google.rpc import status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as p4r
from p4.v1 import p4runtime_pb2_grpc as p4r_grpc

ROOT = Path(__file__).resolve().parents[2]
P4INFO_PATH = ROOT / "p4src" / "build" / "echelon.p4info.txtpb"
JSON_PATH = ROOT / "p4src" / "build" / "echelon.json"
PYTHON = str(ROOT / ".venv" / "bin" / "python")


def load_p4info() -> p4info_pb2.P4Info:
    return text_format.Parse(P4INFO_PATH.read_text(), p4info_pb2.P4Info())


def load_config() -> bytes:
    """p4c's BMv2 JSON of echelon.p4: the p4_device_config both targets run."""
    return JSON_PATH.read_bytes()


def wait_until(cond: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01) -> Any:
    """Poll ``cond`` until it is truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout} s")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


class Client:
    """A bare P4Runtime client over the real protos (independent of controlplane/)."""

    def __init__(
        self, addr: str, device_id: int = 0, election: int | None = 1, role: str = ""
    ) -> None:
        self.device_id = device_id
        self.election = election
        self.role = role
        self.channel = grpc.insecure_channel(addr)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self._out: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self.inbox: queue.Queue[Any] = queue.Queue()
        self._stream = self.stub.StreamChannel(self._requests())
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _requests(self) -> Iterator[p4r.StreamMessageRequest]:
        while True:
            msg = self._out.get()
            if msg is None:
                return
            yield msg

    def _read(self) -> None:
        try:
            for msg in self._stream:
                self.inbox.put(msg)
        except grpc.RpcError as err:
            self.inbox.put(err)

    def arbitrate(self, election: int | None = None, device_id: int | None = None) -> Any:
        """Send a MasterArbitrationUpdate; return the next stream message (or RpcError)."""
        if election is not None:
            self.election = election
        req = p4r.StreamMessageRequest()
        req.arbitration.device_id = self.device_id if device_id is None else device_id
        if self.role:
            req.arbitration.role.name = self.role
        if self.election is not None:
            req.arbitration.election_id.high = self.election >> 64
            req.arbitration.election_id.low = self.election & ((1 << 64) - 1)
        self._out.put(req)
        return self.next_message()

    def next_message(self, timeout: float = 5.0) -> Any:
        return self.inbox.get(timeout=timeout)

    def send_stream(self, req: p4r.StreamMessageRequest) -> None:
        self._out.put(req)

    def _eid(self, msg: Any) -> None:
        if self.election is not None:
            msg.election_id.high = self.election >> 64
            msg.election_id.low = self.election & ((1 << 64) - 1)
        msg.role = self.role

    def set_pipeline(
        self,
        p4info: p4info_pb2.P4Info,
        action: int = p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        cookie: int = 0,
        device_config: bytes | None = None,
    ) -> None:
        req = p4r.SetForwardingPipelineConfigRequest(device_id=self.device_id, action=action)
        self._eid(req)
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = load_config() if device_config is None else device_config
        if cookie:
            req.config.cookie.cookie = cookie
        self.stub.SetForwardingPipelineConfig(req, timeout=10)

    def write(self, *updates: tuple[int, Any], device_id: int | None = None) -> None:
        req = p4r.WriteRequest(device_id=self.device_id if device_id is None else device_id)
        self._eid(req)
        for kind, entity in updates:
            u = req.updates.add(type=kind)
            if isinstance(entity, p4r.TableEntry):
                u.entity.table_entry.CopyFrom(entity)
            elif isinstance(entity, p4r.CounterEntry):
                u.entity.counter_entry.CopyFrom(entity)
            else:
                u.entity.CopyFrom(entity)
        self.stub.Write(req, timeout=10)

    def read(self, *entities: Any) -> list[p4r.Entity]:
        req = p4r.ReadRequest(device_id=self.device_id)
        for e in entities:
            ent = req.entities.add()
            if isinstance(e, p4r.TableEntry):
                ent.table_entry.CopyFrom(e)
            elif isinstance(e, p4r.CounterEntry):
                ent.counter_entry.CopyFrom(e)
            else:
                ent.CopyFrom(e)
        out: list[p4r.Entity] = []
        for resp in self.stub.Read(req, timeout=10):
            out.extend(resp.entities)
        return out

    def close(self) -> None:
        self._out.put(None)
        self.channel.close()
        self._reader.join(timeout=5)


def write_errors(err: grpc.RpcError) -> list[tuple[int, str]]:
    """Per-update (canonical_code, message) from a failed Write's status details."""
    for key, value in err.trailing_metadata() or ():
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


def stop_process(proc: subprocess.Popen[Any], timeout: float = 5.0) -> int:
    """SIGTERM, then SIGKILL after ``timeout``; the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(timeout)
    return int(proc.returncode)


def start_switch(
    ports: dict[int, str],
    grpc_port: int,
    thrift_port: int,
    log_path: Path,
    extra: list[str] | None = None,
    queues: int = 8,
) -> subprocess.Popen[Any]:
    """Start ``python -m softswitch`` and wait for its ready line."""
    cmd = [PYTHON, "-m", "softswitch", "--device-id", "0"]
    for n, i in ports.items():
        cmd += ["-i", f"{n}@{i}"]
    cmd += ["--thrift-port", str(thrift_port), "--log-console", "-L", "info", "--no-p4"]
    cmd += extra or []
    cmd += ["--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}", "--priority-queues", str(queues)]
    log = open(log_path, "w")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    log.close()
    try:
        wait_until(lambda: proc.poll() is not None or "ready grpc=" in log_path.read_text(), 20)
        if proc.poll() is not None:
            raise RuntimeError(f"switch exited: {log_path.read_text()}")
    except BaseException:
        stop_process(proc)
        raise
    return proc


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True

"""A small P4Runtime client: one :class:`SwitchConnection` per switch (device).

Why not p4runtime-shell: it keeps a process-wide global client and prints rather
than raising, which does not suit a daemon that talks to several switches from
several threads, nor tests that need exact per-update error codes. This module
keeps one gRPC channel and one StreamChannel per switch, looks every ID up by
name in the P4Info (:mod:`p4client.p4info`) and raises typed exceptions.

Usage::

    with SwitchConnection("127.0.0.1:9559") as sw:       # connects, arbitrates
        sw.set_pipeline("p4src/build/echelon.p4info.txtpb")
        e = sw.table_entry("ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.0.1", 32)},
                           "ipv4_forward", {"dstAddr": "00:00:0a:00:00:01", "port": 1})
        sw.insert([e])
        assert e in sw.read_table_entries("ipv4_lpm")
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

import grpc
from finsy.proto import p4r as p4runtime_pb2
from finsy.proto import p4r_grpc as p4runtime_pb2_grpc
from finsy.proto import rpc_code as code_pb2

from p4client.codec import ENCODED_MAX, default_entry_reads, encoded, entry_from_proto
from p4client.p4info import P4Info, TableEntry, UserValue
from p4client.p4rt_errors import (
    P4RuntimeConnectionError,
    P4RuntimeError,
    P4RuntimeWriteError,
    UpdateStatus,
    code_name,
    grpc_code,
    rpc_error,
    write_statuses,
)
from p4client.tls import TlsFiles

log = logging.getLogger(__name__)

#: Metadata (trailer) size this client accepts. A failed WriteRequest carries one
#: ``p4.v1.Error`` per update in the ``grpc-status-details-bin`` trailer; gRPC's default
#: limit (8 KiB soft, 16 KiB hard) is exceeded by ~450 updates, and the client then sees
#: only ``RESOURCE_EXHAUSTED`` without knowing which updates applied.
MAX_METADATA_BYTES = 16 << 20
#: Budget per update's error detail (type URL + code + message) that a chunk must fit.
DETAIL_BUDGET_BYTES = 8 << 10
#: Updates per WriteRequest: the per-update statuses of a failing request always fit in
#: ``MAX_METADATA_BYTES`` (500 x 8 KiB = 4 MiB), each message stays far below 4 MB, and
#: encoding the next chunk overlaps most of the switch's work on the current one.
WRITE_CHUNK = 500
#: The most updates one request may carry for its statuses to fit the metadata limit.
MAX_CHUNK = MAX_METADATA_BYTES // DETAIL_BUDGET_BYTES
#: Deadline of unary RPCs, so a frozen switch cannot hang the caller forever.
RPC_TIMEOUT_S = 10.0


class SwitchConnection:
    """A P4Runtime client for one device: stream + arbitration, pipeline, writes, reads."""

    def __init__(
        self,
        grpc_addr: str,
        device_id: int = 0,
        election_id: tuple[int, int] | None = (0, 1),
        role: str = "",
        p4info: P4Info | None = None,
        tls: TlsFiles | None = None,
    ) -> None:
        self.grpc_addr = grpc_addr
        #: TLS files (``None``: plaintext); read at each :meth:`open`
        self.tls = tls
        self.device_id = device_id
        self.election_id = election_id
        self.role = role
        self.p4info = p4info
        self._update_cache: tuple[P4Info | None, dict[tuple[str, TableEntry], Any]] = (None, {})
        self.is_primary = False
        #: the last arbitration update: the primary's election ID (``None`` if the role
        #: has none) and the status code name (OK primary, ALREADY_EXISTS backup, NOT_FOUND)
        self.primary_election_id: tuple[int, int] | None = None
        self.arbitration_code = ""
        self.stream_error: str | None = None
        #: the gRPC error that ended the stream (``None`` while open or when it just closed)
        self.stream_exception: grpc.RpcError | None = None
        self._channel: grpc.Channel | None = None
        self._stub: p4runtime_pb2_grpc.P4RuntimeStub | None = None
        self._requests: queue.Queue[p4runtime_pb2.StreamMessageRequest | None] = queue.Queue()
        self._arbitrated = threading.Event()
        self._stream_done = threading.Event()
        self._closing = False
        self._dead = False
        self._reader: threading.Thread | None = None
        self._on_break: list[Callable[[SwitchConnection], None]] = []
        self._on_arbitration: list[Callable[[SwitchConnection], None]] = []
        self._on_message: list[Callable[[p4runtime_pb2.StreamMessageResponse], None]] = []

    # ------------------------------------------------------------ connection

    def connect(self, timeout: float = 5.0) -> bool:
        """Open the channel and StreamChannel, arbitrate; return whether we are primary.

        Raises :class:`P4RuntimeConnectionError` if the switch does not answer the
        arbitration within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        self.open(timeout)
        self.send_arbitration()
        while not self._arbitrated.wait(0.05):
            if self._stream_done.is_set() or time.monotonic() > deadline:
                why = self.stream_error or "no arbitration response"
                self.close()
                raise P4RuntimeConnectionError("UNAVAILABLE", f"{self.grpc_addr}: {why}")
        return self.is_primary

    def open(self, timeout: float = 5.0) -> None:
        """Open the channel and the StreamChannel without arbitrating (:meth:`connect`
        does both; a test of a server's arbitration sends its own messages)."""
        opts = [
            ("grpc.max_receive_message_length", 64 << 20),
            ("grpc.max_metadata_size", MAX_METADATA_BYTES),
            ("grpc.absolute_max_metadata_size", MAX_METADATA_BYTES),
        ]
        if self.tls is None:
            self._channel = grpc.insecure_channel(self.grpc_addr, options=opts)
        else:
            creds = self.tls.channel_credentials()
            self._channel = grpc.secure_channel(self.grpc_addr, creds, options=opts)
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(self._channel)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            self._teardown()
            raise P4RuntimeConnectionError(
                "UNAVAILABLE", f"{self.grpc_addr}: no gRPC server within {timeout} s"
            ) from None
        self._closing = False
        self._dead = False
        self.stream_exception = None
        self._arbitrated.clear()
        self._stream_done.clear()
        self._requests = queue.Queue()
        stream = self._stub.StreamChannel(self._request_iter(self._requests))
        self._reader = threading.Thread(
            target=self._read_stream, args=(stream,), name=f"p4rt-{self.grpc_addr}", daemon=True
        )
        self._reader.start()

    def send_arbitration(self, device_id: int | None = None) -> None:
        """Send a MasterArbitrationUpdate (this connection's device, election ID, role)."""
        req = self._arbitration_request()
        if device_id is not None:
            req.arbitration.device_id = device_id
        self.send_stream(req)

    def send_stream(self, msg: p4runtime_pb2.StreamMessageRequest) -> None:
        """Queue one message on the StreamChannel."""
        self._requests.put(msg)

    def _arbitration_request(self) -> p4runtime_pb2.StreamMessageRequest:
        req = p4runtime_pb2.StreamMessageRequest()
        arb = req.arbitration
        arb.device_id = self.device_id
        if self.election_id is not None:
            arb.election_id.high, arb.election_id.low = self.election_id
        if self.role:
            arb.role.name = self.role
        return req

    @staticmethod
    def _request_iter(
        q: queue.Queue[p4runtime_pb2.StreamMessageRequest | None],
    ) -> Iterator[p4runtime_pb2.StreamMessageRequest]:
        while (msg := q.get()) is not None:
            yield msg

    def _read_stream(self, stream: Any) -> None:
        try:
            for resp in stream:
                for mcb in list(self._on_message):
                    mcb(resp)
                kind = resp.WhichOneof("update")
                if kind == "arbitration":
                    arb = resp.arbitration
                    self.primary_election_id = (
                        (int(arb.election_id.high), int(arb.election_id.low))
                        if arb.HasField("election_id")
                        else None
                    )
                    self.arbitration_code = code_name(arb.status.code)
                    self.is_primary = arb.status.code == code_pb2.OK
                    self._arbitrated.set()
                    for acb in list(self._on_arbitration):
                        acb(self)
                elif kind == "error":
                    log.warning("%s: stream error %s", self.grpc_addr, resp.error)
            self.stream_error = "stream closed by the switch"
        except grpc.RpcError as exc:
            self.stream_error = f"{exc.code().name}: {exc.details()}"
            self.stream_exception = exc
        finally:
            # is_alive turns false first, the callbacks run, and only then are
            # wait_broken() waiters released: they see the callbacks' effects.
            self._dead = True
            self.is_primary = False
            if not self._closing:
                log.warning("%s: P4Runtime stream broke: %s", self.grpc_addr, self.stream_error)
                for cb in list(self._on_break):
                    try:
                        cb(self)
                    except Exception:  # a callback must not kill the reader thread
                        log.exception("stream-break callback failed")
            self._stream_done.set()

    @property
    def is_alive(self) -> bool:
        """True while the StreamChannel is open (the switch is up and we hold a session)."""
        return self._reader is not None and self._arbitrated.is_set() and not self._dead

    def wait_broken(self, timeout: float) -> bool:
        """Block until the stream has ended (or ``timeout``); return whether it did."""
        return self._stream_done.wait(timeout)

    def on_stream_break(self, callback: Callable[[SwitchConnection], None]) -> None:
        """Call ``callback(self)`` from the reader thread when the stream ends unexpectedly."""
        self._on_break.append(callback)

    def on_arbitration(self, callback: Callable[[SwitchConnection], None]) -> None:
        """Call ``callback(self)`` on every arbitration update (primary gained or lost)."""
        self._on_arbitration.append(callback)

    def on_message(self, callback: Callable[[p4runtime_pb2.StreamMessageResponse], None]) -> None:
        """Call ``callback(msg)`` from the reader thread for every stream message."""
        self._on_message.append(callback)

    def close(self) -> None:
        self._closing = True
        self._requests.put(None)
        self._teardown()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=2.0)

    def _teardown(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._channel = None

    def __enter__(self) -> SwitchConnection:
        if self._channel is None:
            self.connect()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def channel(self) -> grpc.Channel:
        """The gRPC channel (for RPCs this class does not wrap)."""
        if self._channel is None:
            raise P4RuntimeConnectionError("UNAVAILABLE", f"{self.grpc_addr}: not connected")
        return self._channel

    @property
    def stub(self) -> p4runtime_pb2_grpc.P4RuntimeStub:
        if self._stub is None or self._channel is None:
            raise P4RuntimeConnectionError("UNAVAILABLE", f"{self.grpc_addr}: not connected")
        return self._stub

    def loaded_p4info(self) -> P4Info:
        """The pipeline's P4Info (FAILED_PRECONDITION before :meth:`set_pipeline`)."""
        if self.p4info is None:
            raise P4RuntimeError("FAILED_PRECONDITION", "no P4Info: call set_pipeline first")
        return self.p4info

    # ------------------------------------------------------------ pipeline

    def set_pipeline(self, p4info: str | Path | P4Info, device_config: bytes = b"") -> int:
        """Push the pipeline (VERIFY_AND_COMMIT, the P4Info's own cookie); return the
        cookie sent with it."""
        info = p4info if isinstance(p4info, P4Info) else P4Info.load(p4info)
        req = self.pipeline_request(info, device_config)
        try:
            self.stub.SetForwardingPipelineConfig(req, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise rpc_error(exc, "SetForwardingPipelineConfig") from None
        self.p4info = info
        return int(req.config.cookie.cookie)

    def pipeline_request(
        self,
        info: P4Info,
        device_config: bytes = b"",
        cookie: int | None = None,
        action: str = "VERIFY_AND_COMMIT",
    ) -> p4runtime_pb2.SetForwardingPipelineConfigRequest:
        """A SetForwardingPipelineConfigRequest (``action``: VERIFY, VERIFY_AND_SAVE,
        VERIFY_AND_COMMIT, COMMIT, RECONCILE_AND_COMMIT); :meth:`set_pipeline` sends
        the default one."""
        cfg = p4runtime_pb2.SetForwardingPipelineConfigRequest
        req = cfg(device_id=self.device_id, action=cfg.Action.Value(action))
        if self.election_id is not None:
            req.election_id.high, req.election_id.low = self.election_id
        if self.role:
            req.role = self.role
        req.config.p4info.CopyFrom(info.proto)
        req.config.p4_device_config = device_config
        req.config.cookie.cookie = info.cookie(device_config) if cookie is None else cookie
        return req

    def _get_pipeline(
        self, rtype: p4runtime_pb2.GetForwardingPipelineConfigRequest.ResponseType.ValueType
    ) -> p4runtime_pb2.ForwardingPipelineConfig | None:
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, response_type=rtype
        )
        try:
            resp = self.stub.GetForwardingPipelineConfig(req, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as exc:
            if exc.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND):
                return None  # no pipeline installed yet
            raise rpc_error(exc, "GetForwardingPipelineConfig") from None
        config: p4runtime_pb2.ForwardingPipelineConfig = resp.config
        return config

    def get_pipeline_p4info(self) -> P4Info | None:
        """The P4Info the switch runs, or ``None`` if it has no pipeline."""
        cfg = self._get_pipeline(p4runtime_pb2.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
        if cfg is None or not cfg.HasField("p4info") or not cfg.p4info.tables:
            return None
        return P4Info(cfg.p4info)

    def get_pipeline_cookie(self) -> int | None:
        """The cookie of the installed pipeline (``None`` if none is installed)."""
        cfg = self._get_pipeline(p4runtime_pb2.GetForwardingPipelineConfigRequest.COOKIE_ONLY)
        if cfg is None or not cfg.HasField("cookie"):
            return None
        return int(cfg.cookie.cookie)

    # ------------------------------------------------------------ writes

    def table_entry(
        self,
        table: str,
        match: Mapping[str, Any] | None = None,
        action: str | None = None,
        params: Mapping[str, UserValue] | None = None,
        priority: int = 0,
        default: bool = False,
    ) -> TableEntry:
        """Build an entry by names (see :meth:`P4Info.table_entry` for value forms)."""
        return self.loaded_p4info().table_entry(table, match, action, params, priority, default)

    def updates(self, kind: str, entries: Iterable[TableEntry]) -> list[p4runtime_pb2.Update]:
        """``Update`` messages of type ``INSERT``/``MODIFY``/``DELETE`` for ``entries``."""
        utype = p4runtime_pb2.Update.Type.Value(kind)
        info = self.loaded_p4info()
        out = []
        for e in entries:
            if kind == "DELETE":
                e = TableEntry(e.table, e.match, None, (), e.priority, e.is_default)
            u = p4runtime_pb2.Update(type=utype)
            u.entity.table_entry.CopyFrom(encoded(info, e))
            out.append(u)
        return out

    def _shared_updates(
        self, items: Sequence[tuple[str, TableEntry]]
    ) -> list[p4runtime_pb2.Update]:
        """:meth:`updates` for ``(kind, entry)`` pairs, remembered per connection and
        P4Info: read-only messages, only ever copied into a WriteRequest (the controller
        writes the same entries again after every switch restart)."""
        info = self.loaded_p4info()
        if self._update_cache[0] is not info or len(self._update_cache[1]) > ENCODED_MAX:
            self._update_cache = (info, {})
        cache = self._update_cache[1]
        out = []
        for item in items:
            u = cache.get(item)
            if u is None:
                (u,) = self.updates(item[0], [item[1]])
                cache[item] = u
            out.append(u)
        return out

    def insert(self, entries: Iterable[TableEntry]) -> None:
        self.write(self.updates("INSERT", entries))

    def modify(self, entries: Iterable[TableEntry]) -> None:
        self.write(self.updates("MODIFY", entries))

    def delete(self, entries: Iterable[TableEntry]) -> None:
        self.write(self.updates("DELETE", entries))

    def write_request(self, part: Sequence[p4runtime_pb2.Update]) -> p4runtime_pb2.WriteRequest:
        """A WriteRequest for ``part`` with this connection's device, election ID and role."""
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id, updates=part)
        if self.election_id is not None:
            req.election_id.high, req.election_id.low = self.election_id
        if self.role:
            req.role = self.role
        return req

    def _raise_write(self, exc: grpc.RpcError, start: int, count: int) -> NoReturn:
        code = grpc_code(exc)
        if code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
            raise rpc_error(exc, "Write") from None
        statuses, known = write_statuses(exc, start, count)
        raise P4RuntimeWriteError(code, str(exc.details()), statuses, start, known) from None

    def write_entries(
        self, items: Sequence[tuple[str, TableEntry]], chunk: int = WRITE_CHUNK
    ) -> None:
        """Write ``(kind, entry)`` pairs in order, ``chunk`` per WriteRequest, encoding
        chunk k+1 while the switch applies chunk k (errors: those of :meth:`write`)."""
        self._write_chunks(items, self._shared_updates, chunk)

    def write(self, updates: Sequence[p4runtime_pb2.Update], chunk: int = WRITE_CHUNK) -> None:
        """Send ``updates`` in order, ``chunk`` per WriteRequest.

        Stops at the first failing chunk and raises :class:`P4RuntimeWriteError`
        with the status of every update in it, so the caller can undo what applied.
        ``chunk`` is capped at :data:`MAX_CHUNK` so those statuses always fit.
        """
        self._write_chunks(updates, list, chunk)

    def _write_chunks(
        self,
        items: Sequence[Any],
        encode: Callable[[Sequence[Any]], Sequence[p4runtime_pb2.Update]],
        chunk: int,
    ) -> None:
        """The one write path: ``encode(part)`` per chunk of ``items``, one WriteRequest
        each, chunk k+1 built while the switch applies chunk k but sent only after k
        succeeded, so chunks apply strictly in order and nothing follows a failing one."""
        chunk = min(chunk, MAX_CHUNK)
        if len(items) <= chunk:
            # one request (a registration, an online re-plan's few updates): a blocking
            # call, whose answer the calling thread takes itself -- the future's
            # completion passes through gRPC's channel thread first, one more wake-up
            if items:
                try:
                    self.stub.Write(self.write_request(encode(items)), timeout=RPC_TIMEOUT_S)
                except grpc.RpcError as exc:
                    self._raise_write(exc, 0, len(items))
            return
        pending: tuple[Any, int, int] | None = None

        def settle() -> None:
            """Wait for the chunk in flight; raise its error."""
            nonlocal pending
            if pending is not None:
                fut, at, n = pending
                pending = None
                try:
                    fut.result()
                except grpc.RpcError as exc:
                    self._raise_write(exc, at, n)

        start = 0
        while True:
            req = None
            if start < len(items):
                part = items[start : start + chunk]
                try:
                    updates = encode(part)
                except BaseException:
                    settle()  # never leave a chunk in flight behind an encoding error
                    raise
                req = self.write_request(updates)
            settle()
            if req is None:
                return
            pending = (self.stub.Write.future(req, timeout=RPC_TIMEOUT_S), start, len(part))
            start += len(part)

    # ------------------------------------------------------------ reads

    def read_entities(self, *entities: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        """Every entity one ReadRequest for ``entities`` returns (raw protos)."""
        return list(self._read(*entities))

    def read_request(self, *entities: p4runtime_pb2.Entity) -> p4runtime_pb2.ReadRequest:
        """A ReadRequest for ``entities`` with this connection's device and role."""
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id, entities=entities)
        if self.role:
            req.role = self.role
        return req

    def _read(self, *entities: p4runtime_pb2.Entity) -> Iterator[p4runtime_pb2.Entity]:
        req = self.read_request(*entities)
        try:
            for resp in self.stub.Read(req, timeout=RPC_TIMEOUT_S):
                yield from resp.entities
        except grpc.RpcError as exc:
            raise rpc_error(exc, "Read") from None

    def read_table_entries(self, table: str | None = None) -> list[TableEntry]:
        """Every entry of ``table`` (all tables when ``None``), decoded by name."""
        info = self.loaded_p4info()
        ent = p4runtime_pb2.Entity()
        ent.table_entry.table_id = info.table(table).id if table else 0
        return [entry_from_proto(info, e.table_entry) for e in self._read(ent)]

    def read_default_entries(self, *tables: str) -> list[TableEntry]:
        """The default entry of each of ``tables``, in one Read (a wildcard Read of
        table entries does not return default entries)."""
        info = self.loaded_p4info()
        reads = default_entry_reads(info, tables)
        return [entry_from_proto(info, e.table_entry) for e in self._read(*reads)]

    def read_counter(self, name: str, index: int | None = None) -> dict[int, tuple[int, int]]:
        """``{index: (packets, bytes)}`` of counter ``name`` (every index when ``None``)."""
        ci = self.loaded_p4info().counter(name)
        ent = p4runtime_pb2.Entity()
        ent.counter_entry.counter_id = ci.id
        if index is not None:
            ent.counter_entry.index.index = index
        out = {}
        for e in self._read(ent):
            c = e.counter_entry
            out[int(c.index.index)] = (int(c.data.packet_count), int(c.data.byte_count))
        return out

    def reset_counter(self, name: str) -> None:
        """Zero every index of counter ``name`` (one batched write)."""
        ci = self.loaded_p4info().counter(name)
        ups = []
        for i in range(ci.size):
            u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
            u.entity.counter_entry.counter_id = ci.id
            u.entity.counter_entry.index.index = i
            u.entity.counter_entry.data.packet_count = 0
            u.entity.counter_entry.data.byte_count = 0
            ups.append(u)
        self.write(ups)


__all__ = [
    "P4RuntimeConnectionError",
    "P4RuntimeError",
    "P4RuntimeWriteError",
    "SwitchConnection",
    "UpdateStatus",
]

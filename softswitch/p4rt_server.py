"""P4Runtime gRPC service of the soft switch (p4runtime 1.4.1 protos).

All control state (pipeline, saved config, table contents) changes under one
lock, held per request; the packet thread never takes it (see
:mod:`softswitch.tables` for why its lookups stay consistent).

Write errors follow the spec: request-level problems (wrong device, no
pipeline, not primary, unsupported atomicity) fail the RPC with their own code;
per-update problems fail it with UNKNOWN and a ``google.rpc.Status`` in the
``grpc-status-details-bin`` trailer whose details hold one ``p4.v1.Error`` per
update, in order, OK for those that were applied (CONTINUE_ON_ERROR).
"""

from __future__ import annotations

import gc
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from typing import Any, NoReturn

import grpc
from finsy.proto import p4r, p4r_grpc
from finsy.proto import rpc_code as code_pb2
from finsy.proto import rpc_status as status_pb2
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError

from softswitch import p4rt_codec as codec
from softswitch.arbitration import Arbiter, Stream, election_of
from softswitch.bm.pipeline import Pipeline, TableInfo
from softswitch.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    SwitchError,
    Unimplemented,
)
from softswitch.grpc_limits import ClientBounds, Limits
from softswitch.p4rt_entities import write_counter, write_meter, write_pre, write_register
from softswitch.p4rt_read import CounterCells, Part, RegisterCells, chunks
from softswitch.tables import Entry, Table

log = logging.getLogger("softswitch.p4rt")

API_VERSION = "1.4.1"
_CFG = p4r.SetForwardingPipelineConfigRequest
_GET = p4r.GetForwardingPipelineConfigRequest


def _parse_write(data: bytes) -> p4r.WriteRequest | InvalidArgument:
    """Write's request deserializer: the request, or the INVALID_ARGUMENT that
    :meth:`P4RuntimeService.Write` answers if the bytes are not a WriteRequest (an
    exception here would make gRPC answer INTERNAL)."""
    try:
        request: p4r.WriteRequest = p4r.WriteRequest.FromString(data)
    except DecodeError as exc:
        return InvalidArgument("request", f"not a p4.v1.WriteRequest: {exc}")
    return request


def _abort(context: grpc.ServicerContext, err: SwitchError) -> NoReturn:
    log.info("request refused: %s %s", err.code.name, err)
    context.abort(err.code, str(err))
    raise AssertionError("unreachable")  # context.abort raises


class P4RuntimeService(p4r_grpc.P4RuntimeServicer):  # type: ignore[misc]
    """The servicer; ``on_commit`` hands a committed pipeline to the data plane."""

    def __init__(
        self,
        device_id: int,
        on_commit: Callable[[Pipeline | None], None],
        limits: Limits | None = None,
    ) -> None:
        self.device_id = device_id
        self.limits = limits or Limits()
        self.bounds = ClientBounds(self.limits)
        self.arbiter = Arbiter(device_id)
        self.pipeline: Pipeline | None = None
        self._saved: Pipeline | None = None
        self._on_commit = on_commit
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ helpers
    def _check_device(self, device_id: int) -> None:
        if device_id != self.device_id:
            raise NotFound("device_id", f"{device_id} is not this switch ({self.device_id})")

    def _need_pipeline(self) -> Pipeline:
        if self.pipeline is None:
            raise FailedPrecondition("pipeline", "no forwarding pipeline config has been set")
        return self.pipeline

    def commit(self, pl: Pipeline) -> None:
        """Make ``pl`` the running pipeline (also ``python -m softswitch --p4info``'s)."""
        self.pipeline = pl
        pl.digests.sink = self.arbiter.send_primary
        self._on_commit(pl)
        log.info(
            "pipeline committed: %d tables, %d counters, cookie %d",
            len(pl.tables),
            len(pl.counters),
            pl.cookie,
        )

    # ------------------------------------------------------------------ RPCs
    @contextmanager
    def _serving(self, context: grpc.ServicerContext, rpc: str) -> Iterator[None]:
        """One unary RPC: a request slot of its client for the ``with`` block
        (:meth:`ClientBounds.request`); a SwitchError raised in it (or by the slot)
        fails the RPC with the error's own code and message."""
        try:
            with self.bounds.request(context.peer(), rpc):
                yield
        except SwitchError as err:
            _abort(context, err)

    def Capabilities(self, request: Any, context: grpc.ServicerContext) -> p4r.CapabilitiesResponse:
        with self._serving(context, "Capabilities"):
            return p4r.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    def SetForwardingPipelineConfig(
        self, request: p4r.SetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.SetForwardingPipelineConfigResponse:
        with self._serving(context, "SetForwardingPipelineConfig"), self._lock:
            self._set_config(request)
        return p4r.SetForwardingPipelineConfigResponse()

    def _set_config(self, req: p4r.SetForwardingPipelineConfigRequest) -> None:
        self._check_device(req.device_id)
        self.arbiter.check_primary(req.role, election_of(req))
        action = req.action
        if action == _CFG.COMMIT:
            if self._saved is None:
                raise FailedPrecondition("action", "COMMIT without a saved config")
            self.commit(self._saved)
            self._saved = None
            return
        if action not in (
            _CFG.VERIFY,
            _CFG.VERIFY_AND_SAVE,
            _CFG.VERIFY_AND_COMMIT,
            _CFG.RECONCILE_AND_COMMIT,
        ):
            raise InvalidArgument("action", f"unsupported action {action}")
        if not req.HasField("config") or not req.config.HasField("p4info"):
            raise InvalidArgument("config.p4info", "missing")
        cfg = req.config
        cookie = cfg.cookie.cookie if cfg.HasField("cookie") else 0
        if (
            action == _CFG.RECONCILE_AND_COMMIT
            and self.pipeline is not None
            and self.pipeline.p4info == cfg.p4info
            and self.pipeline.device_config == cfg.p4_device_config
        ):
            # Same program (P4Info and BMv2 JSON): keep table and counter state.
            self.pipeline.cookie = cookie
            return
        pl = Pipeline(cfg.p4info, cfg.p4_device_config, cookie)
        if action == _CFG.VERIFY_AND_SAVE:
            self._saved = pl
        elif action in (_CFG.VERIFY_AND_COMMIT, _CFG.RECONCILE_AND_COMMIT):
            self._saved = None
            self.commit(pl)

    def GetForwardingPipelineConfig(
        self, request: p4r.GetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.GetForwardingPipelineConfigResponse:
        with self._serving(context, "GetForwardingPipelineConfig"):
            self._check_device(request.device_id)
            pl = self._need_pipeline()
        resp = p4r.GetForwardingPipelineConfigResponse()
        if pl.cookie:
            resp.config.cookie.cookie = pl.cookie
        rt = request.response_type
        if rt in (_GET.ALL, _GET.P4INFO_AND_COOKIE):
            resp.config.p4info.CopyFrom(pl.p4info)
        if rt in (_GET.ALL, _GET.DEVICE_CONFIG_AND_COOKIE):
            resp.config.p4_device_config = pl.device_config
        return resp

    # ------------------------------------------------------------------ Write
    def Write(
        self, request: p4r.WriteRequest | InvalidArgument, context: grpc.ServicerContext
    ) -> p4r.WriteResponse:
        """Apply the updates in order; ``request`` is what :func:`_parse_write` made of
        the bytes. Request-level problems fail the RPC, per-update ones are answered
        by :meth:`_answer`."""
        if isinstance(request, InvalidArgument):
            _abort(context, request)
        with self._serving(context, "Write"):
            self._check_write(request)
            with self._lock:
                pl = self._need_pipeline()
                results = self._apply_all(pl, request.updates)
        self._answer(results, context)
        return p4r.WriteResponse()

    def _check_write(self, request: p4r.WriteRequest) -> None:
        """The request-level checks, in the order the spec's errors are reported."""
        self._check_device(request.device_id)
        self.arbiter.check_primary(request.role, election_of(request))
        if request.atomicity != p4r.WriteRequest.CONTINUE_ON_ERROR:
            raise Unimplemented("atomicity", "only CONTINUE_ON_ERROR is supported")
        limit, n = self.limits.max_write_updates, len(request.updates)
        if n > limit:
            # checked before the lock: a huge batch must not stall every client
            raise ResourceExhausted(
                "updates", f"{n} updates exceed the limit of {limit} per WriteRequest"
            )

    def _answer(self, results: list[SwitchError | None], context: grpc.ServicerContext) -> None:
        """Fail the RPC with one ``p4.v1.Error`` per update if any update failed."""
        failed = [r for r in results if r is not None]
        if not failed:
            return
        status = status_pb2.Status(
            code=code_pb2.UNKNOWN, message=f"{len(failed)} of {len(results)} updates failed"
        )
        for r in results:
            perr = p4r.Error(canonical_code=code_pb2.OK)
            if r is not None:
                perr = p4r.Error(canonical_code=r.code.value[0], message=str(r), space="softswitch")
            detail = any_pb2.Any()
            detail.Pack(perr)
            status.details.append(detail)
        for r in failed:
            log.info("update refused: %s %s", r.code.name, r)
        context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
        context.abort(grpc.StatusCode.UNKNOWN, status.message)

    def _apply_all(self, pl: Pipeline, updates: Any) -> list[SwitchError | None]:
        """Every update in order; the range/ternary groups the request touched are
        rebuilt once, before the lock is released (:meth:`Table.flush`). The
        collector stays off meanwhile: a batch allocates thousands of objects that
        all live on, so its collections would find nothing to free."""
        dec = codec.decoder(pl)
        touched: set[Table] = set()
        gc_on = gc.isenabled()
        gc.disable()
        try:
            return [self._apply(dec, u, touched) for u in updates]
        finally:
            for table in touched:
                table.flush()
            if gc_on:
                gc.enable()

    def _apply(
        self, dec: codec.Decoder, update: p4r.Update, touched: set[Table]
    ) -> SwitchError | None:
        try:
            entity = update.entity
            which = entity.WhichOneof("entity")
            kind = update.type
            if kind == p4r.Update.UNSPECIFIED:
                raise InvalidArgument("update.type", "UNSPECIFIED")
            if which == "table_entry":
                self._write_table(dec, kind, entity.table_entry, touched)
            elif which == "counter_entry":
                write_counter(dec.pipeline, kind, entity.counter_entry)
            elif which == "register_entry":
                write_register(dec.pipeline, kind, entity.register_entry)
            elif which == "digest_entry":
                dec.pipeline.digests.configure(kind, entity.digest_entry)
            elif which in ("meter_entry", "direct_meter_entry"):
                write_meter(dec, kind, entity)
            elif which == "packet_replication_engine_entry":
                write_pre(dec.pipeline, kind, entity.packet_replication_engine_entry)
            elif which is None:
                raise InvalidArgument("update.entity", "empty entity")
            else:
                raise InvalidArgument(f"update.entity.{which}", "the program has no such object")
        except SwitchError as err:
            return err
        return None

    def _write_table(
        self, dec: codec.Decoder, kind: int, te: p4r.TableEntry, touched: set[Table]
    ) -> None:
        d = dec.table_entry(te, needs_action=kind != p4r.Update.DELETE)
        table = d.info.table
        if te.is_default_action:
            if kind != p4r.Update.MODIFY:
                raise InvalidArgument(f"{d.info.name}.is_default_action", "only MODIFY is allowed")
            if d.info.const_default:
                raise InvalidArgument(d.info.name, "default action is const")
            table.set_default(d.call, d.proto if d.call is not None else None)
            return
        touched.add(table)
        if kind == p4r.Update.INSERT:
            assert d.call is not None
            table.insert(d.key, d.priority, d.call, d.proto, defer=True)
        elif kind == p4r.Update.MODIFY:
            assert d.call is not None
            table.modify(d.key, d.priority, d.call, d.proto, defer=True)
        else:
            table.delete(d.key, d.priority, defer=True)

    # ------------------------------------------------------------------ Read
    def Read(
        self, request: p4r.ReadRequest, context: grpc.ServicerContext
    ) -> Iterator[p4r.ReadResponse]:
        """Bounded and streamed: the answer's size is counted (from table lengths and
        counter sizes, nothing built) and refused with RESOURCE_EXHAUSTED past
        ``max_read_entities``; under the service lock only references are taken
        (stored table entries are replaced, never mutated; counter cells as
        ranges), and the entities are built and sent chunk by chunk outside it."""
        with self._serving(context, "Read"):
            self._check_device(request.device_id)
            n = len(request.entities)
            if n > self.limits.max_read_request_entities:
                raise ResourceExhausted(
                    "entities",
                    f"{n} entities exceed the limit of "
                    f"{self.limits.max_read_request_entities} per ReadRequest",
                )
            with self._lock:
                pl = self._need_pipeline()
                total = sum(self._count(pl, ent) for ent in request.entities)
                if total > self.limits.max_read_entities:
                    raise ResourceExhausted(
                        "entities",
                        f"the Read would answer {total} entities, over the limit of "
                        f"{self.limits.max_read_entities} per Read: read tables or "
                        "counters one at a time",
                    )
                # a repeated entity (1,000 identical wildcards) is walked once
                seen: dict[bytes, Part] = {}
                parts = []
                for ent in request.entities:
                    key = ent.SerializeToString(deterministic=True)
                    if key not in seen:
                        seen[key] = self._snapshot(pl, ent)
                    parts.append(seen[key])
            yield from chunks(parts)

    def _count(self, pl: Pipeline, ent: p4r.Entity) -> int:
        """An upper bound of what ``ent`` reads, without building anything."""
        which = ent.WhichOneof("entity")
        if which == "table_entry":
            te = ent.table_entry
            infos = _tables(pl, te)
            if te.is_default_action:
                return len(infos)
            if te.table_id and len(te.match):
                return 1
            return sum(len(info.table) for info in infos)
        if which in ("counter_entry", "register_entry"):
            # ranges, one per counter or register: nothing built per cell
            return sum(len(cells) for _, cells in self._cells(pl, ent))
        return 0  # refused by _snapshot with its reason

    def _snapshot(self, pl: Pipeline, ent: p4r.Entity) -> Part:
        """What ``ent`` reads, as references (caller holds the lock)."""
        which = ent.WhichOneof("entity")
        if which == "table_entry":
            return self._read_tables(pl, ent.table_entry)
        if which in ("counter_entry", "register_entry"):
            return self._cells(pl, ent)
        if which is None:
            raise InvalidArgument("entity", "empty entity")
        raise InvalidArgument(f"entity.{which}", "the program has no such object")

    @staticmethod
    def _cells(pl: Pipeline, ent: p4r.Entity) -> CounterCells | RegisterCells:
        """The counter or register cells ``ent`` reads, as ranges."""
        if ent.WhichOneof("entity") == "counter_entry":
            return CounterCells(codec.entry_cells(pl.counters, "counter_id", ent.counter_entry))
        re = ent.register_entry
        return RegisterCells(codec.entry_cells(pl.register_infos, "register_id", re))

    def _read_tables(self, pl: Pipeline, te: p4r.TableEntry) -> list[p4r.TableEntry]:
        """The matching entries as stored (the canonical entries reads return)."""
        infos = _tables(pl, te)
        if te.is_default_action:
            return [codec.default_entry(pl, info) for info in infos]
        if te.table_id and len(te.match):
            d = codec.decoder(pl).table_entry(te, needs_action=False)
            entry = d.info.table.get(d.key, d.priority)
            return [] if entry is None else [entry.payload]
        out: list[p4r.TableEntry] = []
        for info in infos:
            for entry in info.table:
                if te.priority and entry.priority != te.priority:
                    continue
                out.append(entry.payload)
        return out

    # ------------------------------------------------------------------ Thrift runtime
    def table_entries(self, info: TableInfo) -> list[Entry]:
        """A table's entries in the order a Read returns them (for :mod:`softswitch.runtime`'s
        dumps: taken under the lock writers hold)."""
        with self._lock:
            return list(info.table)

    def write_counter(self, ce: p4r.CounterEntry) -> None:
        """Set counter cells like a MODIFY (for :mod:`softswitch.runtime`'s counter calls)."""
        with self._lock:
            write_counter(self._need_pipeline(), p4r.Update.MODIFY, ce)

    # ------------------------------------------------------------------ stream
    def StreamChannel(
        self, request_iterator: Iterator[p4r.StreamMessageRequest], context: grpc.ServicerContext
    ) -> Iterator[p4r.StreamMessageResponse]:
        stream = Stream()
        try:
            with self.bounds.stream(context.peer(), stream):
                yield from self._serve_stream(stream, request_iterator, context)
        except SwitchError as err:
            _abort(context, err)

    def _serve_stream(
        self,
        stream: Stream,
        request_iterator: Iterator[p4r.StreamMessageRequest],
        context: grpc.ServicerContext,
    ) -> Iterator[p4r.StreamMessageResponse]:
        """One stream: a reader thread feeds requests in; responses go out from
        ``stream.out``. A stream that has not arbitrated within the limit is closed
        (DEADLINE_EXCEEDED), so idle connections cannot pin a worker thread."""
        deadline = time.monotonic() + self.limits.arbitration_timeout_s

        def reader() -> None:
            try:
                for req in request_iterator:
                    self._stream_request(stream, req)
            except Exception:  # the client went away; the RPC ends below
                pass
            finally:
                stream.out.put(None)

        context.add_callback(lambda: stream.out.put(None))
        threading.Thread(target=reader, name="p4rt-stream", daemon=True).start()
        try:
            while True:
                wait = None if stream.role is not None else deadline - time.monotonic()
                try:
                    msg = stream.out.get(timeout=max(0.0, wait) if wait is not None else None)
                except queue.Empty:
                    if stream.role is not None:
                        continue  # arbitrated just now
                    log.info("stream closed: no arbitration from %s", context.peer())
                    context.abort(
                        grpc.StatusCode.DEADLINE_EXCEEDED,
                        f"no MasterArbitrationUpdate within "
                        f"{self.limits.arbitration_timeout_s:g} s",
                    )
                    return
                if msg is None:
                    return
                if isinstance(msg, SwitchError):
                    _abort(context, msg)
                yield msg
        finally:
            self.arbiter.remove(stream)

    def _stream_request(self, stream: Stream, req: p4r.StreamMessageRequest) -> None:
        which = req.WhichOneof("update")
        if which == "arbitration":
            try:
                self._check_device(req.arbitration.device_id)
                if stream.provisional:  # beyond the stream limit: kept only as a primary
                    self.bounds.admit(stream, self.arbiter, req.arbitration)
                self.arbiter.update(stream, req.arbitration)
                log.info(
                    "arbitration: role %r election id %s",
                    req.arbitration.role.name,
                    stream.election_id,
                )
            except SwitchError as err:
                stream.out.put(err)
        elif which == "packet":
            resp = p4r.StreamMessageResponse()
            resp.error.canonical_code = code_pb2.UNIMPLEMENTED
            resp.error.message = "the program has no CPU port: packet-out is not supported"
            resp.error.packet_out.packet_out.CopyFrom(req.packet)
            stream.out.put(resp)
        elif which == "digest_ack" and self.pipeline is not None:
            self.pipeline.digests.ack(req.digest_ack.digest_id, req.digest_ack.list_id)


def _tables(pl: Pipeline, te: p4r.TableEntry) -> list[TableInfo]:
    """The tables a read names (``table_id`` 0: all of them)."""
    return (
        list(pl.tables.values())
        if te.table_id == 0
        else [codec.by_id(pl.tables, "table_id", te.table_id)]
    )


def make_server(
    service: P4RuntimeService, address: str, credentials: grpc.ServerCredentials | None = None
) -> tuple[grpc.Server, int]:
    """A gRPC server bound to ``address`` but not yet started, and the port it got;
    ``credentials``: TLS (``--grpc-server-ssl``), else plaintext."""
    # No SO_REUSEPORT: a second switch on the same address must fail, not share it.
    # The pool holds every allowed stream plus several clients' requests
    # (Limits.workers); RPCs beyond twice the pool are refused by gRPC
    # (RESOURCE_EXHAUSTED) instead of queueing without bound. Keepalive pings find
    # clients that vanished without closing their connection.
    workers = service.limits.workers
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="p4rt"),
        options=[
            ("grpc.so_reuseport", 0),
            ("grpc.keepalive_time_ms", 60_000),
            ("grpc.keepalive_timeout_ms", 20_000),
        ],
        maximum_concurrent_rpcs=2 * workers,
    )
    p4r_grpc.add_P4RuntimeServicer_to_server(service, server)
    # Write's own request deserializer (:func:`_parse_write`: malformed bytes are
    # INVALID_ARGUMENT, not gRPC's INTERNAL), registered over the generated one
    write = grpc.unary_unary_rpc_method_handler(
        service.Write,
        request_deserializer=_parse_write,
        response_serializer=p4r.WriteResponse.SerializeToString,
    )
    server.add_registered_method_handlers("p4.v1.P4Runtime", {"Write": write})
    if credentials is None:
        port = server.add_insecure_port(address)
    else:
        port = server.add_secure_port(address, credentials)
    if port == 0:
        raise InvalidArgument("grpc-server-addr", f"cannot listen on {address}")
    return server, port

"""An in-process P4Runtime servicer with BMv2's control-plane behaviour, for unit tests.

It stores pipeline, table entries and counters by ID, arbitrates by election ID,
rejects duplicate inserts / missing deletes / full tables with per-update errors
in the ``grpc-status-details-bin`` trailer like PI does. No packet processing.
Integration tests use the real soft switch process instead.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
from finsy.proto import p4r as p4runtime_pb2
from finsy.proto import p4r_grpc as p4runtime_pb2_grpc
from finsy.proto import rpc_code as code_pb2
from finsy.proto import rpc_status as status_pb2
from google.protobuf import any_pb2


def _key(te: Any) -> bytes:
    k = p4runtime_pb2.TableEntry(table_id=te.table_id, priority=te.priority)
    k.match.extend(sorted(te.match, key=lambda m: m.field_id))
    return bytes(k.SerializeToString(deterministic=True))


class FakeSwitch(p4runtime_pb2_grpc.P4RuntimeServicer):  # type: ignore[misc]
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.config: Any = None
        self.tables: dict[int, dict[bytes, Any]] = {}
        self.sizes: dict[int, int] = {}
        self.counters: dict[int, dict[int, tuple[int, int]]] = {}
        self.primary: tuple[int, int] | None = None
        self.writes = 0
        self.streams: list[Any] = []

    # -- stream
    def StreamChannel(self, request_iterator: Iterator[Any], context: Any) -> Iterator[Any]:
        for req in request_iterator:
            if req.WhichOneof("update") != "arbitration":
                continue
            eid = (req.arbitration.election_id.high, req.arbitration.election_id.low)
            with self.lock:
                if self.primary is None or eid >= self.primary:
                    self.primary = eid
                is_primary = self.primary == eid
            resp = p4runtime_pb2.StreamMessageResponse()
            resp.arbitration.CopyFrom(req.arbitration)
            resp.arbitration.status.code = code_pb2.OK if is_primary else code_pb2.ALREADY_EXISTS
            yield resp

    # -- pipeline
    def SetForwardingPipelineConfig(self, request: Any, context: Any) -> Any:
        with self.lock:
            self.config = request.config
            self.tables = {t.preamble.id: {} for t in request.config.p4info.tables}
            self.sizes = {t.preamble.id: t.size for t in request.config.p4info.tables}
            self.counters = {c.preamble.id: {} for c in request.config.p4info.counters}
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request: Any, context: Any) -> Any:
        resp = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        if self.config is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "No forwarding pipeline config")
        resp.config.CopyFrom(self.config)
        return resp

    # -- write / read
    def Write(self, request: Any, context: Any) -> Any:
        eid = (request.election_id.high, request.election_id.low)
        if eid != self.primary:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "not primary")
        errors = []
        with self.lock:
            self.writes += 1
            for u in request.updates:
                errors.append(self._apply(u))
        if any(code != code_pb2.OK for code, _ in errors):
            st = status_pb2.Status(code=code_pb2.UNKNOWN, message="write failed")
            for code, msg in errors:
                a = any_pb2.Any()
                a.Pack(p4runtime_pb2.Error(canonical_code=code, message=msg))
                st.details.append(a)
            context.set_trailing_metadata((("grpc-status-details-bin", st.SerializeToString()),))
            context.abort(grpc.StatusCode.UNKNOWN, "write failed")
        return p4runtime_pb2.WriteResponse()

    def _apply(self, u: Any) -> tuple[int, str]:
        kind = u.entity.WhichOneof("entity")
        if kind == "counter_entry":
            ce = u.entity.counter_entry
            self.counters[ce.counter_id][ce.index.index] = (
                ce.data.packet_count,
                ce.data.byte_count,
            )
            return code_pb2.OK, ""
        te = u.entity.table_entry
        table = self.tables.get(te.table_id)
        if table is None:
            return code_pb2.NOT_FOUND, f"no table {te.table_id}"
        k = _key(te)
        if u.type == p4runtime_pb2.Update.INSERT:
            if k in table:
                return code_pb2.ALREADY_EXISTS, "entry exists"
            if len(table) >= self.sizes[te.table_id]:
                return code_pb2.RESOURCE_EXHAUSTED, "table full"
            table[k] = te
        elif u.type == p4runtime_pb2.Update.MODIFY:
            if k not in table:
                return code_pb2.NOT_FOUND, "no such entry"
            table[k] = te
        elif u.type == p4runtime_pb2.Update.DELETE:
            if k not in table:
                return code_pb2.NOT_FOUND, "no such entry"
            del table[k]
        return code_pb2.OK, ""

    def Read(self, request: Any, context: Any) -> Iterator[Any]:
        resp = p4runtime_pb2.ReadResponse()
        with self.lock:
            for ent in request.entities:
                if ent.WhichOneof("entity") == "table_entry":
                    tid = ent.table_entry.table_id
                    for t, entries in self.tables.items():
                        if tid in (0, t):
                            for te in entries.values():
                                resp.entities.add().table_entry.CopyFrom(te)
                elif ent.WhichOneof("entity") == "counter_entry":
                    cid = ent.counter_entry.counter_id
                    size = next(c.size for c in self.config.p4info.counters if c.preamble.id == cid)
                    idx = (
                        [ent.counter_entry.index.index]
                        if ent.counter_entry.HasField("index")
                        else range(size)
                    )
                    for i in idx:
                        pk, by = self.counters[cid].get(i, (0, 0))
                        ce = resp.entities.add().counter_entry
                        ce.counter_id = cid
                        ce.index.index = i
                        ce.data.packet_count = pk
                        ce.data.byte_count = by
        yield resp


class FakeServer:
    """Runs a :class:`FakeSwitch` on a free localhost port; ``stop()`` kills every stream."""

    def __init__(self) -> None:
        self.switch = FakeSwitch()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self.switch, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop(grace=None).wait(5)

"""A minimal P4Runtime client for the benchmark and smoke checks.

The project's real client is ``controlplane/p4rt.py``; this one exists so the
soft switch can benchmark itself without depending on the controller package.
It looks every ID up by name in the P4Info.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import grpc
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as p4r
from p4.v1 import p4runtime_pb2_grpc as p4r_grpc

#: (field name, value) where value is int (exact), (value, prefix_len) (lpm) or
#: (low, high) (range), matching the field's kind in the P4Info.
MatchSpec = dict[str, Any]


class SimpleClient:
    """Primary client (election id 1 by default) of one device."""

    def __init__(
        self, addr: str, p4info: p4info_pb2.P4Info, device_id: int = 0, election: int = 1
    ) -> None:
        self.p4info = p4info
        self.device_id = device_id
        self.election = election
        self._tables = {t.preamble.name: t for t in p4info.tables}
        self._actions = {a.preamble.name: a for a in p4info.actions}
        self.channel = grpc.insecure_channel(addr)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self._out: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self._in: queue.Queue[Any] = queue.Queue()
        self._stream = self.stub.StreamChannel(self._requests())
        threading.Thread(target=self._reader, daemon=True).start()
        req = p4r.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.low = election
        self._out.put(req)
        reply = self._in.get(timeout=10)
        if isinstance(reply, grpc.RpcError) or reply.arbitration.status.code != 0:
            raise ConnectionError(f"arbitration failed: {reply}")

    def _requests(self) -> Iterator[p4r.StreamMessageRequest]:
        while (msg := self._out.get()) is not None:
            yield msg

    def _reader(self) -> None:
        try:
            for msg in self._stream:
                self._in.put(msg)
        except grpc.RpcError as err:
            self._in.put(err)

    def set_pipeline(self, device_config: bytes = b"") -> None:
        req = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        )
        req.election_id.low = self.election
        req.config.p4info.CopyFrom(self.p4info)
        req.config.p4_device_config = device_config
        self.stub.SetForwardingPipelineConfig(req, timeout=30)

    def entry(
        self, table: str, match: MatchSpec, action: str, params: dict[str, int], priority: int = 0
    ) -> p4r.TableEntry:
        t = self._tables[table]
        te = p4r.TableEntry(table_id=t.preamble.id, priority=priority)
        for mf in t.match_fields:
            if mf.name not in match:
                continue
            v = match[mf.name]
            fm = te.match.add(field_id=mf.id)
            n = (mf.bitwidth + 7) // 8
            if mf.match_type == p4info_pb2.MatchField.EXACT:
                fm.exact.value = v.to_bytes(n, "big")
            elif mf.match_type == p4info_pb2.MatchField.LPM:
                fm.lpm.value, fm.lpm.prefix_len = v[0].to_bytes(n, "big"), v[1]
            else:
                fm.range.low, fm.range.high = v[0].to_bytes(n, "big"), v[1].to_bytes(n, "big")
        a = self._actions[action]
        te.action.action.action_id = a.preamble.id
        for p in a.params:
            te.action.action.params.add(
                param_id=p.id, value=params[p.name].to_bytes((p.bitwidth + 7) // 8, "big")
            )
        return te

    def insert(self, entries: Sequence[p4r.TableEntry], batch: int = 1000) -> None:
        for i in range(0, len(entries), batch):
            req = p4r.WriteRequest(device_id=self.device_id)
            req.election_id.low = self.election
            for te in entries[i : i + batch]:
                req.updates.add(type=p4r.Update.INSERT).entity.table_entry.CopyFrom(te)
            self.stub.Write(req, timeout=60)

    def counter(self, name: str, index: int) -> tuple[int, int]:
        cid = next(c.preamble.id for c in self.p4info.counters if c.preamble.name == name)
        req = p4r.ReadRequest(device_id=self.device_id)
        ce = req.entities.add().counter_entry
        ce.counter_id = cid
        ce.index.index = index
        for resp in self.stub.Read(req, timeout=10):
            for e in resp.entities:
                return e.counter_entry.data.packet_count, e.counter_entry.data.byte_count
        raise LookupError(f"{name}[{index}] not returned")

    def close(self) -> None:
        self._out.put(None)
        self.channel.close()

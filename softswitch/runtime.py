"""BMv2's Thrift runtime services on the ``--thrift-port``, as simple_switch serves them.

Two services multiplexed on one port (Thrift's ``TMultiplexedProtocol``, names
``standard`` and ``simple_switch``), binary protocol, buffered transport: what
``simple_switch_CLI`` and :class:`p4client.bmruntime.RuntimeClient` speak.
Served calls:

* ``simple_switch``: ``set_egress_queue_depth/rate``, ``set_all_egress_queue_depths/rates``,
  ``set_egress_priority_queue_depth/rate`` (BMv2 1.15's per-priority calls, declared in
  :mod:`p4client.thrift_decl` since PyPI's bindings predate them), ``get_time_elapsed_us``,
  ``get_time_since_epoch_us``. Status 0 = done, 1 = a bad port/priority/value.
  ``mirroring_session_add/delete/get`` and the older ``mirroring_mapping_*`` calls
  (``simple_switch_CLI``'s ``mirroring_add``): the clone sessions P4Runtime writes too.
* ``standard``: ``bm_get_config`` (the BMv2 JSON pushed with SetForwardingPipelineConfig;
  ``{}`` before one), ``bm_get_config_md5``, ``bm_mt_get_entries``,
  ``bm_mt_get_default_entry``, ``bm_mt_get_num_entries``, ``bm_counter_read``,
  ``bm_counter_write``, ``bm_counter_reset_all``, ``bm_meter_array_set_rates``,
  ``bm_meter_set_rates``, ``bm_meter_get_rates``, ``bm_dev_mgr_show_ports`` and
  ``bm_mgmt_get_info`` (``show_ports``, ``switch_info``). Tables and counters are named as in
  the P4Info (= the BMv2 JSON's names); unknown names raise BMv2's
  ``InvalidTableOperation``/``InvalidCounterOperation`` codes.

Tables are *written* over P4Runtime only; the table-writing Thrift calls answer
with Thrift's "internal error" (the handler has no such method). A table dump
takes the P4Runtime service's lock (:meth:`P4RuntimeService.table_entries`), so both
APIs see one state, and converts the pipeline's entries (keys as the lookups hold
them, actions from the canonical entries P4Runtime stores) to BMv2's types; counter
and register cells are read as the packet thread leaves them, as P4Runtime reads them.
"""

from __future__ import annotations

import hashlib
import logging
import socketserver
import threading
import time
from pathlib import Path
from typing import Any

from bm_runtime.standard import Standard
from bm_runtime.standard import ttypes as std
from finsy.proto import p4r
from sswitch_runtime import SimpleSwitch
from sswitch_runtime import ttypes as ssw
from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TApplicationException, TMessageType
from thrift.TMultiplexedProcessor import TMultiplexedProcessor
from thrift.transport import TSocket, TTransport

from p4client.p4info import P4InfoError
from p4client.thrift_decl import PRIORITY_CALLS, I32Result
from softswitch.bm.meters import MeterArray
from softswitch.bm.pipeline import CounterInfo, Pipeline, RegisterInfo, TableInfo
from softswitch.errors import SwitchError, UsageError
from softswitch.p4rt_codec import default_entry
from softswitch.p4rt_server import P4RuntimeService
from softswitch.queueing import PriorityRateQueues
from softswitch.tables import LPM, RANGE, FieldMatch, KeyField

log = logging.getLogger("softswitch.runtime")

EMPTY_CONFIG = "{}"
_MT = std.BmMatchParamType


def bmv2_priority(p4rt_priority: int) -> int:
    """The priority BMv2 reports for an entry: PI stores ``2^31 - 1 - p`` (BMv2 serves
    the lowest first, P4Runtime the highest), and -1 for tables without priorities."""
    return (1 << 31) - 1 - p4rt_priority if p4rt_priority else -1


def _iface_up(iface: str) -> bool:
    """The kernel's view of ``iface``: ``up`` (or ``unknown``, as for some virtual links)."""
    try:
        state = Path(f"/sys/class/net/{iface}/operstate").read_text().strip()
    except OSError:
        return False
    return state in ("up", "unknown")


class RuntimeHandler:
    """The Thrift handler: queue calls on ``queues``, reads through ``service``."""

    def __init__(
        self,
        queues: PriorityRateQueues[Any],
        lock: threading.Lock,
        service: P4RuntimeService,
        ports: dict[int, str] | None = None,
        device_id: int = 0,
    ) -> None:
        self.queues = queues
        self.lock = lock
        self.service = service
        self.ports = dict(ports or {})
        self.device_id = device_id
        self.thrift_port = 0  # the bound port, set by RuntimeServer
        self.started = time.monotonic()

    # ------------------------------------------------------------ simple_switch
    def _queue(self, what: str, value: int, port: int | None, prio: int | None) -> int:
        try:
            with self.lock:
                if what == "rate":
                    self.queues.set_rate(float(value), port, prio)
                else:
                    self.queues.set_depth(int(value), port, prio)
        except UsageError as err:
            log.info("runtime: set_queue_%s refused: %s", what, err)
            return 1
        log.info("runtime: set_queue_%s %s port=%s priority=%s", what, value, port, prio)
        return 0

    def set_egress_queue_depth(self, port_num: int, depth_pkts: int) -> int:
        return self._queue("depth", depth_pkts, port_num, None)

    def set_all_egress_queue_depths(self, depth_pkts: int) -> int:
        return self._queue("depth", depth_pkts, None, None)

    def set_egress_priority_queue_depth(self, port_num: int, priority: int, depth: int) -> int:
        return self._queue("depth", depth, port_num, priority)

    def set_egress_queue_rate(self, port_num: int, rate_pps: int) -> int:
        return self._queue("rate", rate_pps, port_num, None)

    def set_all_egress_queue_rates(self, rate_pps: int) -> int:
        return self._queue("rate", rate_pps, None, None)

    def set_egress_priority_queue_rate(self, port_num: int, priority: int, rate: int) -> int:
        return self._queue("rate", rate, port_num, priority)

    def get_time_elapsed_us(self) -> int:
        return int((time.monotonic() - self.started) * 1e6)

    def get_time_since_epoch_us(self) -> int:
        return int(time.time() * 1e6)

    # ------------------------------------------------------------ standard: management
    def bm_dev_mgr_show_ports(self) -> list[std.DevMgrPortInfo]:
        """``show_ports``: the data ports as ``-i N@IFACE`` gave them; up is the kernel's
        operstate of the interface (a veth whose peer is gone reads down)."""
        return [
            std.DevMgrPortInfo(port_num=n, iface_name=i, is_up=_iface_up(i), extra={})
            for n, i in sorted(self.ports.items())
        ]

    def bm_mgmt_get_info(self) -> std.BmConfig:
        """``switch_info``: device ID and thrift port; the soft switch has no nanomsg
        notification, event-logger or debugger sockets, so those are empty."""
        return std.BmConfig(
            device_id=self.device_id,
            thrift_port=self.thrift_port,
            notifications_socket="",
            elogger_socket="",
            debugger_socket="",
        )

    # ------------------------------------------------------------ simple_switch: mirroring
    def _sessions(self) -> dict[int, int]:
        """The committed pipeline's clone sessions (one dict item operation per call)."""
        pl = self.service.pipeline
        if pl is None:
            raise ssw.InvalidMirroringOperation(ssw.MirroringOperationErrorCode.SESSION_NOT_FOUND)
        return pl.mirroring

    def mirroring_session_add(self, mirror_id: int, config: ssw.MirroringSessionConfig) -> None:
        if config.mgid or config.port is None or not 0 <= mirror_id < 1 << 15:
            log.warning("mirroring_session_add %d: only one-port sessions are supported", mirror_id)
            raise ssw.InvalidMirroringOperation(ssw.MirroringOperationErrorCode.SESSION_NOT_FOUND)
        self._sessions()[mirror_id] = config.port

    def mirroring_session_delete(self, mirror_id: int) -> None:
        if self._sessions().pop(mirror_id, None) is None:
            raise ssw.InvalidMirroringOperation(ssw.MirroringOperationErrorCode.SESSION_NOT_FOUND)

    def mirroring_session_get(self, mirror_id: int) -> ssw.MirroringSessionConfig:
        port = self._sessions().get(mirror_id)
        if port is None:
            raise ssw.InvalidMirroringOperation(ssw.MirroringOperationErrorCode.SESSION_NOT_FOUND)
        return ssw.MirroringSessionConfig(port=port)

    def mirroring_mapping_add(self, mirror_id: int, egress_port: int) -> int:
        self.mirroring_session_add(mirror_id, ssw.MirroringSessionConfig(port=egress_port))
        return 0

    def mirroring_mapping_delete(self, mirror_id: int) -> int:
        return 0 if self._sessions().pop(mirror_id, None) is not None else 1

    def mirroring_mapping_get_egress_port(self, mirror_id: int) -> int:
        return self._sessions().get(mirror_id, -1)

    # ------------------------------------------------------------ standard: config
    def bm_get_config(self) -> str:
        pl = self.service.pipeline
        if pl is None or not pl.device_config:
            return EMPTY_CONFIG
        return bytes(pl.device_config).decode("utf-8", "replace")

    def bm_get_config_md5(self) -> bytes:
        return hashlib.md5(self.bm_get_config().encode()).digest()

    # ------------------------------------------------------------ standard: tables
    def _table(self, name: str) -> tuple[Pipeline, TableInfo]:
        """The committed pipeline and its table ``name`` (full name or alias)."""
        pl = self.service.pipeline
        try:
            if pl is not None:
                return pl, pl.tables[pl.names.table(name).id]
        except P4InfoError:
            pass
        raise std.InvalidTableOperation(std.TableOperationErrorCode.INVALID_TABLE_NAME)

    @staticmethod
    def _action(pl: Pipeline, te: p4r.TableEntry) -> std.BmActionEntry:
        """An entry's action as BMv2 dumps it, from the canonical entry P4Runtime stores:
        the data in its shortest form (canonical bytes), unlike match keys (full width)."""
        if not te.action.HasField("action"):
            return std.BmActionEntry(action_type=std.BmActionEntryType.NONE)
        act = te.action.action
        ai = pl.actions[act.action_id]
        given = {p.param_id: p.value for p in act.params}
        return std.BmActionEntry(
            action_type=std.BmActionEntryType.ACTION_DATA,
            action_name=ai.name,
            action_data=[given[pid] for pid in ai.params],
        )

    def bm_mt_get_num_entries(self, cxt_id: int, table_name: str) -> int:
        return len(self._table(table_name)[1].table)

    def bm_mt_get_entries(self, cxt_id: int, table_name: str) -> list[std.BmMtEntry]:
        pl, t = self._table(table_name)
        return [
            std.BmMtEntry(
                match_key=[_match_param(f, v) for f, v in zip(t.table.fields, e.key, strict=True)],
                options=std.BmAddEntryOptions(priority=bmv2_priority(e.priority)),
                entry_handle=handle,
                action_entry=self._action(pl, e.payload),
            )
            for handle, e in enumerate(self.service.table_entries(t))
        ]

    def bm_mt_get_default_entry(self, cxt_id: int, table_name: str) -> std.BmActionEntry:
        pl, t = self._table(table_name)
        return self._action(pl, default_entry(pl, t))

    # ------------------------------------------------------------ standard: counters
    def _counter(self, name: str, index: int | None) -> CounterInfo:
        """Counter ``name`` (full name or alias), its ``index`` checked as BMv2 does."""
        pl = self.service.pipeline
        try:
            c = pl.counters[pl.names.counter(name).id] if pl is not None else None
        except P4InfoError:
            c = None
        if c is None:
            code = std.CounterOperationErrorCode.INVALID_COUNTER_NAME
            raise std.InvalidCounterOperation(code)
        if index is not None and not 0 <= index < c.size:
            raise std.InvalidCounterOperation(std.CounterOperationErrorCode.INVALID_INDEX)
        return c

    def bm_counter_read(self, cxt_id: int, counter_name: str, index: int) -> std.BmCounterValue:
        counter = self._counter(counter_name, index).counter
        return std.BmCounterValue(bytes=counter.bytes[index], packets=counter.packets[index])

    def _counter_write(self, c: CounterInfo, index: int | None, packets: int, nbytes: int) -> None:
        """Cell ``index`` (None: every cell) set as a P4Runtime counter MODIFY sets it."""
        ce = p4r.CounterEntry(counter_id=c.id)
        if index is not None:
            ce.index.index = index
        ce.data.packet_count, ce.data.byte_count = packets, nbytes
        try:
            self.service.write_counter(ce)
        except SwitchError:
            raise std.InvalidCounterOperation(std.CounterOperationErrorCode.ERROR) from None

    def bm_counter_reset_all(self, cxt_id: int, counter_name: str) -> None:
        self._counter_write(self._counter(counter_name, None), None, 0, 0)

    def bm_counter_write(
        self, cxt_id: int, counter_name: str, index: int, value: std.BmCounterValue
    ) -> None:
        c = self._counter(counter_name, index)
        self._counter_write(c, index, value.packets, value.bytes)

    # ------------------------------------------------------------ standard: registers
    def _register(self, name: str, index: int | None = None) -> RegisterInfo:
        """Register ``name`` (full name or alias), its ``index`` checked as BMv2 does."""
        pl = self.service.pipeline
        infos = pl.register_infos.values() if pl is not None else ()
        info = next((i for i in infos if name in (i.name, i.alias)), None)
        if info is None:
            code = std.RegisterOperationErrorCode.INVALID_REGISTER_NAME
            raise std.InvalidRegisterOperation(code)
        if index is not None and not 0 <= index < info.register.size:
            raise std.InvalidRegisterOperation(std.RegisterOperationErrorCode.INVALID_INDEX)
        return info

    def bm_register_read(self, cxt_id: int, register_array_name: str, idx: int) -> int:
        return _i64(self._register(register_array_name, idx).register.cells[idx])

    def bm_register_read_all(self, cxt_id: int, register_array_name: str) -> list[int]:
        return [_i64(c) for c in self._register(register_array_name).register.cells]

    def bm_register_write(
        self, cxt_id: int, register_array_name: str, index: int, value: int
    ) -> None:
        reg = self._register(register_array_name, index).register
        reg.cells[index] = value & reg.mask

    def bm_register_write_range(
        self, cxt_id: int, register_array_name: str, start_index: int, end_index: int, value: int
    ) -> None:
        """Cells ``start_index <= i < end_index`` (BMv2's ``Context::register_write_range``)."""
        reg = self._register(register_array_name).register
        if not 0 <= start_index <= end_index <= reg.size:
            raise std.InvalidRegisterOperation(std.RegisterOperationErrorCode.INVALID_INDEX)
        for i in range(start_index, end_index):
            reg.cells[i] = value & reg.mask

    def bm_register_reset(self, cxt_id: int, register_array_name: str) -> None:
        reg = self._register(register_array_name).register
        for i in range(reg.size):
            reg.cells[i] = 0

    # ------------------------------------------------------------ standard: meters
    def _meter(self, name: str, index: int | None) -> MeterArray:
        pl = self.service.pipeline
        array = next((m for m in pl.meters.values() if m.name == name), None) if pl else None
        if array is None:
            raise std.InvalidMeterOperation(std.MeterOperationErrorCode.INVALID_METER_NAME)
        if index is not None and not 0 <= index < array.size:
            raise std.InvalidMeterOperation(std.MeterOperationErrorCode.INVALID_INDEX)
        return array

    def _set_rates(self, array: MeterArray, cells: range, rates: list[Any]) -> None:
        if len(rates) != 2:
            raise std.InvalidMeterOperation(std.MeterOperationErrorCode.BAD_RATES_LIST)
        config = [(float(r.units_per_micros), int(r.burst_size)) for r in rates]
        try:
            for i in cells:
                array.set_rates(i, config)
        except SwitchError:
            raise std.InvalidMeterOperation(
                std.MeterOperationErrorCode.INVALID_INFO_RATE_VALUE
            ) from None

    def bm_meter_array_set_rates(
        self, cxt_id: int, meter_array_name: str, rates: list[Any]
    ) -> None:
        array = self._meter(meter_array_name, None)
        self._set_rates(array, range(array.size), rates)

    def bm_meter_set_rates(
        self, cxt_id: int, meter_array_name: str, index: int, rates: list[Any]
    ) -> None:
        self._set_rates(self._meter(meter_array_name, index), range(index, index + 1), rates)

    def bm_meter_get_rates(
        self, cxt_id: int, meter_array_name: str, index: int
    ) -> list[std.BmMeterRateConfig]:
        rates = self._meter(meter_array_name, index).rates(index) or []
        return [std.BmMeterRateConfig(units_per_micros=r, burst_size=b) for r, b in rates]


def _match_param(f: KeyField, value: FieldMatch) -> std.BmMatchParam:
    """One key field as BMv2 dumps it, at full width; a wildcard as the pipeline stores
    it (LPM /0, the full range, a zero mask); optional as ternary, BMv2's match for it."""

    def b(x: int) -> bytes:
        return x.to_bytes((f.bitwidth + 7) // 8, "big")

    if isinstance(value, int):  # exact
        return std.BmMatchParam(type=_MT.EXACT, exact=std.BmMatchParamExact(b(value)))
    v, w = value
    if f.kind == LPM:
        return std.BmMatchParam(type=_MT.LPM, lpm=std.BmMatchParamLPM(b(v), w))
    if f.kind == RANGE:
        return std.BmMatchParam(type=_MT.RANGE, range=std.BmMatchParamRange(b(v), b(w)))
    return std.BmMatchParam(type=_MT.TERNARY, ternary=std.BmMatchParamTernary(b(v), b(w)))


def _i64(cell: int) -> int:
    """A cell as Thrift's ``BmRegisterValue`` (i64) carries it: BMv2 reads it as int64_t."""
    return cell - (1 << 64) if cell >> 63 else cell


class _SimpleSwitchProcessor(SimpleSwitch.Processor):  # type: ignore[misc]
    """PyPI's processor plus the per-priority queue calls its bindings lack."""

    def __init__(self, handler: RuntimeHandler) -> None:
        super().__init__(handler)
        for method in PRIORITY_CALLS:
            self._processMap[method] = self._priority_processor(method)

    def _priority_processor(self, method: str) -> Any:
        cls, names = PRIORITY_CALLS[method]

        def process(_self: Any, seqid: int, iprot: Any, oprot: Any) -> None:
            args = cls()
            args.read(iprot)
            iprot.readMessageEnd()
            result: Any = I32Result()
            mtype = TMessageType.REPLY
            try:
                result.success = getattr(self._handler, method)(*(getattr(args, n) for n in names))
            except Exception:  # what the generated processors do: an internal error reply
                log.exception("runtime: %s failed", method)
                mtype = TMessageType.EXCEPTION
                result = TApplicationException(TApplicationException.INTERNAL_ERROR, method)
            oprot.writeMessageBegin(method, mtype, seqid)
            result.write(oprot)
            oprot.writeMessageEnd()
            oprot.trans.flush()

        return process


def make_processor(handler: RuntimeHandler) -> TMultiplexedProcessor:
    proc = TMultiplexedProcessor()
    proc.registerProcessor("standard", Standard.Processor(handler))
    proc.registerProcessor("simple_switch", _SimpleSwitchProcessor(handler))
    return proc


#: Thrift runtime clients served at once; more are closed at once (BMv2's CLI
#: holds one connection, the controller's client one per switch).
MAX_CONNECTIONS = 16
#: A connection is closed when its next message is not complete this long after the
#: previous one (idle, or trickling a byte at a time).
IDLE_TIMEOUT_S = 60.0
#: Longest string / container a message may declare: a declared length is
#: otherwise read (and buffered) in full before anything is checked.
MAX_STRING_BYTES = 16 << 20
MAX_CONTAINER_ITEMS = 1 << 20
#: Seconds between the server loop's checks for stop(); the loop idles in select() meanwhile.
SHUTDOWN_POLL_S = 0.02


class _DeadlineSocket(TSocket.TSocket):  # type: ignore[misc]
    """A message must arrive whole within the idle timeout of the previous one's end:
    a per-read timeout let a client sending one byte every 20 s hold a connection
    (and, 16 times over, every slot) forever."""

    deadline = float("inf")

    def read(self, sz: int) -> bytes:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TTransport.TTransportException(
                TTransport.TTransportException.TIMED_OUT, "message not complete in time"
            )
        self.handle.settimeout(left)
        data: bytes = super().read(sz)
        return data


class RuntimeServer:
    """Threaded TCP server on the thrift port; one thread per client connection, at
    most :data:`MAX_CONNECTIONS` of them, idle ones closed after ``idle_timeout``."""

    def __init__(
        self,
        port: int,
        queues: PriorityRateQueues[Any],
        lock: threading.Lock,
        service: P4RuntimeService,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT_S,
        ports: dict[int, str] | None = None,
        device_id: int = 0,
    ) -> None:
        self.handler = RuntimeHandler(queues, lock, service, ports, device_id)
        processor = make_processor(self.handler)
        pfactory = TBinaryProtocol.TBinaryProtocolAcceleratedFactory(
            string_length_limit=MAX_STRING_BYTES, container_length_limit=MAX_CONTAINER_ITEMS
        )
        slots = threading.BoundedSemaphore(max_connections)
        self.refused = 0

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock = _DeadlineSocket()
                sock.setHandle(self.request)
                trans = TTransport.TBufferedTransport(sock)
                proto = pfactory.getProtocol(trans)
                try:
                    while True:
                        sock.deadline = time.monotonic() + idle_timeout
                        processor.process(proto, proto)
                except (TTransport.TTransportException, OSError):
                    pass  # the client closed the connection, or went idle
                except Exception:  # a malformed message: drop this client, keep serving
                    log.exception("runtime: bad Thrift message; closing the connection")

        outer = self

        class Server(socketserver.ThreadingTCPServer):
            allow_reuse_address = True
            daemon_threads = True

            def process_request(self, request: Any, client_address: Any) -> None:
                if not slots.acquire(blocking=False):
                    outer.refused += 1
                    log.warning(
                        "runtime: %d connections open; refusing %s", max_connections, client_address
                    )
                    self.shutdown_request(request)
                    return
                super().process_request(request, client_address)

            def process_request_thread(self, request: Any, client_address: Any) -> None:
                try:
                    super().process_request_thread(request, client_address)
                finally:
                    slots.release()

        try:
            self._server = Server(("127.0.0.1", port), Handler)
        except OSError as exc:
            raise UsageError("thrift-port", f"cannot listen on 127.0.0.1:{port}: {exc}") from None
        self.port = int(self._server.server_address[1])
        self.handler.thrift_port = self.port
        # serve_forever notices shutdown() only between polls: a short poll makes stop()
        # (a switch's exit, every test's teardown) take milliseconds, not half a second.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": SHUTDOWN_POLL_S},
            name="runtime",
            daemon=True,
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

"""A forwarding pipeline: p4c's BMv2 JSON compiled to closures, bound to its P4Info.

``SetForwardingPipelineConfig`` hands the switch a P4Info and the
``p4_device_config`` bytes; like ``simple_switch_grpc`` those bytes are the
BMv2 JSON p4c wrote. :class:`Pipeline` compiles the JSON once (layout, parser,
checksums, controls, deparser; see the sibling modules) and binds the P4Info's
numeric IDs to the compiled tables, actions and counters, checking that both
describe the same program: every P4Info table/action/counter/register must
exist in the JSON with the same key fields, widths and parameters. Anything
the soft switch does not implement is refused here with INVALID_ARGUMENT
naming it, never ignored.

Packets run :class:`softswitch.bm.packet.PacketPath`, the one packet path:
``Pipeline.ingress`` on arrival, ``Pipeline.egress`` when the packet leaves
its priority queue (simple_switch's order, split where its queues are).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from finsy.proto import p4i as p4info_pb2
from finsy.proto import p4r

from p4client.codec import entry_to_proto
from p4client.p4info import P4Info, TableEntry
from softswitch.bm.actions import Externs, Register
from softswitch.bm.control import Controls, TableRuntime, Visible
from softswitch.bm.layout import build_layout
from softswitch.bm.meters import DirectMeter, MeterArray
from softswitch.bm.packet import PacketPath
from softswitch.bm.parser import Checksums, CompiledParser, Deparser
from softswitch.errors import InvalidArgument
from softswitch.tables import EXACT, LPM, OPTIONAL, RANGE, TERNARY, Counter, Table

_KINDS = {
    p4info_pb2.MatchField.EXACT: EXACT,
    p4info_pb2.MatchField.LPM: LPM,
    p4info_pb2.MatchField.RANGE: RANGE,
    p4info_pb2.MatchField.TERNARY: TERNARY,
    p4info_pb2.MatchField.OPTIONAL: OPTIONAL,
}
#: P4Info sections the soft switch has no implementation for.
_UNSUPPORTED = (
    "action_profiles",
    "direct_counters",
    "controller_packet_metadata",
    "value_sets",
    "externs",
)


@dataclass(frozen=True)
class ActionInfo:
    """An action as P4Info numbers it: param id -> (position in the JSON's runtime_data, width)."""

    id: int
    name: str
    params: dict[int, tuple[int, int]]
    param_names: dict[int, str]


@dataclass(frozen=True)
class TableInfo:
    """A P4Info table bound to its compiled JSON table: ``field_ids[pos]`` is the P4Info id
    of the key field ``table.fields[pos]``."""

    id: int
    name: str
    table: Table
    field_ids: tuple[int, ...]
    actions: dict[int, int]  # action id -> ActionRef scope
    const_default: bool
    is_const: bool
    default_action_id: int
    runtime: TableRuntime


@dataclass(frozen=True)
class CounterInfo:
    id: int
    name: str
    counter: Counter

    @property
    def size(self) -> int:
        return self.counter.size


@dataclass(frozen=True)
class RegisterInfo:
    """A P4Info register bound to the JSON's register array (P4Runtime and Thrift reads)."""

    id: int
    name: str
    alias: str
    bitwidth: int
    register: Register

    @property
    def size(self) -> int:
        return self.register.size


def load_json(device_config: bytes) -> dict[str, Any]:
    """The BMv2 JSON in ``p4_device_config``, or INVALID_ARGUMENT saying what is wrong."""
    if not device_config:
        raise InvalidArgument(
            "p4_device_config", "empty: the soft switch runs p4c's BMv2 JSON, like simple_switch"
        )
    try:
        j = json.loads(device_config)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgument("p4_device_config", f"not BMv2 JSON: {exc}") from None
    if not isinstance(j, dict) or "pipelines" not in j or "parsers" not in j:
        raise InvalidArgument("p4_device_config", "not BMv2 JSON (no parsers/pipelines)")
    return j


def _check_p4info(p4info: p4info_pb2.P4Info) -> None:
    for section in _UNSUPPORTED:
        items = getattr(p4info, section)
        if len(items):
            name = items[0].preamble.name if hasattr(items[0], "preamble") else section
            raise InvalidArgument(f"p4info.{section}", f"{name!r} is not supported")
    seen: dict[int, str] = {}
    for section in (
        "tables",
        "actions",
        "counters",
        "registers",
        "meters",
        "direct_meters",
        "digests",
    ):
        for obj in getattr(p4info, section):
            pid, name = obj.preamble.id, obj.preamble.name
            if pid == 0 or pid in seen:
                raise InvalidArgument(name, f"P4Info id {pid} is zero or used twice")
            seen[pid] = name


def _bind_meters(p4info: p4info_pb2.P4Info, arrays: dict[str, MeterArray]) -> dict[int, MeterArray]:
    """P4Info meter id -> the JSON's meter array (same name, size and unit)."""
    out: dict[int, MeterArray] = {}
    for m in p4info.meters:
        name = m.preamble.name
        array = arrays.get(name)
        if array is None:
            raise InvalidArgument(name, "P4Info meter is not in the BMv2 JSON")
        unit = {p4info_pb2.MeterSpec.BYTES: True, p4info_pb2.MeterSpec.PACKETS: False}.get(
            m.spec.unit
        )
        if m.size != array.size or unit != array.bytes:
            raise InvalidArgument(f"{name}.spec", "P4Info and JSON meters differ (size, unit)")
        out[m.preamble.id] = array
    return out


class Pipeline:
    """A committed (or verified) forwarding pipeline: P4Info, compiled program, state."""

    def __init__(self, p4info: p4info_pb2.P4Info, device_config: bytes, cookie: int) -> None:
        _check_p4info(p4info)
        j = load_json(device_config)
        self.p4info = p4info
        #: the P4Info indexed by name and id (the client library's index; Thrift names)
        self.names = P4Info(p4info)
        self.device_config = device_config
        self.cookie = cookie
        lay = build_layout(j)
        ext = Externs(lay, j)
        visible = {}
        for t in p4info.tables:
            kinds = []
            for mf in t.match_fields:
                kind = _KINDS.get(mf.match_type)
                if kind is None:
                    raise InvalidArgument(f"{t.preamble.name}.{mf.name}", "match kind")
                kinds.append(kind)
            if t.size <= 0:
                raise InvalidArgument(f"{t.preamble.name}.size", "must be positive")
            meters = {m.preamble.id for m in p4info.direct_meters}
            if (
                t.implementation_id
                or set(t.direct_resource_ids) - meters
                or t.idle_timeout_behavior
            ):
                raise InvalidArgument(
                    t.preamble.name, "action profiles, direct counters, idle timeout unsupported"
                )
            visible[t.preamble.name] = Visible(t.size, kinds)
        parser, checksums = CompiledParser(lay, ext, j), Checksums(lay, ext.calculations, j)
        self._controls = Controls(lay, ext, j, visible)
        #: mirroring (clone) sessions: session id -> egress port
        self.mirroring: dict[int, int] = {}
        parts = (parser, checksums, self._controls, Deparser(lay, j))
        lengths = (ext.length_reg, ext.ingress_length)
        path = PacketPath(lay, j, ext.instance_regs, lengths, self.mirroring, ext.digests, *parts)
        #: the packet path: ingress on arrival, egress when the packet leaves its queue;
        #: the clones they make wait in ``spawned`` (take them with ``take_spawned``)
        self.packets = path
        self.ingress, self.egress = path.ingress, path.egress
        self.spawned, self.take_spawned = path.spawned, path.take_spawned
        self.actions = self._bind_actions(p4info, j)
        self.tables = self._bind_tables(p4info)
        self.counters = self._bind_counters(p4info, ext)
        self.meters = _bind_meters(p4info, ext.meters)
        self.direct_meters: dict[int, DirectMeter] = {}
        tables = {t.preamble.id: t.preamble.name for t in p4info.tables}
        for dm in p4info.direct_meters:
            bound = ext.direct_meters.get(tables.get(dm.direct_table_id, ""))
            if bound is None or bound.array.name != dm.preamble.name:
                raise InvalidArgument(dm.preamble.name, "P4Info direct meter is not in the JSON")
            self.direct_meters[dm.preamble.id] = bound
        self.digests = ext.digests
        for d in p4info.digests:
            self.digests.bind(d.preamble.id, d.preamble.name)
        self.register_infos = self._bind_registers(p4info, ext)

    # ------------------------------------------------------------------ binding
    def _bind_actions(self, p4info: p4info_pb2.P4Info, j: dict[str, Any]) -> dict[int, ActionInfo]:
        by_name: dict[str, dict[str, Any]] = {}
        for a in j.get("actions", []):
            by_name.setdefault(a["name"], a)
        actions: dict[int, ActionInfo] = {}
        for a in p4info.actions:
            name = a.preamble.name
            ja = by_name.get(name)
            if ja is None:
                raise InvalidArgument(name, "P4Info action is not in the BMv2 JSON")
            order = {rd["name"]: (i, rd["bitwidth"]) for i, rd in enumerate(ja["runtime_data"])}
            if len(order) != len(a.params):
                raise InvalidArgument(f"{name}.params", "P4Info and JSON parameters differ")
            params: dict[int, tuple[int, int]] = {}
            for p in a.params:
                if order.get(p.name, (0, -1))[1] != p.bitwidth:
                    raise InvalidArgument(f"{name}.{p.name}", "not in the JSON with this width")
                params[p.id] = order[p.name]
            actions[a.preamble.id] = ActionInfo(
                a.preamble.id, name, params, {p.id: p.name for p in a.params}
            )
        return actions

    def _bind_tables(self, p4info: p4info_pb2.P4Info) -> dict[int, TableInfo]:
        tables: dict[int, TableInfo] = {}
        for t in p4info.tables:
            name = t.preamble.name
            rt = self._controls.tables[name]
            for mf, kf in zip(t.match_fields, rt.table.fields, strict=True):
                if mf.bitwidth != kf.bitwidth or mf.name != kf.name:
                    raise InvalidArgument(
                        f"{name}.{mf.name}",
                        f"P4Info {mf.name}/{mf.bitwidth} bits, JSON {kf.name}/{kf.bitwidth}",
                    )
            refs: dict[int, int] = {}
            for ref in t.action_refs:
                ai = self.actions.get(ref.id)
                if ai is None:
                    raise InvalidArgument(f"{name}.action_refs", f"unknown action id {ref.id}")
                rt.action_fn(ai.name)  # must exist in this JSON table
                refs[ref.id] = ref.scope
            missing = set(rt.names.values()) - {self.actions[i].name for i in refs}
            if missing:
                raise InvalidArgument(
                    f"{name}.action_refs", f"JSON actions {sorted(missing)} missing from the P4Info"
                )
            default_name = rt.names[rt.default_id]
            default_id = next((i for i in refs if self.actions[i].name == default_name), 0)
            info = TableInfo(
                t.preamble.id,
                name,
                rt.table,
                tuple(mf.id for mf in t.match_fields),
                refs,
                bool(t.const_default_action_id) or rt.const_default,
                t.is_const_table,
                default_id,
                rt,
            )
            for key, prio, aid, args in rt.const_entries:
                entry = rt.table.get(key, prio)
                if entry is not None:
                    name = rt.names[aid]
                    pid = next((a.id for a in self.actions.values() if a.name == name), None)
                    entry.payload = self.entry_message(info, key, prio, pid, args)
            tables[t.preamble.id] = info
        return tables

    def entry_message(
        self,
        info: TableInfo,
        key: tuple[Any, ...],
        priority: int,
        action_id: int | None,
        args: Sequence[int] = (),
        present: int = -1,
    ) -> p4r.TableEntry:
        """An entry as a Read returns it (canonical), leaving out the match fields whose
        bit in ``present`` is clear (the wildcards): the entry by names, encoded by the
        client library's encoder (:func:`p4client.codec.entry_to_proto`: fields and
        parameters in id order, canonical byte strings). For const entries, entries
        written in another form, default entries."""
        match = []
        for pos, kf in enumerate(info.table.fields):
            if present >> pos & 1:
                match.append((kf.name, key[pos][0] if kf.kind == OPTIONAL else key[pos]))
        ai = self.actions.get(action_id) if action_id is not None else None
        params = (
            () if ai is None else [(ai.param_names[i], args[p]) for i, (p, _w) in ai.params.items()]
        )
        action = None if ai is None else ai.name
        entry = TableEntry(info.name, tuple(sorted(match)), action, tuple(sorted(params)), priority)
        return entry_to_proto(self.names, entry)

    def _bind_counters(self, p4info: p4info_pb2.P4Info, ext: Externs) -> dict[int, CounterInfo]:
        counters: dict[int, CounterInfo] = {}
        for c in p4info.counters:
            counter = ext.counters.get(c.preamble.name)
            if counter is None:
                raise InvalidArgument(c.preamble.name, "P4Info counter is not in the BMv2 JSON")
            if c.size != counter.size:
                raise InvalidArgument(
                    f"{c.preamble.name}.size", f"P4Info {c.size}, JSON {counter.size}"
                )
            counters[c.preamble.id] = CounterInfo(c.preamble.id, c.preamble.name, counter)
        return counters

    def _bind_registers(self, p4info: p4info_pb2.P4Info, ext: Externs) -> dict[int, RegisterInfo]:
        infos: dict[int, RegisterInfo] = {}
        for r in p4info.registers:
            name = r.preamble.name
            reg = ext.registers.get(name)
            if reg is None:
                raise InvalidArgument(name, "P4Info register is not in the BMv2 JSON")
            width = r.type_spec.bitstring.bit.bitwidth
            if r.size != reg.size or width != reg.mask.bit_length():
                raise InvalidArgument(
                    f"{name}.size",
                    f"P4Info {r.size} x {width} bits, JSON {reg.size} x {reg.mask.bit_length()}",
                )
            infos[r.preamble.id] = RegisterInfo(r.preamble.id, name, r.preamble.alias, width, reg)
        return infos

    # ------------------------------------------------------------------ packets
    def process(self, data: bytes, ingress_port: int) -> tuple[int, int, bytearray] | None:
        """(egress port, priority, bytes) of a frame through an idle queue; None if dropped
        or recirculated (clones are discarded).

        Ingress then egress at once, with the queueing metadata of an empty queue:
        what tests and the per-packet cost benchmark run without a data plane."""
        result = self.ingress(data, ingress_port)
        if result is None:
            return None
        spec, prio, state = result
        frame = self.egress(state, spec)
        if self.spawned:
            self.spawned.clear()
        return (spec, prio, frame) if isinstance(frame, bytearray) else None

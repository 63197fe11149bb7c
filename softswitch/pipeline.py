"""Bind a P4Info to the software program, after checking they describe the same thing.

The P4Info is loaded at run time (SetForwardingPipelineConfig) and is the only
source of numeric IDs and table/counter sizes. It must name exactly what
:mod:`softswitch.program` implements, in both directions: a P4Info naming an
unknown table, action, field or extern, or lacking one the program uses, or
disagreeing on a width or match kind, is rejected with INVALID_ARGUMENT naming
the object. Sizes are taken from the P4Info, not checked, so a test can load
a shrunken P4Info to exercise RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

from dataclasses import dataclass

from finsy.proto import p4i as p4info_pb2

from softswitch import program as prog
from softswitch.errors import InvalidArgument
from softswitch.packet import DROP_PORT
from softswitch.tables import EXACT, LPM, RANGE, TERNARY, Counter, KeyField, Table

_KINDS = {
    p4info_pb2.MatchField.EXACT: EXACT,
    p4info_pb2.MatchField.LPM: LPM,
    p4info_pb2.MatchField.RANGE: RANGE,
    p4info_pb2.MatchField.TERNARY: TERNARY,
}
_UNITS = {
    p4info_pb2.CounterSpec.BYTES: "BYTES",
    p4info_pb2.CounterSpec.PACKETS: "PACKETS",
    p4info_pb2.CounterSpec.BOTH: "BOTH",
}
#: P4Info sections this program has none of; any content there is unimplemented.
_UNSUPPORTED = (
    "action_profiles",
    "direct_counters",
    "meters",
    "direct_meters",
    "controller_packet_metadata",
    "value_sets",
    "registers",
    "digests",
    "externs",
)


@dataclass(frozen=True)
class ActionInfo:
    """An action as P4Info numbers it: param id -> (position in program order, width)."""

    id: int
    name: str
    params: dict[int, tuple[int, int]]
    param_names: dict[int, str]


@dataclass(frozen=True)
class TableInfo:
    """A table bound to its P4Info: field id -> (key position, KeyField), action scopes."""

    id: int
    name: str
    table: Table
    fields: dict[int, tuple[int, KeyField]]
    field_ids: tuple[int, ...]
    actions: dict[int, int]  # action id -> ActionRef scope
    const_default: bool


@dataclass(frozen=True)
class CounterInfo:
    id: int
    name: str
    counter: Counter


def _check_sections(p4info: p4info_pb2.P4Info) -> None:
    for section in _UNSUPPORTED:
        items = getattr(p4info, section)
        if len(items):
            name = items[0].preamble.name if hasattr(items[0], "preamble") else section
            raise InvalidArgument(f"p4info.{section}", f"{name!r} is not implemented")


def _ids_unique(p4info: p4info_pb2.P4Info) -> None:
    seen: dict[int, str] = {}
    for section in ("tables", "actions", "counters"):
        for obj in getattr(p4info, section):
            pid, name = obj.preamble.id, obj.preamble.name
            if pid == 0 or pid in seen:
                raise InvalidArgument(name, f"P4Info id {pid} is zero or used twice")
            seen[pid] = name


def _bind_actions(p4info: p4info_pb2.P4Info) -> dict[int, ActionInfo]:
    actions: dict[int, ActionInfo] = {}
    names = {a.preamble.name for a in p4info.actions}
    for missing in sorted(set(prog.ACTIONS) - names):
        raise InvalidArgument(missing, "action used by the program is missing from the P4Info")
    for a in p4info.actions:
        name = a.preamble.name
        if name not in prog.ACTIONS:
            raise InvalidArgument(name, "action is not implemented by the soft switch")
        want = prog.ACTIONS[name]
        got = [(p.name, p.bitwidth) for p in a.params]
        if sorted(got) != sorted(want):
            raise InvalidArgument(f"{name}.params", f"P4Info has {got}, program has {list(want)}")
        order = {pname: i for i, (pname, _w) in enumerate(want)}
        params = {p.id: (order[p.name], p.bitwidth) for p in a.params}
        if len(params) != len(want):
            raise InvalidArgument(f"{name}.params", "parameter ids are not unique")
        actions[a.preamble.id] = ActionInfo(
            a.preamble.id, name, params, {p.id: p.name for p in a.params}
        )
    return actions


def _bind_fields(name: str, t: p4info_pb2.Table, spec: prog.TableSpec) -> list[KeyField]:
    got = []
    for mf in t.match_fields:
        kind = _KINDS.get(mf.match_type)
        if kind is None:
            raise InvalidArgument(f"{name}.{mf.name}", "match kind is not supported")
        got.append((mf.name, kind))
    if tuple(got) != spec.keys:
        raise InvalidArgument(f"{name}.match_fields", f"P4Info has {got}, program has {spec.keys}")
    fields = []
    for mf in t.match_fields:
        attr, width = prog.FIELDS[mf.name]
        if mf.bitwidth != width:
            raise InvalidArgument(
                f"{name}.{mf.name}", f"bitwidth {mf.bitwidth} but the header field has {width}"
            )
        fields.append(KeyField(mf.name, width, _KINDS[mf.match_type], attr))
    return fields


def _bind_tables(
    p4info: p4info_pb2.P4Info, actions: dict[int, ActionInfo], program: prog.EchelonProgram
) -> dict[int, TableInfo]:
    names = {t.preamble.name for t in p4info.tables}
    for missing in sorted(set(prog.TABLES) - names):
        raise InvalidArgument(missing, "table used by the program is missing from the P4Info")
    tables: dict[int, TableInfo] = {}
    by_name: dict[str, Table] = {}
    for t in p4info.tables:
        name = t.preamble.name
        spec = prog.TABLES.get(name)
        if spec is None:
            raise InvalidArgument(name, "table is not implemented by the soft switch")
        fields = _bind_fields(name, t, spec)
        refs: dict[int, int] = {}
        for ref in t.action_refs:
            if ref.id not in actions:
                raise InvalidArgument(f"{name}.action_refs", f"unknown action id {ref.id}")
            refs[ref.id] = ref.scope
        ref_names = sorted(actions[i].name for i in refs)
        if ref_names != sorted(spec.actions):
            raise InvalidArgument(
                f"{name}.action_refs", f"P4Info has {ref_names}, program has {list(spec.actions)}"
            )
        if t.implementation_id or t.direct_resource_ids or t.idle_timeout_behavior:
            raise InvalidArgument(
                name, "action profiles, direct resources, idle timeout unsupported"
            )
        if t.size <= 0:
            raise InvalidArgument(f"{name}.size", "must be positive")
        table = Table(name, tuple(fields), t.size, (program.action(spec.default), ()))
        by_name[name] = table
        tables[t.preamble.id] = TableInfo(
            t.preamble.id,
            name,
            table,
            {mf.id: (i, fields[i]) for i, mf in enumerate(t.match_fields)},
            tuple(mf.id for mf in t.match_fields),
            refs,
            bool(t.const_default_action_id),
        )
    program.bind(by_name)
    return tables


class Pipeline:
    """A committed (or verified) forwarding pipeline: P4Info, program, tables, counters."""

    def __init__(self, p4info: p4info_pb2.P4Info, device_config: bytes, cookie: int) -> None:
        _check_sections(p4info)
        _ids_unique(p4info)
        self.p4info = p4info
        self.device_config = device_config
        self.cookie = cookie
        names = {c.preamble.name for c in p4info.counters}
        for missing in sorted(set(prog.COUNTERS) - names):
            raise InvalidArgument(missing, "counter used by the program is missing from P4Info")
        self.counters: dict[int, CounterInfo] = {}
        by_name: dict[str, Counter] = {}
        for c in p4info.counters:
            name = c.preamble.name
            if name not in prog.COUNTERS:
                raise InvalidArgument(name, "counter is not implemented by the soft switch")
            unit = _UNITS.get(c.spec.unit, "UNSPECIFIED")
            if unit != prog.COUNTERS[name]:
                raise InvalidArgument(
                    f"{name}.unit", f"{unit}, program counts {prog.COUNTERS[name]}"
                )
            if c.size <= 0:
                raise InvalidArgument(f"{name}.size", "must be positive")
            counter = Counter(name, c.size)
            by_name[name] = counter
            self.counters[c.preamble.id] = CounterInfo(c.preamble.id, name, counter)
        self.program = prog.EchelonProgram(by_name)
        self.actions = _bind_actions(p4info)
        self.tables = _bind_tables(p4info, self.actions, self.program)
        self.counter_by_name = {ci.name: ci for ci in self.counters.values()}

    def process(self, data: bytearray, ingress_port: int) -> tuple[int, int, bytearray] | None:
        """(egress port, priority, bytes) for a forwarded frame, None if dropped."""
        p = self.program.process(data, ingress_port)
        if p.egress_spec == DROP_PORT:
            return None
        return p.egress_spec, p.priority, p.data

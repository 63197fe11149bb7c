"""The P4Info must name exactly what the software program implements, both directions."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from finsy.proto import p4i as p4info_pb2

from softswitch import program
from softswitch.errors import InvalidArgument
from softswitch.pipeline import Pipeline
from tests.softswitch.helpers import load_p4info

Mutation = Callable[[p4info_pb2.P4Info], None]


def test_shipped_p4info_matches_program_exactly() -> None:
    info = load_p4info()
    pl = Pipeline(info, b"", 0)
    assert {t.name for t in pl.tables.values()} == set(program.TABLES)
    assert {a.name for a in pl.actions.values()} == set(program.ACTIONS)
    assert {c.name for c in pl.counters.values()} == set(program.COUNTERS)
    for t in info.tables:
        ti = pl.tables[t.preamble.id]
        assert ti.table.size == t.size
        assert [(f.name, f.bitwidth) for f in ti.table.fields] == [
            (m.name, m.bitwidth) for m in t.match_fields
        ]
    for a in info.actions:
        want = dict(program.ACTIONS[a.preamble.name])
        assert {p.name: p.bitwidth for p in a.params} == want


def _drop(section: str, name: str) -> Mutation:
    def m(info: p4info_pb2.P4Info) -> None:
        items = getattr(info, section)
        idx = next(i for i, x in enumerate(items) if x.preamble.name == name)
        del items[idx]

    return m


def _table(name: str) -> Callable[[p4info_pb2.P4Info], p4info_pb2.Table]:
    return lambda info: next(t for t in info.tables if t.preamble.name == name)


def _set_width(info: p4info_pb2.P4Info) -> None:
    _table("EchelonIngress.ipv4_lpm")(info).match_fields[0].bitwidth = 31


def _set_kind(info: p4info_pb2.P4Info) -> None:
    _table("EchelonIngress.deadline_prio")(info).match_fields[
        1
    ].match_type = p4info_pb2.MatchField.TERNARY


def _rename_field(info: p4info_pb2.P4Info) -> None:
    _table("EchelonIngress.echelon_ids")(info).match_fields[0].name = "hdr.echelon.flow_index"


def _extra_table(info: p4info_pb2.P4Info) -> None:
    t = info.tables.add()
    t.CopyFrom(_table("EchelonIngress.echelon_ids")(info))
    t.preamble.id, t.preamble.name = 33554431, "EchelonIngress.mystery"


def _extra_action(info: p4info_pb2.P4Info) -> None:
    a = info.actions.add()
    a.preamble.id, a.preamble.name = 16777215, "EchelonIngress.teleport"


def _param_width(info: p4info_pb2.P4Info) -> None:
    a = next(a for a in info.actions if a.preamble.name == "EchelonIngress.set_echelon")
    a.params[1].bitwidth = 4


def _extra_ref(info: p4info_pb2.P4Info) -> None:
    drop = next(a for a in info.actions if a.preamble.name == "EchelonIngress.drop")
    _table("EchelonIngress.echelon_ids")(info).action_refs.add(id=drop.preamble.id)


def _register(info: p4info_pb2.P4Info) -> None:
    r = info.registers.add()
    r.preamble.id, r.preamble.name = 369098752, "EchelonIngress.reg"


def _counter_unit(info: p4info_pb2.P4Info) -> None:
    info.counters[0].spec.unit = p4info_pb2.CounterSpec.PACKETS


def _dup_id(info: p4info_pb2.P4Info) -> None:
    info.tables[1].preamble.id = info.tables[0].preamble.id


@pytest.mark.parametrize(
    ("mutate", "named"),
    [
        (_drop("tables", "EchelonIngress.deadline_prio"), "EchelonIngress.deadline_prio"),
        (_drop("counters", "EchelonIngress.special_pkts"), "EchelonIngress.special_pkts"),
        (_extra_table, "EchelonIngress.mystery"),
        (_extra_action, "EchelonIngress.teleport"),
        (_set_width, "hdr.ipv4.dstAddr"),
        (_set_kind, "EchelonIngress.deadline_prio"),
        (_rename_field, "EchelonIngress.echelon_ids"),
        (_param_width, "EchelonIngress.set_echelon"),
        (_extra_ref, "EchelonIngress.echelon_ids"),
        (_register, "EchelonIngress.reg"),
        (_counter_unit, "EchelonIngress.echelon_pkts"),
        (_dup_id, "EchelonIngress"),
    ],
)
def test_mismatching_p4info_rejected_naming_the_object(mutate: Mutation, named: str) -> None:
    info = load_p4info()
    mutate(info)
    with pytest.raises(InvalidArgument) as exc:
        Pipeline(info, b"", 0)
    assert named in str(exc.value)


def test_missing_action_rejected() -> None:
    info = load_p4info()
    victim = next(a for a in info.actions if a.preamble.name == "EchelonIngress.set_deadline_prio")
    vid = victim.preamble.id
    _drop("actions", "EchelonIngress.set_deadline_prio")(info)
    t = _table("EchelonIngress.deadline_prio")(info)
    keep = [r for r in t.action_refs if r.id != vid]
    del t.action_refs[:]
    t.action_refs.extend(keep)
    with pytest.raises(InvalidArgument, match="set_deadline_prio"):
        Pipeline(info, b"", 0)

"""Loading p4c's output: the P4Info must describe the BMv2 JSON, and what the
soft switch cannot execute is refused with INVALID_ARGUMENT naming it."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from finsy.proto import p4i as p4info_pb2

from softswitch.bm.pipeline import Pipeline
from softswitch.errors import InvalidArgument
from tests.softswitch.helpers import load_config, load_p4info

Mutation = Callable[[p4info_pb2.P4Info], None]
PROGRAM: dict[str, Any] = json.loads(load_config())


def test_shipped_outputs_bind_exactly() -> None:
    info = load_p4info()
    pl = Pipeline(info, load_config(), 0)
    assert {t.name for t in pl.tables.values()} == {t.preamble.name for t in info.tables}
    assert {c.name for c in pl.counters.values()} == {c.preamble.name for c in info.counters}
    for t in info.tables:
        ti = pl.tables[t.preamble.id]
        assert ti.table.size == t.size
        assert [(f.name, f.bitwidth) for f in ti.table.fields] == [
            (m.name, m.bitwidth) for m in t.match_fields
        ]


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


def _dup_id(info: p4info_pb2.P4Info) -> None:
    info.tables[1].preamble.id = info.tables[0].preamble.id


@pytest.mark.parametrize(
    ("mutate", "named"),
    [
        (_drop("tables", "EchelonIngress.deadline_prio"), "EchelonIngress.deadline_prio"),
        (_extra_table, "EchelonIngress.mystery"),
        (_extra_action, "EchelonIngress.teleport"),
        (_set_width, "hdr.ipv4.dstAddr"),
        (_set_kind, "EchelonIngress.deadline_prio"),
        (_rename_field, "EchelonIngress.echelon_ids"),
        (_param_width, "EchelonIngress.set_echelon"),
        (_extra_ref, "EchelonIngress.echelon_ids"),
        (_register, "EchelonIngress.reg"),
        (_dup_id, "EchelonIngress"),
    ],
)
def test_mismatching_p4info_rejected_naming_the_object(mutate: Mutation, named: str) -> None:
    info = load_p4info()
    mutate(info)
    with pytest.raises(InvalidArgument) as exc:
        Pipeline(info, load_config(), 0)
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
        Pipeline(info, load_config(), 0)


def _json_with(edit: Callable[[dict[str, Any]], None]) -> bytes:
    j = copy.deepcopy(PROGRAM)
    edit(j)
    return json.dumps(j).encode()


def _action(j: dict[str, Any], name: str) -> dict[str, Any]:
    a: dict[str, Any] = next(a for a in j["actions"] if a["name"] == name)
    return a


def _truncate(j: dict[str, Any]) -> None:
    _action(j, "EchelonIngress.drop")["primitives"].append(
        {"op": "truncate", "parameters": [{"type": "hexstr", "value": "0x40"}]}
    )


def _meter(j: dict[str, Any]) -> None:
    j["meter_arrays"] = [
        {"name": "EchelonIngress.m", "id": 0, "size": 4, "is_direct": False, "rate_count": 3}
    ]


def _signed(j: dict[str, Any]) -> None:
    j["header_types"][2]["fields"][0][2] = True


def _crc32(j: dict[str, Any]) -> None:
    j["calculations"][0]["algo"] = "crc32"


def _operator(j: dict[str, Any]) -> None:
    prim = _action(j, "EchelonIngress.ipv4_forward")["primitives"][3]
    prim["parameters"][1]["value"]["value"]["op"] = "two_comp_mod"


def _union(j: dict[str, Any]) -> None:
    j["header_unions"] = [{"name": "u", "id": 0, "union_type": "u_t", "header_ids": []}]


def _parser_op(j: dict[str, Any]) -> None:
    j["parsers"][0]["parse_states"][0]["parser_ops"].append({"op": "advance", "parameters": []})


def _direct_counter(j: dict[str, Any]) -> None:
    j["pipelines"][0]["tables"][0]["with_counters"] = True


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (_truncate, "truncate"),
        (_meter, "3 rates"),
        (_signed, "signed"),
        (_crc32, "crc32"),
        (_operator, "two_comp_mod"),
        (_union, "header unions"),
        (_parser_op, "advance"),
        (_direct_counter, "direct counters"),
    ],
)
def test_unsupported_json_refused_naming_the_construct(
    edit: Callable[[dict[str, Any]], None], named: str
) -> None:
    with pytest.raises(InvalidArgument) as exc:
        Pipeline(load_p4info(), _json_with(edit), 0)
    assert named in str(exc.value)


@pytest.mark.parametrize("config", [b"", b"{}", b"not json", b"[1, 2]"])
def test_missing_or_garbage_device_config_refused(config: bytes) -> None:
    with pytest.raises(InvalidArgument, match="p4_device_config"):
        Pipeline(load_p4info(), config, 0)

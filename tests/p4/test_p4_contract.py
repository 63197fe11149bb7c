"""The hand-written P4Info, the P4 source and the Python constants must agree.

Until real p4c output replaces p4src/build/echelon.p4info.txtpb, this is what keeps
the contract honest: change a table in the P4 source without the P4Info (or the
reverse) and this fails.
"""

from __future__ import annotations

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from echelon import constants as C
from tests.p4 import p4source as src

CONTROL = "EchelonIngress"
MATCH_KIND = {"exact": "EXACT", "lpm": "LPM", "range": "RANGE", "ternary": "TERNARY"}


@pytest.fixture(scope="module")
def p4info() -> p4info_pb2.P4Info:
    text = (src.P4SRC / "build" / "echelon.p4info.txtpb").read_text()
    return text_format.Parse(text, p4info_pb2.P4Info())


@pytest.fixture(scope="module")
def text() -> str:
    return src.source()


def test_tables_match_source(p4info: p4info_pb2.P4Info, text: str) -> None:
    widths = src.field_widths(text)
    action_names = {a.preamble.id: a.preamble.name for a in p4info.actions}
    info = {t.preamble.name: t for t in p4info.tables}
    tables = src.tables(text)
    assert {f"{CONTROL}.{t.name}" for t in tables} == set(info)
    for t in tables:
        pt = info[f"{CONTROL}.{t.name}"]
        assert pt.size == t.size, t.name
        got = [
            (m.name, p4info_pb2.MatchField.MatchType.Name(m.match_type), m.bitwidth)
            for m in pt.match_fields
        ]
        want = [(f, MATCH_KIND[k], widths[f]) for f, k in t.keys]
        assert got == want, t.name
        refs = [action_names[r.id] for r in pt.action_refs]
        assert refs == [a if a == "NoAction" else f"{CONTROL}.{a}" for a in t.actions]


def test_actions_match_source(p4info: p4info_pb2.P4Info, text: str) -> None:
    declared = src.actions(text)
    for a in p4info.actions:
        short = a.preamble.name.removeprefix(f"{CONTROL}.")
        if short == "NoAction":
            assert not a.params
            continue
        assert [(p.name, p.bitwidth) for p in a.params] == list(declared[short]), short
    assert {f"{CONTROL}.{n}" for n in declared} | {"NoAction"} == {
        a.preamble.name for a in p4info.actions
    }


def test_counters_match_source(p4info: p4info_pb2.P4Info, text: str) -> None:
    declared = src.counters(text)
    got = {c.preamble.name: (c.size, c.spec.unit) for c in p4info.counters}
    both = p4info_pb2.CounterSpec.Unit.Value("BOTH")
    assert got == {f"{CONTROL}.{n}": (size, both) for n, size in declared.items()}


def test_ids_unique_and_typed(p4info: p4info_pb2.P4Info) -> None:
    ids = [t.preamble.id for t in p4info.tables] + [a.preamble.id for a in p4info.actions]
    ids += [c.preamble.id for c in p4info.counters]
    assert len(ids) == len(set(ids))
    assert all(t.preamble.id >> 24 == 0x02 for t in p4info.tables)
    assert all(a.preamble.id >> 24 == 0x01 for a in p4info.actions)
    assert all(c.preamble.id >> 24 == 0x12 for c in p4info.counters)


def test_python_constants_match_p4(text: str) -> None:
    consts = src.constants(text)
    assert consts["ECHELON_UDP_PORT"] == C.ECHELON_UDP_PORT
    assert consts["ECHELON_VERSION"] == C.ECHELON_VERSION
    assert consts["PRIO_BEST_EFFORT"] == C.PRIO_BEST_EFFORT
    assert consts["PRIO_MAX"] == C.PRIO_MAX
    assert consts["IPV4_IHL_MIN"] == C.IPV4_IHL_MIN
    for name in (
        "PLAIN",
        "UNKNOWN",
        "SPOOFED",
        "MALFORMED",
        "NON_IPV4",
        "TTL_EXPIRED",
        "IPV4_OPTIONS",
        "COUNT",
    ):
        assert consts[f"SPECIAL_{name}"] == getattr(C, f"SPECIAL_{name}"), name
    widths = src.field_widths(text)
    assert widths["hdr.echelon.echelon_id"] == C.ECHELON_ID_BITS
    assert widths["hdr.echelon.deadline_us"] == C.DEADLINE_BITS
    header_bits = sum(w for f, w in widths.items() if f.startswith("hdr.echelon."))
    assert header_bits == 8 * C.ECHELON_HEADER_LEN


def test_wire_layer_matches_p4_header(text: str) -> None:
    from echelon.wire import Echelon, pack_header, unpack_header

    widths = src.field_widths(text)
    p4_fields = [(f.split(".")[-1], w) for f, w in widths.items() if f.startswith("hdr.echelon.")]
    assert [f.name for f in Echelon.fields_desc] == [n for n, _ in p4_fields]
    assert sum(f.sz * 8 if not hasattr(f, "size") else f.size for f in Echelon.fields_desc) == sum(
        w for _, w in p4_fields
    )
    raw = pack_header(echelon_id=0x1234, deadline_us=1500, flow_index=3, seq=42)
    assert bytes(Echelon(echelon_id=0x1234, deadline_us=1500, flow_index=3, seq=42)) == raw
    assert unpack_header(raw) == (C.ECHELON_VERSION, 0x1234, 1500, 3, 42)


def test_controller_names_every_special_counter_slot() -> None:
    from controlplane.controller import SPECIAL_NAMES

    for i, name in enumerate(SPECIAL_NAMES):
        assert getattr(C, f"SPECIAL_{name.upper()}") == i, name
    used = {v for k, v in vars(C).items() if k.startswith("SPECIAL_") and k != "SPECIAL_COUNT"}
    assert used == set(range(len(SPECIAL_NAMES)))

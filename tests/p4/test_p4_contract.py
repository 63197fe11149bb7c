"""p4c's outputs, the Python constants and the wire layer must agree.

The P4 program is the single source: its compiled P4Info and BMv2 JSON
(committed in p4src/build/, checked against p4c by test_p4_build.py) are
read here and compared with what the rest of the project assumes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from finsy.proto import p4i as p4info_pb2
from google.protobuf import text_format

from echelon import constants as C

BUILD = Path(__file__).resolve().parents[2] / "p4src" / "build"
CONTROL = "EchelonIngress"


@pytest.fixture(scope="module")
def p4info() -> p4info_pb2.P4Info:
    text = (BUILD / "echelon.p4info.txtpb").read_text()
    return text_format.Parse(text, p4info_pb2.P4Info())


@pytest.fixture(scope="module")
def program() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((BUILD / "echelon.json").read_text())
    return data


def _header_fields(program: dict[str, Any], type_name: str) -> list[tuple[str, int]]:
    ht = next(h for h in program["header_types"] if h["name"] == type_name)
    return [(f[0], f[1]) for f in ht["fields"]]


def _state(program: dict[str, Any], name: str) -> dict[str, Any]:
    states: list[dict[str, Any]] = program["parsers"][0]["parse_states"]
    return next(s for s in states if s["name"] == name)


def test_tables_are_the_documented_contract(p4info: p4info_pb2.P4Info) -> None:
    tables = {
        t.preamble.name: [
            (m.name, m.bitwidth, p4info_pb2.MatchField.MatchType.Name(m.match_type))
            for m in t.match_fields
        ]
        for t in p4info.tables
    }
    assert tables == {
        f"{CONTROL}.ipv4_lpm": [("hdr.ipv4.dstAddr", 32, "LPM")],
        f"{CONTROL}.echelon_classify": [
            ("hdr.ipv4.srcAddr", 32, "EXACT"),
            ("hdr.echelon.echelon_id", C.ECHELON_ID_BITS, "EXACT"),
        ],
        f"{CONTROL}.echelon_ids": [("hdr.echelon.echelon_id", C.ECHELON_ID_BITS, "EXACT")],
        f"{CONTROL}.deadline_prio": [
            ("meta.class_id", C.CLASS_ID_BITS, "EXACT"),
            ("hdr.echelon.deadline_us", C.DEADLINE_BITS, "RANGE"),
        ],
    }


def test_counters_and_class_slots(p4info: p4info_pb2.P4Info) -> None:
    got = {c.preamble.name: (c.size, c.spec.unit) for c in p4info.counters}
    both = p4info_pb2.CounterSpec.Unit.Value("BOTH")
    assert got == {
        f"{CONTROL}.echelon_pkts": (C.ECHELON_CLASSES, both),
        f"{CONTROL}.unprioritized_pkts": (C.UNPRIO_COUNT, both),
    }
    # class_id cannot exceed the echelon_pkts counter: its width is the counter's size.
    set_echelon = next(a for a in p4info.actions if a.preamble.name.endswith("set_echelon"))
    widths = {p.name: p.bitwidth for p in set_echelon.params}
    assert 1 << widths["class_id"] == C.ECHELON_CLASSES
    assert widths["prio"] == 3 and C.NUM_PRIORITIES == (1 << 3)
    assert len(C.UNPRIO_NAMES) <= C.UNPRIO_COUNT


def test_queue_telemetry_registers(p4info: p4info_pb2.P4Info) -> None:
    """Three registers, a 32-bit cell per (port, priority): what controlplane/queues.py reads."""
    got = {r.preamble.name: (r.size, r.type_spec.bitstring.bit.bitwidth) for r in p4info.registers}
    assert got == {
        name: (C.QUEUE_TELEMETRY_CELLS, 32)
        for name in (C.REG_QUEUE_DEPTH, C.REG_QUEUE_DEPTH_MAX, C.REG_QUEUE_SOJOURN)
    }


def test_parser_constants_match_python(program: dict[str, Any]) -> None:
    udp = _state(program, "parse_udp")
    assert int(udp["transitions"][0]["value"], 16) == C.ECHELON_UDP_PORT
    ipv4 = _state(program, "parse_ipv4")
    keys = [k["value"][1] for k in ipv4["transition_key"]]
    assert keys == ["fragOffset", "ihl", "protocol"]
    # (fragOffset 0, ihl, UDP) with each key padded to whole bytes: 2 + 1 + 1 bytes.
    assert int(ipv4["transitions"][0]["value"], 16) == (C.IPV4_IHL_MIN << 8) | 17
    verify = json.dumps(_state(program, "parse_echelon")["parser_ops"])
    assert f'"0x{C.ECHELON_VERSION:02x}"' in verify
    errors = dict(program["errors"])
    assert "EchelonBadVersion" in errors


def test_wire_layer_matches_p4_header(program: dict[str, Any]) -> None:
    from echelon.wire import Echelon, pack_header, unpack_header

    p4_fields = _header_fields(program, "echelon_t")
    assert [f.name for f in Echelon.fields_desc] == [n for n, _ in p4_fields]
    assert sum(w for _, w in p4_fields) == 8 * C.ECHELON_HEADER_LEN
    widths = dict(p4_fields)
    assert widths["echelon_id"] == C.ECHELON_ID_BITS
    assert widths["deadline_us"] == C.DEADLINE_BITS
    raw = pack_header(echelon_id=0x1234, deadline_us=1500, flow_index=3, seq=42)
    assert bytes(Echelon(echelon_id=0x1234, deadline_us=1500, flow_index=3, seq=42)) == raw
    assert unpack_header(raw) == (C.ECHELON_VERSION, 0x1234, 1500, 3, 42)


def test_ids_unique_and_typed(p4info: p4info_pb2.P4Info) -> None:
    ids = [t.preamble.id for t in p4info.tables] + [a.preamble.id for a in p4info.actions]
    ids += [c.preamble.id for c in p4info.counters]
    assert len(ids) == len(set(ids))
    assert all(t.preamble.id >> 24 == 0x02 for t in p4info.tables)
    assert all(a.preamble.id >> 24 == 0x01 for a in p4info.actions)
    assert all(c.preamble.id >> 24 == 0x12 for c in p4info.counters)


def test_unprio_slots_are_the_counted_constants(program: dict[str, Any]) -> None:
    """Every index the program counts into unprioritized_pkts is a named UNPRIO_ slot."""
    counted = set()
    for a in program["actions"]:
        for p in a["primitives"]:
            if p["op"] == "count" and p["parameters"][0]["value"].endswith("unprioritized_pkts"):
                counted.add(int(p["parameters"][1]["value"], 16))
    named = {v for k, v in vars(C).items() if k.startswith("UNPRIO_") and isinstance(v, int)}
    named.discard(C.UNPRIO_COUNT)
    assert counted == named == set(range(len(C.UNPRIO_NAMES)))

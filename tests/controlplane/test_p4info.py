"""P4Info look-ups, canonical encoding and the entry builder (pure, no switch)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from p4client.codec import entry_from_proto, entry_to_proto
from p4client.p4info import P4Info, P4InfoError, decode, encode

P4INFO = Path(__file__).resolve().parents[2] / "p4src" / "build" / "echelon.p4info.txtpb"


@pytest.fixture(scope="module")
def info() -> P4Info:
    return P4Info.load(P4INFO)


def test_lookup_by_name_and_alias(info: P4Info) -> None:
    full = info.table("EchelonIngress.ipv4_lpm")
    assert info.table("ipv4_lpm") is full
    assert full.fields["hdr.ipv4.dstAddr"].kind == "LPM"
    assert info.table("deadline_prio").needs_priority
    assert not info.table("echelon_classify").needs_priority
    assert info.counter("echelon_pkts").size == 1024
    assert info.action("set_echelon").params["prio"].bitwidth == 3
    assert info.name_of(full.id) == "EchelonIngress.ipv4_lpm"


def test_unknown_names_raise_naming_field(info: P4Info) -> None:
    with pytest.raises(P4InfoError) as ei:
        info.table("nope")
    assert ei.value.field == "table"
    with pytest.raises(P4InfoError) as ei:
        info.table_entry("ipv4_lpm", {"hdr.ipv4.srcAddr": 1}, "drop")
    assert ei.value.field == "match.hdr.ipv4.srcAddr"


@given(st.integers(min_value=0, max_value=(1 << 48) - 1))
def test_encode_is_canonical_and_round_trips(n: int) -> None:
    b = encode(n, 48, "x")
    assert decode(b) == n
    assert len(b) == max(1, (n.bit_length() + 7) // 8)
    assert b[0] != 0 or len(b) == 1


def test_encode_width_and_string_forms() -> None:
    assert encode("10.0.0.1", 32, "ip") == bytes([10, 0, 0, 1])
    assert decode(encode("00:00:0a:00:00:01", 48, "mac")) == 0x0A000001
    with pytest.raises(P4InfoError, match="does not fit in 3 bits") as ei:
        encode(8, 3, "params.prio")
    assert ei.value.field == "params.prio"
    with pytest.raises(P4InfoError):
        encode(-1, 8, "x")
    with pytest.raises(P4InfoError):
        encode("10.0.0.300", 32, "ip")


def test_entry_builder_normalises_and_validates(info: P4Info) -> None:
    e = info.table_entry(
        "ipv4_lpm",
        {"hdr.ipv4.dstAddr": ("10.0.0.77", 24)},
        "ipv4_forward",
        {"dstAddr": "00:00:0a:00:00:01", "port": 3},
    )
    assert e.table == "EchelonIngress.ipv4_lpm"
    assert e.match_dict() == {"hdr.ipv4.dstAddr": (0x0A000000, 24)}  # host bits cleared
    assert e.params_dict() == {"dstAddr": 0x0A000001, "port": 3}
    with pytest.raises(P4InfoError) as ei:
        info.table_entry(
            "deadline_prio",
            {"meta.class_id": 1, "hdr.echelon.deadline_us": (0, 9)},
            "set_deadline_prio",
            {"prio": 3},
        )
    assert ei.value.field == "priority"
    with pytest.raises(P4InfoError) as ei:
        info.table_entry("echelon_classify", {"hdr.ipv4.srcAddr": 1}, "NoAction")
    assert ei.value.field == "match.hdr.echelon.echelon_id"
    with pytest.raises(P4InfoError) as ei:
        info.table_entry("echelon_ids", {"hdr.echelon.echelon_id": 1}, "set_echelon")
    assert ei.value.field == "action"
    with pytest.raises(P4InfoError) as ei:
        info.table_entry(
            "echelon_classify",
            {"hdr.ipv4.srcAddr": 1, "hdr.echelon.echelon_id": 2},
            "set_echelon",
            {"class_id": 1},
        )
    assert ei.value.field == "params.prio"


def test_proto_round_trip(info: P4Info) -> None:
    entries = [
        info.table_entry(
            "deadline_prio",
            {"meta.class_id": 7, "hdr.echelon.deadline_us": (5, 900)},
            "set_deadline_prio",
            {"prio": 6},
            priority=10,
        ),
        info.table_entry(
            "echelon_classify",
            {"hdr.ipv4.srcAddr": "10.0.0.1", "hdr.echelon.echelon_id": 0},
            "set_echelon",
            {"class_id": 0, "prio": 7},
        ),
        info.table_entry("ipv4_lpm", {"hdr.ipv4.dstAddr": "10.0.0.2"}, "drop"),
    ]
    for e in entries:
        msg = entry_to_proto(info, e)
        # zero encodes as one byte (canonical), never as empty bytes
        assert all(len(m.exact.value) >= 1 for m in msg.match if m.HasField("exact"))
        assert entry_from_proto(info, msg) == e


def test_full_range_is_wildcard(info: P4Info) -> None:
    e = info.table_entry(
        "deadline_prio",
        {"meta.class_id": 1, "hdr.echelon.deadline_us": (0, (1 << 32) - 1)},
        "set_deadline_prio",
        {"prio": 1},
        priority=1,
    )
    assert "hdr.echelon.deadline_us" not in e.match_dict()


def test_cookie_depends_on_content(info: P4Info) -> None:
    assert info.cookie() == P4Info.load(P4INFO).cookie()
    assert info.cookie(b"x") != info.cookie()

"""The wire decoder against protobuf's own encoder: every attribute kind, packed and
unpacked repeated fields, and malformed bytes."""

from __future__ import annotations

import math

import pytest

from echelon.chakra.protobuf import WireError, attribute, fields, packed_varints, varint
from tests.core.chakra_traces import CLASSES

CASES = [
    ("double", 2.5), ("float", 0.5), ("int32", -7), ("int64", -(2**40)), ("uint32", 2**32 - 1),
    ("uint64", 2**64 - 1), ("sint32", -9), ("sint64", -(2**50)), ("fixed32", 2**31 + 5),
    ("fixed64", 2**63 + 7), ("sfixed32", -12), ("sfixed64", -(2**60)), ("bool", True),
    ("string", "ncclKernel_AllReduce µs"), ("bytes", b"\x00\xff"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "value"), CASES)
def test_every_scalar_attribute_kind_decodes_as_protobuf_encoded_it(
    kind: str, value: object
) -> None:
    a = CLASSES["AttributeProto"](name="k")
    setattr(a, f"{kind}_val", value)
    assert attribute(a.SerializeToString(), 0) == ("k", value)


@pytest.mark.parametrize(("kind", "value"), CASES)
def test_every_list_attribute_kind_decodes(kind: str, value: object) -> None:
    a = CLASSES["AttributeProto"](name="k")
    getattr(a, f"{kind}_list").values.extend([value, value])
    name, got = attribute(a.SerializeToString(), 0)
    assert name == "k"
    assert got == (value, value)


def test_unpacked_repeated_values_decode_like_packed_ones() -> None:
    # IntList{values: 3, values: 300} written unpacked (tag 0x08 per element)
    inner = bytes([0x08, 3, 0x08, 0xAC, 0x02])
    attr = bytes([0x0A, 1]) + b"k" + bytes([0x52, len(inner)]) + inner  # field 10: int64_list
    assert attribute(attr, 0) == ("k", (3, 300))


def test_varints_and_unknown_fields() -> None:
    assert varint(bytes([0xAC, 0x02]), 0, 2) == (300, 2)
    assert packed_varints(bytes([1, 0xFF, 0x01])) == [1, 255]
    # an unknown field 15 (varint) and 16 (fixed32) are returned, not refused
    got = fields(bytes([0x78, 5, 0x85, 0x01, 1, 0, 0, 0]), 0, 8)
    assert [(n, wt) for n, wt, _, _ in got] == [(15, 0), (16, 5)]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (bytes([0x80]), "ends inside a varint"),
        (bytes([0xFF] * 11), "longer than 10 bytes"),
        (bytes([0x0A, 5, 1]), "claims 5 bytes, 1 left"),
        (bytes([0x0B]), "wire type 3"),
        (bytes([0x09, 1, 2]), "ends inside a 64-bit value"),
        (bytes([0x00, 1]), "field number 0"),
    ],
)
def test_malformed_bytes_are_wire_errors(data: bytes, message: str) -> None:
    with pytest.raises(WireError, match=message):
        fields(data, 0, len(data))


def test_a_nan_double_survives() -> None:
    a = CLASSES["AttributeProto"](name="x", double_val=math.nan)
    got = attribute(a.SerializeToString(), 0)[1]
    assert isinstance(got, float) and math.isnan(got)

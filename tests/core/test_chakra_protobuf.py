"""The schema's classes and :func:`attributes` on bytes protobuf's encoder wrote: every
attribute kind, packed and unpacked repeated fields, unknown fields, malformed bytes."""

from __future__ import annotations

import math

import pytest

from echelon.chakra.protobuf import CLASSES, DecodeError, attributes

CASES = [
    ("double", 2.5), ("float", 0.5), ("int32", -7), ("int64", -(2**40)), ("uint32", 2**32 - 1),
    ("uint64", 2**64 - 1), ("sint32", -9), ("sint64", -(2**50)), ("fixed32", 2**31 + 5),
    ("fixed64", 2**63 + 7), ("sfixed32", -12), ("sfixed64", -(2**60)), ("bool", True),
    ("string", "ncclKernel_AllReduce µs"), ("bytes", b"\x00\xff"),
]  # fmt: skip
Attr = CLASSES["AttributeProto"]


def _read(data: bytes) -> dict[str, object]:
    return attributes([Attr.FromString(data)])


@pytest.mark.parametrize(("kind", "value"), CASES)
def test_every_scalar_attribute_kind_decodes_as_protobuf_encoded_it(
    kind: str, value: object
) -> None:
    a = Attr(name="k")
    setattr(a, f"{kind}_val", value)
    assert _read(a.SerializeToString()) == {"k": value}


@pytest.mark.parametrize(("kind", "value"), CASES)
def test_every_list_attribute_kind_decodes(kind: str, value: object) -> None:
    a = Attr(name="k")
    getattr(a, f"{kind}_list").values.extend([value, value])
    assert _read(a.SerializeToString()) == {"k": (value, value)}


def test_unpacked_repeated_values_decode_like_packed_ones() -> None:
    # IntList{values: 3, values: 300} written unpacked (tag 0x08 per element)
    inner = bytes([0x08, 3, 0x08, 0xAC, 0x02])
    attr = bytes([0x0A, 1]) + b"k" + bytes([0x52, len(inner)]) + inner  # field 10: int64_list
    assert _read(attr) == {"k": (3, 300)}


def test_unknown_fields_are_skipped_and_an_unset_value_left_out() -> None:
    # name "k", then an unknown field 99 (varint) and no value of the oneof
    assert _read(bytes([0x0A, 1]) + b"k" + bytes([0x98, 0x06, 5])) == {}
    node = CLASSES["Node"].FromString(bytes([0x08, 7, 0xF8, 0x06, 1]))  # id 7, field 111
    assert node.id == 7


@pytest.mark.parametrize(
    "data",
    [bytes([0x80]), bytes([0x0A, 5, 1]), bytes([0x0B]), bytes([0x09, 1, 2]), bytes([0x00, 1])],
)
def test_malformed_bytes_are_decode_errors(data: bytes) -> None:
    with pytest.raises(DecodeError):
        CLASSES["Node"].FromString(data)


def test_a_nan_double_survives() -> None:
    got = _read(Attr(name="x", double_val=math.nan).SerializeToString())["x"]
    assert isinstance(got, float) and math.isnan(got)

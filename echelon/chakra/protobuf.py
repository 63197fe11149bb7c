"""A small protobuf wire-format decoder for Chakra's ``et_def.proto`` messages.

Why hand-written rather than generated code: the core imports no other project
package and should not need ``protoc`` or a generated module; the messages a
reader needs (``GlobalMetadata``, ``Node``, ``AttributeProto`` and its list
messages) are a handful of fields. The decoder follows the protobuf encoding
rules (https://protobuf.dev/programming-guides/encoding/): varints, zigzag for
``sint*``, little-endian fixed-width values, length-delimited strings and
sub-messages, packed *and* unpacked repeated scalars, and unknown fields skipped
(a newer schema's extra fields do not break an older reader). Groups (wire types
3/4) are not used by proto3 and are refused.

Field numbers are those of ``et_def.proto`` (``schema/protobuf/et_def.proto`` of
mlcommons/chakra; a copy ships with the traces). Every decoding failure raises
:class:`WireError` with the byte position, which the trace reader turns into an
error naming the file, node and field.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

#: Wire types.
VARINT, I64, LEN, I32 = 0, 1, 2, 5

_DOUBLE = struct.Struct("<d")
_FLOAT = struct.Struct("<f")
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_S64 = struct.Struct("<q")
_S32 = struct.Struct("<i")

AttrValue = bool | int | float | str | bytes | tuple[bool | int | float | str | bytes, ...]
"""The value of one ``AttributeProto`` (its ``oneof value``); lists become tuples."""


class WireError(ValueError):
    """Malformed protobuf bytes; ``pos`` is the offset in the buffer being decoded."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.pos = pos


def varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it (at most 10 bytes)."""
    if pos >= end:
        raise WireError("ends inside a varint", pos)
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    p = pos + 1
    while True:
        if p >= end:
            raise WireError("ends inside a varint", pos)
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, p
        shift += 7
        if shift >= 70:
            raise WireError("varint longer than 10 bytes", pos)


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _signed32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _zigzag(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def fields(buf: bytes, start: int, end: int) -> list[tuple[int, int, int | bytes, int]]:
    """The fields of the message in ``buf[start:end]``: ``(number, wire type, value, pos)``.

    ``value`` is the varint for wire type 0, the raw little-endian integer for
    fixed-width types, and the bytes for length-delimited fields."""
    out: list[tuple[int, int, int | bytes, int]] = []
    pos = start
    while pos < end:
        at = pos
        key, pos = varint(buf, pos, end)
        number, wt = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0", at)
        if wt == VARINT:
            value, pos = varint(buf, pos, end)
            out.append((number, wt, value, at))
        elif wt == LEN:
            n, pos = varint(buf, pos, end)
            if pos + n > end:
                raise WireError(f"field {number} claims {n} bytes, {end - pos} left", at)
            out.append((number, wt, buf[pos : pos + n], at))
            pos += n
        elif wt == I64:
            if pos + 8 > end:
                raise WireError(f"field {number} ends inside a 64-bit value", at)
            out.append((number, wt, _U64.unpack_from(buf, pos)[0], at))
            pos += 8
        elif wt == I32:
            if pos + 4 > end:
                raise WireError(f"field {number} ends inside a 32-bit value", at)
            out.append((number, wt, _U32.unpack_from(buf, pos)[0], at))
            pos += 4
        else:
            raise WireError(f"field {number} has wire type {wt} (groups/invalid)", at)
    return out


def packed_varints(data: bytes) -> list[int]:
    """A packed ``repeated`` varint field's values."""
    out: list[int] = []
    pos, end = 0, len(data)
    while pos < end:
        v, pos = varint(data, pos, end)
        out.append(v)
    return out


def text(value: int | bytes, pos: int) -> str:
    """A ``string`` field (UTF-8)."""
    if not isinstance(value, bytes):
        raise WireError("a string field has a non-length-delimited wire type", pos)
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise WireError("a string field is not valid UTF-8", pos) from None


def repeated_u64(acc: list[int], wt: int, value: int | bytes) -> None:
    """Append a ``repeated uint64`` field's values (packed or one unpacked element)."""
    if isinstance(value, bytes):
        acc.extend(packed_varints(value))
    elif wt == VARINT:
        acc.append(value)


# --------------------------------------------------------------- AttributeProto

Scalar = bool | int | float | str | bytes
_Decode = Callable[[int | bytes, int], Scalar]


def _need_int(value: int | bytes, pos: int) -> int:
    if isinstance(value, bytes):
        raise WireError("a numeric attribute value is length-delimited", pos)
    return value


def _d(value: int | bytes, pos: int) -> Scalar:
    return float(_DOUBLE.unpack(_U64.pack(_need_int(value, pos)))[0])


def _f(value: int | bytes, pos: int) -> Scalar:
    return float(_FLOAT.unpack(_U32.pack(_need_int(value, pos)))[0])


def _i32(value: int | bytes, pos: int) -> Scalar:
    return _signed32(_need_int(value, pos))


def _i64(value: int | bytes, pos: int) -> Scalar:
    return _signed64(_need_int(value, pos))


def _u(value: int | bytes, pos: int) -> Scalar:
    return _need_int(value, pos)


def _u32(value: int | bytes, pos: int) -> Scalar:
    return _need_int(value, pos) & 0xFFFFFFFF


def _zz(value: int | bytes, pos: int) -> Scalar:
    return _zigzag(_need_int(value, pos))


def _sf32(value: int | bytes, pos: int) -> Scalar:
    return _S32.unpack(_U32.pack(_need_int(value, pos)))[0]  # type: ignore[no-any-return]


def _sf64(value: int | bytes, pos: int) -> Scalar:
    return _S64.unpack(_U64.pack(_need_int(value, pos)))[0]  # type: ignore[no-any-return]


def _b(value: int | bytes, pos: int) -> Scalar:
    return bool(_need_int(value, pos))


def _s(value: int | bytes, pos: int) -> Scalar:
    return text(value, pos)


def _raw(value: int | bytes, pos: int) -> Scalar:
    if not isinstance(value, bytes):
        raise WireError("a bytes attribute value is not length-delimited", pos)
    return value


@dataclass(frozen=True)
class _Kind:
    decode: _Decode
    packed_wt: int | None  # wire type of one packed element; None: not packable


#: ``oneof value`` scalar field number -> its decoder; the list message is number + 1.
_SCALARS: dict[int, _Kind] = {
    3: _Kind(_d, I64),  # double
    5: _Kind(_f, I32),  # float
    7: _Kind(_i32, VARINT),  # int32
    9: _Kind(_i64, VARINT),  # int64
    11: _Kind(_u32, VARINT),  # uint32
    13: _Kind(_u, VARINT),  # uint64
    15: _Kind(_zz, VARINT),  # sint32
    17: _Kind(_zz, VARINT),  # sint64
    19: _Kind(_u, I32),  # fixed32
    21: _Kind(_u, I64),  # fixed64
    23: _Kind(_sf32, I32),  # sfixed32
    25: _Kind(_sf64, I64),  # sfixed64
    27: _Kind(_b, VARINT),  # bool
    29: _Kind(_s, None),  # string
    31: _Kind(_raw, None),  # bytes
}


def _list(kind: _Kind, data: bytes, pos: int) -> tuple[Scalar, ...]:
    """A ``XxxList`` message: ``repeated values = 1``, packed or not."""
    out: list[Scalar] = []
    for number, wt, value, _ in fields(data, 0, len(data)):
        if number != 1:
            continue
        if kind.packed_wt is not None and wt == LEN and isinstance(value, bytes):
            out.extend(kind.decode(v, pos) for v in _unpack(kind.packed_wt, value, pos))
        else:
            out.append(kind.decode(value, pos))
    return tuple(out)


def _unpack(wt: int, data: bytes, pos: int) -> list[int]:
    if wt == VARINT:
        return packed_varints(data)
    width, fmt = (8, _U64) if wt == I64 else (4, _U32)
    if len(data) % width:
        raise WireError(f"packed list of {len(data)} bytes is not a multiple of {width}", pos)
    return [fmt.unpack_from(data, i)[0] for i in range(0, len(data), width)]


def attribute(data: bytes, pos: int) -> tuple[str, AttrValue | None]:
    """An ``AttributeProto``: its name and value (None when the oneof is unset)."""
    name = ""
    value: AttrValue | None = None
    for number, wt, raw, at in fields(data, 0, len(data)):
        if number == 1:
            name = text(raw, pos + at)
        elif number in _SCALARS:
            kind = _SCALARS[number]
            if kind.packed_wt is not None and wt == LEN:
                raise WireError(f"attribute value field {number} is length-delimited", pos + at)
            value = kind.decode(raw, pos + at)
        elif number - 1 in _SCALARS and 4 <= number <= 32:
            if not isinstance(raw, bytes):
                raise WireError(f"attribute list field {number} is not a message", pos + at)
            value = _list(_SCALARS[number - 1], raw, pos + at)
    return name, value

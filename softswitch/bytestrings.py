"""P4Runtime byte strings <-> integers: decoded by the codec, encoded by the pipeline's entries.

A request may use the canonical form (no leading zero bytes) or a form padded
with leading zeros up to ``ceil(bitwidth / 8)`` bytes; both mean the same value.
Empty strings, strings longer than ``ceil(bitwidth / 8)`` bytes and values that
do not fit the bit width are INVALID_ARGUMENT. Reads always return canonical
byte strings. A module of its own so that :mod:`softswitch.bm.pipeline` and
:mod:`softswitch.p4rt_codec` (which imports the pipeline) share it.
"""

from __future__ import annotations

from softswitch.errors import InvalidArgument


def decode_bytes(field: str, data: bytes, bitwidth: int) -> int:
    """The integer a P4Runtime byte string encodes, checked against ``bitwidth``.

    The codec inlines this test on its hot path (``0 < len(data) <= ceil(bitwidth / 8)``
    and no bit above ``bitwidth``) and calls :func:`bytes_error` when it fails."""
    value = int.from_bytes(data, "big")
    if not 0 < len(data) <= (bitwidth + 7) // 8 or value >> bitwidth:
        raise bytes_error(field, data, bitwidth)
    return value


def bytes_error(field: str, data: bytes, bitwidth: int) -> InvalidArgument:
    """Why ``data`` is not a valid byte string for ``bitwidth`` (it must not be one)."""
    if not data:
        return InvalidArgument(field, "empty byte string")
    if len(data) > (bitwidth + 7) // 8:
        return InvalidArgument(field, f"{len(data)} bytes is too long for bitwidth {bitwidth}")
    value = int.from_bytes(data, "big")
    return InvalidArgument(field, f"value {value} does not fit in {bitwidth} bits")


def encode_bytes(value: int) -> bytes:
    """Canonical byte string: no leading zero bytes, at least one byte."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")

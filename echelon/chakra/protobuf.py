"""Chakra's ``et_def.proto`` messages as protobuf classes, decoded by the protobuf library.

Why classes built at run time from a descriptor rather than generated code: the
core should not need ``protoc`` or a generated module checked in, and the
messages a reader needs (``GlobalMetadata``, ``Node``, ``AttributeProto`` and its
list messages, ``IOInfo``) are a handful of fields. Decoding is protobuf's own
(the ``upb`` runtime ``requirements.txt`` pins): varints, zigzag, packed and
unpacked repeated fields, and unknown fields skipped, so a newer schema's extra
fields do not break an older reader. Malformed bytes raise protobuf's
``DecodeError``, which the trace reader turns into an error naming the file and
the record.

Field numbers and types are those of ``et_def.proto`` (``schema/protobuf/et_def.proto``
of mlcommons/chakra; a copy ships with the traces), except that ``Node.type`` is read
as an ``int32`` (an enum on the wire is a varint) so that an unknown node type
reaches the reader's check and its error message instead of being dropped.
The tests encode their traces with these same classes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

__all__ = ["CLASSES", "SCALARS", "AttrValue", "DecodeError", "attributes"]

AttrValue = bool | int | float | str | bytes | tuple[bool | int | float | str | bytes, ...]
"""The value of one ``AttributeProto`` (its ``oneof value``); lists become tuples."""

_F = descriptor_pb2.FieldDescriptorProto
#: ``AttributeProto``'s scalar kinds in field-number order: ``<kind>_val`` is field
#: ``3 + 2 i``, ``<kind>_list`` (a message ``repeated <kind> values = 1``) the next.
SCALARS: dict[str, int] = {
    "double": _F.TYPE_DOUBLE,
    "float": _F.TYPE_FLOAT,
    "int32": _F.TYPE_INT32,
    "int64": _F.TYPE_INT64,
    "uint32": _F.TYPE_UINT32,
    "uint64": _F.TYPE_UINT64,
    "sint32": _F.TYPE_SINT32,
    "sint64": _F.TYPE_SINT64,
    "fixed32": _F.TYPE_FIXED32,
    "fixed64": _F.TYPE_FIXED64,
    "sfixed32": _F.TYPE_SFIXED32,
    "sfixed64": _F.TYPE_SFIXED64,
    "bool": _F.TYPE_BOOL,
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
}
_PACKAGE = "ChakraProtoMsg"


def _field(msg: Any, name: str, number: int, ftype: int, repeated: bool = False,
           message: str = "", oneof: int | None = None) -> None:  # fmt: skip
    f = msg.field.add(name=name, number=number, type=ftype)
    f.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
    if message:
        f.type_name = f".{_PACKAGE}.{message}"
    if oneof is not None:
        f.oneof_index = oneof


def _classes() -> dict[str, Any]:
    fd = descriptor_pb2.FileDescriptorProto(name="echelon_et_def.proto", package=_PACKAGE)
    fd.syntax = "proto3"
    attr = fd.message_type.add(name="AttributeProto")
    _field(attr, "name", 1, _F.TYPE_STRING)
    _field(attr, "doc_string", 2, _F.TYPE_STRING)
    attr.oneof_decl.add(name="value")
    for i, (kind, ftype) in enumerate(SCALARS.items()):
        lst = kind.title() + "List"
        _field(attr, f"{kind}_val", 3 + 2 * i, ftype, oneof=0)
        _field(attr, f"{kind}_list", 4 + 2 * i, _F.TYPE_MESSAGE, message=lst, oneof=0)
        _field(fd.message_type.add(name=lst), "values", 1, ftype, repeated=True)
    meta = fd.message_type.add(name="GlobalMetadata")
    _field(meta, "version", 1, _F.TYPE_STRING)
    _field(meta, "attr", 2, _F.TYPE_MESSAGE, True, "AttributeProto")
    io = fd.message_type.add(name="IOInfo")
    for i, n in enumerate(("values", "shapes", "types")):
        _field(io, n, i + 1, _F.TYPE_STRING)
    node = fd.message_type.add(name="Node")
    _field(node, "id", 1, _F.TYPE_UINT64)
    _field(node, "name", 2, _F.TYPE_STRING)
    _field(node, "type", 3, _F.TYPE_INT32)
    _field(node, "ctrl_deps", 4, _F.TYPE_UINT64, True)
    _field(node, "data_deps", 5, _F.TYPE_UINT64, True)
    _field(node, "start_time_micros", 6, _F.TYPE_UINT64)
    _field(node, "duration_micros", 7, _F.TYPE_UINT64)
    _field(node, "inputs", 8, _F.TYPE_MESSAGE, message="IOInfo")
    _field(node, "outputs", 9, _F.TYPE_MESSAGE, message="IOInfo")
    _field(node, "attr", 10, _F.TYPE_MESSAGE, True, "AttributeProto")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return {
        m.name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{m.name}"))
        for m in fd.message_type
    }


#: Message name -> class (``CLASSES["Node"].FromString(data)``).
CLASSES = _classes()


def attributes(attrs: Iterable[Any]) -> dict[str, AttrValue]:
    """``repeated AttributeProto`` -> ``{name: value}``; an unset ``oneof`` is left out."""
    out: dict[str, AttrValue] = {}
    for a in attrs:
        which = a.WhichOneof("value")
        if which is None:
            continue
        value = getattr(a, which)
        out[a.name] = tuple(value.values) if which.endswith("_list") else value
    return out

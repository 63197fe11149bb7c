"""Chakra traces the tests build themselves, encoded by the real protobuf library.

The message classes are made at run time from a descriptor written after
``et_def.proto`` (field numbers and types as there), so the decoder under test is
checked against protobuf's own encoder, not against a second hand-written one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.internal.encoder import _VarintBytes  # the length prefix

F = descriptor_pb2.FieldDescriptorProto
SCALARS: dict[str, int] = {
    "double": F.TYPE_DOUBLE,
    "float": F.TYPE_FLOAT,
    "int32": F.TYPE_INT32,
    "int64": F.TYPE_INT64,
    "uint32": F.TYPE_UINT32,
    "uint64": F.TYPE_UINT64,
    "sint32": F.TYPE_SINT32,
    "sint64": F.TYPE_SINT64,
    "fixed32": F.TYPE_FIXED32,
    "fixed64": F.TYPE_FIXED64,
    "sfixed32": F.TYPE_SFIXED32,
    "sfixed64": F.TYPE_SFIXED64,
    "bool": F.TYPE_BOOL,
    "string": F.TYPE_STRING,
    "bytes": F.TYPE_BYTES,
}


def _field(msg: Any, name: str, number: int, ftype: int, repeated: bool = False,
           type_name: str = "", oneof: int | None = None) -> None:  # fmt: skip
    f = msg.field.add(name=name, number=number, type=ftype)
    f.label = F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL
    if type_name:
        f.type_name = type_name
    if oneof is not None:
        f.oneof_index = oneof


def _classes() -> dict[str, Any]:
    fd = descriptor_pb2.FileDescriptorProto(name="et_def_test.proto", package="ChakraProtoMsg")
    fd.syntax = "proto3"
    attr = fd.message_type.add(name="AttributeProto")
    _field(attr, "name", 1, F.TYPE_STRING)
    _field(attr, "doc_string", 2, F.TYPE_STRING)
    attr.oneof_decl.add(name="value")
    for i, (kind, ftype) in enumerate(SCALARS.items()):
        number = 3 + 2 * i
        lst = "".join(p.title() for p in kind.split("_")) + "List"
        _field(attr, f"{kind}_val", number, ftype, oneof=0)
        _field(attr, f"{kind}_list", number + 1, F.TYPE_MESSAGE,
               type_name=f".ChakraProtoMsg.{lst}", oneof=0)  # fmt: skip
        m = fd.message_type.add(name=lst)
        _field(m, "values", 1, ftype, repeated=True)
    meta = fd.message_type.add(name="GlobalMetadata")
    _field(meta, "version", 1, F.TYPE_STRING)
    _field(meta, "attr", 2, F.TYPE_MESSAGE, True, ".ChakraProtoMsg.AttributeProto")
    io = fd.message_type.add(name="IOInfo")
    for i, n in enumerate(("values", "shapes", "types")):
        _field(io, n, i + 1, F.TYPE_STRING)
    node = fd.message_type.add(name="Node")
    _field(node, "id", 1, F.TYPE_UINT64)
    _field(node, "name", 2, F.TYPE_STRING)
    _field(node, "type", 3, F.TYPE_INT32)  # an enum on the wire is a varint, unknown values too
    _field(node, "ctrl_deps", 4, F.TYPE_UINT64, True)
    _field(node, "data_deps", 5, F.TYPE_UINT64, True)
    _field(node, "start_time_micros", 6, F.TYPE_UINT64)
    _field(node, "duration_micros", 7, F.TYPE_UINT64)
    _field(node, "inputs", 8, F.TYPE_MESSAGE, type_name=".ChakraProtoMsg.IOInfo")
    _field(node, "outputs", 9, F.TYPE_MESSAGE, type_name=".ChakraProtoMsg.IOInfo")
    _field(node, "attr", 10, F.TYPE_MESSAGE, True, ".ChakraProtoMsg.AttributeProto")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    names = ["AttributeProto", "GlobalMetadata", "Node", "IOInfo"]
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"ChakraProtoMsg.{n}"))
            for n in names}  # fmt: skip


CLASSES = _classes()
COMP, SEND, RECV, COLL = 4, 5, 6, 7


def node(nid: int, ntype: int, deps: tuple[int, ...] = (), dur: int = 0, name: str = "",
         ctrl: tuple[int, ...] = (), **attrs: Any) -> Any:  # fmt: skip
    """A ``Node`` message; ``attrs`` as ``key=value`` (type from the value) or
    ``key=("sint64", -3)`` / ``key=("int64_list", [1, 2])`` for an explicit kind."""
    n = CLASSES["Node"](id=nid, name=name or f"n{nid}", type=ntype, duration_micros=dur)
    n.data_deps.extend(deps)
    n.ctrl_deps.extend(ctrl)
    n.inputs.values = "[[1, 2, 3]]"  # skipped by the reader, must not disturb it
    for key, value in attrs.items():
        a = n.attr.add(name=key)
        if isinstance(value, tuple):
            kind, v = value
        else:
            kind = ("bool" if isinstance(value, bool) else "int64" if isinstance(value, int)
                    else "double" if isinstance(value, float) else "string")  # fmt: skip
            v = value
        if kind.endswith("_list"):
            getattr(a, kind).values.extend(v)
        else:
            setattr(a, f"{kind}_val", v)
    return n


def encode(nodes: list[Any], version: str = "0.0.4", **meta: Any) -> bytes:
    """The length-delimited stream of a rank's file: GlobalMetadata, then the nodes."""
    gm = CLASSES["GlobalMetadata"](version=version)
    for key, value in meta.items():
        gm.attr.add(name=key, string_val=str(value))
    out = bytearray()
    for m in (gm, *nodes):
        body = m.SerializeToString()
        out += _VarintBytes(len(body)) + body
    return bytes(out)


def write(path: Path, nodes: list[Any], **meta: Any) -> Path:
    path.write_bytes(encode(nodes, **meta))
    return path

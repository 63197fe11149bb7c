"""Chakra traces the tests build themselves, encoded by the real protobuf library with
the reader's own message classes (:mod:`echelon.chakra.protobuf`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf.internal.encoder import _VarintBytes  # the length prefix

from echelon.chakra.protobuf import CLASSES

__all__ = ["CLASSES", "encode", "node", "write"]

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

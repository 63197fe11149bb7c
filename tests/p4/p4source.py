"""A deliberately small reader of *our* P4 source, enough to check the hand-written
P4Info against it (tables, keys, actions, counters, widths, sizes, constants).

It understands only the constructs p4src/ uses; a construct it cannot read makes
the contract test fail loudly rather than pass silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

P4SRC = Path(__file__).resolve().parents[2] / "p4src"


@dataclass(frozen=True)
class Table:
    name: str
    keys: tuple[tuple[str, str], ...]  # (field expression, match kind)
    actions: tuple[str, ...]
    size: int


def source() -> str:
    text = "\n".join(p.read_text() for p in sorted((P4SRC / "include").glob("*.p4")))
    text += (P4SRC / "echelon.p4").read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def defines(text: str) -> dict[str, int]:
    pattern = r"#define[ \t]+(\w+)[ \t]+(0x[0-9A-Fa-f]+|\d+)"
    return {m[1]: int(m[2], 0) for m in re.finditer(pattern, text)}


def constants(text: str) -> dict[str, int]:
    return {
        m[2]: int(m[3], 0)
        for m in re.finditer(r"const\s+bit<(\d+)>\s+(\w+)\s*=\s*(0x[0-9A-Fa-f]+|\d+)\s*;", text)
    }


def typedefs(text: str) -> dict[str, int]:
    return {m[2]: int(m[1]) for m in re.finditer(r"typedef\s+bit<(\d+)>\s+(\w+)\s*;", text)}


def _width(typ: str, tdefs: dict[str, int]) -> int:
    m = re.fullmatch(r"bit<(\d+)>", typ)
    if m:
        return int(m[1])
    if typ in tdefs:
        return tdefs[typ]
    raise ValueError(f"cannot size P4 type {typ!r}")


def field_widths(text: str) -> dict[str, int]:
    """``hdr.ipv4.dstAddr`` / ``meta.class_id`` -> bit width."""
    tdefs = typedefs(text)
    types: dict[str, dict[str, int]] = {}
    for m in re.finditer(r"(?:header|struct)\s+(\w+)\s*\{(.*?)\}", text, flags=re.S):
        fields = {}
        for fm in re.finditer(r"([\w<>]+)\s+(\w+)\s*;", m[2]):
            try:
                fields[fm[2]] = _width(fm[1], tdefs)
            except ValueError:
                fields[fm[2]] = -1  # a nested header/struct, not a bit field
        types[m[1]] = fields
    out: dict[str, int] = {}
    hdr_struct = re.search(r"struct\s+headers_t\s*\{(.*?)\}", text, flags=re.S)
    assert hdr_struct, "struct headers_t not found"
    for hm in re.finditer(r"(\w+)\s+(\w+)\s*;", hdr_struct[1]):
        for f, w in types[hm[1]].items():
            out[f"hdr.{hm[2]}.{f}"] = w
    for f, w in types["metadata_t"].items():
        out[f"meta.{f}"] = w
    return out


def actions(text: str) -> dict[str, tuple[tuple[str, int], ...]]:
    tdefs = typedefs(text)
    out = {}
    for m in re.finditer(r"action\s+(\w+)\s*\(([^)]*)\)\s*\{", text):
        params = []
        for p in filter(None, (s.strip() for s in m[2].split(","))):
            typ, name = p.rsplit(None, 1)
            params.append((name, _width(typ, tdefs)))
        out[m[1]] = tuple(params)
    return out


def _block(text: str, start: int) -> str:
    """The text from ``start`` to the brace that closes the one just before it."""
    depth = 1
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i]
    raise ValueError("unbalanced braces in P4 source")


def tables(text: str) -> list[Table]:
    defs = defines(text)
    out = []
    for m in re.finditer(r"table\s+(\w+)\s*\{", text):
        body = _block(text, m.end())
        key = re.search(r"key\s*=\s*\{(.*?)\}", body, flags=re.S)
        acts = re.search(r"actions\s*=\s*\{(.*?)\}", body, flags=re.S)
        size = re.search(r"size\s*=\s*(\w+)\s*;", body)
        assert key and acts and size, f"table {m[1]}: cannot read key/actions/size"
        keys = tuple((km[1], km[2]) for km in re.finditer(r"([\w.]+)\s*:\s*(\w+)\s*;", key[1]))
        names = tuple(a.strip() for a in acts[1].split(";") if a.strip())
        sz = int(size[1]) if size[1].isdigit() else defs[size[1]]
        out.append(Table(m[1], keys, names, sz))
    return out


def counters(text: str) -> dict[str, int]:
    defs = {**defines(text), **constants(text)}
    out = {}
    pattern = r"counter<[^>]*>>?\s*\(\s*(\w+)\s*,\s*CounterType\.(\w+)\s*\)\s*(\w+)\s*;"
    for m in re.finditer(pattern, text):
        out[m[3]] = int(m[1]) if m[1].isdigit() else defs[m[1]]
    return out

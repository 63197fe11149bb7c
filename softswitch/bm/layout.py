"""Where each field of a BMv2 JSON program lives in the per-packet state vector.

A packet's state (every header field, every header's validity, user and
standard metadata, a few internal flags) is one flat Python ``list`` of ints.
Compiling a program assigns each of those a fixed index, so the per-packet
code reads and writes ``v[i]`` with ``i`` a constant captured in a closure:
no name lookups, no dicts, no JSON on the packet path. A new packet's vector
is a copy of :attr:`Layout.initial` (everything zero and invalid, metadata
valid), which is what BMv2 does at the start of each packet.

Each packet header also has a *raw* slot: the offset in the frame it was
extracted from, or -1 once any of its fields was written (or it was added).
The deparser copies a header that is still raw straight from the frame
instead of packing its fields again, and checksum verification of a raw
header reads the frame bytes: same result, a fraction of the work.

Anything this layer cannot represent faithfully is refused here, naming it:
signed or variable-length fields, header unions. The queueing and timestamp
fields of standard_metadata are ordinary slots the data plane fills (see
``Pipeline.ingress``/``Pipeline.egress``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from softswitch.errors import InvalidArgument

#: standard_metadata fields a program may read but not write (multicast, cloning).
READ_ONLY_STD = frozenset({"mcast_grp", "egress_rid", "instance_type"})


@dataclass
class HeaderSlots:
    """One header instance: its validity slot and (name, slot, width) per field."""

    name: str
    valid: int
    metadata: bool
    fields: list[tuple[str, int, int]]
    nbytes: int = 0
    raw: int = -1  # slot: frame offset while unmodified, else -1 (packet headers only)


@dataclass
class StackSlots:
    """A header stack: its element headers and the slot holding the parser's next index."""

    name: str
    headers: list[HeaderSlots]
    next_index: int


@dataclass
class Layout:
    """Slot assignment for one program (see the module docstring)."""

    headers: dict[str, HeaderSlots] = field(default_factory=dict)
    stacks: dict[str, StackSlots] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    initial: list[int] = field(default_factory=list)
    widths: dict[int, int] = field(default_factory=dict)

    def new_slot(self, value: int = 0) -> int:
        self.initial.append(value)
        return len(self.initial) - 1

    def header(self, name: str) -> HeaderSlots:
        h = self.headers.get(name)
        if h is None:
            raise InvalidArgument("p4_device_config", f"unknown header instance {name!r}")
        return h

    def stack(self, name: str) -> StackSlots:
        s = self.stacks.get(name)
        if s is None:
            raise InvalidArgument("p4_device_config", f"unknown header stack {name!r}")
        return s

    def field(self, ref: Any, write: bool = False) -> tuple[int, int]:
        """(slot, width) of a JSON field reference ``[header, field]``."""
        hname, fname = ref
        h = self.header(hname)
        if fname == "$valid$":
            if write:
                raise InvalidArgument(f"{hname}.$valid$", "assigning validity directly")
            return h.valid, 1
        if hname == "standard_metadata" and write and fname in READ_ONLY_STD:
            raise InvalidArgument(
                f"standard_metadata.{fname}",
                "multicast/cloning is not supported by the soft switch",
            )
        for name, slot, width in h.fields:
            if name == fname:
                return slot, width
        raise InvalidArgument(f"{hname}.{fname}", "no such field")

    def raw_slot(self, ref: Any) -> int | None:
        """The raw slot a write to field ``ref`` must clear (None for metadata)."""
        h = self.header(ref[0])
        return None if h.metadata else h.raw

    def std(self, fname: str) -> int:
        """Slot of a standard_metadata field the switch itself sets or reads."""
        for name, slot, _w in self.headers["standard_metadata"].fields:
            if name == fname:
                return slot
        raise InvalidArgument(f"standard_metadata.{fname}", "missing from the program")


def build_layout(j: dict[str, Any]) -> Layout:
    """Assign slots to every header instance, stack and error of program ``j``."""
    lay = Layout()
    lay.new_slot()  # slot 0: the 'exit' flag of the running control
    types: dict[str, list[Any]] = {}
    for ht in j.get("header_types", []):
        for f in ht["fields"]:
            if len(f) < 2 or not isinstance(f[1], int):
                raise InvalidArgument(f"{ht['name']}.{f[0]}", "variable-length fields (varbit)")
            if len(f) > 2 and f[2]:
                raise InvalidArgument(f"{ht['name']}.{f[0]}", "signed fields (int<N>)")
        types[ht["name"]] = ht["fields"]
    for key in ("header_unions", "header_union_stacks"):
        if j.get(key):
            raise InvalidArgument(key, f"header unions ({j[key][0]['name']!r}) are not supported")
    by_id: dict[int, HeaderSlots] = {}
    for h in j.get("headers", []):
        fields = types.get(h["header_type"])
        if fields is None:
            raise InvalidArgument(h["name"], f"unknown header type {h['header_type']!r}")
        meta = bool(h.get("metadata"))
        valid = lay.new_slot(1 if meta else 0)
        slots = []
        for f in fields:
            slot = lay.new_slot()
            lay.widths[slot] = f[1]
            slots.append((f[0], slot, f[1]))
        bits = sum(f[1] for f in fields)
        if not meta and bits % 8:
            raise InvalidArgument(
                h["name"], f"header of {bits} bits is not a whole number of bytes"
            )
        hs = HeaderSlots(h["name"], valid, meta, slots, bits // 8)
        if not meta:
            hs.raw = lay.new_slot(-1)
        lay.headers[h["name"]] = hs
        by_id[h["id"]] = hs
    if "standard_metadata" not in lay.headers:
        raise InvalidArgument("standard_metadata", "not a v1model program")
    for s in j.get("header_stacks", []):
        members = [by_id[i] for i in s["header_ids"]]
        lay.stacks[s["name"]] = StackSlots(s["name"], members, lay.new_slot())
    for name, code in j.get("errors", []):
        lay.errors[name] = code
    return lay

"""P4Info by name: look-ups, value encoding and the hashable :class:`TableEntry`.

Code in this project never hard-codes P4Info IDs (see docs/conventions.md): the
IDs in ``p4src/build/echelon.p4info.txtpb`` are whatever p4c assigned and change
when the program does. Everything here therefore goes from *names* to IDs through
a loaded P4Info.

Values travel as P4Runtime "canonical" byte strings: big-endian, shortest form
(zero is one ``0x00`` byte). Switches answer reads in that form, so decoding back
to ``int`` and comparing ints is what makes entries read back from a switch
compare equal to the entries the controller wanted.

:class:`TableEntry` is the one representation of an entry used by the client
library, the controller's pure diffing code and the tests: a frozen dataclass
whose match fields are normalised (ints, ``(value, prefix)``, ``(lo, hi)``), so
sets of entries can be compared and subtracted.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from finsy.proto import p4i as p4info_pb2
from google.protobuf import text_format

from echelon.errors import SpecError

_MAC = re.compile(r"^[0-9A-Fa-f]{2}([:-][0-9A-Fa-f]{2}){5}$")

MatchValue = int | tuple[int, int]
"""A normalised match: EXACT/OPTIONAL ``int``; LPM ``(value, prefix_len)``;
RANGE ``(lo, hi)``; TERNARY ``(value, mask)``."""

UserValue = int | str | bytes
"""What callers may pass for a value: an int, ``"10.0.0.1"``, ``"00:11:..."``, or bytes."""


class P4InfoError(SpecError):
    """A name is not in the P4Info, or a value does not fit its field."""


# ---------------------------------------------------------------- values


def to_int(value: UserValue, field: str) -> int:
    """Turn a user value into an int: IPv4 and MAC strings are recognised by shape."""
    if isinstance(value, bool):
        raise P4InfoError(field, f"expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, bytes):
        return int.from_bytes(value, "big")
    if isinstance(value, str):
        text = value.strip()
        if _MAC.match(text):
            return int(text.replace(":", "").replace("-", ""), 16)
        if text.count(".") == 3:
            try:
                return int(ipaddress.IPv4Address(text))
            except ValueError as exc:
                raise P4InfoError(field, f"not an IPv4 address: {value!r}") from exc
        try:
            return int(text, 0)
        except ValueError as exc:
            raise P4InfoError(field, f"not an integer, IPv4 or MAC: {value!r}") from exc
    raise P4InfoError(field, f"unsupported value type {type(value).__name__}")


def encode(value: UserValue, bitwidth: int, field: str) -> bytes:
    """Canonical P4Runtime bytes of ``value``; raise :class:`P4InfoError` if it does not fit."""
    n = to_int(value, field)
    if n < 0 or n >= 1 << bitwidth:
        raise P4InfoError(field, f"value {n} does not fit in {bitwidth} bits")
    return n.to_bytes(max(1, (n.bit_length() + 7) // 8), "big")


def decode(data: bytes) -> int:
    """Inverse of :func:`encode` (accepts padded as well as canonical bytes)."""
    return int.from_bytes(data, "big")


# ---------------------------------------------------------------- entries


@dataclass(frozen=True, order=True)
class TableEntry:
    """A table entry by names with normalised values; hashable so sets of entries diff.

    ``match`` is a sorted tuple of ``(field name, value)`` with wildcard fields
    omitted (P4Runtime requires that); ``params`` a sorted tuple of ``(name, int)``.
    ``action is None`` only for a read-back default entry that was never set.
    """

    table: str
    match: tuple[tuple[str, MatchValue], ...] = ()
    action: str | None = None
    params: tuple[tuple[str, int], ...] = ()
    priority: int = 0
    is_default: bool = False
    #: What identifies the entry on the switch (``action``/``params`` are its value);
    #: computed once because the controller diffs thousands of entries per change.
    key: tuple[str, tuple[tuple[str, MatchValue], ...], int, bool] = field(
        init=False, repr=False, compare=False, hash=False
    )

    _hash: int = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        key = (self.table, self.match, self.priority, self.is_default)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "_hash", hash((key, self.action, self.params)))

    def __hash__(self) -> int:
        return self._hash

    def match_dict(self) -> dict[str, MatchValue]:
        return dict(self.match)

    def params_dict(self) -> dict[str, int]:
        return dict(self.params)


@dataclass(frozen=True)
class MatchField:
    id: int
    name: str
    bitwidth: int
    kind: str  # EXACT, LPM, TERNARY, RANGE, OPTIONAL


@dataclass(frozen=True)
class Param:
    id: int
    name: str
    bitwidth: int


@dataclass(frozen=True)
class TableInfo:
    id: int
    name: str
    size: int
    fields: Mapping[str, MatchField]
    action_ids: frozenset[int]

    @property
    def needs_priority(self) -> bool:
        """Ternary, range and optional tables order entries by a priority > 0."""
        return any(f.kind in ("TERNARY", "RANGE", "OPTIONAL") for f in self.fields.values())


@dataclass(frozen=True)
class ActionInfo:
    id: int
    name: str
    params: Mapping[str, Param]


@dataclass(frozen=True)
class CounterInfo:
    id: int
    name: str
    size: int
    unit: str


class P4Info:
    """A loaded P4Info with look-ups by full name (``EchelonIngress.ipv4_lpm``) or alias."""

    def __init__(self, msg: p4info_pb2.P4Info) -> None:
        self.proto = msg
        self._tables: dict[str, TableInfo] = {}
        self._actions: dict[str, ActionInfo] = {}
        self._counters: dict[str, CounterInfo] = {}
        self._by_id: dict[int, str] = {}
        for t in msg.tables:
            fields = {
                m.name: MatchField(
                    m.id, m.name, m.bitwidth, p4info_pb2.MatchField.MatchType.Name(m.match_type)
                )
                for m in t.match_fields
            }
            ti = TableInfo(
                t.preamble.id,
                t.preamble.name,
                t.size,
                fields,
                frozenset(a.id for a in t.action_refs),
            )
            self._add(self._tables, ti, t.preamble.alias)
        for a in msg.actions:
            params = {p.name: Param(p.id, p.name, p.bitwidth) for p in a.params}
            self._add(
                self._actions, ActionInfo(a.preamble.id, a.preamble.name, params), a.preamble.alias
            )
        for c in msg.counters:
            unit = p4info_pb2.CounterSpec.Unit.Name(c.spec.unit)
            self._add(
                self._counters,
                CounterInfo(c.preamble.id, c.preamble.name, c.size, unit),
                c.preamble.alias,
            )

    def _add(self, where: dict[str, Any], info: Any, alias: str) -> None:
        where[info.name] = info
        if alias and alias not in where:
            where[alias] = info
        self._by_id[info.id] = info.name

    # -- loading

    @classmethod
    def from_text(cls, text: str, where: str = "p4info") -> P4Info:
        """Parse a text-format P4Info; fields a newer P4Info has are skipped."""
        msg = p4info_pb2.P4Info()
        try:
            text_format.Parse(text, msg, allow_unknown_field=True)
        except text_format.ParseError as exc:
            raise P4InfoError(where, f"not a P4Info text message: {exc}") from exc
        return cls(msg)

    @classmethod
    def load(cls, path: str | Path) -> P4Info:
        """The P4Info in text file ``path``; P4InfoError naming the file if it is none."""
        try:
            text = Path(path).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not a text file"
            raise P4InfoError("p4info", f"cannot read {path}: {why}") from exc
        return cls.from_text(text, f"p4info {path}")

    def cookie(self, device_config: bytes = b"") -> int:
        """A 64-bit fingerprint of this pipeline, sent as the pipeline cookie so a
        controller can tell from ``GetForwardingPipelineConfig`` whether the switch
        runs *this* program (and not an older one)."""
        h = hashlib.sha256(self.proto.SerializeToString(deterministic=True) + device_config)
        return int.from_bytes(h.digest()[:8], "big")

    # -- look-ups

    def table(self, name: str) -> TableInfo:
        try:
            return self._tables[name]
        except KeyError:
            raise P4InfoError("table", f"no table {name!r} in the P4Info") from None

    def action(self, name: str) -> ActionInfo:
        try:
            return self._actions[name]
        except KeyError:
            raise P4InfoError("action", f"no action {name!r} in the P4Info") from None

    def counter(self, name: str) -> CounterInfo:
        try:
            return self._counters[name]
        except KeyError:
            raise P4InfoError("counter", f"no counter {name!r} in the P4Info") from None

    def name_of(self, id_: int) -> str:
        try:
            return self._by_id[id_]
        except KeyError:
            raise P4InfoError("id", f"no object with id {id_} in the P4Info") from None

    def tables(self) -> list[TableInfo]:
        return sorted({t.name: t for t in self._tables.values()}.values(), key=lambda t: t.name)

    def counters(self) -> list[CounterInfo]:
        return sorted({c.name: c for c in self._counters.values()}.values(), key=lambda c: c.name)

    # -- entry builder

    def table_entry(
        self,
        table: str,
        match: Mapping[str, Any] | None = None,
        action: str | None = None,
        params: Mapping[str, UserValue] | None = None,
        priority: int = 0,
        default: bool = False,
    ) -> TableEntry:
        """Build and validate a :class:`TableEntry` by names.

        Match values: ``int``/IPv4/MAC string for EXACT and OPTIONAL,
        ``(value, prefix_len)`` for LPM (a bare value means /width),
        ``(lo, hi)`` for RANGE, ``(value, mask)`` for TERNARY. Wildcards (LPM /0,
        full RANGE, TERNARY mask 0) are dropped, as P4Runtime requires.
        """
        ti = self.table(table)
        norm: list[tuple[str, MatchValue]] = []
        for fname, raw in (match or {}).items():
            if fname not in ti.fields:
                raise P4InfoError(f"match.{fname}", f"table {ti.name} has no match field {fname!r}")
            mv = _normalise(ti.fields[fname], raw, f"match.{fname}")
            if mv is not None:
                norm.append((fname, mv))
        if default and norm:
            raise P4InfoError("match", "a default entry has no match fields")
        if not default:
            for f in ti.fields.values():
                if f.kind == "EXACT" and f.name not in dict(norm):
                    raise P4InfoError(f"match.{f.name}", "exact match field is required")
        if default or not ti.needs_priority:
            if priority != 0:
                raise P4InfoError("priority", f"table {ti.name} takes no entry priority")
        elif not 0 < priority < 1 << 31:
            raise P4InfoError("priority", f"table {ti.name} needs a priority in 1..2^31-1")
        pnorm: tuple[tuple[str, int], ...] = ()
        aname: str | None = None
        if action is not None:
            ai = self.action(action)
            aname = ai.name
            if ai.id not in ti.action_ids:
                raise P4InfoError("action", f"{ai.name} is not an action of {ti.name}")
            given = dict(params or {})
            for pname in given:
                if pname not in ai.params:
                    raise P4InfoError(f"params.{pname}", f"action {ai.name} has no parameter")
            vals = []
            for p in ai.params.values():
                if p.name not in given:
                    raise P4InfoError(f"params.{p.name}", f"missing parameter of {ai.name}")
                vals.append((p.name, decode(encode(given[p.name], p.bitwidth, f"params.{p.name}"))))
            pnorm = tuple(sorted(vals))
        elif params:
            raise P4InfoError("params", "parameters given without an action")
        elif not default:
            raise P4InfoError("action", "a table entry needs an action")
        return TableEntry(ti.name, tuple(sorted(norm)), aname, pnorm, priority, default)


def _normalise(f: MatchField, raw: Any, where: str) -> MatchValue | None:
    full = (1 << f.bitwidth) - 1
    if f.kind in ("EXACT", "OPTIONAL"):
        if isinstance(raw, tuple):
            raise P4InfoError(where, f"{f.kind} match takes a single value, got {raw!r}")
        return decode(encode(raw, f.bitwidth, where))
    if f.kind == "LPM":
        value, plen = raw if isinstance(raw, tuple) else (raw, f.bitwidth)
        if isinstance(value, str) and "/" in value:
            value, plen = value.split("/", 1)[0], int(value.split("/", 1)[1])
        n = decode(encode(value, f.bitwidth, where))
        if not isinstance(plen, int) or not 0 <= plen <= f.bitwidth:
            raise P4InfoError(where, f"prefix length {plen!r} outside 0..{f.bitwidth}")
        if plen == 0:
            return None
        mask = full ^ ((1 << (f.bitwidth - plen)) - 1)
        return (n & mask, plen)
    if f.kind == "RANGE":
        if not isinstance(raw, tuple) or len(raw) != 2:
            raise P4InfoError(where, f"RANGE match takes (lo, hi), got {raw!r}")
        lo = decode(encode(raw[0], f.bitwidth, where))
        hi = decode(encode(raw[1], f.bitwidth, where))
        if lo > hi:
            raise P4InfoError(where, f"range low {lo} above high {hi}")
        return None if (lo, hi) == (0, full) else (lo, hi)
    if f.kind == "TERNARY":
        if not isinstance(raw, tuple) or len(raw) != 2:
            raise P4InfoError(where, f"TERNARY match takes (value, mask), got {raw!r}")
        value = decode(encode(raw[0], f.bitwidth, where))
        mask = decode(encode(raw[1], f.bitwidth, where))
        return None if mask == 0 else (value & mask, mask)
    raise P4InfoError(where, f"unsupported match kind {f.kind}")

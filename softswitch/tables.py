"""Match-action tables and counters of the software pipeline.

A table holds two views of its entries: the control view (``entries``: key and
priority -> :class:`Entry`, for P4Runtime reads and duplicate checks) and a
lookup view precompiled for the packet thread (a dict for all-exact tables, one
dict per prefix length for LPM, per-exact-key candidate tuples sorted by
priority for range/ternary tables). Writers hold the server's lock; the packet
thread never locks. Every change to the lookup view is a single reference
assignment or dict item operation (atomic under the GIL), and candidate tuples
and level lists are replaced, never mutated, so a lookup sees either the old or
the new state of a bucket, never a torn one. A P4Runtime WriteRequest defers the
range/ternary groups' rebuild to its end (``defer=True``, :meth:`Table.flush`): one
rebuild per touched group instead of one per entry; until then lookups see the group
as it was before the request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Any

from softswitch.errors import (
    AlreadyExists,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
)

#: Match kinds, named as P4Runtime's ``FieldMatch`` oneof (the Write decoder compares them).
EXACT = "exact"
LPM = "lpm"
RANGE = "range"
TERNARY = "ternary"
#: P4Runtime ``optional``: BMv2 matches it as ternary with a full or a zero mask.
OPTIONAL = "optional"

#: An action implementation: called with the packet and the action's parameters.
ActionFn = Callable[..., None]
#: What a lookup yields: the action to run and its arguments (program's parameter order).
ActionCall = tuple[ActionFn, tuple[int, ...]]
#: One field of a match key: an int for exact; (value, prefix_len) for lpm;
#: (low, high) for range; (value, mask) for ternary.
FieldMatch = int | tuple[int, int]
MatchKey = tuple[FieldMatch, ...]


@dataclass(frozen=True)
class KeyField:
    """A match field: its P4Info name, width and kind, and ``attr``, the index of the
    field in the packet's state vector (:mod:`softswitch.bm.layout`)."""

    name: str
    bitwidth: int
    kind: str
    attr: int


@dataclass(slots=True)
class Entry:
    """An installed entry. ``payload`` is whatever the control plane wants back on reads."""

    key: MatchKey
    priority: int
    call: ActionCall
    payload: Any
    seq: int


# A non-exact check inside a priority-table candidate: (key position, is_range, a, b)
# meaning a <= v <= b for ranges and v & a == b for ternary/lpm.
_Check = tuple[int, bool, int, int]
_Candidate = tuple[tuple[_Check, ...], ActionCall]
_C_RANGE, _C_MASK, _C_LPM = range(3)
_SEQ = attrgetter("seq")
_PRIORITY = attrgetter("priority")


class Table:
    """A match-action table: entries written by the control plane, looked up by the
    packet thread (:meth:`lookup_fn`; :mod:`softswitch.bm.control` runs the action)."""

    def __init__(
        self, name: str, fields: tuple[KeyField, ...], size: int, default: ActionCall
    ) -> None:
        self.name = name
        self.fields = fields
        self.size = size
        self.default: ActionCall = default
        self.initial_default: ActionCall = default
        self.default_payload: Any = None
        self.entries: dict[tuple[MatchKey, int], Entry] = {}
        #: per-entry state (a direct meter): wraps each entry's call, forgets a deleted one
        self.wrap: Callable[[MatchKey, int, ActionCall], ActionCall] | None = None
        self.forget: Callable[[MatchKey, int], None] | None = None
        self._seq = 0
        #: range/ternary groups whose lookup view a deferred write left stale
        self._dirty: set[Any] = set()
        kinds = [f.kind for f in fields]
        self.needs_priority = any(k in (RANGE, TERNARY, OPTIONAL) for k in kinds)
        attrs = [f.attr for f in fields]
        self._single = len(fields) == 1
        self._get: Callable[[Any], Any] = itemgetter(*attrs) if attrs else (lambda pkt: ())
        self._exact_pos = tuple(i for i, k in enumerate(kinds) if k == EXACT)
        if not fields:
            # A keyless table always misses: only its default action runs.
            self.mode = "keyless"
        elif self.needs_priority:
            self.mode = "priority"
            self._groups: dict[Any, tuple[_Candidate, ...]] = {}
            # Control view per group, so a write rebuilds only its own group.
            self._members: dict[Any, dict[tuple[MatchKey, int], Entry]] = {}
            # the non-exact fields a candidate checks: (position, _C_*, width)
            self._checks = tuple(
                (
                    pos,
                    _C_RANGE if f.kind == RANGE else _C_LPM if f.kind == LPM else _C_MASK,
                    f.bitwidth,
                )
                for pos, f in enumerate(fields)
                if f.kind != EXACT
            )
            ex = [attrs[i] for i in self._exact_pos]
            self._group_get: Callable[[Any], Any] | None = itemgetter(*ex) if ex else None
        elif LPM in kinds:
            if kinds.count(LPM) != 1:
                raise InvalidArgument(name, "at most one lpm field per table is supported")
            self.mode = "lpm"
            self._lpm_pos = kinds.index(LPM)
            self._lpm_width = fields[self._lpm_pos].bitwidth
            # (prefix_len, mask, dict) sorted longest prefix first.
            self._levels: tuple[tuple[int, int, dict[Any, ActionCall]], ...] = ()
        else:
            self.mode = "exact"
            self._exact: dict[Any, ActionCall] = {}

    # ----------------------------------------------------------- packet thread
    def lookup_fn(self) -> Callable[[Any], ActionCall | None]:
        """The lookup of this table's mode, ``lookup(state) -> the matching entry's
        action, or None on a miss``: a closure for a packet path that calls it
        millions of times, over the live views (a write changes what it finds)."""
        get, table = self._get, self
        if self.mode == "exact":
            exact = self._exact
            return lambda pkt: exact.get(get(pkt))
        if self.mode == "keyless":
            return lambda pkt: None
        if self.mode == "priority":
            return self._lookup_priority
        if self._single:

            def lpm(pkt: Any) -> ActionCall | None:
                value = get(pkt)
                for _plen, mask, level in table._levels:
                    hit = level.get(value & mask)
                    if hit is not None:
                        return hit
                return None

            return lpm
        pos = self._lpm_pos

        def lpm_with_exact(pkt: Any) -> ActionCall | None:
            value = get(pkt)
            for _plen, mask, level in table._levels:
                hit = level.get((*value[:pos], value[pos] & mask, *value[pos + 1 :]))
                if hit is not None:
                    return hit
            return None

        return lpm_with_exact

    def _lookup_priority(self, pkt: Any) -> ActionCall | None:
        gkey = self._group_get(pkt) if self._group_get is not None else None
        group = self._groups.get(gkey)
        if not group:
            return None
        values = (self._get(pkt),) if self._single else self._get(pkt)
        for checks, call in group:
            for pos, is_range, a, b in checks:
                v = values[pos]
                if is_range:
                    if v < a or v > b:
                        break
                elif v & a != b:
                    break
            else:
                return call
        return None

    # ----------------------------------------------------------- control plane
    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(sorted(self.entries.values(), key=lambda e: e.seq))

    def get(self, key: MatchKey, priority: int) -> Entry | None:
        return self.entries.get((key, priority))

    def insert(
        self, key: MatchKey, priority: int, call: ActionCall, payload: Any, defer: bool = False
    ) -> None:
        """Add an entry. ``defer``: a range/ternary group's lookup view is rebuilt by
        :meth:`flush` (once per WriteRequest), not per entry."""
        if self.mode == "keyless":
            raise InvalidArgument(self.name, "a keyless table has only its default entry")
        ident = (key, priority)
        if ident in self.entries:
            raise AlreadyExists(self.name, "an entry with this match key already exists")
        if len(self.entries) >= self.size:
            raise ResourceExhausted(self.name, f"table is full ({self.size} entries)")
        self._seq += 1
        if self.wrap is not None:
            call = self.wrap(key, priority, call)
        entry = Entry(key, priority, call, payload, self._seq)
        self.entries[ident] = entry
        self._index(entry, defer)

    def modify(
        self, key: MatchKey, priority: int, call: ActionCall, payload: Any, defer: bool = False
    ) -> None:
        entry = self.entries.get((key, priority))
        if entry is None:
            raise NotFound(self.name, "no entry with this match key to modify")
        entry.call = call if self.wrap is None else self.wrap(key, priority, call)
        entry.payload = payload
        self._index(entry, defer)

    def delete(self, key: MatchKey, priority: int, defer: bool = False) -> None:
        entry = self.entries.pop((key, priority), None)
        if entry is None:
            raise NotFound(self.name, "no entry with this match key to delete")
        if self.forget is not None:
            self.forget(key, priority)
        self._unindex(entry, defer)

    def flush(self) -> None:
        """Rebuild the lookup view of every range/ternary group a deferred write touched."""
        dirty, self._dirty = self._dirty, set()
        for gkey in dirty:
            self._rebuild_group(gkey)

    def set_default(self, call: ActionCall | None, payload: Any) -> None:
        """Replace the default action; None restores the program's initial default."""
        self.default = self.initial_default if call is None else call
        self.default_payload = None if call is None else payload

    # ----------------------------------------------------------- lookup views
    def _index(self, entry: Entry, defer: bool = False) -> None:
        if self.mode == "exact":
            k = entry.key[0] if self._single else entry.key
            self._exact[k] = entry.call
        elif self.mode == "lpm":
            key, plen, mask = self._lpm_key(entry.key)
            level = self._level(plen, mask, create=True)
            assert level is not None
            level[key] = entry.call
        else:
            gkey = self._group_key(entry.key)
            self._members.setdefault(gkey, {})[(entry.key, entry.priority)] = entry
            if defer:
                self._dirty.add(gkey)
            else:
                self._rebuild_group(gkey)

    def _unindex(self, entry: Entry, defer: bool = False) -> None:
        if self.mode == "exact":
            k = entry.key[0] if self._single else entry.key
            del self._exact[k]
        elif self.mode == "lpm":
            key, plen, mask = self._lpm_key(entry.key)
            level = self._level(plen, mask, create=False)
            if level is not None:
                level.pop(key, None)
                if not level:
                    self._levels = tuple(lv for lv in self._levels if lv[0] != plen)
        else:
            gkey = self._group_key(entry.key)
            members = self._members.get(gkey, {})
            members.pop((entry.key, entry.priority), None)
            if not members:
                self._members.pop(gkey, None)
            if defer:
                self._dirty.add(gkey)
            else:
                self._rebuild_group(gkey)

    def _lpm_key(self, key: MatchKey) -> tuple[Any, int, int]:
        value, plen = key[self._lpm_pos]  # type: ignore[misc]
        mask = ((1 << plen) - 1) << (self._lpm_width - plen)
        if self._single:
            return value, plen, mask
        pos = self._lpm_pos
        return (*key[:pos], value, *key[pos + 1 :]), plen, mask

    def _level(self, plen: int, mask: int, create: bool) -> dict[Any, ActionCall] | None:
        for lp, _m, level in self._levels:
            if lp == plen:
                return level
        if not create:
            return None
        new: dict[Any, ActionCall] = {}
        levels = sorted((*self._levels, (plen, mask, new)), key=lambda lv: -lv[0])
        self._levels = tuple(levels)
        return new

    def _group_key(self, key: MatchKey) -> Any:
        if not self._exact_pos:
            return None
        if len(self._exact_pos) == 1:
            return key[self._exact_pos[0]]
        return tuple(key[i] for i in self._exact_pos)

    def _rebuild_group(self, gkey: Any) -> None:
        group = self._members.get(gkey)
        if not group:
            self._groups.pop(gkey, None)
            return
        # highest priority first, then the oldest (two stable sorts, no key lambda)
        members = sorted(group.values(), key=_SEQ)
        members.sort(key=_PRIORITY, reverse=True)
        checks_of = self._checks
        cands: list[_Candidate] = []
        for e in members:
            key = e.key
            checks: list[_Check] = []
            for pos, code, width in checks_of:
                a, b = key[pos]  # type: ignore[misc]
                if code == _C_RANGE:
                    checks.append((pos, True, a, b))
                elif not b:  # a zero mask / prefix length: a wildcard, no check
                    continue
                elif code == _C_MASK:
                    checks.append((pos, False, b, a))
                else:  # lpm: (value, prefix length)
                    checks.append((pos, False, ((1 << b) - 1) << (width - b), a))
            cands.append((tuple(checks), e.call))
        self._groups[gkey] = tuple(cands)


class Counter:
    """An indexed packets-and-bytes counter (P4 ``counter`` extern).

    The packet thread increments list items; control-plane reads may see a
    packet counted but not yet its bytes, which P4Runtime tolerates (counters
    are not read atomically on hardware either).
    """

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self.packets = [0] * size
        self.bytes = [0] * size

    def count(self, index: int, nbytes: int) -> None:
        if 0 <= index < self.size:
            self.packets[index] += 1
            self.bytes[index] += nbytes

    def set(self, index: int, packets: int, nbytes: int) -> None:
        self.packets[index] = packets
        self.bytes[index] = nbytes

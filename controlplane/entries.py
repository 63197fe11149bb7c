"""Desired table entries and the minimal, safely ordered update between two entry sets.

Pure (no I/O), so the controller's central decision — what a switch must hold and
in which order to get there — is unit-tested without a switch. The controller
feeds it the topology, the P4Info and one :class:`GroupPlan` per registered
(job, group); the plans themselves come from :mod:`controlplane.planning`.

Update order (why): a packet of registered traffic must never fall back to
best-effort during an update. Inserts and modifies therefore go before deletes,
so a group's new ranges/levels exist before its old ones disappear. Only a table
whose old and new entries together would not fit is cleared of stale entries
first (the switch would refuse the inserts otherwise).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from echelon.errors import EchelonError
from echelon.schedule import DeadlineRange
from echelon.topology import Topology
from p4client.p4info import P4Info, TableEntry

T_LPM = "EchelonIngress.ipv4_lpm"
T_CLASSIFY = "EchelonIngress.echelon_classify"
T_IDS = "EchelonIngress.echelon_ids"
T_DEADLINE = "EchelonIngress.deadline_prio"
#: P4Runtime priority of every deadline_prio entry: ranges of one class never
#: overlap, so any fixed value > 0 (required for RANGE tables) is correct.
RANGE_ENTRY_PRIORITY = 1


class TableFullError(EchelonError):
    """The desired entries of ``table`` exceed its size (P4Info or switch)."""

    def __init__(self, table: str, needed: int, size: int, why: str = "") -> None:
        msg = why or f"the table holds {size}"
        super().__init__(f"{table}: table full: needs {needed} entries, {msg}")
        self.field = table
        self.table = table
        self.needed = needed
        self.size = size


@dataclass(frozen=True)
class GroupPlan:
    """What one registered (job, group) gets on the switches its packets cross.

    ``priority`` is the band's top level (0 = best effort, used by the ``fifo``
    policy); ``ranges`` the deadline ranges inside the band (empty for ``coflow`` and
    ``fifo``); ``pairs`` the (source, destination) hosts of its flows, which say
    where its entries go (:func:`group_entries`).
    """

    job: str
    group: str
    echelon_id: int
    class_id: int
    priority: int
    ranges: tuple[DeadlineRange, ...]
    pairs: tuple[tuple[str, str], ...]

    @property
    def sources(self) -> tuple[str, ...]:
        """The hosts that send the group's flows (each one classify entry)."""
        return tuple(sorted({src for src, _ in self.pairs}))


def forwarding_entries(p4info: P4Info, topo: Topology, switch: str) -> list[TableEntry]:
    """One ``ipv4_lpm`` /32 per host, from the topology's shortest-path routes."""
    out = []
    for r in topo.routes(switch):
        ip, plen = r.prefix.split("/")
        out.append(
            p4info.table_entry(
                T_LPM,
                {"hdr.ipv4.dstAddr": (ip, int(plen))},
                "EchelonIngress.ipv4_forward",
                {"dstAddr": r.next_hop_mac, "port": r.port},
            )
        )
    return out


def group_entries(
    p4info: P4Info, topo: Topology, plan: GroupPlan
) -> Mapping[str, frozenset[TableEntry]]:
    """The echelon_ids, echelon_classify and deadline_prio entries of one group, per
    switch that needs them.

    Every switch classifies on its own, so a switch needs a group's entries exactly
    when one of the group's flows crosses it (:meth:`Topology.switch_path`), and the
    classify entry of a source only when that source's flows do. A switch the group
    never crosses holds nothing of it: on a fabric a leaf's tables hold the groups of
    its own hosts, not every group of the deployment. Each entry is built (and
    validated by :meth:`P4Info.table_entry`) once per distinct value: a re-plan moves
    a group between a few levels, so its entries recur."""
    sources: dict[str, set[str]] = {}
    for src, dst in plan.pairs:
        for switch in topo.switch_path(src, dst):
            sources.setdefault(switch, set()).add(src)
    common = [ids_entry(p4info, plan.echelon_id)]
    for rg in plan.ranges:
        common.append(range_entry(p4info, plan.class_id, rg.lo_us, rg.hi_us, rg.priority))
    out = {}
    for switch, srcs in sources.items():
        classify = [
            classify_entry(
                p4info, _ip(topo.hosts[src].ip), plan.echelon_id, plan.class_id, plan.priority
            )
            for src in srcs
        ]
        out[switch] = frozenset(common + classify)
    return out


@lru_cache(maxsize=1 << 16)
def ids_entry(p4info: P4Info, echelon_id: int) -> TableEntry:
    """The echelon_ids entry that admits ``echelon_id`` (the controller's and PTF's)."""
    return p4info.table_entry(T_IDS, {"hdr.echelon.echelon_id": echelon_id}, "NoAction")


@lru_cache(maxsize=1 << 16)
def classify_entry(
    p4info: P4Info, ip: int, echelon_id: int, class_id: int, prio: int
) -> TableEntry:
    """The echelon_classify entry of one source host (``ip`` as an int): its class and
    band top level ``prio``."""
    return p4info.table_entry(
        T_CLASSIFY,
        {"hdr.ipv4.srcAddr": ip, "hdr.echelon.echelon_id": echelon_id},
        "EchelonIngress.set_echelon",
        {"class_id": class_id, "prio": prio},
    )


@lru_cache(maxsize=1 << 16)
def range_entry(p4info: P4Info, class_id: int, lo: int, hi: int, prio: int) -> TableEntry:
    """The deadline_prio entry mapping deadlines ``lo..hi`` µs of a class to level ``prio``."""
    return p4info.table_entry(
        T_DEADLINE,
        {"meta.class_id": class_id, "hdr.echelon.deadline_us": (lo, hi)},
        "EchelonIngress.set_deadline_prio",
        {"prio": prio},
        priority=RANGE_ENTRY_PRIORITY,
    )


@lru_cache(maxsize=4096)
def _ip(text: str) -> int:
    """A host's dotted IPv4 as an int, parsed once (a registration builds its entries
    while every other request waits)."""
    return int(ipaddress.IPv4Address(text))


def count_by_table(entries: Iterable[TableEntry]) -> dict[str, int]:
    """Entries per table; a default entry takes no slot and is not counted."""
    counts: dict[str, int] = {}
    for e in entries:
        if not e.is_default:
            counts[e.table] = counts.get(e.table, 0) + 1
    return counts


def default_entries(p4info: P4Info, device_config: bytes) -> list[TableEntry]:
    """The program's default entry of every table whose default the control plane may
    change, as p4c's BMv2 JSON (``device_config``) declares it: what the controller
    keeps them at (a foreign ``MODIFY is_default_action`` is drift, repaired like any
    other). Empty without a device config: the defaults are then not known."""
    if not device_config:
        return []
    try:
        cfg = json.loads(device_config)
        names = {a["id"]: a["name"] for a in cfg["actions"]}
        tables = [t for p in cfg["pipelines"] for t in p["tables"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise EchelonError(f"device-config: not p4c's BMv2 JSON: {exc}") from None
    known = {t.name for t in p4info.tables()}
    out = []
    for t in tables:
        d = t.get("default_entry")
        if t.get("name") not in known or not d or d.get("action_const"):
            continue
        action = p4info.action(names[d["action_id"]])
        data = [int(str(v), 0) for v in d.get("action_data", [])]
        params = {p.name: v for p, v in zip(action.params.values(), data, strict=True)}
        out.append(p4info.table_entry(t["name"], None, action.name, params, default=True))
    return out


@dataclass(frozen=True)
class Step:
    """One update: ``kind`` INSERT/MODIFY/DELETE of ``entry``; ``old`` is the entry it
    replaces (MODIFY) or removes (DELETE), kept so the step can be undone."""

    kind: str
    entry: TableEntry
    old: TableEntry | None = None

    def inverse(self) -> Step:
        if self.kind == "INSERT":
            return Step("DELETE", self.entry)
        if self.kind == "DELETE":
            assert self.old is not None
            return Step("INSERT", self.old)
        assert self.old is not None
        return Step("MODIFY", self.old, self.entry)


def plan_updates(
    current: Iterable[TableEntry],
    desired: Iterable[TableEntry],
    sizes: Mapping[str, int] | None = None,
) -> list[Step]:
    """The minimal ordered steps that turn ``current`` into ``desired``.

    Entries are matched by :attr:`TableEntry.key`; a key in both with another
    action or parameters becomes a MODIFY. A desired default entry that differs from
    the one read back becomes a MODIFY of the default (last); a default read back
    but not desired is left alone (its table's default is not the controller's).
    """
    cur_set = {e for e in current if not e.is_default}
    want_set = {e for e in desired if not e.is_default}
    peak = count_by_table(cur_set) if sizes else {}
    steps = _order(cur_set - want_set, want_set - cur_set, peak, sizes)
    now = {e.key: e for e in current if e.is_default}
    for d in sorted((e for e in desired if e.is_default), key=lambda e: e.table):
        old = now.get(d.key)
        if old is not None and old != d:
            steps.append(Step("MODIFY", d, old))
    return steps


def plan_delta(
    current: set[TableEntry],
    gone: Iterable[TableEntry],
    new: Iterable[TableEntry],
    counts: Mapping[str, int],
    sizes: Mapping[str, int] | None = None,
) -> list[Step]:
    """``plan_updates(current, (current - gone) | new, sizes)`` in O(len(gone) + len(new)).

    Why: a registration changes a handful of groups; diffing the whole entry set
    (5,000 entries with 1,000 jobs) on every change cost more than the planning.
    ``counts`` is ``count_by_table(current)`` (kept by the caller).
    """
    new_set = {e for e in new if not e.is_default and e not in current}
    gone_set = {e for e in gone if not e.is_default and e in current} - set(new)
    return _order(gone_set, new_set, dict(counts) if sizes else {}, sizes)


def _order(
    gone_set: set[TableEntry],
    new_set: set[TableEntry],
    peak: dict[str, int],
    sizes: Mapping[str, int] | None,
) -> list[Step]:
    """The steps from the entries to remove and to add; ``peak`` is the current
    count per table (used only with ``sizes``)."""
    if not gone_set or not new_set:  # pure inserts (e.g. an empty switch) or pure deletes
        inserts = [Step("INSERT", e) for e in new_set]
        modifies: list[Step] = []
        deletes = [Step("DELETE", e, e) for e in gone_set]
    else:
        gone = {e.key: e for e in gone_set}
        new = {e.key: e for e in new_set}
        inserts = [Step("INSERT", e) for k, e in new.items() if k not in gone]
        modifies = [Step("MODIFY", e, gone[k]) for k, e in new.items() if k in gone]
        deletes = [Step("DELETE", e, e) for k, e in gone.items() if k not in new]
    tight: set[str] = set()
    if sizes:
        for s in inserts:
            peak[s.entry.table] = peak.get(s.entry.table, 0) + 1
        tight = {t for t, n in peak.items() if sizes.get(t, 0) and n > sizes[t]}
    first = [s for s in deletes if s.entry.table in tight]
    last = [s for s in deletes if s.entry.table not in tight]
    return _sorted(first) + _sorted(inserts) + _sorted(modifies) + _sorted(last)


def _sorted(steps: Sequence[Step]) -> list[Step]:
    """Deterministic order; ids before classify before ranges, so a group is known
    before its sources are classified (and the reverse would only cost counters)."""
    rank = {T_LPM: 0, T_IDS: 1, T_CLASSIFY: 2, T_DEADLINE: 3}

    def order(s: Step) -> tuple[Any, ...]:
        # TableEntry's own field order, as plain tuples: compared in C, not by the
        # dataclass's generated __lt__/__eq__ (4,000 entries: 100 ms -> a few ms)
        e = s.entry
        return (rank.get(e.table, 9), e.table, e.match, e.action or "", e.params, e.priority)

    return sorted(steps, key=order)


def apply_steps(entries: Iterable[TableEntry], steps: Iterable[Step]) -> set[TableEntry]:
    """The entry set after ``steps`` (what the controller caches as installed)."""
    by_key = {e.key: e for e in entries}
    for s in steps:
        if s.kind == "DELETE":
            by_key.pop(s.entry.key, None)
        else:
            by_key[s.entry.key] = s.entry
    return set(by_key.values())

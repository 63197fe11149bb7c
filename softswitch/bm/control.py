"""The ingress and egress pipelines of a BMv2 JSON program as chains of node closures.

Each table and conditional of a pipeline becomes a node ``node(v) -> next
node or None``; a control runs ``while node: node = node(v)``. A table node
looks the packet up, runs the hit or the (current) default action and picks
the next node like BMv2: by ``__HIT__``/``__MISS__`` when the JSON has them,
otherwise by the action that ran. Tables p4c synthesises for straight-line
code (keyless, a const default action, absent from the P4Info) become a bare
call of that action, with no lookup at all.

Tables are :class:`softswitch.tables.Table` (exact dict, LPM per prefix
length, priority-sorted candidates for ternary/range/optional), sized from
the P4Info. A key with a mask (``field & 0xff00: ternary``) is copied,
masked, into a scratch slot before the lookup, as BMv2 masks it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from softswitch.bm.actions import Externs, compile_action
from softswitch.bm.expr import PrimitiveFn, compile_expr, hexstr
from softswitch.bm.layout import Layout
from softswitch.errors import InvalidArgument
from softswitch.tables import EXACT, LPM, OPTIONAL, RANGE, TERNARY, FieldMatch, KeyField, Table

Node = Callable[[list[int]], Any]
_JSON_KINDS = {"exact": EXACT, "lpm": LPM, "ternary": TERNARY, "range": RANGE}
#: BMv2 const-entry priorities: lower wins; tables.Table: higher wins.
_PRIO_TOP = (1 << 31) - 1


class _ByAction(dict[PrimitiveFn, Any]):
    """Next node by action, also for a direct meter's wrapper of it (its ``orig``)."""

    def __missing__(self, fn: Any) -> Any:
        return self[fn.orig]


@dataclass
class Visible:
    """What the P4Info says of a table: its size and, per key field, the match kind."""

    size: int
    kinds: list[str]


@dataclass
class TableRuntime:
    """A JSON table compiled: the lookup structure and its actions' closures."""

    name: str
    table: Table
    actions: dict[int, PrimitiveFn]
    names: dict[int, str]
    default_id: int
    default_args: tuple[int, ...]
    const_default: bool
    const_entries: list[tuple[tuple[FieldMatch, ...], int, int, tuple[int, ...]]] = field(
        default_factory=list
    )

    def action_fn(self, name: str) -> PrimitiveFn:
        """The closure of this table's action called ``name`` (p4c copies actions per table)."""
        for aid, aname in self.names.items():
            if aname == name:
                return self.actions[aid]
        raise InvalidArgument(self.name, f"action {name!r} is not an action of this table")


class Controls:
    """Compiled ``ingress`` and ``egress`` of a v1model program."""

    def __init__(
        self, lay: Layout, ext: Externs, j: dict[str, Any], visible: dict[str, Visible]
    ) -> None:
        self._lay, self._ext = lay, ext
        self._actions_json = {a["id"]: a for a in j.get("actions", [])}
        self._uses_exit = any(
            p["op"] == "exit" for a in j.get("actions", []) for p in a.get("primitives", [])
        )
        self._visible = visible
        self._scratch: dict[tuple[str, int], tuple[int, int, int]] = {}
        self._masked: dict[str, list[int]] = {}
        self.tables: dict[str, TableRuntime] = {}
        pipes = {p["name"]: p for p in j.get("pipelines", [])}
        if set(pipes) != {"ingress", "egress"}:
            raise InvalidArgument("pipelines", f"{sorted(pipes)}; v1model has ingress and egress")
        self.ingress = self._pipeline(pipes["ingress"])
        self.egress = self._pipeline(pipes["egress"])
        unknown = set(visible) - set(self.tables)
        if unknown:
            raise InvalidArgument(sorted(unknown)[0], "P4Info table is not in the BMv2 JSON")

    def _pipeline(self, p: dict[str, Any]) -> Callable[[list[int]], None]:
        if p.get("action_profiles"):
            raise InvalidArgument(p["action_profiles"][0]["name"], "action profiles")
        tables = {t["name"]: t for t in p.get("tables", [])}
        conds = {c["name"]: c for c in p.get("conditionals", [])}
        nodes: dict[str, Node] = {}

        def build(name: str | None) -> Node | None:
            if name is None:
                return None
            if name in nodes:
                return nodes[name]
            if name in tables:
                node = self._table_node(tables[name], build)
            elif name in conds:
                node = self._cond_node(conds[name], build)
            else:
                raise InvalidArgument(p["name"], f"unknown node {name!r}")
            nodes[name] = node
            return node

        init = build(p.get("init_table"))
        if not self._uses_exit:

            def run_to_end(v: list[int]) -> None:
                node = init
                while node is not None:
                    node = node(v)

            return run_to_end

        def run(v: list[int]) -> None:
            node = init
            while node is not None and not v[0]:  # v[0]: the `exit` primitive ran
                node = node(v)

        return run

    def _cond_node(self, c: dict[str, Any], build: Callable[[str | None], Node | None]) -> Node:
        cond = compile_expr(self._lay, c["expression"], f"conditional {c['name']!r}")
        t, f = build(c.get("true_next")), build(c.get("false_next"))
        return lambda v: t if cond(v, ()) else f

    def _table_node(self, t: dict[str, Any], build: Callable[[str | None], Node | None]) -> Node:
        name = t["name"]
        rt = self._table(t)
        nt = t.get("next_tables", {})
        if "__HIT__" in nt or "__MISS__" in nt:
            hit_next, miss_next = build(nt.get("__HIT__")), build(nt.get("__MISS__"))
            by_fn: dict[PrimitiveFn, Node | None] = {}
        else:
            hit_next = miss_next = None
            by_fn = {rt.actions[aid]: build(nt.get(rt.names[aid])) for aid in rt.actions}
        hit_based = not by_fn
        if name in self._ext.direct_meters:  # a hit's call is its meter's wrapper (bm/meters.py)
            by_fn = _ByAction(by_fn)
        if not t.get("key") and name not in self._visible and rt.const_default:
            # p4c's straight-line-code table: just the action.
            fn, args = rt.actions[rt.default_id], rt.default_args
            nxt = miss_next if hit_based else by_fn[fn]

            def call(v: list[int]) -> Node | None:
                fn(v, args)
                return nxt

            return call
        table = rt.table
        lookup = table.lookup_fn()
        pre = self._masked_keys(t)
        if not pre and not hit_based:

            def apply_by_action(v: list[int]) -> Node | None:
                hit = lookup(v)
                fn, args = table.default if hit is None else hit
                fn(v, args)
                return by_fn[fn]

            return apply_by_action
        if not pre:

            def apply_by_hit(v: list[int]) -> Node | None:
                hit = lookup(v)
                if hit is None:
                    fn, args = table.default
                    fn(v, args)
                    return miss_next
                fn, args = hit
                fn(v, args)
                return hit_next

            return apply_by_hit

        def apply(v: list[int]) -> Node | None:
            for slot, src, mask in pre:
                v[slot] = v[src] & mask
            hit = lookup(v)
            if hit is None:
                fn, args = table.default
                fn(v, args)
                return miss_next if hit_based else by_fn[fn]
            fn, args = hit
            fn(v, args)
            return hit_next if hit_based else by_fn[fn]

        return apply

    def _masked_keys(self, t: dict[str, Any]) -> tuple[tuple[int, int, int], ...]:
        return tuple(self._scratch[(t["name"], i)] for i in self._masked.get(t["name"], ()))

    def _table(self, t: dict[str, Any]) -> TableRuntime:
        name = t["name"]
        if t.get("type", "simple") != "simple":
            raise InvalidArgument(name, f"table type {t.get('type')!r} (action profiles)")
        if t.get("with_counters") or t.get("support_timeout"):
            raise InvalidArgument(name, "direct counters, idle timeout")
        if t.get("direct_meters") and name not in self._ext.direct_meters:
            raise InvalidArgument(name, f"direct meter {t['direct_meters']!r} is not bound to it")
        vis = self._visible.get(name)
        keys = t.get("key", [])
        if keys and vis is None:
            raise InvalidArgument(name, "table with a key is not in the P4Info")
        if vis is not None and len(vis.kinds) != len(keys):
            raise InvalidArgument(name, f"P4Info has {len(vis.kinds)} key fields, JSON {len(keys)}")
        fields: list[KeyField] = []
        for i, k in enumerate(keys):
            kind = _JSON_KINDS.get(k["match_type"])
            if kind is None:
                raise InvalidArgument(f"{name}.{k.get('name')}", f"match kind {k['match_type']!r}")
            assert vis is not None
            if vis.kinds[i] == OPTIONAL and kind == TERNARY:
                kind = OPTIONAL
            elif vis.kinds[i] != kind:
                raise InvalidArgument(
                    f"{name}.{k.get('name')}", f"P4Info says {vis.kinds[i]}, JSON {kind}"
                )
            slot, width = self._lay.field(k["target"])
            if k.get("mask"):
                scratch = self._lay.new_slot()
                self._scratch[(name, i)] = (scratch, slot, hexstr(k["mask"]))
                self._masked.setdefault(name, []).append(i)
                slot = scratch
            fields.append(KeyField(k.get("name", str(i)), width, kind, slot))
        actions: dict[int, PrimitiveFn] = {}
        names: dict[int, str] = {}
        for aid in t.get("action_ids", []):
            a = self._actions_json.get(aid)
            if a is None:
                raise InvalidArgument(name, f"unknown action id {aid}")
            actions[aid] = compile_action(self._lay, self._ext, a)
            names[aid] = a["name"]
        de = t.get("default_entry") or {}
        did = de.get("action_id")
        if did not in actions:
            raise InvalidArgument(name, "default action is not one of the table's actions")
        dargs = tuple(hexstr(x) for x in de.get("action_data", []))
        size = vis.size if vis is not None else int(t.get("max_size", 1024))
        table = Table(name, tuple(fields), size, (actions[did], dargs))
        dm = self._ext.direct_meters.get(name)
        if dm is not None:  # each entry's call runs its meter first (bm/meters.py)
            table.wrap, table.forget = dm.wrap, dm.forget
        rt = TableRuntime(name, table, actions, names, did, dargs, bool(de.get("action_const")))
        for e in t.get("entries", []) or []:
            rt.const_entries.append(self._const_entry(rt, fields, e))
        self.tables[name] = rt
        return rt

    def _const_entry(
        self, rt: TableRuntime, fields: Sequence[KeyField], e: dict[str, Any]
    ) -> tuple[tuple[FieldMatch, ...], int, int, tuple[int, ...]]:
        key: list[FieldMatch] = []
        for f, m in zip(fields, e["match_key"], strict=True):
            if f.kind == EXACT:
                key.append(hexstr(m["key"]))
            elif f.kind == LPM:
                key.append((hexstr(m["key"]), int(m["prefix_length"])))
            elif f.kind == RANGE:
                key.append((hexstr(m["start"]), hexstr(m["end"])))
            else:
                key.append((hexstr(m["key"]), hexstr(m["mask"])))
        prio = _PRIO_TOP - int(e.get("priority", 0)) if rt.table.needs_priority else 0
        aid = e["action_entry"]["action_id"]
        args = tuple(hexstr(x) for x in e["action_entry"].get("action_data", []))
        rt.table.insert(tuple(key), prio, (rt.actions[aid], args), None)
        return tuple(key), prio, aid, args

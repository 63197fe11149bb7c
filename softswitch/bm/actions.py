"""Compile BMv2 JSON actions (v1model primitives) to closures ``fn(v, args)``.

Every action of the JSON becomes its own closure object (the control uses
closure identity to pick ``next_tables`` by action). The primitives p4c emits
for v1model that the soft switch implements are :func:`compile_primitive`'s branches
(listed in docs/softswitch.md);
anything else (truncate, ...) is refused when the pipeline is loaded,
naming the primitive and the action. The hash primitives are :mod:`softswitch.bm.hashing`'s,
``push``/``pop`` (header stacks) :mod:`softswitch.bm.stacks`'s, clone, resubmit and
recirculate :mod:`softswitch.bm.packet`'s, meters :mod:`softswitch.bm.meters`'s, digests
:mod:`softswitch.bm.digests`'s.

Counters count the ingress frame length in bytes, like BMv2
(``Packet::get_ingress_length``): :attr:`Externs.ingress_length`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from softswitch.bm import packet
from softswitch.bm.digests import Digests, generate_digest
from softswitch.bm.expr import Expr, PrimitiveFn, compile_expr, constant_of
from softswitch.bm.hashing import Calculations, hash_based_offset, rng_uniform
from softswitch.bm.layout import Layout
from softswitch.bm.meters import execute_meter, meter_arrays
from softswitch.bm.stacks import stack_shift
from softswitch.errors import InvalidArgument
from softswitch.tables import Counter


class Register:
    """A register array: ``size`` cells of ``bitwidth`` bits, zero at load."""

    def __init__(self, name: str, size: int, bitwidth: int) -> None:
        self.name = name
        self.size = size
        self.mask = (1 << bitwidth) - 1
        self.cells = [0] * size


class Externs:
    """The program's stateful objects, by JSON name, and the slots primitives need."""

    def __init__(self, lay: Layout, j: dict[str, Any]) -> None:
        self.counters: dict[str, Counter] = {}
        self.registers: dict[str, Register] = {}
        for c in j.get("counter_arrays", []):
            if c.get("is_direct"):
                raise InvalidArgument(c["name"], "direct counters are not supported")
            self.counters[c["name"]] = Counter(c["name"], int(c["size"]))
        for r in j.get("register_arrays", []):
            self.registers[r["name"]] = Register(r["name"], int(r["size"]), int(r["bitwidth"]))
        self.meters, self.direct_meters = meter_arrays(j, lay)
        self.digests = Digests(lay, j)
        for key in ("extern_instances", "parse_vsets"):
            if j.get(key):
                raise InvalidArgument(key, f"{j[key][0].get('name')!r} is not supported")
        #: simple_switch's packet length register: the ingress length, plus or minus each
        #: header made valid or invalid (add/remove_header); egress's packet_length
        self.length_reg = lay.new_slot()
        #: the frame's length as received (what counters and byte meters count)
        self.ingress_length = lay.new_slot()
        for dm in self.direct_meters.values():
            dm.bind(self.ingress_length)
        self.calculations = Calculations(lay, j)
        #: clone/resubmit/recirculate/digest request slots (0: no request)
        self.instance_regs = packet.Registers.allocate(lay)
        self.egress_spec = lay.std("egress_spec")
        self.mcast_grp = lay.std("mcast_grp")


def _field_dst(lay: Layout, p: Any, where: str) -> tuple[int, int]:
    if p.get("type") != "field":
        raise InvalidArgument(where, f"assignment to a {p.get('type')!r} is not supported")
    slot, width = lay.field(p["value"], write=True)
    return slot, (1 << width) - 1


def _dirtying(fn: PrimitiveFn, raw: int | None) -> PrimitiveFn:
    """``fn`` followed by marking the written packet header as modified (see layout)."""
    if raw is None:
        return fn

    def write_then_dirty(v: list[int], a: Sequence[int]) -> None:
        fn(v, a)
        v[raw] = -1

    return write_then_dirty


def _assign(lay: Layout, params: list[Any], where: str) -> PrimitiveFn:
    """``dst = src`` truncated to dst's width; a packet header's raw slot is cleared."""
    slot, mask = _field_dst(lay, params[0], where)
    src = params[1]
    e = None if src.get("type") in ("runtime_data", "local") else compile_expr(lay, src, where)
    c = None if e is None else constant_of(e)
    fn: PrimitiveFn
    if e is None:
        i = int(src["value"])

        def assign_arg(v: list[int], a: Sequence[int]) -> None:
            v[slot] = a[i] & mask

        fn = assign_arg
    elif c is not None:
        value = c & mask

        def assign_const(v: list[int], a: Sequence[int]) -> None:
            v[slot] = value

        fn = assign_const
    elif src.get("type") == "field":
        s_slot, _w = lay.field(src["value"])

        def assign_field(v: list[int], a: Sequence[int]) -> None:
            v[slot] = v[s_slot] & mask

        fn = assign_field
    else:
        expr = e

        def assign_expr(v: list[int], a: Sequence[int]) -> None:
            v[slot] = expr(v, a) & mask

        fn = assign_expr
    return _dirtying(fn, lay.raw_slot(params[0]["value"]))


def compile_primitive(lay: Layout, ext: Externs, prim: dict[str, Any], where: str) -> PrimitiveFn:
    """One primitive call. ``_jump*`` are handled by :func:`compile_action`."""
    op = prim["op"]
    params = prim.get("parameters", [])
    where = f"{where}: {op}"
    if op == "assign":
        return _assign(lay, params, where)
    if op == "mark_to_drop":
        es, mg = ext.egress_spec, ext.mcast_grp

        def mark_to_drop(v: list[int], a: Sequence[int]) -> None:
            v[es] = packet.DROP_PORT
            v[mg] = 0

        return mark_to_drop
    if op == "count":
        counter = ext.counters.get(params[0]["value"])
        if counter is None:
            raise InvalidArgument(where, f"unknown counter {params[0]['value']!r}")
        index = compile_expr(lay, params[1], where)
        plen = ext.ingress_length
        count = counter.count

        def do_count(v: list[int], a: Sequence[int]) -> None:
            count(index(v, a), v[plen])

        return do_count
    if op in ("register_read", "register_write"):
        reg_param = params[1] if op == "register_read" else params[0]
        reg = ext.registers.get(reg_param["value"])
        if reg is None:
            raise InvalidArgument(where, f"unknown register {reg_param['value']!r}")
        cells, size, rmask = reg.cells, reg.size, reg.mask
        if op == "register_read":
            slot, mask = _field_dst(lay, params[0], where)
            idx = compile_expr(lay, params[2], where)

            def register_read(v: list[int], a: Sequence[int]) -> None:
                i = idx(v, a)
                v[slot] = cells[i] & mask if i < size else 0

            return _dirtying(register_read, lay.raw_slot(params[0]["value"]))
        idx = compile_expr(lay, params[1], where)
        value = compile_expr(lay, params[2], where)

        def register_write(v: list[int], a: Sequence[int]) -> None:
            i = idx(v, a)
            if i < size:
                cells[i] = value(v, a) & rmask

        return register_write
    if op in ("add_header", "remove_header"):
        h = lay.header(params[0]["value"])
        valid, slots, raw = h.valid, tuple(s for _n, s, _w in h.fields), h.raw
        lreg, nbytes = ext.length_reg, h.nbytes
        if op == "remove_header":

            def remove_header(v: list[int], a: Sequence[int]) -> None:
                if v[valid]:
                    v[valid] = 0
                    v[lreg] -= nbytes

            return remove_header

        def add_header(v: list[int], a: Sequence[int]) -> None:
            if not v[valid]:
                for s in slots:
                    v[s] = 0
                v[valid] = 1
                v[lreg] += nbytes
                if raw >= 0:
                    v[raw] = -1

        return add_header
    if op == "assign_header":
        dst, src = lay.header(params[0]["value"]), lay.header(params[1]["value"])
        pairs = tuple((d[1], s[1]) for d, s in zip(dst.fields, src.fields, strict=True))
        dv, sv, draw = dst.valid, src.valid, dst.raw

        def assign_header(v: list[int], a: Sequence[int]) -> None:
            v[dv] = v[sv]
            for d, s in pairs:
                v[d] = v[s]
            if draw >= 0:
                v[draw] = -1

        return assign_header
    if op == "exit":

        def do_exit(v: list[int], a: Sequence[int]) -> None:
            v[0] = 1

        return do_exit
    if op == "modify_field_with_hash_based_offset":
        fn = hash_based_offset(lay, ext.calculations, params, where)
        return _dirtying(fn, lay.raw_slot(params[0]["value"]))
    if op == "modify_field_rng_uniform":
        return _dirtying(rng_uniform(lay, params, where), lay.raw_slot(params[0]["value"]))
    if op == "generate_digest":
        return generate_digest(lay, ext.instance_regs.learn, params, where)
    if op in packet.OPS:
        return packet.primitive(lay, ext.instance_regs, op, params, where)
    if op == "execute_meter":
        fn = execute_meter(lay, ext.meters, params, where, ext.ingress_length)
        return _dirtying(fn, lay.raw_slot(params[2]["value"]))
    if op in ("push", "pop"):
        return stack_shift(lay, op, params, where)
    if op == "log_msg":

        def log_msg(v: list[int], a: Sequence[int]) -> None:
            return None

        return log_msg
    raise InvalidArgument(where, "primitive is not supported by the soft switch")


def compile_action(lay: Layout, ext: Externs, action: dict[str, Any]) -> PrimitiveFn:
    """A fresh closure running the action's primitives in order (with p4c's jumps)."""
    where = f"action {action['name']!r}"
    prims = action.get("primitives", [])
    if any(p["op"] in ("_jump", "_jump_if_zero") for p in prims):
        return _with_jumps(lay, ext, prims, where)
    steps = tuple(compile_primitive(lay, ext, p, where) for p in prims)
    if not steps:

        def empty(v: list[int], a: Sequence[int]) -> None:
            return None

        return empty
    if len(steps) == 1:
        only = steps[0]

        def one(v: list[int], a: Sequence[int]) -> None:
            only(v, a)

        return one

    if len(steps) == 2:
        s0, s1 = steps

        def two(v: list[int], a: Sequence[int]) -> None:
            s0(v, a)
            s1(v, a)

        return two
    if len(steps) == 3:
        t0, t1, t2 = steps

        def three(v: list[int], a: Sequence[int]) -> None:
            t0(v, a)
            t1(v, a)
            t2(v, a)

        return three

    def run(v: list[int], a: Sequence[int]) -> None:
        for step in steps:
            step(v, a)

    return run


def _with_jumps(lay: Layout, ext: Externs, prims: list[Any], where: str) -> PrimitiveFn:
    # Each step: (kind, fn_or_cond, target); kind 0 = call, 1 = jump, 2 = jump if zero.
    code: list[tuple[int, Any, int]] = []
    for p in prims:
        params = p.get("parameters", [])
        if p["op"] == "_jump":
            code.append((1, None, int(params[0]["value"])))
        elif p["op"] == "_jump_if_zero":
            cond: Expr = compile_expr(lay, params[0], where)
            code.append((2, cond, int(params[1]["value"])))
        else:
            code.append((0, compile_primitive(lay, ext, p, where), 0))
    prog = tuple(code)
    end = len(prog)

    def run(v: list[int], a: Sequence[int]) -> None:
        pc = 0
        while pc < end:
            kind, fn, target = prog[pc]
            if kind == 0:
                fn(v, a)
                pc += 1
            elif kind == 1 or not fn(v, a):
                pc = target
            else:
                pc += 1

    return run

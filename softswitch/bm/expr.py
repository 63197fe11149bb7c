"""Compile BMv2 JSON expressions to Python closures, once, at pipeline load.

An expression becomes ``f(v, a) -> int`` where ``v`` is the packet's state
vector (:mod:`softswitch.bm.layout`) and ``a`` the running action's
parameters (``()`` outside actions). Values are Python ints of unbounded
width, as BMv2 computes them (arbitrary-precision ``Data``): p4c emits an
explicit ``& mask`` wherever P4 wraps, and an assignment truncates to the
destination field's width, so Python's ints give BMv2's results bit for bit.

Constant sub-expressions are folded, and the most common shapes (a field
against a constant) get dedicated closures, because this is the packet path.
Operators and operand kinds outside the supported set raise InvalidArgument
naming them; the list is in docs/softswitch.md.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from softswitch.bm.layout import Layout
from softswitch.errors import InvalidArgument

#: A compiled expression: state vector, action arguments -> value.
Expr = Callable[[list[int], Sequence[int]], int]
#: A compiled primitive or action: state vector, action arguments (it writes the state).
PrimitiveFn = Callable[[list[int], Sequence[int]], None]

_BINARY: dict[str, Callable[[int, int], int]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "<<": operator.lshift,
    ">>": operator.rshift,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class StackOutOfBounds(Exception):
    """``.last`` of an empty header stack (the parser turns it into error.StackOutOfBounds)."""


class Const:
    """Marks a folded constant so callers can specialise on it."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __call__(self, v: list[int], a: Sequence[int]) -> int:
        return self.value


def _const(value: int) -> Expr:
    return Const(value)


def constant_of(e: Expr) -> int | None:
    return e.value if isinstance(e, Const) else None


def hexstr(text: str) -> int:
    return int(text, 16)


def compile_expr(lay: Layout, node: Any, where: str) -> Expr:
    """Compile one JSON operand/expression node (``{"type": ..., "value": ...}``)."""
    if node is None:
        raise InvalidArgument(where, "missing operand")
    kind = node.get("type")
    value = node.get("value")
    if kind == "expression":
        if isinstance(value, dict) and "op" in value:
            return _compile_op(lay, value, where)
        return compile_expr(lay, value, where)
    if kind == "field":
        slot, _w = lay.field(value)
        return lambda v, a: v[slot]
    if kind == "hexstr":
        return _const(hexstr(value))
    if kind == "bool":
        return _const(1 if value else 0)
    if kind in ("runtime_data", "local"):
        idx = int(value)
        return lambda v, a: a[idx]
    if kind == "header":
        valid = lay.header(value).valid
        return lambda v, a: v[valid]
    if kind == "stack_field":
        stack_name, fname = value
        st = lay.stack(stack_name)
        slots = tuple(lay.field([h.name, fname])[0] for h in st.headers)
        nx = st.next_index

        def last_field(v: list[int], a: Sequence[int]) -> int:
            i = v[nx] - 1
            if i < 0:
                raise StackOutOfBounds(stack_name)
            return v[slots[i]]

        return last_field
    raise InvalidArgument(where, f"operand type {kind!r} is not supported")


def _compile_op(lay: Layout, e: dict[str, Any], where: str) -> Expr:
    op = e["op"]
    if op == "?":
        cond = compile_expr(lay, e["cond"], where)
        t = compile_expr(lay, e["left"], where)
        f = compile_expr(lay, e["right"], where)
        return lambda v, a: t(v, a) if cond(v, a) else f(v, a)
    if op in ("d2b", "b2d"):
        right = e["right"]
        inner = compile_expr(lay, right, where)
        c = constant_of(inner)
        if c is not None:
            return _const(1 if c else 0)
        if right.get("type") == "field":
            slot = lay.field(right["value"])[0]
            return lambda v, a: 1 if v[slot] else 0
        if _is_boolean(right):  # already 0 or 1: no second closure
            return inner
        return lambda v, a: 1 if inner(v, a) else 0
    if op == "valid":
        return compile_expr(lay, e["right"], where)
    if op == "not":
        inner = compile_expr(lay, e["right"], where)
        return lambda v, a: 0 if inner(v, a) else 1
    if op == "~":
        inner = compile_expr(lay, e["right"], where)
        return lambda v, a: ~inner(v, a)
    if op in ("and", "or"):
        left = compile_expr(lay, e["left"], where)
        right = compile_expr(lay, e["right"], where)
        if op == "and":
            return lambda v, a: 1 if left(v, a) and right(v, a) else 0
        return lambda v, a: 1 if left(v, a) or right(v, a) else 0
    fn = _BINARY.get(op)
    if fn is None:
        raise InvalidArgument(where, f"expression operator {op!r} is not supported")
    left = compile_expr(lay, e["left"], where)
    right = compile_expr(lay, e["right"], where)
    return _binary(fn, left, right, e["left"], lay)


_BOOLEAN_OPS = frozenset({"==", "!=", "<", "<=", ">", ">=", "and", "or", "not", "d2b", "b2d"})


def _is_boolean(node: Any) -> bool:
    """True if ``node`` compiles to a closure that only ever returns 0 or 1."""
    if node.get("type") == "bool":
        return True
    inner = node.get("value")
    if node.get("type") == "expression" and isinstance(inner, dict):
        if "op" in inner:
            return inner["op"] in _BOOLEAN_OPS
        return _is_boolean(inner)
    return False


def _binary(fn: Callable[[int, int], Any], left: Expr, right: Expr, ln: Any, lay: Layout) -> Expr:
    lc, rc = constant_of(left), constant_of(right)
    if lc is not None and rc is not None:
        return _const(int(fn(lc, rc)))
    # A field against a constant: the shape of almost every condition and mask.
    if rc is not None and ln.get("type") == "field":
        slot, width = lay.field(ln["value"])
        full = (1 << width) - 1
        if fn is operator.and_ and rc & full == full:
            # p4c's casts (``(bit<32>) f`` is ``f & 0xffffffff``): a field holds only
            # its width's bits, so masking with all of them is the field itself
            return lambda v, a: v[slot]
        if fn is operator.eq:
            return lambda v, a: 1 if v[slot] == rc else 0
        if fn is operator.ne:
            return lambda v, a: 1 if v[slot] != rc else 0
        if fn is operator.le:
            return lambda v, a: 1 if v[slot] <= rc else 0
        if fn is operator.lt:
            return lambda v, a: 1 if v[slot] < rc else 0
        if fn is operator.ge:
            return lambda v, a: 1 if v[slot] >= rc else 0
        if fn is operator.gt:
            return lambda v, a: 1 if v[slot] > rc else 0
        if fn is operator.and_:
            return lambda v, a: v[slot] & rc
        return lambda v, a: int(fn(v[slot], rc))
    if rc is not None:
        if fn is operator.and_:
            return lambda v, a: left(v, a) & rc
        return lambda v, a: int(fn(left(v, a), rc))
    return lambda v, a: int(fn(left(v, a), right(v, a)))

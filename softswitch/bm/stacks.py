"""Header-stack primitives (``push_front``/``pop_front``) and the parser's ``lookahead``.

p4c emits ``hdr.s.push_front(n)`` as the primitive ``push`` and
``pop_front(n)`` as ``pop`` (parameters: the ``header_stack`` and a constant
count). simple_switch 1.15 is built with P4-16 stack semantics
(``StackP4_16``): the whole stack shifts; ``push`` leaves the first ``n``
elements invalid, ``pop`` the last ``n``; the next index moves by ``n``,
within ``[0, size]``. BMv2 shifts by *swapping* element values, so an element
that became invalid holds what the swap left there; the soft switch does the
same swaps, so even reads of invalid elements agree.

Each header instance is a contiguous block of slots in the state vector
(validity, fields, raw offset; :mod:`softswitch.bm.layout`), so a swap is a
slice exchange, and a moved element keeps its raw frame offset (its fields
are still those bytes of the frame).

``lookahead<T>()`` is a parser ``set`` whose source is ``{"type":
"lookahead", "value": [bit offset, bit width]}`` from the current parser
position. BMv2 does not check the frame's length there; bits past the end of
the frame read as zero here (BMv2 reads whatever its buffer holds).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from softswitch.bm.expr import PrimitiveFn, compile_expr, constant_of
from softswitch.bm.layout import Layout
from softswitch.errors import InvalidArgument

#: A parser operation: (state vector, frame, offset) -> offset.
ParserOp = Callable[[list[int], bytes, int], int]


def _blocks(lay: Layout, name: str, where: str) -> tuple[list[tuple[int, int]], int]:
    """Per element, its slot range [start, end); and the next-index slot."""
    st = lay.stack(name)
    blocks = []
    for h in st.headers:
        start, end = h.valid, h.raw + 1
        if h.raw < 0 or [s for _n, s, _w in h.fields] != list(range(start + 1, end - 1)):
            raise AssertionError(f"{where}: {h.name} is not one block of slots")
        blocks.append((start, end))
    return blocks, st.next_index


def stack_shift(lay: Layout, op: str, params: list[Any], where: str) -> PrimitiveFn:
    """``push`` or ``pop`` of a header stack by a constant count, as StackP4_16 does."""
    if len(params) != 2 or params[0].get("type") != "header_stack":
        raise InvalidArgument(where, "expected (header_stack, count)")
    n = constant_of(compile_expr(lay, params[1], where))
    if n is None:
        raise InvalidArgument(where, "a header stack shifted by a run-time count")
    blocks, nx = _blocks(lay, str(params[0]["value"]), where)
    size = len(blocks)
    if n == 0:

        def no_shift(v: list[int], a: Sequence[int]) -> None:
            return None

        return no_shift
    # The swaps BMv2 makes, in its order: pairs of element indices.
    if op == "push":
        swaps = tuple((i, i - n) for i in range(size - 1, n - 1, -1))
        cleared = tuple(blocks[i][0] for i in range(min(size, n)))
    else:
        swaps = tuple((i, i + n) for i in range(size - n)) if n < size else ()
        cleared = tuple(blocks[i][0] for i in range(max(size - n, 0), size))
    pairs = tuple((blocks[i], blocks[k]) for i, k in swaps)

    def shift(v: list[int], a: Sequence[int]) -> None:
        for (s0, e0), (s1, e1) in pairs:
            v[s0:e0], v[s1:e1] = v[s1:e1], v[s0:e0]
        for valid in cleared:
            v[valid] = 0
        i = v[nx]
        v[nx] = min(size, i + n) if op == "push" else i - min(i, n)

    return shift


def lookahead_set(lay: Layout, dst: Any, src: Any, where: str) -> ParserOp:
    """Parser ``set(dst, lookahead(offset, width))``: the bits ahead, truncated to dst."""
    if dst.get("type") != "field":
        raise InvalidArgument(where, f"lookahead into a {dst.get('type')!r}")
    slot, dwidth = lay.field(dst["value"], write=True)
    raw = lay.raw_slot(dst["value"])
    offset, width = (int(x) for x in src["value"])
    skip, bit = offset // 8, offset % 8
    nbytes = (bit + width + 7) // 8
    shift = 8 * nbytes - bit - width
    mask = ((1 << width) - 1) & ((1 << dwidth) - 1)
    from_bytes = int.from_bytes

    def lookahead(v: list[int], data: bytes, pos: int) -> int:
        at = pos + skip
        chunk = data[at : at + nbytes]
        x = from_bytes(chunk, "big") << (8 * (nbytes - len(chunk)))
        v[slot] = (x >> shift) & mask
        if raw is not None:
            v[raw] = -1
        return pos

    return lookahead

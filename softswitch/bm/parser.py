"""Parser, checksum verify/update and deparser of a BMv2 JSON program, as closures.

Parser semantics follow BMv2: ``extract`` past the end of the frame sets
``parser_error = PacketTooShort`` and stops parsing with that header invalid
(headers extracted before stay valid); a failing ``verify`` stops parsing
*after* its header was extracted (the header stays valid); ``extract`` into a
full header stack is ``StackOutOfBounds``. Parser errors never drop: ingress
runs with ``standard_metadata.parser_error`` set. ``select`` keys are the
concatenation of each key field padded to whole bytes, matched against p4c's
``value``/``mask`` in order, exactly how BMv2 builds them.

``set`` from ``lookahead`` is :mod:`softswitch.bm.stacks`'s. The deparser
emits the valid headers in the JSON's order, then the bytes the parser did
not consume.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from softswitch.bm.actions import Externs, compile_primitive
from softswitch.bm.expr import Expr, StackOutOfBounds, compile_expr, hexstr
from softswitch.bm.hashing import Calculations, csum16, fold
from softswitch.bm.layout import HeaderSlots, Layout
from softswitch.bm.stacks import lookahead_set
from softswitch.errors import InvalidArgument

#: A parser state: (state vector, frame, offset) -> (next state or None, offset).
State = Callable[[list[int], bytes, int], tuple[Any, int]]


class ParserStop(Exception):
    """A parser error: its code and the offset where parsing stopped."""

    def __init__(self, code: int, pos: int) -> None:
        self.code = code
        self.pos = pos


def _extractor(h: HeaderSlots, too_short: int) -> Callable[[list[int], bytes, int], int]:
    n, valid, raw = h.nbytes, h.valid, h.raw
    first = h.fields[0][1] if h.fields else valid + 1
    last = first + len(h.fields)
    if [slot for _n, slot, _w in h.fields] != list(range(first, last)):
        raise AssertionError(f"{h.name}: field slots are not contiguous")
    pairs = []
    at = 8 * n
    for _name, _slot, width in h.fields:
        at -= width
        pairs.append((at, (1 << width) - 1))
    layout = tuple(pairs)
    from_bytes = int.from_bytes

    def extract(v: list[int], data: bytes, pos: int) -> int:
        end = pos + n
        if end > len(data):
            raise ParserStop(too_short, pos)
        x = from_bytes(data[pos:end], "big")
        v[first:last] = [(x >> shift) & mask for shift, mask in layout]
        v[valid] = 1
        v[raw] = pos
        return end

    return extract


def _stack_extractor(
    lay: Layout, name: str, too_short: int, oob: int
) -> Callable[[list[int], bytes, int], int]:
    st = lay.stack(name)
    elems = tuple(_extractor(h, too_short) for h in st.headers)
    nx, size = st.next_index, len(st.headers)

    def extract_next(v: list[int], data: bytes, pos: int) -> int:
        i = v[nx]
        if i >= size:
            raise ParserStop(oob, pos)
        end = elems[i](v, data, pos)
        v[nx] = i + 1
        return end

    return extract_next


class CompiledParser:
    """The program's parser: ``parse(v, data) -> offset of the payload``."""

    def __init__(self, lay: Layout, ext: Externs, j: dict[str, Any]) -> None:
        parsers = j.get("parsers", [])
        if len(parsers) != 1:
            raise InvalidArgument("parsers", f"{len(parsers)} parsers; v1model has exactly one")
        p = parsers[0]
        self.err_slot = lay.std("parser_error")
        self._too_short = lay.errors.get("PacketTooShort", 1)
        self._oob = lay.errors.get("StackOutOfBounds", 3)
        self._lay, self._ext = lay, ext
        specs = {s["name"]: s for s in p["parse_states"]}
        self._states: dict[str, State] = {}
        self._specs = specs
        self.init = self._state(p["init_state"])

    def _state(self, name: str | None) -> State | None:
        if name is None:
            return None
        if name in self._states:
            return self._states[name]
        spec = self._specs.get(name)
        if spec is None:
            raise InvalidArgument("parsers", f"unknown parser state {name!r}")
        # Placeholder for loops (a state may transition to itself, e.g. header stacks).
        cell: list[State] = []
        self._states[name] = lambda v, d, pos: cell[0](v, d, pos)
        ops = tuple(self._op(op, name) for op in spec.get("parser_ops", []))
        select = self._select(spec, name)
        state: State
        if len(ops) == 1:
            only = ops[0]

            def state(v: list[int], data: bytes, pos: int) -> tuple[Any, int]:
                pos = only(v, data, pos)  # before select: it reads what was extracted
                return select(v), pos

        else:

            def state(v: list[int], data: bytes, pos: int) -> tuple[Any, int]:
                for op in ops:
                    pos = op(v, data, pos)
                return select(v), pos

        cell.append(state)
        self._states[name] = state
        return state

    def _op(self, op: dict[str, Any], state: str) -> Callable[[list[int], bytes, int], int]:
        kind = op["op"]
        params = op.get("parameters", [])
        where = f"parser state {state!r}: {kind}"
        lay = self._lay
        if kind == "extract":
            ptype, pval = params[0]["type"], params[0]["value"]
            if ptype == "regular":
                return _extractor(lay.header(pval), self._too_short)
            if ptype == "stack":
                return _stack_extractor(lay, pval, self._too_short, self._oob)
            raise InvalidArgument(where, f"extract into a {ptype!r} is not supported")
        if kind == "set" and params[1].get("type") == "lookahead":
            return lookahead_set(lay, params[0], params[1], where)
        if kind in ("set", "primitive"):
            prim = {"op": "assign", "parameters": params} if kind == "set" else params[0]
            fn = compile_primitive(lay, self._ext, prim, where)

            def run_primitive(v: list[int], data: bytes, pos: int) -> int:
                fn(v, ())
                return pos

            return run_primitive
        if kind == "verify":
            cond = compile_expr(lay, params[0], where)
            code = compile_expr(lay, params[1], where)

            def verify(v: list[int], data: bytes, pos: int) -> int:
                if not cond(v, ()):
                    raise ParserStop(code(v, ()), pos)
                return pos

            return verify
        raise InvalidArgument(where, "parser operation is not supported")

    def _select(self, spec: dict[str, Any], state: str) -> Callable[[list[int]], Any]:
        where = f"parser state {state!r}: select"
        keys: list[tuple[Expr, int]] = []
        for k in spec.get("transition_key", []):
            if k["type"] == "field":
                width = self._lay.field(k["value"])[1]
            elif k["type"] == "stack_field":
                st = self._lay.stack(k["value"][0])
                width = self._lay.field([st.headers[0].name, k["value"][1]])[1]
            else:
                raise InvalidArgument(where, f"key of type {k['type']!r} is not supported")
            keys.append((compile_expr(self._lay, k, where), 8 * ((width + 7) // 8)))
        cases: list[tuple[int, int, Any]] = []
        default: Any = None
        has_default = False
        for t in spec.get("transitions", []):
            nxt = self._state(t.get("next_state"))
            if t["type"] == "default":
                default, has_default = nxt, True
                break
            if t["type"] != "hexstr":
                raise InvalidArgument(where, f"transition of type {t['type']!r} is not supported")
            value = hexstr(t["value"])
            mask = hexstr(t["mask"]) if t.get("mask") else -1
            cases.append((value & mask, mask, nxt))
        no_match_code = self._lay.errors.get("NoMatch", 2)

        def no_match(v: list[int], data: bytes, pos: int) -> tuple[Any, int]:
            raise ParserStop(no_match_code, pos)

        table = tuple(cases)
        if not table and has_default:
            return lambda v: default
        key_fns = tuple(keys)
        slots = [self._lay.field(k["value"])[0] for k in spec.get("transition_key", [])
                 if k["type"] == "field"]  # fmt: skip
        if len(slots) == len(keys) == 1:  # the common case: one plain field
            only = slots[0]

            def select_one(v: list[int]) -> Any:
                k = v[only]
                for value, mask, nxt in table:
                    if k & mask == value:
                        return nxt
                return default if has_default else no_match

            return select_one
        if len(slots) == len(keys):
            field_keys = tuple(zip(slots, (bits for _fn, bits in keys), strict=True))

            def select_fields(v: list[int]) -> Any:
                k = 0
                for slot, bits in field_keys:
                    k = (k << bits) | v[slot]
                for value, mask, nxt in table:
                    if k & mask == value:
                        return nxt
                return default if has_default else no_match

            return select_fields

        def select(v: list[int]) -> Any:
            k = 0
            for fn, bits in key_fns:
                k = (k << bits) | fn(v, ())
            for value, mask, nxt in table:
                if k & mask == value:
                    return nxt
            return default if has_default else no_match

        return select

    def parse(self, v: list[int], data: bytes) -> int:
        """Run the parser; returns the payload offset (parser_error set on a stop)."""
        state = self.init
        pos = 0
        try:
            while state is not None:
                state, pos = state(v, data, pos)
        except ParserStop as stop:
            v[self.err_slot] = stop.code
            return stop.pos
        except StackOutOfBounds:
            v[self.err_slot] = self._oob
        return pos


def _whole_header(lay: Layout, calc: dict[str, Any], target: Any) -> tuple[int, int, Any] | None:
    """For the usual IPv4 shape (every field of one header but the 16-bit aligned
    checksum field, in order): (raw slot, word index of the checksum, words struct),
    so a still-raw header's checksum is computed from the frame bytes."""
    h = lay.header(target[0])
    if h.metadata or h.nbytes % 2:
        return None
    want = [[h.name, n] for n, _s, _w in h.fields if n != target[1]]
    if [item.get("value") for item in calc["input"]] != want:
        return None
    bit = 0
    for n, _s, w in h.fields:
        if n == target[1]:
            if w != 16 or bit % 16:
                return None
            return h.raw, bit // 16, struct.Struct(f"!{h.nbytes // 2}H")
        bit += w
    return None


class Checksums:
    """v1model verify_checksum / update_checksum blocks (csum16 only); each computes a JSON
    calculation compiled as hashes compile theirs (:class:`softswitch.bm.hashing.Calculation`:
    the bytes BMv2's BufBuilder builds, fields of invalid headers left out)."""

    def __init__(self, lay: Layout, calcs: Calculations, j: dict[str, Any]) -> None:
        Item = tuple[Expr | None, Callable[[list[int]], bytes], int, Any]
        self.verify: list[Item] = []
        self.update: list[Item] = []
        for c in j.get("checksums", []):
            where = f"checksum {c['name']!r}"
            if c.get("type") != "generic":
                raise InvalidArgument(where, f"checksum type {c.get('type')!r} is not supported")
            calc = calcs.get(c["calculation"], where)
            if calc.spec.get("algo") != "csum16":
                raise InvalidArgument(
                    f"calculation {calc.name!r}", f"algorithm {calc.spec['algo']!r}"
                )
            cond = compile_expr(lay, c["if_cond"], where) if c.get("if_cond") else None
            target, _w = lay.field(c["target"], write=True)
            item = (cond, calc.data, target, _whole_header(lay, calc.spec, c["target"]))
            if c.get("verify"):
                self.verify.append(item)
            if c.get("update"):
                self.update.append(item)
        self.checksum_error = lay.std("checksum_error")

    def run_verify(self, v: list[int], data: bytes) -> None:
        for cond, built, target, fast in self.verify:
            if cond is not None and not cond(v, ()):
                continue
            if fast is not None and v[fast[0]] >= 0:
                words = fast[2].unpack_from(data, v[fast[0]])
                value = fold(sum(words) - words[fast[1]])
            else:
                value = csum16(built(v))
            if value != v[target]:
                v[self.checksum_error] = 1

    def run_update(self, v: list[int], data: bytes) -> None:
        for cond, built, target, fast in self.update:
            if cond is not None and not cond(v, ()):
                continue
            if fast is not None and v[fast[0]] >= 0:
                words = fast[2].unpack_from(data, v[fast[0]])
                value = fold(sum(words) - words[fast[1]])
                if value != v[target]:
                    v[target] = value
                    v[fast[0]] = -1
            else:
                v[target] = csum16(built(v))


class Deparser:
    """Emit valid headers in order, then the unparsed payload."""

    def __init__(self, lay: Layout, j: dict[str, Any]) -> None:
        deps = j.get("deparsers", [])
        if len(deps) != 1:
            raise InvalidArgument("deparsers", f"{len(deps)} deparsers; v1model has exactly one")
        if deps[0].get("primitives"):
            raise InvalidArgument("deparser", "primitives in the deparser are not supported")
        emit = []
        for name in deps[0]["order"]:
            h = lay.header(name)
            emit.append((h.valid, h.raw, h.nbytes, tuple((s, w) for _n, s, w in h.fields)))
        self._emit = tuple(emit)

    def deparse(self, v: list[int], data: bytes, pos: int) -> bytearray:
        out: list[bytes] = []
        for valid, raw, nbytes, fields in self._emit:
            if v[valid]:
                at = v[raw]
                if at >= 0:  # unmodified since extract: the frame's own bytes
                    out.append(data[at : at + nbytes])
                    continue
                x = 0
                for slot, width in fields:
                    x = (x << width) | v[slot]
                out.append(x.to_bytes(nbytes, "big"))
        out.append(data[pos:])
        return bytearray().join(out)

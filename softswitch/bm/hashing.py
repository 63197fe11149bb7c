"""BMv2's hash algorithms and the v1model primitives that use them.

p4c compiles v1model's ``hash(result, algo, base, data, max)`` to the
primitive ``modify_field_with_hash_based_offset(result, base, calc, max)``
and a *calculation* (``{"name", "algo", "input"}``) in the JSON's
``calculations``. simple_switch computes ``base + hash(bytes) % max`` in
64-bit arithmetic and truncates it to ``result``'s width; ``bytes`` is what
BMv2's ``BufBuilder`` makes of the inputs: the fields packed bit by bit, most
significant first, with no padding between them (a header's field of an
invalid header is left out), zero bits at the end to a whole byte.

The algorithms are BMv2 1.15's (``src/bm_sim/calculations.cpp``): ``crc16``
(CRC-16/ARC), ``crc32`` (the zlib CRC), ``crcCCITT`` (CRC-16/CCITT-FALSE),
``crc16_custom`` / ``crc32_custom`` / ``crc8_custom`` / ``crc64_custom`` (with
BMv2's default parameters; BMv2's Thrift ``bm_set_crc*_custom_parameters`` calls,
which change them, are not served),
``csum16``/``cksum16`` (the Internet checksum), ``xor16``/``xor32`` (XOR of
big-endian words, the last one zero-padded) and ``identity`` (the first
8 bytes as an integer). ``random`` (v1model's ``HashAlgorithm.random``) is not an
algorithm BMv2 registers, so BMv2 refuses such a program and so does the soft
switch, as it refuses ``xxh64``, ``toeplitz`` and the round-robin "hashes",
naming them.

``random(result, lo, hi)`` is ``modify_field_rng_uniform``: a uniform integer
in ``[lo, hi]``, like BMv2's (its sequence is not BMv2's; only a one-value
range compares equal).

Nothing here runs unless the program has these primitives.
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from softswitch.bm.expr import PrimitiveFn, compile_expr, constant_of, hexstr
from softswitch.bm.layout import Layout
from softswitch.errors import InvalidArgument

#: A hash over bytes.
HashFn = Callable[[bytes], int]

_U64 = (1 << 64) - 1
_REFLECT8 = tuple(int(f"{b:08b}"[::-1], 2) for b in range(256))


def _reflect(x: int, bits: int) -> int:
    return int(f"{x:0{bits}b}"[::-1], 2)


@dataclass
class CrcConfig:
    """A CRC as BMv2's ``crc_config_t`` describes it."""

    polynomial: int
    initial_remainder: int
    final_xor_value: int
    data_reflected: bool
    remainder_reflected: bool


#: BMv2's defaults for the ``*_custom`` CRCs, by width.
CUSTOM_DEFAULTS = {
    8: CrcConfig(0x07, 0x00, 0x00, False, False),
    16: CrcConfig(0x8005, 0x0000, 0x0000, True, True),
    32: CrcConfig(0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True),
    64: CrcConfig(0x1B, 0, 0, True, True),
}


class Crc:
    """A table-driven CRC computed exactly as BMv2's ``crc_custom<T>``."""

    def __init__(self, width: int, config: CrcConfig) -> None:
        w, mask = width, (1 << width) - 1
        top = 1 << (w - 1)
        table = []
        for dividend in range(256):
            r = dividend << (w - 8)
            for _ in range(8):
                r = ((r << 1) ^ config.polynomial) if r & top else (r << 1)
            table.append(r & mask)
        self.width = width
        self.config = config
        self._table = tuple(table)

    def __call__(self, data: bytes) -> int:
        table, c = self._table, self.config
        w, mask = self.width, (1 << self.width) - 1
        shift = w - 8
        r = c.initial_remainder & mask
        refl = _REFLECT8
        if c.data_reflected:
            for b in data:
                r = (table[refl[b] ^ (r >> shift)] ^ (r << 8)) & mask
        else:
            for b in data:
                r = (table[b ^ (r >> shift)] ^ (r << 8)) & mask
        if c.remainder_reflected:
            r = _reflect(r, w)
        return r ^ c.final_xor_value


def fold(s: int) -> int:
    """The Internet checksum of 16-bit words that sum to ``s`` (ones' complement)."""
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def csum16(data: bytes) -> int:
    """The Internet checksum of ``data`` (an odd length is padded with a zero byte)."""
    if len(data) % 2:
        data += b"\0"
    return fold(sum(struct.unpack(f"!{len(data) // 2}H", data)))


def _xor(nbytes: int) -> HashFn:
    def xor_words(data: bytes) -> int:
        x = 0
        for i in range(0, len(data), nbytes):
            x ^= int.from_bytes(data[i : i + nbytes].ljust(nbytes, b"\0"), "big")
        return x

    return xor_words


def _identity(data: bytes) -> int:
    return int.from_bytes(data[:8], "big")


#: The algorithms by BMv2's names (shared: none keeps state between packets).
_ALGORITHMS: dict[str, HashFn] = {
    "crc16": Crc(16, CUSTOM_DEFAULTS[16]),
    "crc32": zlib.crc32,
    "crcCCITT": Crc(16, CrcConfig(0x1021, 0xFFFF, 0, False, False)),
    "csum16": csum16,
    "cksum16": csum16,
    "xor16": _xor(2),
    "xor32": _xor(4),
    "identity": _identity,
    **{f"crc{w}_custom": Crc(w, CUSTOM_DEFAULTS[w]) for w in (8, 16, 32, 64)},
}


def algorithm(name: str, where: str) -> HashFn:
    """BMv2's algorithm ``name``; INVALID_ARGUMENT naming it if the soft switch has none."""
    fn = _ALGORITHMS.get(name)
    if fn is None:
        raise InvalidArgument(where, f"hash algorithm {name!r} is not supported by the soft switch")
    return fn


class Calculation:
    """A JSON calculation compiled: ``calc(v) -> hash`` of its inputs, as BMv2 builds them."""

    def __init__(self, lay: Layout, calc: dict[str, Any]) -> None:
        where = f"calculation {calc.get('name')!r}"
        self.name = str(calc.get("name"))
        self.spec = calc
        self.hash = algorithm(str(calc.get("algo")), where)
        # The inputs as runs under one validity check (a header's fields cost one check,
        # on the checksum path of every packet): (valid slot or None, (slot, width) per
        # field, constant, bits); a constant is a run of its own, without fields.
        runs: list[tuple[int | None, tuple[tuple[int, int], ...], int, int]] = []
        for item in calc.get("input", []):
            kind = item.get("type")
            if kind == "field":
                slot, width = lay.field(item["value"])
                h = lay.header(item["value"][0])
                valid = None if h.metadata else h.valid
                fields: tuple[tuple[int, int], ...] = ()
                bits = 0
                if runs and runs[-1][0] == valid and runs[-1][1]:
                    _v, fields, _c, bits = runs.pop()
                runs.append((valid, (*fields, (slot, width)), 0, bits + width))
            elif kind == "hexstr" and "bitwidth" in item:
                width = int(item["bitwidth"])
                runs.append((None, (), hexstr(item["value"]) & ((1 << width) - 1), width))
            else:
                raise InvalidArgument(where, f"hash input of type {kind!r} is not supported")
        self._runs = tuple(runs)

    def data(self, v: list[int]) -> bytes:
        """The bytes BMv2's BufBuilder hashes for packet state ``v`` (fields of invalid
        headers left out)."""
        x = bits = 0
        for valid, fields, const, nbits in self._runs:
            if valid is not None and not v[valid]:
                continue
            if fields:
                for slot, width in fields:
                    x = (x << width) | v[slot]
            else:
                x = (x << nbits) | const
            bits += nbits
        nbytes = (bits + 7) // 8
        return (x << (8 * nbytes - bits)).to_bytes(nbytes, "big")

    def __call__(self, v: list[int]) -> int:
        return self.hash(self.data(v))


class Calculations:
    """The program's calculations, each compiled when a hash primitive or a checksum
    (:class:`softswitch.bm.parser.Checksums`) first uses it."""

    def __init__(self, lay: Layout, j: dict[str, Any]) -> None:
        self._lay = lay
        self._json = {str(c["name"]): c for c in j.get("calculations", [])}
        self.compiled: dict[str, Calculation] = {}

    def get(self, name: str, where: str) -> Calculation:
        calc = self.compiled.get(name)
        if calc is None:
            spec = self._json.get(name)
            if spec is None:
                raise InvalidArgument(where, f"unknown calculation {name!r}")
            calc = self.compiled[name] = Calculation(self._lay, spec)
        return calc


def hash_based_offset(
    lay: Layout, calcs: Calculations, params: list[Any], where: str
) -> PrimitiveFn:
    """``dst = (base + calc() % size) & width``, 64-bit like simple_switch
    (which treats a ``size`` of 0 as 1: the result is ``base``)."""
    if len(params) != 4 or params[2].get("type") != "calculation":
        raise InvalidArgument(where, "expected (field, base, calculation, size)")
    if params[0].get("type") != "field":
        raise InvalidArgument(where, f"hash result into a {params[0].get('type')!r}")
    slot, width = lay.field(params[0]["value"], write=True)
    mask = (1 << width) - 1
    calc = calcs.get(str(params[2]["value"]), where)
    base = compile_expr(lay, params[1], where)
    size = compile_expr(lay, params[3], where)
    c_base, c_size = constant_of(base), constant_of(size)
    if c_base is not None and c_size is not None:
        b, n = c_base & _U64, (c_size & _U64) or 1

        def hash_const(v: list[int], a: Sequence[int]) -> None:
            v[slot] = ((calc(v) % n + b) & _U64) & mask

        return hash_const

    def hash_offset(v: list[int], a: Sequence[int]) -> None:
        n = size(v, a) & _U64
        b = base(v, a) & _U64
        v[slot] = (calc(v) % (n or 1) + b) & _U64 & mask

    return hash_offset


def rng_uniform(lay: Layout, params: list[Any], where: str) -> PrimitiveFn:
    """``random(result, lo, hi)``: a uniform integer in [lo, hi]."""
    if params[0].get("type") != "field":
        raise InvalidArgument(where, f"random result into a {params[0].get('type')!r}")
    slot, width = lay.field(params[0]["value"], write=True)
    mask = (1 << width) - 1
    lo, hi = compile_expr(lay, params[1], where), compile_expr(lay, params[2], where)
    draw = random.Random().randint

    def rng(v: list[int], a: Sequence[int]) -> None:
        low, high = lo(v, a) & _U64, hi(v, a) & _U64
        v[slot] = (draw(low, high) if high > low else low) & mask

    return rng

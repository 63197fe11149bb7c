"""BMv2's hash algorithms and hash input bytes, against published check values.

The check values are the CRC catalogue's for b"123456789" (CRC-16/ARC is
BMv2's crc16, the zlib CRC its crc32, CRC-16/CCITT-FALSE its crcCCITT); the
differential test (tests/p4/programs/hash.p4) compares the same code with
BMv2 itself on packets.
"""

from __future__ import annotations

import pytest

from softswitch.bm.hashing import Calculation, algorithm
from softswitch.bm.layout import build_layout
from softswitch.errors import InvalidArgument

CHECK = b"123456789"


@pytest.mark.parametrize(
    ("algo", "value"),
    [
        ("crc16", 0xBB3D),
        ("crc16_custom", 0xBB3D),
        ("crc32", 0xCBF43926),
        ("crc32_custom", 0xCBF43926),
        ("crcCCITT", 0x29B1),
        ("crc8_custom", 0xF4),
        ("identity", int.from_bytes(CHECK[:8], "big")),
        ("xor16", 0x3132 ^ 0x3334 ^ 0x3536 ^ 0x3738 ^ 0x3900),
        ("csum16", 0xFFFF & ~(0x3132 + 0x3334 + 0x3536 + 0x3738 + 0x3900 + 1)),
    ],
)
def test_algorithms_give_the_catalogue_check_values(algo: str, value: int) -> None:
    assert algorithm(algo, "t")(CHECK) == value


@pytest.mark.parametrize("algo", ["random", "xxh64", "round_robin", "toeplitz"])
def test_algorithms_bmv2_v1model_lacks_are_refused_by_name(algo: str) -> None:
    with pytest.raises(InvalidArgument, match=algo):
        algorithm(algo, "calculation 'c'")


def _program() -> dict[str, object]:
    return {
        "header_types": [
            {"name": "scalars_0", "fields": [["a", 3, False], ["b", 13, False], ["c", 4, False]]},
            {"name": "standard_metadata", "fields": [["ingress_port", 9, False]]},
            {"name": "h_t", "fields": [["x", 8, False]]},
        ],
        "headers": [
            {"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": True},
            {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata",
             "metadata": True},
            {"name": "h", "id": 2, "header_type": "h_t", "metadata": False},
        ],
    }  # fmt: skip


def test_inputs_packed_bitwise_padded_at_the_end_invalid_headers_left_out() -> None:
    lay = build_layout(_program())
    calc = Calculation(
        lay,
        {
            "name": "c",
            "algo": "identity",
            "input": [
                {"type": "field", "value": ["scalars", "a"]},
                {"type": "field", "value": ["h", "x"]},
                {"type": "field", "value": ["scalars", "b"]},
                {"type": "hexstr", "value": "0x5", "bitwidth": 4},
            ],
        },
    )
    v = lay.initial.copy()
    a, b = lay.field(["scalars", "a"])[0], lay.field(["scalars", "b"])[0]
    x, hv = lay.field(["h", "x"])[0], lay.header("h").valid
    v[a], v[b], v[x] = 0b101, 0x1ABC, 0xEE
    # 101 | 1101010111100 | 0101 -> 20 bits, 4 zero bits of padding
    assert calc.data(v) == bytes.fromhex("babc50")
    v[hv] = 1
    assert calc.data(v) == ((0b101 << 25 | 0xEE << 17 | 0x1ABC << 4 | 5) << 4).to_bytes(4, "big")

"""v1model programs written by others (p4lang/tutorials solutions), run on both switches.

Their sources are not part of this repository: ``tests/p4/programs/public/fetch.py``
downloads them at the pinned commits listed in ``tests/p4/programs/public/SOURCES.md``
(Apache-2.0) and compiles them with p4c into ``public/build/``; the differential test
skips them, saying so, when they are absent. Entries and sentinels are installed the
same way on both targets.

Some frames are not drawn because BMv2 has no one answer for them: it keeps an invalid
header's field values from an earlier packet (its PHVs are pooled) and reads past the
frame's end in ``lookahead``. load_balance hashes TCP ports, so its routed frames are whole
TCP frames; frames are at least 64 bytes (the Ethernet minimum), so calc's 16-byte
lookahead stays inside the frame.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

from hypothesis import assume
from hypothesis import strategies as st

from p4client.p4info import TableEntry
from p4client.p4rt import SwitchConnection
from tests.p4.differential.programs import _finish, _ip_bytes, _ipv4_fields, ipv4, udp_sentinel
from tests.p4.differential.rig import Program
from tests.p4.differential.v1programs import ipv4_frames

ROOT = Path(__file__).resolve().parents[3]
PUBLIC = ROOT / "tests" / "p4" / "programs" / "public"
BUILD = PUBLIC / "build"
_u16 = st.integers(0, 0xFFFF)
_u32 = st.integers(0, 0xFFFFFFFF)


def _program(
    name: str,
    ports: tuple[int, ...],
    entries: Callable[[SwitchConnection], list[TableEntry]],
    sentinel: Callable[[int, bytes], bytes],
) -> Program:
    return Program(
        name, BUILD / f"{name}.p4info.txtpb", BUILD / f"{name}.json", ports, entries, sentinel
    )


def _pad(frame: bytes) -> bytes:
    return frame.ljust(64, b"\0")


# ---------------------------------------------------------------- calc (lookahead)
def _calc_header(op: int, a: int, b: int, res: int = 0, magic: bytes = b"P4\x01") -> bytes:
    return magic + struct.pack("!BIII", op, a, b, res)


def _calc_sentinel(port: int, tag: bytes) -> bytes:
    eth = bytes.fromhex("020000000001020000000002") + b"\x12\x34"
    return _pad(eth + _calc_header(0x2B, 1, 2) + tag)


@st.composite
def calc_frames(draw: st.DrawFn) -> bytes:
    """Calculator frames: every op (and unknown ones), wrong magic/version, other types."""
    eth = draw(st.binary(min_size=12, max_size=12))
    etype = draw(st.sampled_from([0x1234] * 10 + [0x0800, 0x1235]))
    magic = draw(st.sampled_from([b"P4\x01"] * 8 + [b"P4\x02", b"Q4\x01", b"P5\x01"]))
    op = draw(st.sampled_from([0x2B, 0x2D, 0x26, 0x7C, 0x5E, 0x2A, 0]))
    body = _calc_header(op, draw(_u32), draw(_u32), draw(_u32), magic)
    return _pad(eth + struct.pack("!H", etype) + body + draw(st.binary(max_size=16)))


CALC = _program("calc", (1,), lambda sw: [], _calc_sentinel)


# ---------------------------------------------------------------- source_routing (stacks)
def _hops(labels: list[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack("!H", (bos << 15) | port) for bos, port in labels)


def _sr_sentinel(port: int, tag: bytes) -> bytes:
    udp = udp_sentinel(b"\x02" + bytes(5), "10.0.9.9", f"10.0.{port}.200", tag)
    return udp[:12] + b"\x12\x34" + _hops([(1, port)]) + udp[14:]


@st.composite
def source_routing_frames(draw: st.DrawFn) -> bytes:
    """0-10 hops (9 fit the stack), usually ending with a bottom-of-stack hop, over IPv4."""
    if draw(st.sampled_from([False] * 9 + [True])):
        return _pad(draw(ipv4_frames()))
    n = draw(st.sampled_from([1, 1, 2, 3, 4, 8, 9, 10, 0]))
    ports = [draw(st.sampled_from([1, 2, 3, 4, 4, 0, 511, 0x7FFF, 0x201])) for _ in range(n)]
    labels = [(0, p) for p in ports]
    if labels and draw(st.sampled_from([True] * 5 + [False])):
        labels[-1] = (1, labels[-1][1])
    ip = draw(ipv4_frames())[14:]
    return _pad(draw(st.binary(min_size=12, max_size=12)) + b"\x12\x34" + _hops(labels) + ip)


SOURCE_ROUTING = _program("source_routing", (1, 2, 3, 4), lambda sw: [], _sr_sentinel)


# ---------------------------------------------------------------- basic_tunnel
def _tunnel_entries(sw: SwitchConnection) -> list[TableEntry]:
    out = []
    for p in (1, 2, 3, 4):
        out.append(
            sw.table_entry(
                "MyIngress.ipv4_lpm",
                {"hdr.ipv4.dstAddr": (f"10.0.{p}.0", 24)},
                "MyIngress.ipv4_forward",
                {"dstAddr": 0x0A0000000000 + p, "port": p},
            )
        )
        out.append(
            sw.table_entry(
                "MyIngress.myTunnel_exact",
                {"hdr.myTunnel.dst_id": p},
                "MyIngress.myTunnel_forward",
                {"port": p},
            )
        )
    out.append(
        sw.table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": ("10.0.9.0", 24)}, "NoAction")
    )
    out.append(
        sw.table_entry("MyIngress.myTunnel_exact", {"hdr.myTunnel.dst_id": 9}, "MyIngress.drop")
    )
    return out


def _tunnel_sentinel(port: int, tag: bytes) -> bytes:
    return udp_sentinel(b"\x02" + bytes(5), "10.0.9.9", f"10.0.{port}.200", tag)


@st.composite
def tunnel_frames(draw: st.DrawFn) -> bytes:
    """Plain IPv4 frames, and frames in the tunnel header (IPv4 inside or not)."""
    frame = draw(ipv4_frames())
    if draw(st.booleans()):
        proto = draw(st.sampled_from([0x0800] * 4 + [0x86DD]))
        dst = draw(st.sampled_from([1, 2, 3, 4, 9, 77]))
        frame = frame[:12] + b"\x12\x12" + struct.pack("!HH", proto, dst) + frame[14:]
    return frame


BASIC_TUNNEL = _program("basic_tunnel", (1, 2, 3, 4), _tunnel_entries, _tunnel_sentinel)


# ---------------------------------------------------------------- load_balance (hash)
def _lb_entries(sw: SwitchConnection) -> list[TableEntry]:
    out = [
        sw.table_entry("MyIngress.ecmp_group", {"hdr.ipv4.dstAddr": ("10.0.0.0", 24)},
                       "MyIngress.set_ecmp_select", {"ecmp_base": 2, "ecmp_count": 2}),
        sw.table_entry("MyIngress.ecmp_group", {"hdr.ipv4.dstAddr": ("10.0.7.0", 24)},
                       "MyIngress.drop"),
    ]  # fmt: skip
    for p in (2, 3):  # the sentinels: one flow per port, count 1
        out.append(
            sw.table_entry(
                "MyIngress.ecmp_group",
                {"hdr.ipv4.dstAddr": (f"10.0.{p}.200", 32)},
                "MyIngress.set_ecmp_select",
                {"ecmp_base": p, "ecmp_count": 1},
            )
        )
        out.append(
            sw.table_entry(
                "MyIngress.ecmp_nhop",
                {"meta.ecmp_select": p},
                "MyIngress.set_nhop",
                {"nhop_dmac": 0x000000000100 + p, "nhop_ipv4": 0x0A000000 + p, "port": p},
            )
        )
        out.append(
            sw.table_entry(
                "MyEgress.send_frame",
                {"standard_metadata.egress_port": p},
                "MyEgress.rewrite_mac",
                {"smac": 0x00000000AA00 + p},
            )
        )
    return out


def _lb_sentinel(port: int, tag: bytes) -> bytes:
    return udp_sentinel(b"\x02" + bytes(5), "10.0.9.9", f"10.0.{port}.200", tag)


def _hashed_without_tcp(frame: bytes) -> bool:
    """An IPv4 frame to the ECMP prefix 10.0.0.0/24 that is not a whole TCP frame: the
    hash would read the invalid TCP header's ports, which BMv2 keeps from an earlier
    packet (the module docstring). A cut frame padded with zeros can land there: cut
    inside 10.0.2.201, its destination reads 10.0.0.0."""
    ip = frame[14:]
    return (
        frame[12:14] == b"\x08\x00"
        and len(ip) >= 20
        and ip[16:19] == bytes([10, 0, 0])
        and (ip[9] != 6 or len(ip) < 40)
    )


@st.composite
def lb_frames(draw: st.DrawFn) -> bytes:
    """Whole TCP frames to the ECMP prefix (many flows), other traffic elsewhere."""
    eth = b"\x02" + bytes(5) + draw(st.binary(min_size=6, max_size=6)) + b"\x08\x00"
    if draw(st.sampled_from([True] * 3 + [False])):
        f = draw(_ipv4_fields(["10.0.1.1", "10.0.2.2", "192.168.0.1"], ["10.0.0.1", "10.0.0.2"]))
        f["version"], f["ihl"], f["options"] = 4, 5, b""
        tcp = struct.pack(
            "!HHIIBBHHH",
            draw(_u16),
            draw(_u16),
            draw(_u32),
            draw(_u32),
            0x50,
            draw(st.integers(0, 255)),
            draw(_u16),
            draw(_u16),
            0,
        )
        body = tcp + draw(st.binary(max_size=16))
        return _pad(eth + _ip_bytes(f, 6, body, draw(st.integers(1, 0xFFFF))) + body)
    dst = draw(st.sampled_from(["10.0.7.1", "10.9.9.9", "10.0.2.201"]))
    body = draw(st.binary(min_size=8, max_size=24))
    frame = eth + ipv4("10.0.1.1", dst, draw(st.sampled_from([6, 17, 1])), len(body)) + body
    padded = _pad(draw(_finish(frame)))
    assume(not _hashed_without_tcp(padded))
    return padded


LOAD_BALANCE = _program("load_balance", (2, 3), _lb_entries, _lb_sentinel)

PUBLIC_PROGRAMS = {
    "calc": (CALC, calc_frames()),
    "source_routing": (SOURCE_ROUTING, source_routing_frames()),
    "basic_tunnel": (BASIC_TUNNEL, tunnel_frames()),
    "load_balance": (LOAD_BALANCE, lb_frames()),
}

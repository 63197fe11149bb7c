"""The two programs the differential test runs: table entries, sentinels, frame strategies.

``echelon`` is the project's program (p4src/); ``l3acl`` is a second v1model
program written for this test (tests/p4/programs/l3acl.p4: VLAN header stack,
ternary/range/optional ACL, const entries, a register, egress drops). The
hypothesis strategies draw mostly well-formed frames with every field from a
small set of interesting values (the entries' keys and their neighbours,
boundaries, wrong versions/IHLs/checksums, fragments) and cut some short, so
that every parser path, table hit and miss and drop reason is exercised.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path

from hypothesis import strategies as st

from p4client.p4info import TableEntry
from p4client.p4rt import SwitchConnection
from ptf_tests import entries as ptf_entries
from ptf_tests import packets as pk
from tests.p4.differential.rig import Program

ROOT = Path(__file__).resolve().parents[3]
PORTS = (1, 2, 3, 4)


def _ip4(a: str) -> bytes:
    return socket.inet_aton(a)


def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ipv4(
    src: str, dst: str, proto: int, payload_len: int, *, version: int = 4, ihl: int = 5,
    tos: int = 0, ident: int = 0, flags_frag: int = 0, ttl: int = 64,
    checksum: int | None = None, options: bytes = b"",
) -> bytes:  # fmt: skip
    """An IPv4 header; ``checksum`` None means the correct one."""
    total = 4 * max(ihl, 5) + payload_len
    hdr = struct.pack(
        "!BBHHHBBH4s4s",
        (version << 4) | ihl, tos, total & 0xFFFF, ident, flags_frag, ttl, proto, 0,
        _ip4(src), _ip4(dst),
    ) + options  # fmt: skip
    csum = _csum(hdr) if checksum is None else checksum
    return hdr[:10] + struct.pack("!H", csum) + hdr[12:]


def udp_sentinel(eth_dst: bytes, src: str, dst: str, tag: bytes, port: int = 9) -> bytes:
    """A plain IPv4/UDP frame carrying ``tag`` (UDP ports ``port``), for
    :class:`Program.sentinel`."""
    payload = struct.pack("!HHHH", port, port, 8 + len(tag), 0) + tag
    eth = eth_dst + bytes.fromhex("0000000000aa") + b"\x08\x00"
    return eth + ipv4(src, dst, 17, len(payload)) + payload


# ---------------------------------------------------------------- shared strategies
_byte = st.integers(0, 255)
_u16 = st.integers(0, 0xFFFF)
_u32 = st.integers(0, 0xFFFFFFFF)


def _mostly(common: list[int], other: st.SearchStrategy[int]) -> st.SearchStrategy[int]:
    """One of ``common`` (as weighted by repetition), or now and then any ``other`` value."""
    return st.sampled_from([*common, -1]).flatmap(lambda x: st.just(x) if x >= 0 else other)


@st.composite
def _ipv4_fields(draw: st.DrawFn, srcs: list[str], dsts: list[str]) -> dict[str, object]:
    version = draw(st.sampled_from([4] * 24 + [6, 0, 15]))
    ihl = draw(st.sampled_from([5] * 24 + [6, 7, 4, 0, 15]))
    frag = draw(st.sampled_from([0] * 12 + [0x2000, 1, 185, 0x1FFF, 0x4000]) | _u16)
    return {
        "version": version,
        "ihl": ihl,
        "tos": draw(st.sampled_from([0, 0xB8, 0x03, 0xFF]) | _byte),
        "ident": draw(_u16),
        "flags_frag": frag,
        "ttl": draw(st.sampled_from([64] * 16 + [2, 1, 0, 255])),
        "src": draw(st.sampled_from(srcs)),
        "dst": draw(st.sampled_from(dsts)),
        "bad_checksum": draw(st.sampled_from([False] * 24 + [True])),
        "options": draw(st.binary(min_size=4 * max(ihl - 5, 0), max_size=4 * max(ihl - 5, 0))),
    }


def _ip_bytes(f: dict[str, object], proto: int, rest: bytes, bad: int) -> bytes:
    hdr = ipv4(
        str(f["src"]), str(f["dst"]), proto, len(rest),
        version=int(str(f["version"])), ihl=int(str(f["ihl"])), tos=int(str(f["tos"])),
        ident=int(str(f["ident"])), flags_frag=int(str(f["flags_frag"])),
        ttl=int(str(f["ttl"])), options=bytes(f["options"]),  # type: ignore[arg-type]
    )  # fmt: skip
    if f["bad_checksum"]:
        hdr = (
            hdr[:10]
            + struct.pack("!H", (_csum(hdr[:10] + b"\0\0" + hdr[12:]) ^ bad) or 1)
            + hdr[12:]
        )
    return hdr


@st.composite
def _finish(draw: st.DrawFn, frame: bytes) -> bytes:
    """Maybe cut the frame short (never below an Ethernet header), maybe add a tail."""
    frame += draw(st.binary(max_size=24))
    if draw(st.sampled_from([False] * 9 + [True])):
        frame = frame[: draw(st.integers(14, max(14, len(frame))))]
    return frame


# ---------------------------------------------------------------- echelon
def _echelon_entries(sw: SwitchConnection) -> list[TableEntry]:
    out = ptf_entries.routes(sw)
    out.append(
        sw.table_entry(
            "EchelonIngress.ipv4_lpm",
            {"hdr.ipv4.dstAddr": ("10.1.0.0", 16)},
            "EchelonIngress.ipv4_forward",
            {"dstAddr": 0x0A0100000004, "port": 4},
        )
    )
    out += ptf_entries.echelon(sw, 100, 1, 5, [1], [(0, 999, 7), (1000, 4999, 6)])
    out += ptf_entries.echelon(sw, 200, 1023, 3, [2, 3], [(0, 100, 4)])
    out.append(
        sw.table_entry("EchelonIngress.echelon_ids", {"hdr.echelon.echelon_id": 300}, "NoAction")
    )
    return out


def _echelon_sentinel(port: int, tag: bytes) -> bytes:
    return udp_sentinel(bytes.fromhex("02ec000000fe"), "10.0.0.9", pk.host_ip(port), tag)


_ECH_HOSTS = [pk.host_ip(p) for p in PORTS]


@st.composite
def echelon_frames(draw: st.DrawFn) -> bytes:
    """Frames for echelon.p4: mostly IPv4/UDP to 0xEC00 with an echelon header."""
    if draw(st.sampled_from([False] * 15 + [True])):
        return draw(st.binary(min_size=14, max_size=90))
    eth = draw(st.sampled_from([bytes.fromhex("02ec000000fe"), bytes(6)])) + bytes.fromhex(
        "00000a000001"
    )
    etype = draw(_mostly([0x0800] * 24 + [0x0806, 0x86DD, 0x8100], _u16))
    srcs = [*_ECH_HOSTS, "10.0.0.9", "10.1.2.3"]
    dsts = [*_ECH_HOSTS, "10.1.2.3", "10.1.255.255", pk.UNROUTED_IP]
    f = draw(_ipv4_fields(srcs, dsts))
    # Half the frames use a registered (source, ID) pair so classification and the
    # deadline ranges are exercised, not only the misses.
    pair = draw(st.sampled_from([(1, 100), (2, 200), (3, 200), (2, 100), None, None, None]))
    eid = draw(_mostly([100, 100, 200, 300, 999, 0, 0xFFFF], _u16))
    if pair is not None:
        f["src"], eid = pk.host_ip(pair[0]), pair[1]
    proto = draw(_mostly([17] * 12 + [6, 1], _byte))
    dport = draw(_mostly([0xEC00] * 10 + [5001, 0xEC01], _u16))
    ech = struct.pack(
        "!BBHIHHI",
        (draw(st.sampled_from([1] * 8 + [0, 2, 15])) << 4) | draw(st.integers(0, 15)),
        draw(_byte),
        eid,
        draw(_mostly([0, 999, 1000, 4999, 5000, 100, 101, 0xFFFFFFFF], _u32)),
        draw(_u16),
        draw(_u16),
        draw(_u32),
    )
    body = ech + draw(st.binary(max_size=32))
    udp = struct.pack("!HHHH", draw(_u16), dport, 8 + len(body), draw(_u16)) + body
    frame = (
        eth
        + struct.pack("!H", etype)
        + _ip_bytes(f, proto, udp, draw(st.integers(1, 0xFFFF)))
        + udp
    )
    return draw(_finish(frame))


ECHELON = Program(
    "echelon",
    ROOT / "p4src" / "build" / "echelon.p4info.txtpb",
    ROOT / "p4src" / "build" / "echelon.json",
    PORTS,
    _echelon_entries,
    _echelon_sentinel,
)


# ---------------------------------------------------------------- l3acl
def _l3acl_entries(sw: SwitchConnection) -> list[TableEntry]:
    out = []
    for p in PORTS:
        out.append(
            sw.table_entry(
                "Ing.routes",
                {"hdr.ipv4.dst": (f"10.0.{p}.0", 24)},
                "Ing.route",
                {"dmac": 0x0200000000A0 + p, "port": p},
            )
        )
    for net, plen, port in (("192.168.0.0", 16, 2), ("224.0.0.0", 8, 3), ("0.0.0.0", 8, 1)):
        out.append(
            sw.table_entry(
                "Ing.routes",
                {"hdr.ipv4.dst": (net, plen)},
                "Ing.route",
                {"dmac": 0x0200000000B0 + port, "port": port},
            )
        )
    out.append(sw.table_entry("Ing.routes", {"hdr.ipv4.dst": ("10.0.3.0", 25)}, "Ing.drop"))
    acl = [
        ({"hdr.ipv4.src": ("10.0.1.0", 0xFFFFFF00), "meta.l4_dport": (1000, 2000)}, "Ing.deny",
         {"reason": 3}, 10),
        ({"hdr.ipv4.dst & 0xffffff00": ("192.168.1.0", 0xFFFFFF00), "hdr.ipv4.protocol": (6, 0xFF)},
         "Ing.set_prio", {"prio": 5}, 20),
        ({"hdr.ipv4.protocol": (17, 0xFF), "sm.ingress_port": 2}, "Ing.permit", {}, 5),
        ({"hdr.ipv4.src": ("10.0.2.7", 0xFFFFFFFF)}, "Ing.set_prio", {"prio": 7}, 30),
        ({"meta.l4_dport": (0, 99), "sm.ingress_port": 3}, "Ing.set_prio", {"prio": 2}, 25),
    ]  # fmt: skip
    for match, action, params, prio in acl:
        out.append(sw.table_entry("Ing.acl", match, action, params, priority=prio))
    for mac, vid, action, params in (
        (0x000000000002, 10, "Ing.l2_forward", {"port": 2}),
        (0x000000000003, 0, "Ing.l2_forward", {"port": 3}),
        (0x000000000004, 0, "Ing.drop", {}),
        (0x000000000001, 0xFFF, "Ing.l2_forward", {"port": 1}),
    ):
        out.append(
            sw.table_entry("Ing.dmac", {"hdr.ethernet.dst": mac, "meta.vid": vid}, action, params)
        )
    return out


#: The sentinels' UDP port: outside every l4_dport range of the ACL above, so no entry
#: sets their priority and they stay at 0, behind any frame they follow. (Port 9 fell in
#: the ``0..99`` set_prio(2) entry for port 3: under load, when the soft switch's egress
#: backlogged, a sentinel at 2 overtook the frame at 0 it was to follow and the frame's
#: output was counted with the next one.)
L3ACL_SENTINEL_PORT = 4000


def _l3acl_sentinel(port: int, tag: bytes) -> bytes:
    return udp_sentinel(
        bytes.fromhex("020000000001"), "10.0.9.9", f"10.0.{port}.200", tag, L3ACL_SENTINEL_PORT
    )


@st.composite
def l3acl_frames(draw: st.DrawFn) -> bytes:
    """Frames for l3acl.p4: 0-3 VLAN tags, IPv4 with TCP/UDP/other, L2-only frames."""
    if draw(st.sampled_from([False] * 15 + [True])):
        return draw(st.binary(min_size=14, max_size=90))
    dst_mac = draw(st.sampled_from([2, 3, 4, 1, 5, 0x0203]).map(lambda x: x.to_bytes(6, "big")))
    eth = dst_mac + bytes.fromhex("00000a000001")
    tags = b""
    ntags = draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3]))
    for i in range(ntags):
        outer = 0x8100 if i == 0 else draw(st.sampled_from([0x8100, 0x9100]))
        vid = draw(st.sampled_from([0, 10, 0xFFF, 5]) | st.integers(0, 0xFFF))
        tags += struct.pack("!H", outer) + struct.pack("!H", (draw(st.integers(0, 15)) << 12) | vid)
    l3type = draw(_mostly([0x0800] * 12 + [0x0806, 0x8100, 0x86DD], _u16))
    f = draw(
        _ipv4_fields(
            ["10.0.1.5", "10.0.2.7", "10.0.9.9", "192.168.1.1", "10.0.3.3"],
            ["10.0.1.9", "10.0.2.9", "10.0.3.9", "10.0.3.200", "10.0.4.4", "192.168.1.20",
             "192.168.7.7", "224.0.0.5", "0.1.2.3", "10.9.9.9"],
        )
    )  # fmt: skip
    proto = draw(st.sampled_from([6, 17, 17, 1]) | _byte)
    dport = draw(st.sampled_from([80, 99, 100, 999, 1000, 1500, 2000, 2001]) | _u16)
    l4 = struct.pack("!HH", draw(_u16), dport) + draw(st.binary(max_size=24))
    ip = _ip_bytes(f, proto, l4, draw(st.integers(1, 0xFFFF)))
    if ntags:
        frame = eth + tags + struct.pack("!H", l3type) + ip + l4
    else:
        frame = eth + struct.pack("!H", l3type) + ip + l4
    return draw(_finish(frame))


L3ACL = Program(
    "l3acl",
    ROOT / "tests" / "p4" / "programs" / "build" / "l3acl.p4info.txtpb",
    ROOT / "tests" / "p4" / "programs" / "build" / "l3acl.json",
    PORTS,
    _l3acl_entries,
    _l3acl_sentinel,
)

PROGRAMS = {"echelon": (ECHELON, echelon_frames()), "l3acl": (L3ACL, l3acl_frames())}
